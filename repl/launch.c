/*
 * launch.c -- `cnnsh --nproc N [options] FILE [args]`: N ranks of this
 * cnnsh on this machine, started through Open MPI's mpirun.
 *
 * The command line is rebuilt without --nproc:
 *   mpirun -np N --oversubscribe [--allow-run-as-root] <this cnnsh> [options] FILE [args]
 * and exec()ed, so mpirun takes this process's place: its exit status is
 * cnnsh's (non-zero when any rank failed), and a Ctrl-C at the terminal
 * reaches it, which stops every rank.  --oversubscribe lets N exceed the
 * cores; root needs --allow-run-as-root (Open MPI refuses root otherwise).
 * $CNNSH_MPIRUN names another mpirun.  Several machines: run mpirun with a
 * hostfile yourself (README, "Several processes").
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "repl.h"

int cnn_launch_ranks(int nproc, int argc, char **argv, int skip_at, int skip_len) {
  static char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return fprintf(stderr, "cnnsh: --nproc: cannot find this program's path\n"), 2;
  exe[n] = 0;
  char np[24];
  snprintf(np, sizeof np, "%d", nproc);
  const char *mpirun = getenv("CNNSH_MPIRUN");
  if (!mpirun || !*mpirun) mpirun = "mpirun";
  char **args = calloc((size_t)argc + 8, sizeof *args);
  if (!args) return fprintf(stderr, "cnnsh: --nproc: out of memory\n"), 2;
  int k = 0;
  args[k++] = (char *)mpirun;
  args[k++] = "-np";
  args[k++] = np;
  args[k++] = "--oversubscribe";
  if (geteuid() == 0) args[k++] = "--allow-run-as-root";
  args[k++] = exe;
  for (int i = 1; i < argc; i++)
    if (i < skip_at || i >= skip_at + skip_len) args[k++] = argv[i];
  fflush(stdout);
  execvp(mpirun, args);
  fprintf(stderr, "cnnsh: --nproc starts the ranks with Open MPI's %s: %s (install openmpi-bin)\n",
          mpirun, strerror(errno));
  free(args);
  return 2;
}

/*
 * history.c -- the persistent history of the cnnsh prompt.
 *
 * Where: $CNNSH_HISTORY (tests), else $XDG_STATE_HOME/cnnsh/history, else
 * ~/.cnnsh_history.
 *
 * Format: one entry per line.  An entry typed over several lines (a
 * function definition) stays one entry: its inner newlines are stored as
 * the byte 0x01, which Lua source never contains in practice.
 *
 * Design: every entry is appended to the file as soon as it is typed (a
 * crash loses nothing; two sessions interleave their entries).  Loading
 * collapses consecutive duplicates and keeps the last CNN_HISTORY_MAX
 * entries, rewriting the file (temporary file + rename) only when that
 * changed it; cnn_history_trim() does the same at exit.
 * Invariant: readline's in-memory list never holds two equal neighbours
 * and never more than CNN_HISTORY_MAX entries.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <readline/history.h>

#include "repl.h"

#define NL_MARK '\001'

char *cnn_history_path(void) {
  const char *env = getenv("CNNSH_HISTORY");
  if (env && *env) return strdup(env);
  const char *state = getenv("XDG_STATE_HOME");
  char buf[4096];
  if (state && *state) {
    snprintf(buf, sizeof buf, "%s/cnnsh", state);
    if (mkdir(buf, 0700) != 0 && errno != EEXIST) return NULL;
    snprintf(buf, sizeof buf, "%s/cnnsh/history", state);
    return strdup(buf);
  }
  const char *home = getenv("HOME");
  if (home == NULL || *home == '\0') return NULL;
  snprintf(buf, sizeof buf, "%s/.cnnsh_history", home);
  return strdup(buf);
}

/* Read the file's entries (decoded, duplicates collapsed, last MAX kept).
 * *changed says whether the file differs from that. */
static int read_entries(const char *path, cnn_strlist *out, bool *changed) {
  *changed = false;
  FILE *f = fopen(path, "r");
  if (f == NULL) return errno == ENOENT ? 0 : -1;
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, f)) >= 0) {
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
    for (ssize_t i = 0; i < len; i++)
      if (line[i] == NL_MARK) line[i] = '\n';
    if (len == 0 || (out->n > 0 && strcmp(out->v[out->n - 1], line) == 0)) {
      *changed = true;
      continue;
    }
    cnn_strlist_add(out, line, (size_t)len);
  }
  free(line);
  fclose(f);
  if (out->n > CNN_HISTORY_MAX) { /* keep the newest */
    int drop = out->n - CNN_HISTORY_MAX;
    for (int i = 0; i < drop; i++) free(out->v[i]);
    memmove(out->v, out->v + drop, sizeof *out->v * (size_t)CNN_HISTORY_MAX);
    out->n = CNN_HISTORY_MAX;
    *changed = true;
  }
  return 0;
}

static void write_entry(FILE *f, const char *entry) {
  for (const char *p = entry; *p; p++) fputc(*p == '\n' ? NL_MARK : *p, f);
  fputc('\n', f);
}

static int write_entries(const char *path, const cnn_strlist *l) {
  size_t n = strlen(path) + 16;
  char *tmp = malloc(n);
  if (tmp == NULL) return -1;
  snprintf(tmp, n, "%s.tmp%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "w");
  int rc = -1;
  if (f) {
    for (int i = 0; i < l->n; i++) write_entry(f, l->v[i]);
    rc = fclose(f) == 0 && rename(tmp, path) == 0 ? 0 : -1;
    if (rc != 0) unlink(tmp);
  }
  free(tmp);
  return rc;
}

int cnn_history_trim(const char *path) {
  if (path == NULL) return 0;
  cnn_strlist l = {0};
  bool changed;
  int rc = read_entries(path, &l, &changed);
  if (rc == 0 && changed) rc = write_entries(path, &l);
  cnn_strlist_clear(&l);
  return rc;
}

int cnn_history_load(const char *path) {
  stifle_history(CNN_HISTORY_MAX);
  if (path == NULL) return 0;
  cnn_strlist l = {0};
  bool changed;
  int rc = read_entries(path, &l, &changed);
  for (int i = 0; rc == 0 && i < l.n; i++) add_history(l.v[i]);
  if (rc == 0 && changed) rc = write_entries(path, &l);
  cnn_strlist_clear(&l);
  return rc;
}

int cnn_history_add(const char *path, const char *entry) {
  size_t len = strlen(entry);
  while (len > 0 && (entry[len - 1] == '\n' || entry[len - 1] == ' ')) len--;
  if (len == 0) return 0;
  char *e = strndup(entry, len);
  if (e == NULL) return -1;
  HIST_ENTRY *last = history_length > 0 ? history_get(history_base + history_length - 1) : NULL;
  int rc = 0;
  if (last == NULL || strcmp(last->line, e) != 0) {
    add_history(e);
    if (path) {
      FILE *f = fopen(path, "a");
      if (f) {
        write_entry(f, e);
        rc = fclose(f) == 0 ? 0 : -1;
      } else {
        rc = -1;
      }
    }
  }
  free(e);
  return rc;
}

#!/bin/bash
# faults.sh MPIRUN CNNSH SCRIPT MODE WORKDIR -- a failing, killed or
# interrupted rank must end the whole job, non-zero, within 30 s, with a
# message naming the failed rank (faults.lua is the rank side).
mpirun=$1 cnnsh=$2 script=$3 mode=$4 work=$5
bound=30
rm -rf "$work" && mkdir -p "$work" || exit 1
log=$work/log
start=$(date +%s)
case $mode in
error|kill|sigint)
  timeout 90 "$mpirun" -np 2 --oversubscribe "$cnnsh" "$script" "$mode" >"$log" 2>&1
  rc=$?
  ;;
interrupt)
  # the terminal's Ctrl-C: SIGINT to the launcher's whole process group
  setsid "$cnnsh" --nproc 2 "$script" loop "$work" >"$log" 2>&1 &
  pid=$!
  n=0
  while [ ! -f "$work/running" ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
  [ -f "$work/running" ] || { echo "the ranks never started"; cat "$log"; kill -9 -- -$pid; exit 1; }
  start=$(date +%s)
  kill -INT -- -$pid
  n=0
  while kill -0 $pid 2>/dev/null && [ $n -lt 900 ]; do sleep 0.1; n=$((n + 1)); done
  if kill -0 $pid 2>/dev/null; then echo "still running after 90 s"; kill -9 -- -$pid; exit 1; fi
  wait $pid
  rc=$?
  ;;
*) echo "unknown mode $mode"; exit 1 ;;
esac
elapsed=$(( $(date +%s) - start ))
cat "$log"
echo "faults.sh: mode $mode, exit status $rc after $elapsed s"
[ "$rc" -ne 0 ] || { echo "FAIL: the job exited 0"; exit 1; }
[ "$elapsed" -le $bound ] || { echo "FAIL: took $elapsed s (bound $bound s)"; exit 1; }
case $mode in
# (cnnsh's own line; mpirun's "MPI_ABORT was invoked on rank 1" goes through
# Open MPI's help relay, which can drop it under load or a sanitizer)
error) grep -q "rank 1 of 2 failed (exit status 1)" "$log" ||
         { echo "FAIL: the failed rank is not named"; exit 1; } ;;
kill) grep -q "rank 1 .*signal 9" "$log" || { echo "FAIL: the killed rank is not named"; exit 1; } ;;
sigint) grep -q "rank 1 of 2 failed (exit status 130)" "$log" || { echo "FAIL: the interrupted rank is not named"; exit 1; } ;;
interrupt) ;; # mpirun ends every rank on SIGINT (its status is non-zero)
esac
# no rank may outlive the job
sleep 1
if pgrep -f "^$cnnsh $script" >/dev/null; then echo "FAIL: ranks left running"; pgrep -af "^$cnnsh $script"; exit 1; fi
exit 0

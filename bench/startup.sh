#!/usr/bin/env bash
# bench/startup.sh -- start-up time of `cnnsh -e ''` against bare `lua5.4 -e ''`.
#
# Usage: bench/startup.sh [path/to/cnnsh] [runs]   (defaults: build/repl/cnnsh, 50)
# Each command runs `runs` times after 3 warm-up runs; the time of one run is
# taken with bash's $EPOCHREALTIME around the fork+exec (no extra process),
# so both figures include the same spawning cost.  Prints JSON lines:
#   {"bench":"startup","cmd":"cnnsh -e ''","median_ms":...,"min_ms":...,"runs":50}
#   {"bench":"startup","cmd":"lua5.4 -e ''",...}
#   {"bench":"startup_ratio","ratio":...}   (median cnnsh / median lua5.4)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cnnsh=${1:-$here/build/repl/cnnsh}
runs=${2:-50}
lua=$(command -v lua5.4 || command -v lua)

# times_ms CMD...: one line per run, in milliseconds
times_ms() {
  local i t0 t1
  for i in 1 2 3; do "$@" >/dev/null; done
  for ((i = 0; i < runs; i++)); do
    t0=$EPOCHREALTIME
    "$@" >/dev/null
    t1=$EPOCHREALTIME
    echo "$t0 $t1"
  done | awk '{ printf "%.4f\n", ($2 - $1) * 1000 }' | sort -g
}

# stats NAME: median and min of sorted times on stdin, as a JSON line
stats() {
  awk -v name="$1" '{ v[NR] = $1 }
    END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
          printf "{\"bench\":\"startup\",\"cmd\":\"%s\",\"median_ms\":%.3f,\"min_ms\":%.3f,\"runs\":%d}\n", name, m, v[1], NR }'
}

c=$(times_ms "$cnnsh" -e '' | stats "cnnsh -e ''")
l=$(times_ms "$lua" -e '' | stats "lua5.4 -e ''")
echo "$c"
echo "$l"
cm=$(sed 's/.*"median_ms":\([0-9.]*\).*/\1/' <<<"$c")
lm=$(sed 's/.*"median_ms":\([0-9.]*\).*/\1/' <<<"$l")
awk -v c="$cm" -v l="$lm" 'BEGIN { printf "{\"bench\":\"startup_ratio\",\"ratio\":%.2f,\"target_ms\":10,\"ok\":%s}\n", c / l, (c < 10) ? "true" : "false" }'

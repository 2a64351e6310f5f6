#!/usr/bin/env bash
# cli_test.sh -- cnnsh as a program: options, scripts and their `arg`, -e,
# piped input, exit codes (script error 1, bad option 2, SIGINT 130).
# Usage: cli_test.sh path/to/cnnsh.  Exits 1 if any check failed.
set -u
cnnsh=$1
tmp=$(mktemp -d /tmp/cnnsh_cli_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export NO_COLOR=1 CNNSH_HISTORY=$tmp/history HOME=$tmp
fails=0 checks=0

# check NAME WANT GOT
check() {
  checks=$((checks + 1))
  if [[ "$3" != "$2" ]]; then
    fails=$((fails + 1))
    printf 'FAIL %s\n  wanted: %q\n  got:    %q\n' "$1" "$2" "$3" >&2
  fi
}
# check_match NAME REGEX GOT
check_match() {
  checks=$((checks + 1))
  if ! [[ "$3" =~ $2 ]]; then
    fails=$((fails + 1))
    printf 'FAIL %s\n  wanted a match of: %s\n  got: %q\n' "$1" "$2" "$3" >&2
  fi
}

# -e, in order, and its exit status
check "-e" "2" "$("$cnnsh" -e 'print(1 + 1)')"
check "-e twice" "a b" "$("$cnnsh" -e 'x = "a"' -e 'print(x, "b")' | tr '\t' ' ')"
check "-e attached" "7" "$("$cnnsh" -e'print(7)')"
"$cnnsh" -e 'error("boom")' 2>"$tmp/err"; check "-e error status" 1 $?
check_match "-e error message" "boom" "$(cat "$tmp/err")"
check_match "-e error traceback" "stack traceback" "$(cat "$tmp/err")"

# scripts: arg table, ..., shebang line, errors
cat >"$tmp/s.lua" <<'EOF'
#!/usr/bin/env cnnsh
local a, b = ...
print(arg[0]:match("s%.lua$") ~= nil, arg[1], arg[2], a, b, #arg, arg[-1] ~= nil)
EOF
check "script args" "true x y x y 2 true" "$("$cnnsh" "$tmp/s.lua" x y | tr '\t' ' ')"
printf 'local t = nil\nprint(t.field)\n' >"$tmp/bad.lua"
"$cnnsh" "$tmp/bad.lua" >/dev/null 2>"$tmp/err"; check "script error status" 1 $?
check_match "script error names the file and line" "bad.lua:2:" "$(cat "$tmp/err")"
"$cnnsh" "$tmp/missing.lua" 2>/dev/null; check "missing script status" 1 $?
printf 'print(1\n' >"$tmp/syntax.lua"
"$cnnsh" "$tmp/syntax.lua" 2>/dev/null; check "syntax error status" 1 $?
check "os.exit passes through" 3 "$("$cnnsh" -e 'os.exit(3)'; echo $?)"

# options
"$cnnsh" --bogus >/dev/null 2>"$tmp/err"; check "bad option status" 2 $?
check_match "bad option usage" "usage: cnnsh" "$(cat "$tmp/err")"
"$cnnsh" -x 2>/dev/null; check "bad short option status" 2 $?
"$cnnsh" --threads zero -e '' 2>/dev/null; check "bad --threads" 2 $?
"$cnnsh" -e 2>/dev/null; check "-e without chunk" 2 $?
check_match "--help" "usage: cnnsh" "$("$cnnsh" --help)"
check "--help status" 0 "$("$cnnsh" --help >/dev/null; echo $?)"
check_match "--version" "^cnnsh [0-9]+\.[0-9]+.*Lua 5\.4" "$("$cnnsh" --version | tr '\n' ' ')"
check "--threads" "3" "$("$cnnsh" --threads 3 -e 'print(cnn.get_num_threads and cnn.get_num_threads() or 3)')"
check "--seed reproducible" "$("$cnnsh" --seed 5 -e 'print(cnn.rand and cnn.rand(3):sum():item() or 1)')" \
      "$("$cnnsh" --seed=5 -e 'print(cnn.rand and cnn.rand(3):sum():item() or 1)')"
check "--ascii" "true" "$("$cnnsh" --ascii -e 'print(cnn.ascii)')"
check "-- ends options" "ok" "$("$cnnsh" -- "$tmp/s.lua" >/dev/null && echo ok)"

# piped input: no prompt, no echo, values print, status 1 if any chunk failed
check "piped print" "2" "$(echo 'print(1+1)' | "$cnnsh")"
check "piped expression" "42" "$(printf 'x = 40\nx + 2\n' | "$cnnsh")"
check "piped multi-line" "6" "$(printf 'function f(a)\n  return a * 2\nend\nprint(f(3))\n' | "$cnnsh")"
out=$(printf 'print("a")\nerror("mid")\nprint("b")\n' | "$cnnsh" 2>/dev/null); st=$?
check "piped continues after an error" "a b" "$(echo $out)"
check "piped error status" 1 $st
check "piped '-'" "3" "$(echo 'print(1+2)' | "$cnnsh" -)"
check "piped unfinished status" 1 "$(echo 'x = {' | "$cnnsh" 2>/dev/null; echo $?)"
check "piped :command" "ok" "$(printf ':time 1+1\nprint("ok")\n' | "$cnnsh" | tail -1)"
check "no history written when piped" "no" "$([[ -e $tmp/history ]] && echo yes || echo no)"

# SIGINT during a script: status 130, <close> handlers run
cat >"$tmp/loop.lua" <<'EOF'
local guard <close> = setmetatable({}, {__close = function()
  io.open(arg[1], "w"):close()
end})
io.stdout:write("started\n"); io.stdout:flush()
while true do end
EOF
"$cnnsh" "$tmp/loop.lua" "$tmp/closed" >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 100); do [[ -s "$tmp/out" ]] && break; sleep 0.05; done
kill -INT $pid
wait $pid; check "SIGINT status" 130 $?
check_match "SIGINT message" "interrupted" "$(cat "$tmp/err")"
check "SIGINT unwinds (<close> ran)" "yes" "$([[ -e $tmp/closed ]] && echo yes || echo no)"
printf 'io.stdout:write("looping\\n") io.stdout:flush()\nwhile true do end\nprint("after")\n' >"$tmp/loop_in"
"$cnnsh" <"$tmp/loop_in" >"$tmp/out2" 2>/dev/null &
pid=$!
for _ in $(seq 100); do [[ -s "$tmp/out2" ]] && break; sleep 0.05; done
kill -INT $pid
wait $pid; check "SIGINT in piped input: status" 130 $?
check "SIGINT in piped input: stops reading" "looping" "$(cat "$tmp/out2")"

# the example scripts: --help/-h print the usage and exit 0; a bad value
# exits 2 with the problem and the usage, no traceback (issue 20, point 12)
examples=$(cd "$(dirname "$0")/../../examples" && pwd)
for ex in fashion_mnist fashion_mnist_ddp inspect quickstart image_folder cifar10_resnet; do
  for h in --help -h; do
    out=$("$cnnsh" "$examples/$ex.lua" $h 2>"$tmp/err"); st=$?
    check "$ex $h status" 0 $st
    check_match "$ex $h usage" "^usage: cnnsh examples/$ex.lua" "$out"
    check "$ex $h quiet stderr" "" "$(cat "$tmp/err")"
  done
done
for bad in "fashion_mnist --epochs abc" "fashion_mnist --lr" "fashion_mnist --bogus 1" \
           "inspect abc" "inspect 10 out extra" "quickstart x" "fashion_mnist_ddp --sync-bn x" \
           "image_folder --epochs abc" "image_folder --mode cmyk" "cifar10_resnet --bogus 1" "cifar10_resnet --lr x"; do
  set -- $bad
  ex=$1; shift
  "$cnnsh" "$examples/$ex.lua" "$@" >"$tmp/out" 2>"$tmp/err"; st=$?
  check "$bad: status" 2 $st
  check_match "$bad: usage" "usage: cnnsh examples/$ex.lua" "$(cat "$tmp/err")"
  check "$bad: no traceback" "no" "$(grep -q 'stack traceback' "$tmp/err" && echo yes || echo no)"
  check "$bad: nothing on stdout" "" "$(cat "$tmp/out")"
done
check_match "the problem is named" "--epochs wants an integer, got 'abc'" \
  "$("$cnnsh" "$examples/fashion_mnist.lua" --epochs abc 2>&1)"

echo "repl_cli: $((checks - fails)) of $checks checks passed"
[[ $fails -eq 0 ]]

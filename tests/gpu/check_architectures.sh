#!/bin/sh
# check_architectures.sh MODULE "SM..." PTX_SM -- the CI check that
# libcnn_cuda.so carries native code (an ELF cubin) for every required
# architecture in every translation unit, plus PTX for PTX_SM, so that no
# GPU of those generations meets "no kernel image" (gpu/README.md,
# "Architectures").  It reads the module with cuobjdump: from $CUOBJDUMP,
# PATH, the toolkit, or where scripts/setup installs it (the toolkit here
# comes from NVIDIA's wheels, which leave cuobjdump out).
set -u
module=$1
required=$2
ptx_sm=$3
fail=0
say() { echo "check_architectures: $*"; }
bad() { say "FAIL: $*"; fail=1; }

tool=${CUOBJDUMP:-}
for c in "$(command -v cuobjdump 2>/dev/null)" /usr/local/cuda/bin/cuobjdump \
         /usr/local/lib/cnnsh-cuobjdump/nvidia/cu13/bin/cuobjdump; do
  [ -z "$tool" ] && [ -n "$c" ] && [ -x "$c" ] && tool=$c
done
if [ -z "$tool" ]; then
  say "FAIL: no cuobjdump (scripts/setup installs it into /usr/local/lib/cnnsh-cuobjdump)"
  exit 1
fi
elf=$("$tool" --list-elf "$module") || { bad "cuobjdump --list-elf failed"; exit 1; }
ptx=$("$tool" --list-ptx "$module") || { bad "cuobjdump --list-ptx failed"; exit 1; }

# one cubin per architecture per translation unit: each count must equal
# the number of units (the largest count of any required architecture)
units=0
for sm in $required; do
  n=$(echo "$elf" | grep -c "\.sm_${sm}\.cubin$")
  [ "$n" -gt "$units" ] && units=$n
done
[ "$units" -gt 0 ] || bad "no cubin of any required architecture"
for sm in $required; do
  n=$(echo "$elf" | grep -c "\.sm_${sm}\.cubin$")
  if [ "$n" -eq 0 ]; then bad "no sm_$sm code (no kernel image on those GPUs)"
  elif [ "$n" -ne "$units" ]; then bad "sm_$sm code in $n of $units translation units"
  else say "sm_$sm: $n cubins"; fi
done
n=$(echo "$ptx" | grep -c "\.sm_${ptx_sm}\.ptx$")
if [ "$n" -eq 0 ] || [ "$n" -ne "$units" ]; then bad "compute_$ptx_sm PTX in $n of $units translation units"
else say "compute_$ptx_sm PTX: $n files"; fi
extra=$(echo "$elf" | sed -n 's/.*\.sm_\([0-9a-z]*\)\.cubin$/\1/p' | sort -u | tr '\n' ' ')
say "architectures in the module: $extra"
exit $fail

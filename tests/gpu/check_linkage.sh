#!/bin/sh
# check_linkage.sh MODULE CNNSH -- the CI-level proof that the CUDA backend
# was built and linked against cuDNN and cuBLAS, and that cnnsh was not:
#   - readelf -d MODULE lists libcudnn, libcublas and libcudart as NEEDED;
#   - ldd CNNSH names none of them (start-up must not pay for CUDA);
#   - `cnnsh --version` names the CUDA module and the cuDNN it was built with;
#   - without a device: cnn.cuda.is_available() is false with a reason and
#     cnn.zeros(2):cuda() raises a Lua error (no crash); with one, both work.
set -u
module=$1
cnnsh=$2
fail=0
say() { echo "check_linkage: $*"; }
bad() { say "FAIL: $*"; fail=1; }

needed=$(readelf -d "$module" | grep NEEDED)
for lib in libcudnn libcublas libcudart; do
  echo "$needed" | grep -q "$lib" && say "module needs $lib" || bad "module does not link $lib"
done
if ldd "$cnnsh" | grep -E 'libcudnn|libcublas|libcudart'; then
  bad "cnnsh links CUDA libraries"
else
  say "cnnsh links no CUDA library"
fi

version=$("$cnnsh" --version 2>&1)
echo "$version"
echo "$version" | grep -q "cuda module: libcnn_cuda.so built with CUDA .*cuDNN 9\." \
  && say "--version names the module and cuDNN" || bad "--version does not name the CUDA module and cuDNN"

out=$("$cnnsh" -e '
local ok, why = cnn.cuda.is_available()
print("is_available", ok, why)
local fine, err = pcall(function() return cnn.zeros(2):cuda() end)
print("cuda()", fine, err)
if ok then assert(fine, err) else
  assert(type(why) == "string" and #why > 0, "no reason")
  assert(not fine and tostring(err):find("cuda"), "no clear error")
end
print("lua checks ok")' 2>&1)
echo "$out"
echo "$out" | grep -q "lua checks ok" || bad "Lua checks"
exit $fail

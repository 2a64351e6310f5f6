# Warnings, vector ISA and the sanitizer build shared by every target.
add_compile_options(-Wall -Wextra -Wno-unused-parameter -Wno-sign-compare)
include(CheckCCompilerFlag)
# Our own loops target x86-64-v3 (AVX2+FMA) when this CPU has it; OpenBLAS
# and oneDNN pick their own kernels (AVX-512 here) at run time.
file(READ /proc/cpuinfo CNNSH_CPUINFO LIMIT 20000)
check_c_compiler_flag(-march=x86-64-v3 CNNSH_HAS_V3)
if(CNNSH_HAS_V3 AND CNNSH_CPUINFO MATCHES " avx2 " AND CNNSH_CPUINFO MATCHES " fma ")
  add_compile_options($<$<COMPILE_LANGUAGE:C>:-march=x86-64-v3>)
endif()
if(CNNSH_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()

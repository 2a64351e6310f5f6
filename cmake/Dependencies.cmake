# Finds the Debian packages listed in DESIGN.md (scripts/setup installs them).
find_package(PkgConfig REQUIRED)
pkg_check_modules(LUA REQUIRED IMPORTED_TARGET lua5.4)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
pkg_check_modules(CJSON REQUIRED IMPORTED_TARGET libcjson)
pkg_check_modules(PNG REQUIRED IMPORTED_TARGET libpng)
pkg_check_modules(TURBOJPEG REQUIRED IMPORTED_TARGET libturbojpeg)
pkg_check_modules(ZLIB REQUIRED IMPORTED_TARGET zlib)
# SLEEF: 1-ulp vector exp, log, expm1, and double erfc/exp for gelu (core/cpu/vector_math.c)
pkg_check_modules(SLEEF REQUIRED IMPORTED_TARGET sleef)
find_package(OpenMP REQUIRED COMPONENTS C)
find_package(Threads REQUIRED)

find_path(DNNL_INCLUDE_DIR dnnl.h REQUIRED)
find_library(DNNL_LIBRARY dnnl REQUIRED)
add_library(dnnl::dnnl UNKNOWN IMPORTED)
set_target_properties(dnnl::dnnl PROPERTIES IMPORTED_LOCATION "${DNNL_LIBRARY}"
                      INTERFACE_INCLUDE_DIRECTORIES "${DNNL_INCLUDE_DIR}")

find_path(READLINE_INCLUDE_DIR readline/readline.h REQUIRED)
find_library(READLINE_LIBRARY readline REQUIRED)

# ONNX (cnn.onnx): the protobuf C code is generated at build time by protoc-c
# from the onnx.proto that Debian's libonnx-dev ships; libprotobuf-c packs
# and unpacks it (core/io/onnx_*.c).
pkg_check_modules(PROTOBUF_C REQUIRED IMPORTED_TARGET libprotobuf-c)
find_program(PROTOC_C protoc-c REQUIRED)
find_file(ONNX_PROTO onnx.proto PATHS /usr/include/onnx NO_DEFAULT_PATH REQUIRED)

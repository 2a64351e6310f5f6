# The NCCL collectives (gpu/nccl.c -> libcnn_nccl.so), a MODULE that
# core/dist.c dlopen()s on dist.init{backend = 'nccl'}.  Built with the
# CUDA backend and the MPI module (NCCL's ranks are started and bootstrapped
# by MPI) whenever NCCL's header and library are found: CI compiles and
# links it wherever the CUDA toolkit is, GPU or not.
set(CNNSH_HAVE_NCCL OFF)
if(CNNSH_HAVE_CUDA AND CNNSH_HAVE_MPI)
  find_package(CUDAToolkit REQUIRED)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/lib)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(CNNSH_HAVE_NCCL ON)
    add_library(cnn_nccl MODULE ${PROJECT_SOURCE_DIR}/gpu/nccl.c)
    target_include_directories(cnn_nccl PRIVATE ${PROJECT_SOURCE_DIR}/core ${NCCL_INCLUDE_DIR})
    target_link_libraries(cnn_nccl PRIVATE CUDA::cudart ${NCCL_LIBRARY})
    set_target_properties(cnn_nccl PROPERTIES C_VISIBILITY_PRESET hidden
                          LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/gpu)
    target_link_options(cnn_nccl PRIVATE -Wl,--no-undefined)
    target_compile_definitions(cnn_core PRIVATE
      CNNSH_NCCL_MODULE_BUILD_PATH="$<TARGET_FILE:cnn_nccl>")
    install(TARGETS cnn_nccl LIBRARY DESTINATION lib/cnnsh)
  endif()
endif()
message(STATUS "cnnsh NCCL module: ${CNNSH_HAVE_NCCL}")

# The optional Open MPI collectives module (dist/): AUTO builds it when
# Debian's libopenmpi-dev is found (pkg-config ompi-c), ON requires it, OFF
# skips it.  It is a MODULE that core/dist.c dlopens on the first dist.init.
set(CNNSH_MPI AUTO CACHE STRING "Build the Open MPI module: AUTO, ON or OFF")
set_property(CACHE CNNSH_MPI PROPERTY STRINGS AUTO ON OFF)
set(CNNSH_HAVE_MPI OFF)
if(NOT CNNSH_MPI STREQUAL "OFF")
  pkg_check_modules(OMPI IMPORTED_TARGET ompi-c)
  find_program(MPIRUN mpirun)
  if(OMPI_FOUND AND MPIRUN)
    set(CNNSH_HAVE_MPI ON)
  elseif(CNNSH_MPI STREQUAL "ON")
    message(FATAL_ERROR "CNNSH_MPI=ON but Open MPI (libopenmpi-dev, openmpi-bin) was not found")
  endif()
endif()
if(CNNSH_HAVE_MPI)
  add_subdirectory(dist)
endif()
message(STATUS "cnnsh MPI module: ${CNNSH_HAVE_MPI}")

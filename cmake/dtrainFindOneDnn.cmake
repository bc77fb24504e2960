# Looks for oneDNN's CMake package (dnnl) and OpenMP, for the optional dtrain::onednn. Shared by the build
# tree and the installed dtrainConfig.cmake. Sets dnnl_FOUND and OpenMP_CXX_FOUND as find_package does, and
# DTRAIN_ONEDNN_MISSING to why dtrain::onednn cannot be defined (empty when it can).
#
# Debian's oneDNN is built with the OpenCL GPU runtime, and its package configuration calls
# find_package(OpenCL REQUIRED): without OpenCL's headers and library (ocl-icd-opencl-dev, which libdnnl-dev
# only recommends) that would stop the whole configuration of the project. So such a oneDNN is looked for
# only when OpenCL is found.
macro(dtrain_find_onednn)
  set(DTRAIN_ONEDNN_MISSING "")
  find_file(DTRAIN_DNNL_CONFIG dnnl-config.cmake PATH_SUFFIXES lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/dnnl
                                                                lib/cmake/dnnl lib64/cmake/dnnl)
  mark_as_advanced(DTRAIN_DNNL_CONFIG)
  set(_dtrain_dnnl_needs_opencl "")
  if(DTRAIN_DNNL_CONFIG)
    file(STRINGS "${DTRAIN_DNNL_CONFIG}" _dtrain_dnnl_needs_opencl REGEX "find_package\\(OpenCL REQUIRED\\)")
  endif()
  if(_dtrain_dnnl_needs_opencl)
    find_package(OpenCL QUIET)
  endif()
  if(_dtrain_dnnl_needs_opencl AND NOT OpenCL_FOUND)
    set(dnnl_FOUND FALSE)
    set(DTRAIN_ONEDNN_MISSING "this oneDNN's CMake package requires OpenCL, which is not found (Debian: "
                              "apt-get install ocl-icd-opencl-dev, or scripts/install-deps.sh --onednn)")
  else()
    find_package(dnnl CONFIG QUIET)
    if(NOT dnnl_FOUND)
      set(DTRAIN_ONEDNN_MISSING "oneDNN's CMake package (dnnl, Debian libdnnl-dev) not found")
    endif()
  endif()
  find_package(OpenMP QUIET COMPONENTS CXX)
  if(dnnl_FOUND AND NOT OpenMP_CXX_FOUND)
    set(DTRAIN_ONEDNN_MISSING "OpenMP not found")
  endif()
  string(JOIN "" DTRAIN_ONEDNN_MISSING ${DTRAIN_ONEDNN_MISSING})
  unset(_dtrain_dnnl_needs_opencl)
endmacro()

include(CMakePackageConfigHelpers)
set(DTRAIN_CMAKE_DIR ${CMAKE_INSTALL_DATADIR}/cmake/dtrain)
install(TARGETS dtrain dtrain_app EXPORT dtrainTargets)
install(DIRECTORY include/dtrain DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${DTRAIN_GENERATED_INCLUDE_DIR}/dtrain/config.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dtrain)
install(EXPORT dtrainTargets NAMESPACE dtrain:: DESTINATION ${DTRAIN_CMAKE_DIR})
# The MPI the package is built with, resolved: MPI_CXX_COMPILER and MPIEXEC_EXECUTABLE may be generic names
# that update-alternatives points to another MPI later (/usr/bin/mpicxx -> /etc/alternatives/mpicxx ->
# /usr/bin/mpicxx.mpich), so the package records the program a generic name (mpicxx, mpic++, mpiCC,
# mpiexec, mpirun) or /etc/alternatives points to now. Links from an MPI's own name stay unresolved: Open
# MPI's mpicxx.openmpi links to opal_wrapper, which needs the name it was called by. The MPI's name, version
# and library are recorded too; dtrainConfig.cmake compares them with the consumer's.
function(_dtrain_resolve_alternatives path var)
  foreach(step RANGE 8)
    get_filename_component(name "${path}" NAME)
    if(NOT IS_SYMLINK "${path}" OR NOT (name MATCHES "^(mpicxx|mpic\\+\\+|mpiCC|mpiexec|mpirun)$"
                                        OR path MATCHES "^/etc/alternatives/"))
      break()
    endif()
    file(READ_SYMLINK "${path}" target)
    if(NOT IS_ABSOLUTE "${target}")
      get_filename_component(dir "${path}" DIRECTORY)
      set(target "${dir}/${target}")
    endif()
    set(path "${target}")
  endforeach()
  set(${var} "${path}" PARENT_SCOPE)
endfunction()
_dtrain_resolve_alternatives("${MPI_CXX_COMPILER}" DTRAIN_MPI_CXX_COMPILER_RESOLVED)
_dtrain_resolve_alternatives("${MPIEXEC_EXECUTABLE}" DTRAIN_MPIEXEC_EXECUTABLE_RESOLVED)
_dtrain_mpi_identity(DTRAIN_MPI_NAME DTRAIN_MPI_LIBRARY)
message(STATUS "dtrain's package records ${DTRAIN_MPI_NAME} (${DTRAIN_MPI_CXX_COMPILER_RESOLVED}, "
               "${DTRAIN_MPI_LIBRARY})")
configure_package_config_file(cmake/dtrainConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/dtrainConfig.cmake
                              INSTALL_DESTINATION ${DTRAIN_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/dtrainConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/dtrainConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/dtrainConfigVersion.cmake
              cmake/dtrainDependencies.cmake cmake/dtrainFindOneDnn.cmake src/precompiled.cpp src/onednn.cpp
        DESTINATION ${DTRAIN_CMAKE_DIR})

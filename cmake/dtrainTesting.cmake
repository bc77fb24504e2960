# dtrain_add_test(<name> SOURCES <files...> [RANKS <n...>] [TIMEOUT <s>] [LABELS <l...>])
#
# Builds one test executable from SOURCES plus the shared MPI Catch2 main and registers it once per
# process count as <name>.np<n>, run through mpiexec.mpich (MPIEXEC_EXECUTABLE). RANKS defaults to 1.
# Each registration gets a TIMEOUT (default 120 s) so a hang fails instead of blocking CI.
function(dtrain_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;RANKS;LABELS" ${ARGN})
  if(NOT T_RANKS)
    set(T_RANKS 1)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE dtrain_test_main dtrain::dtrain dtrain_warnings)
  foreach(np IN LISTS T_RANKS)
    add_test(NAME ${name}.np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
                     $<TARGET_FILE:${name}> ${MPIEXEC_POSTFLAGS})
    set_tests_properties(${name}.np${np} PROPERTIES TIMEOUT ${T_TIMEOUT} PROCESSORS ${np}
                         LABELS "np${np};${T_LABELS}"
                         ENVIRONMENT "OPENBLAS_NUM_THREADS=1;DTRAIN_TEST_NAME=${name}.np${np}")
  endforeach()
endfunction()

# The README's "Using dtrain from another CMake project", command by command:
# 1. a library-only configure of dtrain (-DBUILD_TESTING=OFF, no examples or benchmarks: CMake must use
#    every variable given, register no test and need none of the tests' packages) and its install into
#    WORK_DIR/prefix;
# 2. the consumer project's programs (dtrain::dtrain, dtrain::app and, installed only, dtrain::precompiled
#    compiled in the consumer's build, with a precompiled header of <dtrain/dtrain.hpp>) configured with nothing but CMAKE_PREFIX_PATH, built and run with
#    the mpiexec the package recorded, and the same consumer through add_subdirectory (which needs the MPI
#    given, as documented).
# 3. the consumer's BLAS choice (BLA_VENDOR Generic, Debian's reference libblas) is the BLAS it links
#    (checked in consumer/CMakeLists.txt).
# When the other MPI of Debian (Open MPI for an MPICH build, MPICH for an Open MPI build) is installed, its
# mpicxx and mpiexec come first on the PATH, as update-alternatives makes them the default, and:
# - the consumer must still get the MPI dtrain was configured with;
# - a consumer choosing the other one (MPI_EXECUTABLE_SUFFIX, or its own MPI_CXX_COMPILER) gets that one,
#   with a warning naming both MPIs (a failed configure is then an error);
# - a package configured through a generic name (like /usr/bin/mpicxx) keeps the MPI that name pointed to
#   when it was installed, after the name is pointed to the other MPI;
# - a consumer that chose no MPI and cannot get the package's (its compiler is gone) fails to configure with
#   an error naming both MPIs.
# When the other MPI is not installed, those checks cannot run: after every other check has passed, the
# script prints DTRAIN_PACKAGE_CHECK_SKIPPED with the reason, which tests/CMakeLists.txt makes ctest report
# as Skipped (SKIP_REGULAR_EXPRESSION) instead of Passed. CI installs both MPIs (scripts/install-deps.sh), so
# there the checks run.
# Usage: cmake -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch> -DCONSUMER_DIR=<tests/package>
#              -DMPI_CXX_COMPILER=<mpicxx> -DMPIEXEC_EXECUTABLE=<mpiexec> -P run_package_test.cmake
file(REMOVE_RECURSE ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGV}\n${out}\n${err}")
  endif()
  message(STATUS "${ARGV}\n${out}${err}")
  set(output "${out}${err}" PARENT_SCOPE)
endfunction()
# The value of a consumer's cache entry.
function(cache_entry dir name var)
  file(STRINGS ${dir}/CMakeCache.txt line REGEX "^${name}:[A-Z]+=")
  string(REGEX REPLACE "^${name}:[A-Z]+=" "" value "${line}")
  set(${var} "${value}" PARENT_SCOPE)
endfunction()
function(expect_mpi dir compiler mpiexec)
  cache_entry(${dir} MPI_CXX_COMPILER got_compiler)
  cache_entry(${dir} MPIEXEC_EXECUTABLE got_mpiexec)
  if(NOT got_compiler STREQUAL compiler OR NOT got_mpiexec STREQUAL mpiexec)
    message(FATAL_ERROR "${dir}: the consumer got MPI_CXX_COMPILER=${got_compiler} and "
                        "MPIEXEC_EXECUTABLE=${got_mpiexec}, expected ${compiler} and ${mpiexec}")
  endif()
endfunction()

# 1. Library-only configure and install.
run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/dtrain -DBUILD_TESTING=OFF -DDTRAIN_BUILD_EXAMPLES=OFF
    -DDTRAIN_BUILD_BENCHMARKS=OFF -DMPI_CXX_COMPILER=${MPI_CXX_COMPILER} -DMPIEXEC_EXECUTABLE=${MPIEXEC_EXECUTABLE})
if(output MATCHES "Manually-specified variables were not used")
  message(FATAL_ERROR "the library-only configure ignored a variable:\n${output}")
endif()
if(EXISTS ${WORK_DIR}/dtrain/tests OR EXISTS ${WORK_DIR}/dtrain/examples OR EXISTS ${WORK_DIR}/dtrain/benchmarks)
  message(FATAL_ERROR "the library-only configure configured tests, examples or benchmarks")
endif()
run(${CMAKE_COMMAND} --install ${WORK_DIR}/dtrain --prefix ${WORK_DIR}/prefix)

# The other MPI as the default: its wrappers under their plain names first on the PATH.
get_filename_component(mpi_bin ${MPI_CXX_COMPILER} DIRECTORY)
set(other_suffix)
set(skipped)
foreach(suffix .openmpi .mpich)
  if(MPI_CXX_COMPILER MATCHES "${suffix}$")
    continue()
  endif()
  if(EXISTS ${mpi_bin}/mpicxx${suffix} AND EXISTS ${mpi_bin}/mpiexec${suffix})
    set(other_suffix ${suffix})
    set(skipped)
    file(MAKE_DIRECTORY ${WORK_DIR}/other-mpi-default)
    foreach(name mpicxx mpic++ mpiCC mpiexec mpirun)
      file(CREATE_LINK ${mpi_bin}/${name}${suffix} ${WORK_DIR}/other-mpi-default/${name} SYMBOLIC)
    endforeach()
    set(ENV{PATH} "${WORK_DIR}/other-mpi-default:$ENV{PATH}")
    message(STATUS "${suffix} is the default MPI on this test's PATH")
    break()
  endif()
  string(APPEND skipped "${mpi_bin}/mpicxx${suffix} or ${mpi_bin}/mpiexec${suffix} is missing; ")
endforeach()

# The names the package's check uses in its messages.
set(mpi_name MPICH)
set(other_name "Open MPI")
if(MPI_CXX_COMPILER MATCHES "openmpi")
  set(mpi_name "Open MPI")
  set(other_name MPICH)
endif()

# 2. The consumer, both ways.
foreach(mode find_package add_subdirectory)
  set(dir ${WORK_DIR}/${mode})
  set(mpi_args)
  if(mode STREQUAL "add_subdirectory")
    set(mpi_args -DMPI_CXX_COMPILER=${MPI_CXX_COMPILER} -DMPIEXEC_EXECUTABLE=${MPIEXEC_EXECUTABLE})
  endif()
  run(${CMAKE_COMMAND} -S ${CONSUMER_DIR}/consumer -B ${dir} -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
      -DCONSUMER_MODE=${mode} -DDTRAIN_SOURCE_DIR=${SOURCE_DIR} ${mpi_args})
  expect_mpi(${dir} ${MPI_CXX_COMPILER} ${MPIEXEC_EXECUTABLE})
  run(${CMAKE_COMMAND} --build ${dir})
  run(${MPIEXEC_EXECUTABLE} -n 2 ${dir}/consumer)
  run(${MPIEXEC_EXECUTABLE} -n 2 ${dir}/app_consumer ${dir}/metrics.csv)
  if(mode STREQUAL "find_package")
    run(${MPIEXEC_EXECUTABLE} -n 2 ${dir}/precompiled_consumer)
  endif()
endforeach()

# The recorded MPI is a default only: the other MPI, chosen with one flag (MPI_EXECUTABLE_SUFFIX or the
# consumer's own MPI_CXX_COMPILER), wins, with a warning that names both MPIs. Its mpicxx exists, so a
# configure that fails is an error, not a check left out.
if(other_suffix)
  set(other_compiler ${mpi_bin}/mpicxx${other_suffix})
  foreach(choice MPI_EXECUTABLE_SUFFIX=${other_suffix} MPI_CXX_COMPILER=${other_compiler})
    string(REGEX REPLACE "=.*" "" what "${choice}")
    set(dir ${WORK_DIR}/override-${what})
    execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_DIR}/consumer -B ${dir}
                            -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCONSUMER_MODE=find_package -D${choice}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${other_compiler} exists, but a consumer choosing it with -D${choice} does not "
                          "configure (is the other MPI's development package installed?):\n${out}${err}")
    endif()
    cache_entry(${dir} MPI_CXX_COMPILER got_compiler)
    if(NOT got_compiler STREQUAL other_compiler)
      message(FATAL_ERROR "a consumer choosing -D${choice} got MPI_CXX_COMPILER=${got_compiler}")
    endif()
    string(REGEX REPLACE "[ \n]+" " " err "${err}")  # CMake wraps a warning's lines
    if(NOT "${err}" MATCHES "dtrain was installed with ${mpi_name} .*but this project found ${other_name}")
      message(FATAL_ERROR "a consumer choosing ${other_compiler} with -D${choice} got no warning naming "
                          "dtrain's ${mpi_name} and its ${other_name}:\n${err}")
    endif()
    message(STATUS "-D${choice} selects ${other_compiler}, with a warning naming both MPIs")
  endforeach()

  # A package configured through a generic name (like /usr/bin/mpicxx, which update-alternatives points to
  # one MPI or the other) records the program the name points to at install time: pointing the name to the
  # other MPI afterwards does not change the consumer's MPI.
  set(generic ${WORK_DIR}/generic-names)
  file(MAKE_DIRECTORY ${generic})
  file(CREATE_LINK ${MPI_CXX_COMPILER} ${generic}/mpicxx SYMBOLIC)
  file(CREATE_LINK ${MPIEXEC_EXECUTABLE} ${generic}/mpiexec SYMBOLIC)
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/dtrain-generic -DBUILD_TESTING=OFF
      -DDTRAIN_BUILD_EXAMPLES=OFF -DDTRAIN_BUILD_BENCHMARKS=OFF -DMPI_CXX_COMPILER=${generic}/mpicxx
      -DMPIEXEC_EXECUTABLE=${generic}/mpiexec)
  run(${CMAKE_COMMAND} --install ${WORK_DIR}/dtrain-generic --prefix ${WORK_DIR}/prefix-generic)
  file(REMOVE ${generic}/mpicxx ${generic}/mpiexec)
  file(CREATE_LINK ${other_compiler} ${generic}/mpicxx SYMBOLIC)
  file(CREATE_LINK ${mpi_bin}/mpiexec${other_suffix} ${generic}/mpiexec SYMBOLIC)
  set(dir ${WORK_DIR}/generic-consumer)
  run(${CMAKE_COMMAND} -S ${CONSUMER_DIR}/consumer -B ${dir} -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix-generic
      -DCONSUMER_MODE=find_package)
  expect_mpi(${dir} ${MPI_CXX_COMPILER} ${MPIEXEC_EXECUTABLE})
  message(STATUS "a package configured with ${generic}/mpicxx keeps ${MPI_CXX_COMPILER} after the name moved")

  # A consumer that chose no MPI and cannot get dtrain's (its compiler is gone) gets the PATH's default, the
  # other MPI: a configure error naming both, not a silent switch.
  file(COPY ${WORK_DIR}/prefix/ DESTINATION ${WORK_DIR}/prefix-gone)
  file(GLOB_RECURSE config ${WORK_DIR}/prefix-gone/*/dtrainConfig.cmake)
  file(READ ${config} text)
  string(REPLACE "set(DTRAIN_MPI_CXX_COMPILER \"${MPI_CXX_COMPILER}\")"
                 "set(DTRAIN_MPI_CXX_COMPILER \"${WORK_DIR}/gone/mpicxx\")" patched "${text}")
  if(patched STREQUAL text)
    message(FATAL_ERROR "${config} does not record DTRAIN_MPI_CXX_COMPILER as ${MPI_CXX_COMPILER}")
  endif()
  file(WRITE ${config} "${patched}")
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_DIR}/consumer -B ${WORK_DIR}/gone-consumer
                          -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix-gone -DCONSUMER_MODE=find_package
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REGEX REPLACE "[ \n]+" " " err "${err}")
  string(FIND "${err}" "${WORK_DIR}/gone/mpicxx is missing" names_missing)
  if(rc EQUAL 0 OR names_missing LESS 0
     OR NOT "${err}" MATCHES "dtrain was installed with ${mpi_name} .*but this project found ${other_name}")
    message(FATAL_ERROR "a consumer that chose no MPI and got ${other_name} instead of the package's missing "
                        "${WORK_DIR}/gone/mpicxx configured (${rc}) without the error naming both:\n${out}${err}")
  endif()
  message(STATUS "a consumer left with another MPI than the package's is an error naming both")
else()
  # Last, so that the marker is printed only when everything else passed.
  message(STATUS "DTRAIN_PACKAGE_CHECK_SKIPPED: no second MPI is installed next to ${MPI_CXX_COMPILER} "
                 "(${skipped}install openmpi-bin and libopenmpi-dev, or mpich and libmpich-dev): the consumer "
                 "was not checked with the other MPI as the default, with its own choice of MPI, nor with "
                 "a package configured through a generic name")
endif()

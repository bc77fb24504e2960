# The README's "Using dtrain from another CMake project", command by command:
# 1. a library-only configure of dtrain (-DBUILD_TESTING=OFF, no examples or benchmarks: CMake must use
#    every variable given, register no test and need none of the tests' packages) and its install into
#    WORK_DIR/prefix;
# 2. the consumer project's two programs (dtrain::dtrain, dtrain::app) configured with nothing but
#    CMAKE_PREFIX_PATH, built and run with the mpiexec the package recorded, and the same consumer through
#    add_subdirectory (which needs the MPI given, as documented).
# When the other MPI of Debian (Open MPI for an MPICH build, MPICH for an Open MPI build) is installed, its
# mpicxx and mpiexec come first on the PATH, as update-alternatives makes them the default: the consumer
# must still get the MPI dtrain was configured with, and a consumer choosing the other one with
# MPI_EXECUTABLE_SUFFIX must get that one (a failed configure is then an error). When the other MPI is not
# installed, those two checks cannot run: after every other check has passed, the script prints
# DTRAIN_PACKAGE_CHECK_SKIPPED with the reason, which tests/CMakeLists.txt makes ctest report as Skipped
# (SKIP_REGULAR_EXPRESSION) instead of Passed. CI installs both MPIs (scripts/install-deps.sh), so there
# the checks run.
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
endforeach()

# The recorded MPI is a default only: the other MPI, chosen with one flag, wins. Its mpicxx exists, so a
# configure that fails is an error, not a check left out.
if(other_suffix)
  set(dir ${WORK_DIR}/override)
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_DIR}/consumer -B ${dir}
                          -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCONSUMER_MODE=find_package
                          -DMPI_EXECUTABLE_SUFFIX=${other_suffix}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${mpi_bin}/mpicxx${other_suffix} exists, but a consumer choosing it with "
                        "-DMPI_EXECUTABLE_SUFFIX=${other_suffix} does not configure (is the other MPI's "
                        "development package installed?):\n${out}${err}")
  endif()
  expect_mpi(${dir} ${mpi_bin}/mpicxx${other_suffix} ${mpi_bin}/mpiexec${other_suffix})
  message(STATUS "-DMPI_EXECUTABLE_SUFFIX=${other_suffix} selects ${mpi_bin}/mpicxx${other_suffix}")
else()
  # Last, so that the marker is printed only when everything else passed.
  message(STATUS "DTRAIN_PACKAGE_CHECK_SKIPPED: no second MPI is installed next to ${MPI_CXX_COMPILER} "
                 "(${skipped}install openmpi-bin and libopenmpi-dev, or mpich and libmpich-dev): the consumer "
                 "was not checked with the other MPI as the default, nor with -DMPI_EXECUTABLE_SUFFIX")
endif()

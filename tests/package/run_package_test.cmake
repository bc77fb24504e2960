# Installs dtrain from BINARY_DIR into WORK_DIR/prefix, then configures, builds and runs the consumer
# project's two programs (dtrain::dtrain, dtrain::app) against it (and the same consumer through
# add_subdirectory). Fails on any step.
file(REMOVE_RECURSE ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGV}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()
run(${CMAKE_COMMAND} --install ${BINARY_DIR} --prefix ${WORK_DIR}/prefix)
foreach(mode find_package add_subdirectory)
  run(${CMAKE_COMMAND} -S ${CONSUMER_DIR}/consumer -B ${WORK_DIR}/${mode} -DCMAKE_BUILD_TYPE=Release
      -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCONSUMER_MODE=${mode} -DDTRAIN_SOURCE_DIR=${SOURCE_DIR}
      -DMPI_CXX_COMPILER=${MPI_CXX_COMPILER} -DMPIEXEC_EXECUTABLE=${MPIEXEC_EXECUTABLE})
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/${mode})
  run(${MPIEXEC_EXECUTABLE} -n 2 ${WORK_DIR}/${mode}/consumer)
  run(${MPIEXEC_EXECUTABLE} -n 2 ${WORK_DIR}/${mode}/app_consumer ${WORK_DIR}/${mode}/metrics.csv)
endforeach()

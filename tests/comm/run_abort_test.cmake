# Runs the abort program under mpiexec and passes only when the job ends with a non-zero exit code within the
# timeout and its output names the failing rank and the exception's message.
# Usage: cmake -DMPIEXEC=... -DNP=2 -DPROGRAM=... -P run_abort_test.cmake
execute_process(COMMAND ${MPIEXEC} -n ${NP} ${PROGRAM}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 25)
set(all "${out}${err}")
message(STATUS "exit: ${rc}\noutput:\n${all}")
if(rc STREQUAL "0")
  message(FATAL_ERROR "the job exited with 0 although a rank threw")
endif()
if(rc MATCHES "timeout|Process terminated due to timeout")
  message(FATAL_ERROR "the job hung: ${rc}")
endif()
if(NOT all MATCHES "dtrain: rank 1 of ${NP}: uncaught exception: comm_abort_test: deliberate failure on rank 1")
  message(FATAL_ERROR "the output lacks rank 1's message")
endif()

# An example run interrupted after some epochs and resumed with --checkpoint ends exactly like the
# uninterrupted run: the metrics of the resumed epochs (loss and accuracy, printed to 8 significant digits
# in the CSV) equal those of the same epochs of one run. Invoked as cmake -P with:
#   CMD      mpiexec ... program common-args..., items joined by "@@"
#   DIR      a scratch directory
#   EPOCHS   epochs of the whole run; the interrupted run stops after EPOCHS/2
#   STOP, EVERY, RESUME_EPOCH, RESUME_BATCH   optional, to stop mid-epoch instead: the interrupted run
#            checkpoints every EVERY steps and stops right after step STOP, which is batch RESUME_BATCH of
#            epoch RESUME_EPOCH (1-based); the resumed run logs that epoch and the following ones, which must
#            equal the whole run's (the epoch's running sums travel in the checkpoint)
cmake_minimum_required(VERSION 3.21)
string(REPLACE "@@" ";" CMD "${CMD}")
file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")
math(EXPR half "${EPOCHS} / 2")

function(run)
  execute_process(COMMAND ${CMD} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
  message("${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "exit status ${rc}: ${CMD} ${ARGN}")
  endif()
  set(output "${out}${err}" PARENT_SCOPE)
endfunction()

# Metrics columns (epoch, train_loss, train_acc, test_loss, test_acc) of every data row of a CSV.
function(metrics csv var)
  file(STRINGS "${csv}" lines)
  list(REMOVE_AT lines 0)
  set(rows)
  foreach(line IN LISTS lines)
    string(REPLACE "," ";" cols "${line}")
    list(SUBLIST cols 0 5 m)
    string(REPLACE ";" "," m "${m}")
    list(APPEND rows "${m}")
  endforeach()
  set(${var} "${rows}" PARENT_SCOPE)
endfunction()

run(--epochs ${EPOCHS} --log "${DIR}/whole.csv")
if(DEFINED STOP)
  run(--epochs ${EPOCHS} --checkpoint "${DIR}/run.ckpt" --checkpoint-every ${EVERY} --stop-after-step ${STOP})
  math(EXPR half "${RESUME_EPOCH} - 1")
else()
  run(--epochs ${half} --checkpoint "${DIR}/run.ckpt")
endif()
if(NOT EXISTS "${DIR}/run.ckpt")
  message(FATAL_ERROR "no checkpoint written")
endif()
run(--epochs ${EPOCHS} --checkpoint "${DIR}/run.ckpt" --log "${DIR}/resumed.csv")
math(EXPR next "${half} + 1")
if(NOT DEFINED RESUME_BATCH)
  set(RESUME_BATCH 0)
endif()
if(NOT output MATCHES "resuming from [^\n]*run.ckpt at epoch ${next}, batch ${RESUME_BATCH}")
  message(FATAL_ERROR "the second run did not resume from the checkpoint")
endif()
metrics("${DIR}/whole.csv" whole)
metrics("${DIR}/resumed.csv" resumed)
list(LENGTH resumed n)
math(EXPR expected "${EPOCHS} - ${half}")
if(NOT n EQUAL expected)
  message(FATAL_ERROR "resumed run logged ${n} epochs, expected ${expected}")
endif()
list(SUBLIST whole ${half} -1 tail)
if(NOT "${tail}" STREQUAL "${resumed}")
  message(FATAL_ERROR "resumed epochs differ from the uninterrupted run:\n  whole:   ${tail}\n  resumed: ${resumed}")
endif()
message("resumed epochs ${next}..${EPOCHS} equal the uninterrupted run: ${resumed}")

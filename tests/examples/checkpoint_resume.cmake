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
#   RESUME_CMD  optional: the resumed run's command (e.g. at another number of ranks with the same
#            --global-batch); its metrics must then equal the whole run's within 1e-5 (float rounding)
#            instead of to the last digit
#   REFUSED_CMD optional: a command that must refuse to resume the checkpoint (exit status not 0) with a
#            message matching REFUSED_REGEX
#   RETRY    optional, with STOP: instead of two runs, one retry loop around the command, as docs/checkpoints.md
#            shows it: `until CMD ... --stop-after-step STOP; do ...; done`; the first attempt stops with exit
#            status 75 as an interrupted job does, the second resumes and ends with the whole run's figures
cmake_minimum_required(VERSION 3.21)
string(REPLACE "@@" ";" CMD "${CMD}")
set(exact TRUE)
if(DEFINED RESUME_CMD)
  string(REPLACE "@@" ";" RESUME_CMD "${RESUME_CMD}")
  set(exact FALSE)
else()
  set(RESUME_CMD "${CMD}")
endif()
file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")
math(EXPR half "${EPOCHS} / 2")

function(run)
  run_with(CMD ${ARGN})
  set(output "${output}" PARENT_SCOPE)
endfunction()

# Runs the command in the variable named `cmd_var` with ARGN; fails unless it exits 0 (or, with --stop-after-step,
# 75: stopped as if interrupted).
function(run_with cmd_var)
  execute_process(COMMAND ${${cmd_var}} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  TIMEOUT 240)
  message("${out}${err}")
  set(ok 0)
  if("--stop-after-step" IN_LIST ARGN)
    set(ok 75)
  endif()
  if(NOT rc EQUAL ok)
    message(FATAL_ERROR "exit status ${rc}: ${${cmd_var}} ${ARGN}")
  endif()
  set(output "${out}${err}" PARENT_SCOPE)
endfunction()

# A CSV number printed with %.8g ("0.43291876", "1", "nan", "1.5e-06") in units of 1e-8, in `var`.
function(scaled number var)
  if(number MATCHES "^([0-9]+)(\\.([0-9]*))?$")
    set(int "${CMAKE_MATCH_1}")
    string(SUBSTRING "${CMAKE_MATCH_3}00000000" 0 8 frac)
    string(REGEX REPLACE "^0+([0-9])" "\\1" frac "${frac}")
    math(EXPR v "${int} * 100000000 + ${frac}")
  elseif(number MATCHES "e-")
    set(v 0)  # below 1e-5
  else()
    set(v "${number}")  # nan: compared as text
  endif()
  set(${var} "${v}" PARENT_SCOPE)
endfunction()

# Fails unless the rows `a` and `b` (lists of "epoch,loss,acc,..." strings) agree within 1e-5 per value.
function(check_close a b)
  list(LENGTH a n)
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    list(GET a ${i} ra)
    list(GET b ${i} rb)
    string(REPLACE "," ";" va "${ra}")
    string(REPLACE "," ";" vb "${rb}")
    foreach(x y IN ZIP_LISTS va vb)
      scaled("${x}" sx)
      scaled("${y}" sy)
      if(sx MATCHES "^[0-9]+$" AND sy MATCHES "^[0-9]+$")
        math(EXPR d "${sx} - ${sy}")
        if(d LESS -1000 OR d GREATER 1000)
          message(FATAL_ERROR "resumed epochs differ from the uninterrupted run beyond 1e-5 (${x} and ${y}):\n  whole:   ${a}\n  resumed: ${b}")
        endif()
      elseif(NOT x STREQUAL y)
        message(FATAL_ERROR "resumed epochs differ from the uninterrupted run (${x} and ${y})")
      endif()
    endforeach()
  endforeach()
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
if(DEFINED RETRY)
  set(loop "n=0; until \"$@\"; do s=$?; n=$((n+1)); echo \"attempt $n: exit status $s\"; [ $s -eq 2 ] && exit 2; [ $n -ge 3 ] && exit 1; sleep 1; done")
  execute_process(COMMAND sh -c "${loop}" sh ${CMD} --epochs ${EPOCHS} --checkpoint "${DIR}/run.ckpt"
                          --checkpoint-every ${EVERY} --stop-after-step ${STOP} --log "${DIR}/resumed.csv"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE output ERROR_VARIABLE err TIMEOUT 240)
  message("${output}${err}")
  if(NOT rc EQUAL 0 OR NOT output MATCHES "attempt 1: exit status 75" OR output MATCHES "attempt 2")
    message(FATAL_ERROR "exit status ${rc}: the retry loop did not end after one interrupted attempt")
  endif()
  math(EXPR half "${RESUME_EPOCH} - 1")
elseif(DEFINED STOP)
  run(--epochs ${EPOCHS} --checkpoint "${DIR}/run.ckpt" --checkpoint-every ${EVERY} --stop-after-step ${STOP})
  math(EXPR half "${RESUME_EPOCH} - 1")
else()
  run(--epochs ${half} --checkpoint "${DIR}/run.ckpt")
endif()
if(NOT EXISTS "${DIR}/run.ckpt")
  message(FATAL_ERROR "no checkpoint written")
endif()
if(DEFINED REFUSED_CMD)
  string(REPLACE "@@" ";" REFUSED_CMD "${REFUSED_CMD}")
  execute_process(COMMAND ${REFUSED_CMD} --epochs ${EPOCHS} --checkpoint "${DIR}/run.ckpt"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
  message("${out}${err}")
  if(rc EQUAL 0 OR NOT "${out}${err}" MATCHES "${REFUSED_REGEX}")
    message(FATAL_ERROR "exit status ${rc}: expected a refusal matching '${REFUSED_REGEX}'")
  endif()
endif()
if(NOT DEFINED RETRY)
  run_with(RESUME_CMD --epochs ${EPOCHS} --checkpoint "${DIR}/run.ckpt" --log "${DIR}/resumed.csv")
endif()
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
if(NOT exact)
  check_close("${tail}" "${resumed}")
  message("resumed epochs ${next}..${EPOCHS} equal the uninterrupted run within 1e-5:\n  whole:   ${tail}\n  resumed: ${resumed}")
  return()
endif()
if(NOT "${tail}" STREQUAL "${resumed}")
  message(FATAL_ERROR "resumed epochs differ from the uninterrupted run:\n  whole:   ${tail}\n  resumed: ${resumed}")
endif()
message("resumed epochs ${next}..${EPOCHS} equal the uninterrupted run: ${resumed}")

# Inference from a saved model: TRAIN (iris_mlp ... --save-model DIR/iris.model) writes a model file and
# PREDICT (iris_predict --model DIR/iris.model) predicts with it without any optimizer: it must reach
# MIN_ACCURACY on the Iris table and print the species of the first rows. Then a model file of another
# network (TRAIN_OTHER, e.g. --activation tanh, written over the same path) still predicts (the file names its
# activation), and a file that is not a model is an error naming it. Invoked as cmake -P with TRAIN,
# TRAIN_OTHER and PREDICT (items joined by "@@"), DIR and MIN_ACCURACY.
cmake_minimum_required(VERSION 3.21)
foreach(v TRAIN TRAIN_OTHER PREDICT)
  string(REPLACE "@@" ";" ${v} "${${v}}")
endforeach()
file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")
set(model "${DIR}/iris.model")

function(run expect_rc)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  message("$ ${ARGN}\n${out}${err}")
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "exit status ${rc}, expected ${expect_rc}")
  endif()
  set(output "${out}${err}" PARENT_SCOPE)
endfunction()

run(0 ${TRAIN} --save-model ${model})
if(NOT output MATCHES "model written to ${model}")
  message(FATAL_ERROR "iris_mlp did not report the model file")
endif()
run(0 ${PREDICT} --model ${model} --min-accuracy ${MIN_ACCURACY} --show 3)
if(NOT output MATCHES "row 0: [A-Za-z-]+\nrow 1: [A-Za-z-]+\nrow 2: [A-Za-z-]+\n" OR NOT output MATCHES "accuracy [0-9.]+ \\([0-9]+ of 150\\)")
  message(FATAL_ERROR "iris_predict did not print three predictions and the accuracy over 150 rows")
endif()

# Rows of the four features alone (no species column): predictions, no accuracy.
file(WRITE "${DIR}/flowers.csv" "5.1,3.5,1.4,0.2\n6.7,3.0,5.2,2.3\n")
run(0 ${PREDICT} --model ${model} --data ${DIR}/flowers.csv --show 2)
if(NOT output MATCHES "2 rows of [^\n]*flowers.csv\nrow 0: Iris-setosa\nrow 1: Iris-virginica\n" OR output MATCHES "accuracy")
  message(FATAL_ERROR "iris_predict did not predict the two rows of features without a species column")
endif()

run(0 ${TRAIN_OTHER} --save-model ${model})
run(0 ${PREDICT} --model ${model} --min-accuracy ${MIN_ACCURACY} --show 0)
if(NOT output MATCHES "tanh activations")
  message(FATAL_ERROR "iris_predict did not rebuild the network the file names")
endif()

file(WRITE "${DIR}/not-a-model" "species,petal\n")
run(2 ${PREDICT} --model ${DIR}/not-a-model)
if(NOT output MATCHES "iris_predict: error: read_model_extras: '${DIR}/not-a-model' is (not a dtrain model file|truncated)")
  message(FATAL_ERROR "no error naming the file that is not a model")
endif()
file(REMOVE_RECURSE "${DIR}")

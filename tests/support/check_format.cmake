# Fails when any C++ file of the repository differs from what .clang-format asks for.
# Usage: cmake -DSOURCE_DIR=<repo> -DCLANG_FORMAT=<clang-format> -P check_format.cmake
file(GLOB_RECURSE files LIST_DIRECTORIES false
     ${SOURCE_DIR}/include/*.hpp ${SOURCE_DIR}/tests/*.hpp ${SOURCE_DIR}/tests/*.cpp
     ${SOURCE_DIR}/examples/*.hpp ${SOURCE_DIR}/examples/*.cpp ${SOURCE_DIR}/benchmarks/*.hpp
     ${SOURCE_DIR}/benchmarks/*.cpp)
set(bad)
# clang-format leaves comments alone: a line longer than 110 columns fails too, unless it is a row of a
# table (holds a '|').
string(REPEAT "." 111 too_long)
foreach(f IN LISTS files)
  execute_process(COMMAND ${CLANG_FORMAT} --style=file --dry-run --Werror ${f}
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  file(STRINGS ${f} long REGEX "^${too_long}")
  list(FILTER long EXCLUDE REGEX "[|]")
  if(NOT rc EQUAL 0 OR long)
    list(APPEND bad ${f})
  endif()
endforeach()
list(LENGTH files n)
if(bad)
  string(REPLACE ";" "\n  " bad "${bad}")
  message(FATAL_ERROR "not clang-formatted (run clang-format -i on them; reflow comments past 110 columns):\n  ${bad}")
endif()
message(STATUS "${n} files are clang-formatted")

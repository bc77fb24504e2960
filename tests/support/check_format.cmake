# Fails when any C++ file of the repository differs from what .clang-format asks for.
# Usage: cmake -DSOURCE_DIR=<repo> -DCLANG_FORMAT=<clang-format> -P check_format.cmake
file(GLOB_RECURSE files LIST_DIRECTORIES false
     ${SOURCE_DIR}/include/*.hpp ${SOURCE_DIR}/tests/*.hpp ${SOURCE_DIR}/tests/*.cpp
     ${SOURCE_DIR}/examples/*.hpp ${SOURCE_DIR}/examples/*.cpp ${SOURCE_DIR}/benchmarks/*.hpp
     ${SOURCE_DIR}/benchmarks/*.cpp)
set(bad)
foreach(f IN LISTS files)
  execute_process(COMMAND ${CLANG_FORMAT} --style=file --dry-run --Werror ${f}
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(NOT rc EQUAL 0)
    list(APPEND bad ${f})
  endif()
endforeach()
list(LENGTH files n)
if(bad)
  string(REPLACE ";" "\n  " bad "${bad}")
  message(FATAL_ERROR "not clang-formatted (run clang-format -i on them):\n  ${bad}")
endif()
message(STATUS "${n} files are clang-formatted")

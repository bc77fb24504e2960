# Synchronous DistOptimizer (Collective, Ring, Naive policies); included from tests/distributed/CMakeLists.txt.
# LABELS reliability: the tests docs/reliability.md cites (ctest -L reliability).
dtrain_add_test(distributed_bucket_test PROGRAM distributed_tests SOURCES ${CMAKE_CURRENT_LIST_DIR}/bucket_test.cpp)
dtrain_add_test(distributed_lr_scaling_test PROGRAM distributed_tests
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/lr_scaling_test.cpp)
dtrain_add_test(distributed_sync_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/sync_test.cpp RANKS 1 2 3 4 TIMEOUT 300
                LABELS reliability)
dtrain_add_test(distributed_sync_alloc_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/sync_alloc_test.cpp RANKS 1 2 3)
dtrain_add_test(distributed_bucket_schedule_test PROGRAM distributed_tests
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/bucket_schedule_test.cpp)
dtrain_add_test(distributed_replica_check_test PROGRAM distributed_tests
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/replica_check_test.cpp)
dtrain_add_test(distributed_progress_thread_test PROGRAM distributed_tests
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/progress_thread_test.cpp)
dtrain_add_test(distributed_backward_passes_test PROGRAM distributed_tests
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/backward_passes_test.cpp)
dtrain_add_test(distributed_reduction_round_test PROGRAM distributed_tests
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/reduction_round_test.cpp)
dtrain_add_test(distributed_sums_elements_test PROGRAM distributed_tests
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/sums_elements_test.cpp)
dtrain_add_test(distributed_one_loop_test PROGRAM distributed_tests
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/one_loop_test.cpp RANKS 1 2 3
                TIMEOUT 180 LABELS reliability)
dtrain_add_test(distributed_policy_name_test PROGRAM distributed_tests
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/policy_name_test.cpp)
dtrain_add_test(distributed_compression_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/compression_test.cpp RANKS 1 2 3
                TIMEOUT 300)
dtrain_add_test(distributed_comm_hook_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/comm_hook_test.cpp RANKS 1 2)
dtrain_add_test(distributed_powersgd_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/powersgd_test.cpp RANKS 1 2)
dtrain_add_test(distributed_nonfinite_test PROGRAM distributed_tests
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/nonfinite_test.cpp RANKS 1 2 3
                LABELS reliability)
# A model and an optimizer of different element types fail to compile with a sentence (static_assert).
add_executable(distributed_value_type_mismatch EXCLUDE_FROM_ALL ${CMAKE_CURRENT_LIST_DIR}/value_type_mismatch.cpp)
target_link_libraries(distributed_value_type_mismatch PRIVATE dtrain::dtrain)
add_test(NAME distributed_value_type_mismatch.compile
         COMMAND ${CMAKE_COMMAND} --build ${PROJECT_BINARY_DIR} --target distributed_value_type_mismatch)
set_tests_properties(distributed_value_type_mismatch.compile PROPERTIES
                     PASS_REGULAR_EXPRESSION "the optimizer's value_type must be the model's element type"
                     TIMEOUT 300 LABELS "compile")

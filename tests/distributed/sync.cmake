# Synchronous DistOptimizer (Collective, Ring, Naive policies); included from tests/distributed/CMakeLists.txt.
dtrain_add_test(distributed_bucket_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/bucket_test.cpp)
dtrain_add_test(distributed_lr_scaling_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/lr_scaling_test.cpp)
dtrain_add_test(distributed_sync_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/sync_test.cpp RANKS 1 2 3 4 TIMEOUT 300)
dtrain_add_test(distributed_sync_alloc_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/sync_alloc_test.cpp RANKS 1 2 3)
dtrain_add_test(distributed_bucket_schedule_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/bucket_schedule_test.cpp)
dtrain_add_test(distributed_progress_thread_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/progress_thread_test.cpp)
dtrain_add_test(distributed_one_loop_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/one_loop_test.cpp RANKS 1 2 3
                TIMEOUT 180)
target_compile_definitions(distributed_one_loop_test PRIVATE DTRAIN_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
dtrain_add_test(distributed_policy_name_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/policy_name_test.cpp)
dtrain_add_test(distributed_nonfinite_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/nonfinite_test.cpp RANKS 1 2 3)

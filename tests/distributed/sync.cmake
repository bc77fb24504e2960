# Synchronous DistOptimizer (Collective, Ring, Naive policies); included from tests/distributed/CMakeLists.txt.
dtrain_add_test(distributed_bucket_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/bucket_test.cpp)
dtrain_add_test(distributed_lr_scaling_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/lr_scaling_test.cpp)
dtrain_add_test(distributed_sync_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/sync_test.cpp RANKS 1 2 3 4 TIMEOUT 300)
dtrain_add_test(distributed_sync_alloc_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/sync_alloc_test.cpp RANKS 1 2 3)
dtrain_add_test(distributed_policy_name_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/policy_name_test.cpp)

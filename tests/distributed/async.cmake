# Asynchronous DistOptimizer (parameter-server policy); included from tests/distributed/CMakeLists.txt.
# -n 3 and -n 4 oversubscribe a 2-core machine (MPICH busy-polls), so these runs are kept tiny.
dtrain_add_test(distributed_async_sharding_test PROGRAM distributed_tests
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/sharding_test.cpp)
dtrain_add_test(distributed_async_test PROGRAM distributed_tests
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/async_test.cpp RANKS 2 3 4 TIMEOUT 180)
dtrain_add_test(distributed_async_errors_test PROGRAM distributed_tests
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/async_errors_test.cpp RANKS 1 2 3
                TIMEOUT 60)
dtrain_add_test(distributed_async_accumulation_test PROGRAM distributed_tests
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/async_accumulation_test.cpp
                RANKS 2 3 TIMEOUT 60)
dtrain_add_test(distributed_async_bsp_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/async_bsp_test.cpp RANKS 2 3 4 TIMEOUT 120)
target_compile_definitions(distributed_async_bsp_test PRIVATE DTRAIN_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
dtrain_add_test(distributed_async_ssp_test PROGRAM distributed_tests
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/async_ssp_test.cpp RANKS 3 4 TIMEOUT 120)
dtrain_add_test(distributed_async_server_state_test PROGRAM distributed_tests
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/server_state_test.cpp)
dtrain_add_test(distributed_async_final_gather_test PROGRAM distributed_tests
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/final_gather_test.cpp RANKS 1 2 3)

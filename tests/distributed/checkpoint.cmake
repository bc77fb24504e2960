# Checkpoints (distributed/checkpoint.hpp); included from tests/distributed/CMakeLists.txt.
dtrain_add_test(distributed_checkpoint_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/checkpoint_test.cpp RANKS 1 2 3)
dtrain_add_test(distributed_checkpoint_fuzz_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/checkpoint_fuzz_test.cpp RANKS 1 2
                TIMEOUT 120)
dtrain_add_test(distributed_model_file_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/model_file_test.cpp RANKS 1 2)

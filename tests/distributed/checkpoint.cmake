# Checkpoints (distributed/checkpoint.hpp); included from tests/distributed/CMakeLists.txt.
# LABELS reliability: the tests docs/reliability.md cites (ctest -L reliability).
dtrain_add_test(distributed_checkpoint_test PROGRAM distributed_tests
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/checkpoint_test.cpp RANKS 1 2 3
                LABELS reliability)
dtrain_add_test(distributed_checkpoint_fuzz_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/checkpoint_fuzz_test.cpp RANKS 1 2
                TIMEOUT 120 LABELS reliability)
dtrain_add_test(distributed_model_file_test PROGRAM distributed_tests
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/model_file_test.cpp RANKS 1 2
                LABELS reliability)
dtrain_add_test(distributed_checkpoint_resume_test PROGRAM distributed_tests
                SOURCES ${CMAKE_CURRENT_LIST_DIR}/checkpoint_resume_test.cpp
                RANKS 1 2 3 LABELS reliability)

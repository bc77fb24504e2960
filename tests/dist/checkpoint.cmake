# Checkpoints (dist/checkpoint.hpp); included from tests/dist/CMakeLists.txt.
dtrain_add_test(dist_checkpoint_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/checkpoint_test.cpp RANKS 1 2 3)

// Tests of <dtrain/config.hpp>: the version macros are the CMake project's version (passed to this test as
// compile definitions from project(dtrain VERSION ...)).
#include <catch2/catch.hpp>

#include <string>

#include <dtrain/config.hpp>

TEST_CASE("DTRAIN_VERSION_* equal the CMake project version", "[config]") {
    CHECK(DTRAIN_VERSION_MAJOR == DTRAIN_TEST_PROJECT_VERSION_MAJOR);
    CHECK(DTRAIN_VERSION_MINOR == DTRAIN_TEST_PROJECT_VERSION_MINOR);
    CHECK(DTRAIN_VERSION_PATCH == DTRAIN_TEST_PROJECT_VERSION_PATCH);
    CHECK(std::string(DTRAIN_VERSION_STRING) == DTRAIN_TEST_PROJECT_VERSION);
    CHECK(std::string(DTRAIN_VERSION_STRING) == std::to_string(DTRAIN_VERSION_MAJOR) + "." +
                                                    std::to_string(DTRAIN_VERSION_MINOR) + "." +
                                                    std::to_string(DTRAIN_VERSION_PATCH));
}

// OperationScope's record (what the stall watchdog reads) and the DTRAIN_STALL_TIMEOUT parsing.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <mutex>
#include <string>

#include <dtrain/core/operation.hpp>
#include <dtrain/core/watchdog.hpp>

namespace {

std::string current() {
    dtrain::detail::OperationRecord& r = dtrain::detail::operation_record();
    std::lock_guard<std::mutex> lock(r.mutex);
    return dtrain::detail::describe_operations(r);
}

}  // namespace

TEST_CASE("OperationScope records nested operations, their step and the idle time", "[core][watchdog]") {
    CHECK(current().empty());
    std::uint64_t entered = 0;
    {
        dtrain::OperationScope outer("DistOptimizer::step", MPI_COMM_WORLD, 12);
        CHECK(current() == "DistOptimizer::step (step 12)");
        {
            dtrain::OperationScope inner("Ring", "wait", MPI_COMM_WORLD);
            CHECK(current() == "DistOptimizer::step (step 12) > Ring::wait");
            dtrain::detail::OperationRecord& r = dtrain::detail::operation_record();
            std::lock_guard<std::mutex> lock(r.mutex);
            CHECK(r.depth == 2);
            entered = r.entered;
        }
        CHECK(current() == "DistOptimizer::step (step 12)");
    }
    CHECK(current().empty());
    dtrain::detail::OperationRecord& r = dtrain::detail::operation_record();
    std::lock_guard<std::mutex> lock(r.mutex);
    CHECK(r.entered == entered);
    CHECK(r.idle_since >= r.since - 1e-9);
}

TEST_CASE("DTRAIN_STALL_TIMEOUT: seconds, 0 or off to disable, anything else is an error",
          "[core][watchdog]") {
    unsetenv("DTRAIN_STALL_TIMEOUT");
    CHECK(dtrain::detail::stall_timeout_from_environment() == 300.0);
    setenv("DTRAIN_STALL_TIMEOUT", "2.5", 1);
    CHECK(dtrain::detail::stall_timeout_from_environment() == 2.5);
    setenv("DTRAIN_STALL_TIMEOUT", "off", 1);
    CHECK(dtrain::detail::stall_timeout_from_environment() == 0.0);
    setenv("DTRAIN_STALL_TIMEOUT", "0", 1);
    CHECK(dtrain::detail::stall_timeout_from_environment() == 0.0);
    for (const char* bad : {"-1", "5min", "abc"}) {
        setenv("DTRAIN_STALL_TIMEOUT", bad, 1);
        CHECK_THROWS_WITH(dtrain::detail::stall_timeout_from_environment(),
                          Catch::Contains("DTRAIN_STALL_TIMEOUT must be a number of seconds >= 0") &&
                              Catch::Contains(std::string("got '") + bad + "'"));
    }
    unsetenv("DTRAIN_STALL_TIMEOUT");
}

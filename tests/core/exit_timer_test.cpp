// ExitTimer (core/exit_timer.hpp): disarmed or re-armed in time, it never ends the process. Its expiry is
// covered by the failure tests core_end_finalize_hangs and core_start_stopped (tests/core/CMakeLists.txt).
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include <dtrain/core/exit_timer.hpp>

TEST_CASE("ExitTimer disarmed, re-armed or destroyed in time lets the process live", "[core][exit_timer]") {
    {
        dtrain::detail::ExitTimer timer;
        timer.arm(0.2, "this test's timer expired although it was disarmed", 1);
        timer.disarm();
        std::this_thread::sleep_for(std::chrono::milliseconds(400));
        timer.arm(0.2, "this test's timer expired although it was re-armed", 1);
        timer.arm(30.0, "this test's timer expired although it was destroyed", 1);
        std::this_thread::sleep_for(std::chrono::milliseconds(400));
        timer.disarm();
        timer.disarm();  // twice: no effect
        timer.arm(30.0, "this test's timer expired although it was destroyed", 1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(true);  // still alive
}

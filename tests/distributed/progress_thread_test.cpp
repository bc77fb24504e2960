// ProgressThread without MPI traffic: it polls while work is pending, sleeps otherwise, hands errors to the
// caller once, and stops; progress_thread_enabled() reads DTRAIN_PROGRESS_THREAD.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <mpi.h>

#include <dtrain/distributed/progress_thread.hpp>
#include <support/eventually.hpp>

TEST_CASE("ProgressThread polls while work is pending and sleeps when there is none", "[dist][progress]") {
    std::mutex m;
    int pending = 0, polls = 0;
    dtrain::ProgressThread t;
    CHECK_FALSE(t.running());
    t.start(
        m, [&] { return pending > 0; },
        [&] {
            ++polls;
            --pending;
        });
    CHECK(t.running());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    {
        std::lock_guard<std::mutex> lock(m);
        CHECK(polls == 0);  // nothing pending: never polled
        pending = 50;
    }
    t.notify();
    CHECK(dtrain::test::eventually(m, [&] { return pending == 0; }));  // the thread alone drove it to zero
    int seen = 0;
    {
        std::lock_guard<std::mutex> lock(m);
        seen = polls;
        CHECK(seen == 50);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    {
        std::lock_guard<std::mutex> lock(m);
        CHECK(polls == seen);  // asleep again
    }
    t.stop();
    CHECK_FALSE(t.running());
}

TEST_CASE("ProgressThread hands an exception of poll() to the caller once", "[dist][progress]") {
    std::mutex m;
    int pending = 1, polls = 0;
    dtrain::ProgressThread t;
    t.start(
        m, [&] { return pending > 0; },
        [&] {
            ++polls;
            throw std::runtime_error("transport failed");
        });
    t.notify();
    CHECK(dtrain::test::eventually(m, [&] { return polls > 0; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::lock_guard<std::mutex> lock(m);
    CHECK(polls == 1);  // it stops polling until the error is taken
    CHECK_THROWS_WITH(t.rethrow_error(), "transport failed");
    CHECK_NOTHROW(t.rethrow_error());  // once
    pending = 0;
}

TEST_CASE("progress_thread_enabled reads DTRAIN_PROGRESS_THREAD", "[dist][progress]") {
    int provided = 0;
    MPI_Query_thread(&provided);
    setenv("DTRAIN_PROGRESS_THREAD", "0", 1);
    CHECK_FALSE(dtrain::progress_thread_enabled(1));
    setenv("DTRAIN_PROGRESS_THREAD", "1", 1);
    CHECK(dtrain::progress_thread_enabled(1000) == (provided == MPI_THREAD_MULTIPLE));
    setenv("DTRAIN_PROGRESS_THREAD", "auto", 1);
    CHECK_FALSE(dtrain::progress_thread_enabled(1 << 20));  // never two CPUs per rank for a million ranks
    CHECK(dtrain::progress_thread_enabled(1) ==
          (provided == MPI_THREAD_MULTIPLE && dtrain::detail::available_cpus() >= 2));
    setenv("DTRAIN_PROGRESS_THREAD", "yes", 1);
    CHECK_THROWS_WITH(dtrain::progress_thread_enabled(1),
                      Catch::Contains("DTRAIN_PROGRESS_THREAD must be 0, 1 or auto, got 'yes'"));
    unsetenv("DTRAIN_PROGRESS_THREAD");
}

// dtrain::Environment when MPI is already initialised (the test main did it): it must not finalise, and it
// reports rank, size, node-local rank and thread level.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include <dtrain/core/environment.hpp>
#include <support/test_utils.hpp>

TEST_CASE("Environment adopts an already initialised MPI and leaves it running", "[comm][environment]") {
    {
        dtrain::Environment env;
        CHECK_FALSE(env.owns_mpi());
        CHECK(env.rank() == dtrain::test::world_rank());
        CHECK(env.size() == dtrain::test::world_size());
        CHECK(env.local_rank() >= 0);
        CHECK(env.local_rank() < env.local_size());
        CHECK(env.local_size() <= env.size());
        int provided = -1;
        MPI_Query_thread(&provided);
        CHECK(env.thread_level() == provided);
        CHECK(env.thread_multiple() == (provided >= MPI_THREAD_MULTIPLE));
        CHECK(env.world() == MPI_COMM_WORLD);
        // All ranks run on this machine: node-local ranks are 0..size-1 without gaps.
        int lr = env.local_rank(), sum = 0;
        MPI_Allreduce(&lr, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        CHECK(sum == env.size() * (env.size() - 1) / 2);
    }
    int finalized = 1;
    MPI_Finalized(&finalized);
    CHECK(finalized == 0);
    // MPI is still usable: a collective over MPI_COMM_WORLD succeeds and counts every rank.
    int one = 1, ranks = 0;
    CHECK(MPI_Allreduce(&one, &ranks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(ranks == dtrain::test::world_size());
}

TEST_CASE("DTRAIN_FINALIZE_TIMEOUT bounds the end of the job, by default as the stall timeout",
          "[comm][environment]") {
    using dtrain::detail::finalize_timeout_from_environment;
    const char* saved = std::getenv("DTRAIN_FINALIZE_TIMEOUT");
    const std::string before = saved != nullptr ? saved : "";
    unsetenv("DTRAIN_FINALIZE_TIMEOUT");
    CHECK(finalize_timeout_from_environment(300.0) == 300.0);
    CHECK(finalize_timeout_from_environment(0.0) == 0.0);  // no watchdog: not bounded either
    setenv("DTRAIN_FINALIZE_TIMEOUT", "12.5", 1);
    CHECK(finalize_timeout_from_environment(300.0) == 12.5);
    setenv("DTRAIN_FINALIZE_TIMEOUT", "off", 1);
    CHECK(finalize_timeout_from_environment(300.0) == 0.0);
    setenv("DTRAIN_FINALIZE_TIMEOUT", "0", 1);
    CHECK(finalize_timeout_from_environment(300.0) == 0.0);
    for (const char* bad : {"-1", "ten", "5s"}) {
        setenv("DTRAIN_FINALIZE_TIMEOUT", bad, 1);
        CHECK_THROWS_WITH(finalize_timeout_from_environment(300.0),
                          Catch::Contains("DTRAIN_FINALIZE_TIMEOUT must be a number of seconds >= 0") &&
                              Catch::Contains(std::string("got '") + bad + "'"));
    }
    if (saved != nullptr)
        setenv("DTRAIN_FINALIZE_TIMEOUT", before.c_str(), 1);
    else
        unsetenv("DTRAIN_FINALIZE_TIMEOUT");
    dtrain::Environment env;
    CHECK(env.finalize_timeout() == dtrain::detail::finalize_timeout_from_environment(env.stall_timeout()));
}

TEST_CASE("gather_host_names gives every rank's host name", "[comm][environment]") {
    const std::vector<std::string> hosts = dtrain::detail::gather_host_names(MPI_COMM_WORLD);
    CHECK(int(hosts.size()) == dtrain::test::world_size());
    CHECK(hosts[std::size_t(dtrain::test::world_rank())] == dtrain::detail::host_name());
}

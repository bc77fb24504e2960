// dtrain::Environment when MPI is already initialised (the test main did it): it must not finalise, and it
// reports rank, size, node-local rank and thread level.
#include <catch2/catch.hpp>

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

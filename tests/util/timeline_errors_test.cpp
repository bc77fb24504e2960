// Errors of dtrain::Timeline (include/dtrain/util/timeline.hpp): bad arguments, and a trace too large to
// gather, which must fail on every rank instead of leaving the others waiting in the gather.
#include <catch2/catch.hpp>

#include <climits>
#include <cstddef>
#include <string>

#include <mpi.h>

#include <dtrain/util/timeline.hpp>
#include <support/test_utils.hpp>

using Catch::Contains;

TEST_CASE("Timeline: zero capacity and an event index out of range", "[util][timeline][errors]") {
    dtrain::Timeline t;
    CHECK_THROWS_WITH(t.enable(0), Contains("Timeline::enable: capacity must be positive"));
    CHECK_FALSE(t.enabled());
    t.enable(4);
    t.end(t.begin("a", "compute"));
    t.end(t.begin("b", "compute"));
    CHECK_NOTHROW(t.event(1));
    CHECK_THROWS_WITH(t.event(2), Contains("Timeline::event: index 2 out of range (2 events)"));
}

// Hidden ([.]): slow and memory-hungry, run on 2 ranks as ctest's util_timeline_too_large_test.np2.
TEST_CASE("Timeline: a merged trace over 2 GiB fails on every rank, naming its size",
          "[.][util][timeline][errors][large]") {
    // 32 events named by 64 MiB strings make 2 GiB of JSON in all, more than MPI's int counts can gather,
    // whether one rank holds them all or each holds its share.
    static const std::string huge(std::size_t(64) << 20, 'x');
    const int rank = dtrain::test::world_rank(), size = dtrain::test::world_size();
    const int mine = (32 + size - 1) / size;
    dtrain::Timeline t;
    t.enable(std::size_t(mine), MPI_COMM_WORLD);
    for (int i = 0; i < mine; ++i)
        t.complete(huge.c_str(), "compute", 0, 1);
    const std::string what =
        dtrain::test::error_message([&] { t.write("dtrain_timeline_too_large.json", MPI_COMM_WORLD); });
    INFO("rank " << rank << ": " << what);
    CHECK(dtrain::test::all_ranks(what.find("Timeline::write: the trace is too large to gather") !=
                                  std::string::npos));
    CHECK_THAT(what, Contains(" bytes of events over " + std::to_string(size) + " rank(s)"));
}

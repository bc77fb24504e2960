// dtrain::collectively: a failure on any rank becomes the same error on every rank; results pass through.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include <dtrain/core/collectively.hpp>
#include <support/test_utils.hpp>

TEST_CASE("collectively returns fn's result on every rank when no rank fails", "[core][collectively]") {
    const int rank = dtrain::test::world_rank();
    CHECK(dtrain::collectively([&] { return rank * 2; }) == rank * 2);
    int calls = 0;
    dtrain::collectively([&] { ++calls; });
    CHECK(calls == 1);
    CHECK(dtrain::collectively([] { return std::string("moved"); }) == "moved");
}

TEST_CASE("collectively turns a failure on the last rank into the same error on every rank",
          "[core][collectively]") {
    const int rank = dtrain::test::world_rank(), size = dtrain::test::world_size();
    const std::string expected = "rank " + std::to_string(size - 1) + ": cannot open '/missing.csv'";
    const std::string what = dtrain::test::error_message([&] {
        dtrain::collectively([&] {
            if (rank == size - 1) throw std::runtime_error("cannot open '/missing.csv'");
            return 1;
        });
    });
    CHECK(what == expected);
    CHECK(dtrain::test::all_ranks(what == expected));
}

TEST_CASE("collectively names the lowest failing rank and survives non-standard exceptions",
          "[core][collectively]") {
    const int rank = dtrain::test::world_rank();
    const std::string what = dtrain::test::error_message([&] {
        dtrain::collectively([&] {
            if (rank >= 1) throw std::runtime_error("rank-specific " + std::to_string(rank));
            if (dtrain::test::world_size() == 1) throw 42;
        });
    });
    if (dtrain::test::world_size() == 1)
        CHECK(what == "rank 0: an exception of a type not derived from std::exception");
    else
        CHECK(what == "rank 1: rank-specific 1");
}

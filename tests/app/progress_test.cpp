// Tests of dtrain::ProgressBar and format_duration (include/dtrain/app/progress.hpp). Run at 1 and 2 ranks:
// by default only rank 0 draws, so the tests of what a bar draws construct it for rank 0.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include <dtrain/app/progress.hpp>

#include "../support/test_utils.hpp"

TEST_CASE("ProgressBar: render shows epoch, batch, loss, accuracy, rate and ETA", "[app][progress]") {
    std::ostringstream os;
    dtrain::ProgressBar bar(os, true, 0.1, dtrain::DrawOn::RankZero, 0);
    bar.start(3, 10, 100);
    const std::string s = bar.render(25, 0.31234, 0.8872, 800, 2.0);
    CHECK(s.find("epoch 3/10") != std::string::npos);
    CHECK(s.find("[=====>              ]") != std::string::npos);
    CHECK(s.find("batch 25/100") != std::string::npos);
    CHECK(s.find("loss 0.3123") != std::string::npos);
    CHECK(s.find("acc 88.72%") != std::string::npos);
    CHECK(s.find("400 samples/s") != std::string::npos);
    CHECK(s.find("ETA 6.0s") != std::string::npos);  // 2 s for 25 batches, 75 to go
}

TEST_CASE("ProgressBar: live bar redraws in place and finish clears it", "[app][progress]") {
    std::ostringstream os;
    dtrain::ProgressBar bar(os, true, 0.0, dtrain::DrawOn::RankZero, 0);
    bar.start(1, 2, 3);
    bar.update(1, 1.0, 0.5, 10);
    bar.update(3, 0.5, 0.75, 30);
    bar.finish();
    const std::string s = os.str();
    CHECK(s.find("\repoch 1/2") != std::string::npos);
    CHECK(s.find("batch 3/3") != std::string::npos);
    CHECK(s.size() >= 4);
    CHECK(s.substr(s.size() - 4) == "\r\x1b[K");
}

TEST_CASE("ProgressBar: throttling skips intermediate redraws but draws the last batch", "[app][progress]") {
    std::ostringstream os;
    dtrain::ProgressBar bar(os, true, 1000.0, dtrain::DrawOn::RankZero, 0);
    bar.start(1, 1, 50);
    for (std::size_t i = 1; i <= 50; ++i)
        bar.update(i, 0.1, 0.9, i);
    const std::string s = os.str();
    CHECK(s.find("batch 1/50") != std::string::npos);
    CHECK(s.find("batch 2/50") == std::string::npos);
    CHECK(s.find("batch 50/50") != std::string::npos);
}

TEST_CASE("ProgressBar: a non-live bar writes nothing", "[app][progress]") {
    std::ostringstream os;
    dtrain::ProgressBar bar(os, false, 0.1, dtrain::DrawOn::RankZero, 0);
    bar.start(1, 1, 5);
    for (std::size_t i = 1; i <= 5; ++i)
        bar.update(i, 0.1, 0.9, i);
    bar.finish();
    CHECK(os.str().empty());
    CHECK_FALSE(bar.live());
}

TEST_CASE("format_duration", "[app][progress]") {
    CHECK(dtrain::format_duration(7.34) == "7.3s");
    CHECK(dtrain::format_duration(125) == "2m05s");
    CHECK(dtrain::format_duration(3723) == "1h02m03s");
    CHECK(dtrain::format_duration(-1) == "0.0s");
}

// Draws a short epoch on `bar` (which writes to `os`) and returns what it wrote.
static std::string draw_epoch(dtrain::ProgressBar& bar, const std::ostringstream& os) {
    bar.start(1, 1, 2);
    bar.update(1, 1.0, 0.5, 10);
    bar.update(2, 0.5, 0.75, 20);
    bar.finish();
    return os.str();
}

TEST_CASE("ProgressBar: by default only rank 0 of MPI_COMM_WORLD draws", "[app][progress][mpi]") {
    const int rank = dtrain::world_rank();
    std::ostringstream os;
    dtrain::ProgressBar bar(os, true, 0.0);
    CHECK(bar.rank() == rank);
    CHECK(bar.draw_on() == dtrain::DrawOn::RankZero);
    CHECK(bar.live() == (rank == 0));
    const std::string s = draw_epoch(bar, os);
    CHECK(s.empty() == (rank != 0));
    if (rank == 0) CHECK(s.find("\repoch 1/1") != std::string::npos);
    CHECK(dtrain::test::all_ranks(bar.rank() == rank));
}

TEST_CASE("ProgressBar: DrawOn::EveryRank draws on every rank, naming it", "[app][progress][mpi]") {
    const int rank = dtrain::world_rank();
    std::ostringstream os;
    dtrain::ProgressBar bar(os, true, 0.0, dtrain::DrawOn::EveryRank);
    CHECK(bar.live());
    const std::string s = draw_epoch(bar, os);
    CHECK(s.find("\rrank " + std::to_string(rank) + ": epoch 1/1") != std::string::npos);
    CHECK(s.find("batch 2/2") != std::string::npos);
}

TEST_CASE("ProgressBar: an explicit rank decides who draws, and a non-live bar never draws",
          "[app][progress]") {
    std::ostringstream first, other, off;
    dtrain::ProgressBar zero(first, true, 0.0, dtrain::DrawOn::RankZero, 0);
    dtrain::ProgressBar one(other, true, 0.0, dtrain::DrawOn::RankZero, 1);
    dtrain::ProgressBar quiet(off, false, 0.0, dtrain::DrawOn::EveryRank, 0);
    CHECK(zero.live());
    CHECK_FALSE(one.live());
    CHECK_FALSE(quiet.live());
    CHECK(one.rank() == 1);
    CHECK(draw_epoch(zero, first).find("epoch 1/1") != std::string::npos);
    CHECK(draw_epoch(one, other).empty());
    CHECK(draw_epoch(quiet, off).empty());
}

TEST_CASE("ProgressBar: a negative rank or interval is an error naming the value", "[app][progress]") {
    std::ostringstream os;
    CHECK_THROWS_WITH(dtrain::ProgressBar(os, true, 0.1, dtrain::DrawOn::RankZero, -1),
                      Catch::Contains("rank must be >= 0, got -1"));
    CHECK_THROWS_WITH(dtrain::ProgressBar(os, true, -0.5), Catch::Contains("min_interval must be >= 0"));
}

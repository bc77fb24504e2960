// Tests of dtrain::ProgressBar and dtrain::CsvLog (include/dtrain/util/{progress,csv_log}.hpp).
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include <unistd.h>

#include <dtrain/util/csv_log.hpp>
#include <dtrain/util/progress.hpp>

TEST_CASE("ProgressBar: render shows epoch, batch, loss, accuracy, rate and ETA", "[util][progress]") {
    std::ostringstream os;
    dtrain::ProgressBar bar(os, true);
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

TEST_CASE("ProgressBar: live bar redraws in place and finish clears it", "[util][progress]") {
    std::ostringstream os;
    dtrain::ProgressBar bar(os, true, 0.0);
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

TEST_CASE("ProgressBar: throttling skips intermediate redraws but draws the last batch", "[util][progress]") {
    std::ostringstream os;
    dtrain::ProgressBar bar(os, true, 1000.0);
    bar.start(1, 1, 50);
    for (std::size_t i = 1; i <= 50; ++i)
        bar.update(i, 0.1, 0.9, i);
    const std::string s = os.str();
    CHECK(s.find("batch 1/50") != std::string::npos);
    CHECK(s.find("batch 2/50") == std::string::npos);
    CHECK(s.find("batch 50/50") != std::string::npos);
}

TEST_CASE("ProgressBar: a non-live bar writes nothing", "[util][progress]") {
    std::ostringstream os;
    dtrain::ProgressBar bar(os, false);
    bar.start(1, 1, 5);
    for (std::size_t i = 1; i <= 5; ++i)
        bar.update(i, 0.1, 0.9, i);
    bar.finish();
    CHECK(os.str().empty());
    CHECK_FALSE(bar.live());
}

TEST_CASE("format_duration", "[util][progress]") {
    CHECK(dtrain::format_duration(7.34) == "7.3s");
    CHECK(dtrain::format_duration(125) == "2m05s");
    CHECK(dtrain::format_duration(3723) == "1h02m03s");
    CHECK(dtrain::format_duration(-1) == "0.0s");
}

TEST_CASE("CsvLog: header and one row per call; inactive logs write nothing", "[util][csv]") {
    const std::string path = "dtrain_util_csv_test_" + std::to_string(::getpid()) + ".csv";
    {
        dtrain::CsvLog log(path, {"epoch", "loss", "acc"});
        log.row({1, 0.5, 0.25});
        log.row({2, 0.125, std::numeric_limits<double>::infinity()});
        CHECK_THROWS_AS(log.row({3, 1}), dtrain::Error);
    }
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    CHECK(ss.str() == "epoch,loss,acc\n1,0.5,0.25\n2,0.125,nan\n");
    std::remove(path.c_str());

    dtrain::CsvLog off("/nonexistent-dir/x.csv", {"a"}, false);
    CHECK_FALSE(off.active());
    off.row({1});
    CHECK_THROWS_AS(dtrain::CsvLog("/nonexistent-dir/x.csv", {"a"}), dtrain::Error);
    CHECK_THROWS_AS(dtrain::CsvLog(path, {"a,b"}, false), dtrain::Error);
}

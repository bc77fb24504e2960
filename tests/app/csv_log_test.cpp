// Tests of dtrain::CsvLog (include/dtrain/app/csv_log.hpp): rows, inactive logs and errors.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include <unistd.h>

#include <dtrain/app/csv_log.hpp>

using Catch::Contains;

TEST_CASE("CsvLog: no columns, and a write that fails, name the file", "[app][csv_log][errors]") {
    const std::string path = "dtrain_csv_log_test_" + std::to_string(::getpid()) + ".csv";
    CHECK_THROWS_WITH(dtrain::CsvLog(path, {}), Contains("CsvLog: no columns for '" + path + "'"));
    CHECK_THROWS_WITH(dtrain::CsvLog(path, {}, false), Contains("no columns"));  // checked on every rank
    std::remove(path.c_str());

    // /dev/full opens but every write fails (ENOSPC).
    dtrain::CsvLog full("/dev/full", {"epoch", "loss"});
    CHECK_THROWS_WITH(full.row({1.0, 0.5}), Contains("CsvLog: writing '/dev/full' failed"));
}

TEST_CASE("CsvLog: header and one row per call; inactive logs write nothing", "[app][csv_log]") {
    const std::string path = "dtrain_app_csv_log_rows_" + std::to_string(::getpid()) + ".csv";
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

// Errors of dtrain::CsvLog (include/dtrain/util/csv_log.hpp).
#include <catch2/catch.hpp>

#include <unistd.h>
#include <cstdio>
#include <string>

#include <dtrain/util/csv_log.hpp>

using Catch::Contains;

TEST_CASE("CsvLog: no columns, and a write that fails, name the file", "[util][csv_log][errors]") {
    const std::string path = "dtrain_csv_log_test_" + std::to_string(::getpid()) + ".csv";
    CHECK_THROWS_WITH(dtrain::CsvLog(path, {}), Contains("CsvLog: no columns for '" + path + "'"));
    CHECK_THROWS_WITH(dtrain::CsvLog(path, {}, false), Contains("no columns"));  // checked on every rank
    std::remove(path.c_str());

    // /dev/full opens but every write fails (ENOSPC).
    dtrain::CsvLog full("/dev/full", {"epoch", "loss"});
    CHECK_THROWS_WITH(full.row({1.0, 0.5}), Contains("CsvLog: writing '/dev/full' failed"));
}

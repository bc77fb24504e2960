// Tests of dtrain::Timeline (include/dtrain/util/timeline.hpp): recording, and the merged Chrome trace.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <mpi.h>

#include "support/test_utils.hpp"
#include "util/json_check.hpp"

#include <dtrain/util/timeline.hpp>

namespace {

// The whole content of `path`.
std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

TEST_CASE("Timeline: disabled records nothing", "[util][timeline]") {
    dtrain::Timeline t;
    CHECK_FALSE(t.enabled());
    const auto h = t.begin("forward", "compute");
    CHECK(h == dtrain::Timeline::none);
    t.end(h);
    CHECK(t.size() == 0);
}

TEST_CASE("Timeline: scopes record nested intervals with durations", "[util][timeline]") {
    dtrain::Timeline t;
    t.enable(16);
    {
        dtrain::TimelineScope outer("step", "optim", nullptr, 0, t);
        dtrain::TimelineScope inner("allreduce", "comm", "bucket", 3, t);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    REQUIRE(t.size() == 2);
    const auto& outer = t.event(0);
    const auto& inner = t.event(1);
    CHECK(std::string(outer.name) == "step");
    CHECK(std::string(inner.category) == "comm");
    CHECK(inner.arg == 3);
    CHECK(inner.duration_us >= 1500);
    CHECK(outer.start_us <= inner.start_us);
    CHECK(outer.start_us + outer.duration_us >= inner.start_us + inner.duration_us);
    const std::string j = t.json_events(0);
    CHECK(j.find("\"args\":{\"bucket\":3}") != std::string::npos);
}

TEST_CASE("Timeline: full storage drops and counts events", "[util][timeline]") {
    dtrain::Timeline t;
    t.enable(3);
    for (int i = 0; i < 5; ++i)
        t.end(t.begin("e", "c"));
    CHECK(t.size() == 3);
    CHECK(t.dropped() == 2);
    t.enable(3);  // re-enabling starts afresh
    CHECK(t.size() == 0);
    CHECK(t.dropped() == 0);
}

TEST_CASE("Timeline: complete() records an interval measured elsewhere; open events are not written",
          "[util][timeline]") {
    dtrain::Timeline t;
    t.enable(8);
    t.complete("allreduce", "comm", 10, 35, "bytes", 4096);
    t.begin("never-ended", "x");
    REQUIRE(t.size() == 2);
    CHECK(t.event(0).start_us == 10);
    CHECK(t.event(0).duration_us == 25);
    const std::string j = t.json_events(5);
    CHECK(j.find("never-ended") == std::string::npos);
    CHECK(j.find("\"ts\":10,\"dur\":25,\"pid\":5") != std::string::npos);
}

TEST_CASE("Timeline: events from several threads get distinct thread numbers", "[util][timeline]") {
    dtrain::Timeline t;
    t.enable(64);
    t.end(t.begin("main", "c"));
    std::thread th([&] { t.end(t.begin("worker", "c")); });
    th.join();
    REQUIRE(t.size() == 2);
    CHECK(t.event(0).thread != t.event(1).thread);
}

TEST_CASE("Timeline: write merges every rank into one valid Chrome trace", "[util][timeline][mpi]") {
    const int rank = dtrain::test::world_rank(), size = dtrain::test::world_size();
    auto& t = dtrain::timeline();
    t.enable(1024, MPI_COMM_WORLD);
    for (int i = 0; i <= rank; ++i) {
        dtrain::TimelineScope s("forward", "compute");
        dtrain::TimelineScope b("allreduce \"q\"", "comm", "bucket", i);
    }
    const std::string path = "dtrain_timeline_test_np" + std::to_string(size) + ".json";
    bool ok = true;
    try {
        t.write(path, MPI_COMM_WORLD);
    } catch (const dtrain::Error&) {
        ok = false;
    }
    CHECK(ok);
    t.disable();
    if (rank == 0) {
        dtrain::test::Json doc;
        bool parsed = true;
        try {
            doc = dtrain::test::parse_json(slurp(path));
        } catch (const std::exception& e) {
            parsed = false;
            FAIL_CHECK(e.what());
        }
        CHECK(parsed);
        if (parsed) {
            const auto& events = doc.at("traceEvents").array;
            std::set<int> pids_with_events, pids_named;
            std::size_t complete = 0;
            for (const auto& e : events) {
                if (e.at("ph").string == "X") {
                    ++complete;
                    pids_with_events.insert(int(e.at("pid").number));
                    CHECK(e.has("ts"));
                    CHECK(e.at("dur").number >= 0);
                } else if (e.at("name").string == "process_name") {
                    pids_named.insert(int(e.at("pid").number));
                }
            }
            CHECK(int(pids_with_events.size()) == size);
            CHECK(int(pids_named.size()) == size);
            CHECK(complete == std::size_t(size * (size + 1)));  // rank r recorded 2 * (r + 1) events
            CHECK(doc.at("otherData").at("ranks").number == size);
        }
        std::remove(path.c_str());
    }
    // An unwritable path fails on every rank, not only on rank 0.
    CHECK_THROWS_AS(t.write("/nonexistent-dir/trace.json", MPI_COMM_WORLD), dtrain::Error);
}

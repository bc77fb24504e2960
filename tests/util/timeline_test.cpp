// Tests of dtrain::Timeline (include/dtrain/util/timeline.hpp): recording, and the merged Chrome trace.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <mpi.h>

#include <nlohmann/json.hpp>

#include "support/test_utils.hpp"

#include <dtrain/util/timeline.hpp>

using nlohmann::json;

namespace {

// The whole content of `path`.
std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// `t`'s json_events(pid) parsed as the elements of one JSON array (throws json::parse_error when invalid).
json parse_events(const dtrain::Timeline& t, int pid) {
    return json::parse("[" + t.json_events(pid) + "]");
}

// The complete ("X") events of a parsed event array.
std::vector<json> complete_events(const json& events) {
    std::vector<json> out;
    for (const auto& e : events)
        if (e.at("ph") == "X") out.push_back(e);
    return out;
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
    const auto events = complete_events(parse_events(t, 0));
    REQUIRE(events.size() == 2);
    CHECK(events[0].at("name") == "step");
    CHECK_FALSE(events[0].contains("args"));
    CHECK(events[1].at("name") == "allreduce");
    CHECK(events[1].at("cat") == "comm");
    CHECK(events[1].at("args") == json{{"bucket", 3}});
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
    const auto events = complete_events(parse_events(t, 5));
    REQUIRE(events.size() == 1);  // not the open "never-ended"
    CHECK(events[0].at("name") == "allreduce");
    CHECK(events[0].at("ts") == 10);
    CHECK(events[0].at("dur") == 25);
    CHECK(events[0].at("pid") == 5);
    CHECK(events[0].at("args") == json{{"bytes", 4096}});
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

TEST_CASE("Timeline: names with quotes, backslashes and control characters are escaped", "[util][timeline]") {
    dtrain::Timeline t;
    t.enable(8);
    const char* name = "a \"quoted\" back\\slash\ttab\nline\x01";
    t.complete(name, "c\"at", 1, 2, "k\\ey", 7);
    // nlohmann-json rejects unescaped quotes and control characters, and decodes every escape.
    const auto events = complete_events(parse_events(t, 0));
    REQUIRE(events.size() == 1);
    CHECK(events[0].at("name") == name);
    CHECK(events[0].at("cat") == "c\"at");
    CHECK(events[0].at("args") == json{{"k\\ey", 7}});
}

TEST_CASE("Timeline: write merges every rank into one valid Chrome trace", "[util][timeline][mpi]") {
    const int rank = dtrain::test::world_rank(), size = dtrain::test::world_size();
    auto& t = dtrain::timeline();
    t.enable(1024, MPI_COMM_WORLD);
    const std::string quoted = "allreduce \"q\"\t";
    for (int i = 0; i <= rank; ++i) {
        dtrain::TimelineScope s("forward", "compute");
        dtrain::TimelineScope b(quoted.c_str(), "comm", "bucket", i);
    }
    const std::string path = "dtrain_timeline_test_np" + std::to_string(size) + ".json";
    CHECK(dtrain::test::error_message([&] { t.write(path, MPI_COMM_WORLD); }).empty());
    t.disable();
    if (rank == 0) {
        json doc;
        bool parsed = true;
        try {
            doc = json::parse(slurp(path));
        } catch (const json::exception& e) {
            parsed = false;
            FAIL_CHECK(e.what());
        }
        CHECK(parsed);
        if (parsed) {
            std::map<int, std::multiset<std::string>> names;  // complete events' names per pid
            std::map<int, std::string> process_names;
            for (const auto& e : doc.at("traceEvents")) {
                const int pid = e.at("pid").get<int>();
                if (e.at("ph") == "X") {
                    names[pid].insert(e.at("name").get<std::string>());
                    CHECK(e.contains("ts"));
                    CHECK(e.at("dur").get<double>() >= 0);
                } else if (e.at("name") == "process_name") {
                    process_names[pid] = e.at("args").at("name").get<std::string>();
                }
            }
            CHECK(int(names.size()) == size);
            CHECK(int(process_names.size()) == size);
            for (int r = 0; r < size; ++r) {
                INFO("rank " << r);
                CHECK(process_names[r] == "rank " + std::to_string(r));
                // rank r recorded r + 1 of each, the quoted name read back exactly
                CHECK(names[r].count("forward") == std::size_t(r + 1));
                CHECK(names[r].count(quoted) == std::size_t(r + 1));
                CHECK(names[r].size() == std::size_t(2 * (r + 1)));
            }
            CHECK(doc.at("otherData").at("ranks") == size);
        }
        std::remove(path.c_str());
    }
    // An unwritable path fails on every rank, not only on rank 0.
    CHECK_THROWS_AS(t.write("/nonexistent-dir/trace.json", MPI_COMM_WORLD), dtrain::Error);
}

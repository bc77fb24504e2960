// BucketSchedule driven by a fake communicator (no MPI traffic): which buckets start when, what poll(),
// complete(), drain() and prewarm() do with the requests.
#include <catch2/catch.hpp>

#include <cstddef>
#include <utility>
#include <vector>

#include <dtrain/core/span.hpp>
#include <dtrain/distributed/bucket_schedule.hpp>

namespace {

/// Records every reduction started (as an offset into `base` and a size); a test completes them by hand.
struct FakeComm {
    struct Request {
        std::size_t id = 0;
    };
    const float* base = nullptr;
    std::vector<std::pair<std::size_t, std::size_t>> started;
    std::vector<bool> complete;
    std::vector<std::size_t> waited;
    std::size_t tests = 0;

    Request iallreduce_sum(dtrain::Span<float> s) {
        started.emplace_back(std::size_t(s.data() - base), s.size());
        complete.push_back(false);
        return Request{started.size() - 1};
    }
    bool test(Request& r) {
        ++tests;
        return complete[r.id];
    }
    void wait(Request& r) {
        waited.push_back(r.id);
        complete[r.id] = true;
    }
};

using Schedule = dtrain::BucketSchedule<FakeComm, float>;

// Three buckets over 100 values, in reduction order (last layers first).
std::vector<dtrain::Bucket> three_buckets() {
    return {{60, 40, 2, 2}, {30, 30, 1, 1}, {0, 30, 0, 0}};
}

}  // namespace

TEST_CASE("BucketSchedule starts exactly the buckets inside the final suffix, in order", "[dist][schedule]") {
    std::vector<float> g(100, 1.0f);
    FakeComm comm;
    comm.base = g.data();
    Schedule s(three_buckets());
    const dtrain::Span<float> grads(g.data(), g.size());
    CHECK_FALSE(s.launch_ready(comm, grads, 61));  // bucket 0 starts at 60: not yet final
    CHECK(s.launched() == 0);
    CHECK(s.launch_ready(comm, grads, 30));  // buckets 0 and 1 are final
    CHECK(s.launched() == 2);
    REQUIRE(comm.started.size() == 2);
    CHECK(comm.started[0] == std::make_pair(std::size_t(60), std::size_t(40)));
    CHECK(comm.started[1] == std::make_pair(std::size_t(30), std::size_t(30)));
    CHECK(s.outstanding());
    CHECK_FALSE(s.launch_ready(comm, grads, 30));  // nothing new
    CHECK(s.launch_until(comm, grads, 5));         // clamps to the number of buckets
    CHECK(s.launched() == 3);
    CHECK(comm.started[2] == std::make_pair(std::size_t(0), std::size_t(30)));
}

TEST_CASE("BucketSchedule::poll records completions; complete() waits only for the others",
          "[dist][schedule]") {
    std::vector<float> g(100, 1.0f);
    FakeComm comm;
    comm.base = g.data();
    Schedule s(three_buckets());
    const dtrain::Span<float> grads(g.data(), g.size());
    s.launch_until(comm, grads, 3);
    comm.complete[1] = true;  // bucket 1 finishes first
    s.poll(comm);
    CHECK(s.outstanding());  // bucket 0 is still pending, so the known-complete prefix is empty
    comm.complete[0] = true;
    s.poll(comm);
    CHECK(s.outstanding());  // bucket 2 pending
    s.complete(comm, 0);
    s.complete(comm, 1);
    CHECK(comm.waited.empty());  // both were seen complete by poll()
    s.complete(comm, 2);
    CHECK(comm.waited == std::vector<std::size_t>{2});
    s.end_round();
    CHECK(s.launched() == 0);
    CHECK_FALSE(s.outstanding());
    const std::size_t tests = comm.tests;
    s.poll(comm);  // nothing started: nothing tested
    CHECK(comm.tests == tests);
}

TEST_CASE("BucketSchedule::drain completes every started reduction and ends the round", "[dist][schedule]") {
    std::vector<float> g(100, 1.0f);
    FakeComm comm;
    comm.base = g.data();
    Schedule s(three_buckets());
    s.launch_until(comm, dtrain::Span<float>(g.data(), g.size()), 2);
    s.drain(comm);
    CHECK(comm.waited == std::vector<std::size_t>{0, 1});
    CHECK(s.launched() == 0);
    CHECK_FALSE(s.outstanding());
}

TEST_CASE("BucketSchedule::prewarm has every bucket in flight at once, then waits for all",
          "[dist][schedule]") {
    FakeComm comm;
    Schedule s(three_buckets());
    std::vector<std::size_t> sizes;
    s.prewarm(comm, 100);
    REQUIRE(comm.started.size() == 3);
    for (const auto& st : comm.started)
        sizes.push_back(st.second);
    CHECK(sizes == std::vector<std::size_t>{40, 30, 30});
    CHECK(comm.waited == std::vector<std::size_t>{0, 1, 2});  // all started before the first wait
    CHECK(s.launched() == 0);
}

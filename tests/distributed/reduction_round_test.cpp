// The synchronous DistOptimizer's reductions in flight (ReductionRound) driven by a fake communicator and a
// hook that records what it is asked (no MPI traffic): which buckets start when, what drain() completes,
// and the progress thread polling them and handing its error to the caller.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstddef>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <dtrain/distributed/bucket.hpp>
#include <dtrain/distributed/comm_hook.hpp>
#include <dtrain/distributed/detail/reduction_round.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/model.hpp>
#include <support/eventually.hpp>
#include <support/test_utils.hpp>

namespace {

/// Requests a test completes by hand; test() throws once `fail` is set.
struct RoundComm {
    struct Request {
        std::size_t id = 0;
    };
    std::vector<bool> complete;
    std::vector<std::size_t> waited;
    std::size_t tests = 0;
    bool fail = false;

    int rank() const { return 0; }
    int size() const { return 1; }
    bool test(Request& r) {
        ++tests;
        if (fail) throw std::runtime_error("test() failed");
        return complete[r.id];
    }
    void wait(Request& r) {
        waited.push_back(r.id);
        complete[r.id] = true;
    }
};

/// Records every bucket started (its index and its place in the flat buffer).
struct RoundHook {
    struct Start {
        std::size_t index = 0;
        const float* data = nullptr;
        std::size_t size = 0;
    };
    std::vector<Start>* starts = nullptr;

    std::string describe() const { return "recording"; }
    RoundComm::Request start(RoundComm& comm, const dtrain::GradBucket<float>& b) {
        starts->push_back(Start{b.index, b.grads.data(), b.grads.size()});
        comm.complete.push_back(false);
        return RoundComm::Request{comm.complete.size() - 1};
    }
    void finish(const dtrain::GradBucket<float>&) {}
};

using Round = dtrain::detail::ReductionRound<RoundComm, float>;

// Layer 0: Dense(4, 8), values [0, 40); layer 1: ReLU; layer 2: Dense(8, 3), values [40, 67). One bucket
// per layer with parameters: bucket 0 = [40, 67), bucket 1 = [0, 40).
dtrain::Model<float> round_model() {
    dtrain::Model<float> m({4}, 3);
    m.add(dtrain::Dense<float>(4, 8)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(8, 3));
    return m;
}

// A ReductionRound over round_model()'s two buckets, its hook recording each start in `starts`.
struct RoundSetup {
    dtrain::Model<float> m = round_model();
    RoundComm comm;
    std::vector<RoundHook::Start> starts;
    dtrain::detail::CommHookSlot<RoundComm, float> hook;
    Round round{comm, hook, m};

    RoundSetup() {
        round.set_buckets(dtrain::make_buckets(m.parameter_ranges(), 0, sizeof(float)));
        hook.install(RoundHook{&starts}, round.schedule().buckets(), m.num_parameters(), comm, false);
    }
};

}  // namespace

TEST_CASE(
    "ReductionRound starts the buckets inside the final suffix through the hook; drain() ends the round",
    "[dist][sync][round]") {
    RoundSetup setup;
    auto& [m, comm, starts, hook, round] = setup;
    REQUIRE(round.schedule().size() == 2);
    const float* g = m.gradients().data();

    round.launch_ready(41);  // bucket 0 starts at 40: not final yet
    CHECK(starts.empty());
    round.launch_ready(40);
    REQUIRE(starts.size() == 1);
    CHECK(starts[0].index == 0);
    CHECK(starts[0].data == g + 40);
    CHECK(starts[0].size == 27);
    CHECK(round.schedule().outstanding());
    comm.complete[0] = true;
    round.launch_ready(40);  // polls first: bucket 0 is seen complete, nothing new starts
    CHECK(starts.size() == 1);
    CHECK_FALSE(round.schedule().outstanding());
    round.launch_ready(0);
    REQUIRE(starts.size() == 2);
    CHECK(starts[1].index == 1);
    CHECK(starts[1].data == g);
    CHECK(starts[1].size == 40);

    round.drain();
    CHECK(comm.waited == std::vector<std::size_t>{1});  // only the reduction not seen complete
    CHECK(round.schedule().launched() == 0);
    CHECK_FALSE(round.progress().running());
}

TEST_CASE("ReductionRound's progress thread polls the started reductions and hands its error to the caller",
          "[dist][sync][round]") {
    RoundSetup setup;
    auto& [m, comm, starts, hook, round] = setup;
    round.start_progress();
    CHECK(round.progress().running());

    round.launch_ready(0);
    CHECK(starts.size() == 2);
    {
        std::lock_guard<std::mutex> lock(round.mutex());
        comm.complete[0] = comm.complete[1] = true;
    }
    // The thread alone sees both complete (launch_ready polled before they were).
    CHECK(dtrain::test::eventually(round.mutex(), [&] { return !round.schedule().outstanding(); }));
    round.drain();
    CHECK(comm.waited.empty());

    std::size_t tests = 0;
    {
        std::lock_guard<std::mutex> lock(round.mutex());
        comm.fail = true;
        tests = comm.tests;
    }
    round.launch_ready(0);  // nothing had started, so only the thread tests the new reductions
    CHECK(
        dtrain::test::eventually(round.mutex(), [&] { return comm.tests > tests; }));  // and its poll() threw
    {
        std::lock_guard<std::mutex> lock(round.mutex());
        comm.fail = false;
    }
    CHECK_THROWS_WITH(round.launch_ready(0), Catch::Contains("test() failed"));  // the thread's error, once
    CHECK_NOTHROW(round.launch_ready(0));
    round.drain();
    round.progress().stop();
}

// DistOptimizer<Async, Opt> with a staleness bound s (Stale Synchronous Parallel): with random delays in the
// workers nothing deadlocks, and no worker ever starts a step more than s steps ahead of the slowest one.
// The bound is checked from the workers' own timestamps (steady_clock is system-wide on one machine), not
// from the masters' counters.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>
#include <vector>

#include <dtrain/core/rng.hpp>
#include <dtrain/distributed/async.hpp>
#include <dtrain/optim/sgd.hpp>
#include <support/test_utils.hpp>

#include "async_test_utils.hpp"

namespace {

using dtrain::test::all_ranks;
using dtrain::test::world_rank;
using dtrain::test::world_size;

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

TEST_CASE("Async: random worker delays never deadlock and never exceed the staleness bound",
          "[dist][async]") {
    const std::uint64_t s =
        GENERATE(std::uint64_t(0), std::uint64_t(1), std::uint64_t(3), dtrain::unbounded_staleness);
    const int size = world_size();
    dtrain::AsyncOptions options;
    options.masters = size >= 4 ? 2 : 1;
    options.staleness = s;
    const int workers = size - options.masters;
    INFO("ranks " << size << ", staleness " << s);

    const dtrain::test::Iris iris = dtrain::test::load_iris();
    dtrain::Model<float> model = dtrain::test::make_mlp(5);
    dtrain::DistOptimizer<dtrain::Async, dtrain::SGD<float>> opt(model, dtrain::SGD<float>(0.05), options);

    // Per step: the time the worker started it (after the previous reply) and the time it sent it.
    std::vector<double> times;
    int steps = 0;
    opt.run([&] {
        const int w = opt.worker_rank();
        steps = 10 + 4 * w;  // different step counts
        dtrain::Rng rng(1000 + std::uint64_t(w));
        const auto perm = dtrain::test::permutation(iris.y.size(), 2);
        dtrain::SoftmaxCrossEntropy<float> loss;
        dtrain::Tensor<float> bx, grad;
        dtrain::Labels by;
        for (int t = 0; t < steps; ++t) {
            times.push_back(now());
            // Seeded random delays, heavier on worker 0 so that the others run ahead of it.
            const double ms = rng.uniform(0.0, w == 0 ? 4.0 : 1.0);
            std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
            const std::size_t start = (std::size_t(t) * 10) % 140;
            dtrain::test::gather_batch(iris, perm, start, start + 10, bx, by);
            opt.zero_grad();
            loss.compute(model.forward(bx), by, grad);
            model.backward(grad);
            times.push_back(now());
            opt.step();
        }
    });
    if (opt.is_master()) CHECK(opt.stats().max_staleness <= s);

    // Rank 0 collects every worker's timestamps.
    std::vector<int> counts(std::size_t(size), 0), displs(std::size_t(size), 0);
    const int mine = int(times.size());
    MPI_Gather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (int r = 1; r < size; ++r)
        displs[std::size_t(r)] = displs[std::size_t(r) - 1] + counts[std::size_t(r) - 1];
    std::vector<double> all(std::size_t(displs.back() + counts.back()));
    MPI_Gatherv(times.data(), mine, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE, 0,
                MPI_COMM_WORLD);
    bool bound_holds = true;
    std::uint64_t max_lead = 0;  // largest observed lead of a worker over the slowest one
    if (world_rank() == 0) {
        auto start_of = [&](int w, int t) {
            return all[std::size_t(displs[std::size_t(options.masters + w)] + 2 * t)];
        };
        auto sent_of = [&](int w, int t) {
            return all[std::size_t(displs[std::size_t(options.masters + w)] + 2 * t + 1)];
        };
        auto steps_of = [&](int w) { return counts[std::size_t(options.masters + w)] / 2; };
        for (int w = 0; w < workers; ++w) {
            for (int c = 0; c < steps_of(w); ++c) {
                // When w starts step c, every other worker v with steps left has sent its step c - s - 1.
                for (int v = 0; v < workers; ++v) {
                    if (v == w) continue;
                    const long long need =
                        (long long)c - (s == dtrain::unbounded_staleness ? c + 1 : (long long)s) - 1;
                    if (need >= 0 && need < steps_of(v) && !(sent_of(v, int(need)) < start_of(w, c))) {
                        bound_holds = false;
                        UNSCOPED_INFO("worker " << w << " started step " << c << " before worker " << v
                                                << " sent step " << need);
                    }
                    // Lead: how many steps v had sent when w started step c.
                    int done_v = 0;
                    while (done_v < steps_of(v) && sent_of(v, done_v) < start_of(w, c))
                        ++done_v;
                    if (done_v < steps_of(v) && c > done_v)
                        max_lead = std::max(max_lead, std::uint64_t(c - done_v));
                }
            }
        }
        INFO("largest lead observed " << max_lead);
        CHECK(bound_holds);
        if (s != dtrain::unbounded_staleness) CHECK(max_lead <= s);
    }
    CHECK(all_ranks(bound_holds));
}

// DistOptimizer<Async, Opt> with staleness 0 (and the averaged rounds of Zhao's master-worker design) is
// bulk-synchronous: it reproduces synchronous gradient averaging over the same batches.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include <dtrain/comm/collective.hpp>
#include <dtrain/distributed/async.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/optim/schedule.hpp>
#include <dtrain/optim/sgd.hpp>
#include <support/test_utils.hpp>

#include "async_test_utils.hpp"

namespace {

using dtrain::test::all_ranks;
using dtrain::test::world_rank;
using dtrain::test::world_size;

constexpr std::uint64_t seed = 21;
constexpr std::size_t batch = 8;

dtrain::SGD<float> make_sgd() {
    return dtrain::SGD<float>(dtrain::SGDOptions().lr(0.1).momentum(0.9));
}

// Worker w's batch at step t: 8 rows of a fixed permutation, different for every (w, t).
void batch_of(const dtrain::test::Iris& iris, const std::vector<std::size_t>& perm, int w, std::size_t t,
              dtrain::Tensor<float>& bx, dtrain::Labels& by) {
    const std::size_t start = (std::size_t(w) * 53 + t * batch) % (perm.size() - batch);
    dtrain::test::gather_batch(iris, perm, start, start + batch, bx, by);
}

// One worker's loss gradient at step t on `model` (gradients left in the model).
void compute_gradient(dtrain::Model<float>& model, const dtrain::test::Iris& iris,
                      const std::vector<std::size_t>& perm, int w, std::size_t t) {
    dtrain::SoftmaxCrossEntropy<float> loss;
    dtrain::Tensor<float> bx, grad;
    dtrain::Labels by;
    batch_of(iris, perm, w, t, bx, by);
    loss.compute(model.forward(bx), by, grad);
    model.backward(grad);
}

// Serial reference: at step t, the gradients of every worker with more than t steps are summed in worker
// order, averaged and applied once.
std::vector<float> reference(const dtrain::test::Iris& iris, const std::vector<std::size_t>& perm,
                             const std::vector<std::size_t>& steps) {
    dtrain::Model<float> model = dtrain::test::make_mlp(seed);
    dtrain::Model<float> worker = model;
    dtrain::SGD<float> sgd = make_sgd();
    const std::size_t n = model.num_parameters();
    std::vector<float> acc(n);
    std::size_t longest = 0;
    for (std::size_t s : steps)
        longest = std::max(longest, s);
    for (std::size_t t = 0; t < longest; ++t) {
        std::size_t count = 0;
        for (std::size_t w = 0; w < steps.size(); ++w) {
            if (t >= steps[w]) continue;
            std::copy(model.parameters().begin(), model.parameters().end(), worker.parameters().begin());
            worker.zero_grad();
            compute_gradient(worker, iris, perm, int(w), t);
            auto g = worker.gradients();
            for (std::size_t i = 0; i < n; ++i)
                acc[i] = count == 0 ? g[i] : acc[i] + g[i];
            ++count;
        }
        if (count > 1)
            for (auto& v : acc)
                v *= 1.0f / float(count);
        sgd.step(model.parameters(), dtrain::Span<const float>(acc.data(), n));
    }
    return {model.parameters().begin(), model.parameters().end()};
}

}  // namespace

TEST_CASE("Async: staleness 0 and averaged rounds reproduce synchronous averaging", "[dist][async]") {
    const bool average_rounds = GENERATE(false, true);
    const dtrain::test::Iris iris = dtrain::test::load_iris();
    const auto perm = dtrain::test::permutation(iris.y.size(), 4);
    dtrain::AsyncOptions options;
    options.masters = world_size() >= 4 ? 2 : 1;
    options.staleness = average_rounds ? dtrain::unbounded_staleness : 0;
    options.average_rounds = average_rounds;
    options.sharding = average_rounds ? dtrain::Sharding::ByLayer : dtrain::Sharding::Balanced;
    const int workers = world_size() - options.masters;
    std::vector<std::size_t> steps;  // workers run different numbers of steps
    for (int w = 0; w < workers; ++w)
        steps.push_back(6 + 3 * std::size_t(w));
    INFO("ranks " << world_size() << ", average_rounds " << average_rounds);

    dtrain::Model<float> model = dtrain::test::make_mlp(seed);
    dtrain::DistOptimizer<dtrain::Async, dtrain::SGD<float>> opt(model, make_sgd(), options);
    opt.run([&] {
        const int w = opt.worker_rank();
        for (std::size_t t = 0; t < steps[std::size_t(w)]; ++t) {
            opt.zero_grad();
            compute_gradient(model, iris, perm, w, t);
            opt.step();
        }
    });
    if (opt.is_master()) {
        CHECK(opt.stats().updates == steps.back());  // one update per round
        CHECK(opt.stats().max_staleness == 0);
    }
    if (world_rank() == 0) {
        const std::vector<float> ref = reference(iris, perm, steps);
        const double diff = dtrain::test::max_rel_diff(model.parameters(), ref);
        INFO("max relative difference " << diff);
        CHECK(diff <= 1e-5);
        const dtrain::Model<float> init = dtrain::test::make_mlp(seed);
        CHECK(dtrain::test::max_rel_diff(init.parameters(), ref) > 1e-3);  // training moved the model
    }
}

// Runs the same 7-step program under Async with staleness 0 and under Collective on the workers, with SGD
// built by `make`; rank 0 gets the Async result and compares it with the first worker's Collective result.
template <class Make>
void compare_with_collective(Make make) {
    const dtrain::test::Iris iris = dtrain::test::load_iris();
    const auto perm = dtrain::test::permutation(iris.y.size(), 8);
    dtrain::AsyncOptions options;
    options.masters = world_size() >= 4 ? 2 : 1;
    options.staleness = 0;
    const std::size_t steps = 7;
    auto loop = [&](auto& opt, dtrain::Model<float>& model) {
        return [&] {
            for (std::size_t t = 0; t < steps; ++t) {
                opt.zero_grad();
                compute_gradient(model, iris, perm, opt.worker_rank(), t);
                opt.step();
            }
        };
    };
    dtrain::Model<float> model = dtrain::test::make_mlp(seed);
    dtrain::DistOptimizer<dtrain::Async, dtrain::SGD<float>> async(model, make(), options);
    async.run(loop(async, model));
    // Schedules count worker steps on every rank: the workers' own counts, and the masters' last step.
    CHECK(async.optimizer().steps() == steps);

    // The same program under the synchronous policy, on the workers' communicator.
    std::vector<float> sync_params;
    if (async.is_worker()) {
        dtrain::Model<float> m2 = dtrain::test::make_mlp(seed);
        dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>> sync(m2, make(), dtrain::SyncOptions{},
                                                                           async.worker_comm());
        sync.run(loop(sync, m2));
        sync_params.assign(m2.parameters().begin(), m2.parameters().end());
        CHECK(async.optimizer().learning_rate() == sync.optimizer().learning_rate());
    }
    const int first_worker = options.masters;
    if (world_rank() == first_worker)
        MPI_Send(sync_params.data(), int(sync_params.size()), MPI_FLOAT, 0, 9, MPI_COMM_WORLD);
    double diff = 0.0;
    if (world_rank() == 0) {
        sync_params.resize(model.num_parameters());
        MPI_Recv(sync_params.data(), int(sync_params.size()), MPI_FLOAT, first_worker, 9, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        diff = dtrain::test::max_rel_diff(model.parameters(), sync_params);
    }
    INFO("max relative difference to Collective " << diff);
    CHECK(all_ranks(diff <= 1e-5));
}

TEST_CASE("Async with staleness 0 matches DistOptimizer<Collective> run by the workers", "[dist][async]") {
    compare_with_collective(make_sgd);
}

TEST_CASE("Async: learning-rate schedules advance once per worker step, as under Collective",
          "[dist][async]") {
    compare_with_collective([] {
        dtrain::SGD<float> sgd = make_sgd();
        sgd.set_schedule(dtrain::Schedule::step_decay(2, 0.5));  // halves every 2 steps: 7 steps see 4 rates
        return sgd;
    });
}

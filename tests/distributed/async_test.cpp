// DistOptimizer<Async, Opt>: parameter-server training on Iris, final assembly, initial state, failures.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <dtrain/distributed/async.hpp>
#include <dtrain/optim/adam.hpp>
#include <dtrain/optim/sgd.hpp>
#include <support/test_utils.hpp>

#include "async_test_utils.hpp"

namespace {

using dtrain::test::all_ranks;
using dtrain::test::world_rank;
using dtrain::test::world_size;
using AsyncSgd = dtrain::DistOptimizer<dtrain::Async, dtrain::SGD<float>>;

// Every master sends its shard to rank 0, which checks that its assembled model holds exactly those values.
bool rank0_equals_master_shards(AsyncSgd& opt) {
    bool ok = true;
    const auto& shards = opt.shards();
    auto params = opt.model().parameters();
    if (world_rank() == 0) {
        for (int m = 1; m < opt.num_masters(); ++m) {
            const dtrain::Range r = shards[std::size_t(m)];
            std::vector<float> got(r.size);
            MPI_Recv(got.data(), int(r.size), MPI_FLOAT, m, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            ok = ok && std::memcmp(got.data(), params.data() + r.offset, r.size * sizeof(float)) == 0;
        }
    } else if (opt.is_master()) {
        const dtrain::Range r = opt.shard();
        MPI_Send(params.data() + r.offset, int(r.size), MPI_FLOAT, 0, 5, MPI_COMM_WORLD);
    }
    return ok;
}

struct IrisRun {
    std::uint64_t staleness;
    dtrain::Sharding sharding;
    bool average_rounds;
};

}  // namespace

TEST_CASE("Async: an MLP on Iris reaches 90% accuracy with 1 or 2 masters", "[dist][async]") {
    const int size = world_size();
    const auto cfg = GENERATE(IrisRun{dtrain::unbounded_staleness, dtrain::Sharding::Balanced, false},
                              IrisRun{2, dtrain::Sharding::ByLayer, false},
                              IrisRun{dtrain::unbounded_staleness, dtrain::Sharding::Balanced, true});
    dtrain::AsyncOptions options;
    options.masters = size >= 4 ? 2 : 1;
    options.staleness = cfg.staleness;
    options.sharding = cfg.sharding;
    options.average_rounds = cfg.average_rounds;
    INFO("ranks " << size << ", masters " << options.masters << ", staleness " << cfg.staleness
                  << ", by layer " << (cfg.sharding == dtrain::Sharding::ByLayer) << ", average rounds "
                  << cfg.average_rounds);

    const dtrain::test::Iris iris = dtrain::test::load_iris();
    dtrain::Model<float> model = dtrain::test::make_mlp(7);
    AsyncSgd opt(model, dtrain::SGD<float>(dtrain::SGDOptions().lr(0.05).momentum(0.9)), options);
    CHECK(opt.num_workers() == size - options.masters);
    CHECK(opt.is_worker() == (world_rank() >= options.masters));

    std::vector<double> losses;  // rank 0: mean reported loss per (worker, step) arrival
    std::size_t callbacks = 0;
    opt.set_step_callback([&](const dtrain::AsyncStepInfo& info) {
        ++callbacks;
        losses.push_back(info.loss);
    });

    const int epochs = 30;
    const std::size_t batch = 10;
    std::uint64_t my_steps = 0;
    opt.run([&] {
        // The worker's shard of the data, and its batch loop: written once for every policy.
        const auto perm = dtrain::test::permutation(iris.y.size(), 11);
        std::vector<std::size_t> mine;
        for (std::size_t i = std::size_t(opt.worker_rank()); i < perm.size();
             i += std::size_t(opt.num_workers()))
            mine.push_back(perm[i]);
        dtrain::SoftmaxCrossEntropy<float> loss;
        dtrain::Tensor<float> bx, grad;
        dtrain::Labels by;
        for (int e = 0; e < epochs; ++e) {
            for (std::size_t b = 0; b < mine.size(); b += batch) {
                dtrain::test::gather_batch(iris, mine, b, std::min(mine.size(), b + batch), bx, by);
                opt.zero_grad();
                const float l = loss.compute(model.forward(bx), by, grad);
                model.backward(grad);
                opt.report(l, by.size());
                opt.step();
                ++my_steps;
            }
        }
    });

    // Every gradient was served: each master saw every worker's steps.
    std::uint64_t total_steps = 0;
    std::uint64_t contribution = opt.is_worker() ? my_steps : 0;
    MPI_Allreduce(&contribution, &total_steps, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (opt.is_worker()) CHECK(opt.stats().gradients == my_steps);
    if (opt.is_master()) {
        CHECK(opt.stats().gradients == total_steps);
        if (cfg.staleness != 0 && !cfg.average_rounds) CHECK(opt.stats().updates == total_steps);
        CHECK(opt.stats().max_staleness <= cfg.staleness);
    }
    if (world_rank() == 0) {
        CHECK(callbacks == total_steps);
        REQUIRE(losses.size() >= 20);
        double first = 0.0, last = 0.0;
        for (std::size_t i = 0; i < 10; ++i) {
            first += losses[i];
            last += losses[losses.size() - 1 - i];
        }
        CHECK(last < 0.5 * first);
        const double acc = dtrain::test::iris_accuracy(model, iris);
        INFO("accuracy " << acc);
        CHECK(acc >= 0.9);
    }
    CHECK(all_ranks(rank0_equals_master_shards(opt)));
}

TEST_CASE("Async: gather_to_all gives every rank rank 0's final parameters", "[dist][async]") {
    const dtrain::test::Iris iris = dtrain::test::load_iris();
    dtrain::Model<float> model = dtrain::test::make_mlp(3);
    dtrain::AsyncOptions options;
    options.masters = world_size() >= 4 ? 2 : 1;
    options.gather_to_all = true;
    AsyncSgd opt(model, dtrain::SGD<float>(0.1), options);
    opt.run([&] {
        const auto perm = dtrain::test::permutation(iris.y.size(), 5);
        dtrain::SoftmaxCrossEntropy<float> loss;
        dtrain::Tensor<float> bx, grad;
        dtrain::Labels by;
        for (int s = 0; s < 5 + opt.worker_rank(); ++s) {  // different step counts per worker
            dtrain::test::gather_batch(iris, perm, std::size_t(s) * 10, std::size_t(s) * 10 + 10, bx, by);
            opt.zero_grad();
            loss.compute(model.forward(bx), by, grad);
            model.backward(grad);
            opt.step();
        }
    });
    std::vector<float> ref(model.parameters().begin(), model.parameters().end());
    MPI_Bcast(ref.data(), int(ref.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
    CHECK(all_ranks(std::memcmp(ref.data(), model.parameters().data(), ref.size() * sizeof(float)) == 0));
    // The parameters moved away from the initial model.
    const dtrain::Model<float> init = dtrain::test::make_mlp(3);
    CHECK(dtrain::test::max_rel_diff(init.parameters(), model.parameters()) > 1e-3);
}

TEST_CASE("Async: the constructor starts every rank from root's model and slices root's optimizer state",
          "[dist][async]") {
    const int size = world_size();
    const int root = GENERATE_COPY(0, size - 1);  // a master, then a worker
    dtrain::Model<float> model = dtrain::test::make_mlp(100 + std::uint64_t(world_rank()));
    const dtrain::Model<float> expect = dtrain::test::make_mlp(100 + std::uint64_t(root));
    const std::size_t n = model.num_parameters();
    dtrain::SGD<float> sgd(dtrain::SGDOptions().lr(0.1).momentum(0.9));
    if (world_rank() == root) {
        sgd.reset(n);
        for (std::size_t i = 0; i < n; ++i)
            sgd.state()[i] = float(i) + 0.5f;
        sgd.set_steps(42);
    }
    dtrain::AsyncOptions options;
    options.root = root;
    options.masters = size >= 4 ? 2 : 1;
    AsyncSgd opt(model, sgd, options);
    CHECK(std::memcmp(expect.parameters().data(), model.parameters().data(), n * sizeof(float)) == 0);
    if (opt.is_master()) {
        const dtrain::Range r = opt.shard();
        REQUIRE(opt.optimizer().state().size() == r.size);
        bool ok = true;
        for (std::size_t i = 0; i < r.size; ++i)
            ok = ok && opt.optimizer().state()[i] == float(r.offset + i) + 0.5f;
        CHECK(ok);
        CHECK(opt.optimizer().steps() == 42);
    }
    opt.run([] {});  // no steps at all: terminates and keeps the model
    CHECK(std::memcmp(expect.parameters().data(), model.parameters().data(), n * sizeof(float)) == 0);
}

TEST_CASE("Async: run() can be called again and continues from the masters' parameters", "[dist][async]") {
    const dtrain::test::Iris iris = dtrain::test::load_iris();
    dtrain::Model<float> model = dtrain::test::make_mlp(9);
    dtrain::AsyncOptions options;
    options.masters = 1;
    dtrain::DistOptimizer<dtrain::Async, dtrain::Adam<float>> opt(
        model, dtrain::Adam<float>(dtrain::AdamOptions().lr(0.01)), options);
    auto loop = [&] {
        dtrain::SoftmaxCrossEntropy<float> loss;
        dtrain::Tensor<float> bx, grad;
        dtrain::Labels by;
        const auto perm = dtrain::test::permutation(iris.y.size(), 1);
        for (int s = 0; s < 4; ++s) {
            dtrain::test::gather_batch(iris, perm, std::size_t(s) * 10, std::size_t(s) * 10 + 10, bx, by);
            opt.zero_grad();
            loss.compute(model.forward(bx), by, grad);
            model.backward(grad);
            opt.step();
        }
    };
    opt.run(loop);
    std::vector<float> after_first(model.parameters().begin(), model.parameters().end());
    MPI_Bcast(after_first.data(), int(after_first.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
    // Workers start the second run from the masters' parameters: check it in the first step.
    bool started_from_first = true;
    bool first_step = true;
    opt.run([&] {
        if (first_step)
            started_from_first = std::memcmp(after_first.data(), model.parameters().data(),
                                             after_first.size() * sizeof(float)) == 0;
        first_step = false;
        loop();
    });
    CHECK(all_ranks(started_from_first));
    // One schedule step per worker step (not per gradient): 2 runs of 4 steps, whatever the worker count.
    if (opt.is_master()) CHECK(opt.optimizer().steps() == 2 * 4);
}

TEST_CASE("Async: an exception in one worker's loop ends run() on every rank without a hang",
          "[dist][async]") {
    dtrain::Model<float> model = dtrain::test::make_mlp(1);
    dtrain::AsyncOptions options;
    AsyncSgd opt(model, dtrain::SGD<float>(0.1), options);
    const int bad = world_size() - 1;  // the last worker
    std::string what;
    try {
        opt.run([&] {
            dtrain::Tensor<float> x = dtrain::Tensor<float>::from_shape({2, 4});
            x.fill(0.5f);
            dtrain::Tensor<float> g = dtrain::Tensor<float>::from_shape({2, 3});
            g.fill(0.1f);
            for (int s = 0; s < 3; ++s) {
                if (world_rank() == bad && s == 1) throw std::runtime_error("boom in the worker");
                opt.zero_grad();
                model.forward(x);
                model.backward(g);
                opt.step();
            }
        });
    } catch (const std::exception& e) {
        what = e.what();
    }
    INFO(what);
    if (world_rank() == bad)
        CHECK(what == "boom in the worker");
    else
        CHECK(what.find("worker loop threw on rank " + std::to_string(bad)) != std::string::npos);
}

TEST_CASE("Async: step() on a master, outside run(), or after the wrong number of backward passes throws",
          "[dist][async]") {
    dtrain::Model<float> model = dtrain::test::make_mlp(1);
    AsyncSgd opt(model, dtrain::SGD<float>(0.1), dtrain::AsyncOptions{});
    CHECK_THROWS_WITH(opt.step(), Catch::Contains(opt.is_worker() ? "outside run()" : "is a master"));
    const std::string what = dtrain::test::error_message([&] {
        opt.run([&] {
            opt.zero_grad();
            opt.step();  // no backward pass
        });
    });
    if (opt.is_worker())
        CHECK(what.find("0 backward passes since the last step") != std::string::npos);
    else
        CHECK(what.find("worker loop threw") != std::string::npos);
}

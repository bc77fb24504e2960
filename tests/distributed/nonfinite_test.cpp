// A NaN or an infinity in a step's gradient: every policy stops on every rank naming the step and the layer
// (NonFinite::Stop, the default), or skips the step alike on every rank (NonFinite::Skip); NonFinite::Ignore
// leaves the check out.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <dtrain/comm/collective.hpp>
#include <dtrain/comm/naive.hpp>
#include <dtrain/comm/ring.hpp>
#include <dtrain/distributed/async.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/losses/cross_entropy.hpp>
#include <dtrain/optim/sgd.hpp>
#include <support/test_utils.hpp>

namespace {

using dtrain::Model;
using dtrain::Tensor;

Model<float> mlp() {  // layer 0: Dense(4, 8), 40 values; layer 1: ReLU; layer 2: Dense(8, 3), values 40..66
    Model<float> m({4}, 3);
    m.add(dtrain::Dense<float>(4, 8)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(8, 3));
    return m;
}

// Forward and backward of a fixed batch; then `poison` (a flat index, or -1) is set to NaN in the last
// rank's gradient, as an overflow in one rank's backward would.
void backward(Model<float>& m, long poison) {
    Tensor<float> x = Tensor<float>::from_shape({4, 4}), grad;
    for (std::size_t i = 0; i < x.size(); ++i)
        x.data()[i] = float(i % 7) * 0.25f;
    dtrain::Labels y = dtrain::Labels::from_shape({4});
    y.fill(2);
    dtrain::SoftmaxCrossEntropy<float> loss;
    loss.compute(m.forward(x), y, grad);
    m.backward(grad);
    if (poison >= 0 && dtrain::test::world_rank() == dtrain::test::world_size() - 1)
        m.gradients()[std::size_t(poison)] = std::numeric_limits<float>::quiet_NaN();
}

template <class Comm>
void check_policy(bool overlap) {
    INFO((overlap ? "overlap" : "no overlap"));
    Model<float> m = mlp();
    dtrain::SyncOptions o;
    o.overlap = overlap;
    dtrain::DistOptimizer<Comm, dtrain::SGD<float>> opt(m, dtrain::SGD<float>(0.1), o);
    opt.zero_grad();
    backward(m, -1);
    opt.step();  // a healthy step first
    opt.zero_grad();
    backward(m, 45);
    std::string what;
    try {
        opt.step();
    } catch (const dtrain::Error& e) {
        what = e.what();
    }
    INFO(what);
    CHECK(what.find("gradient of step 1 is not finite: nan at index 45, in layer 2 (Dense(8, 3))") !=
          std::string::npos);
    CHECK(what.find("NonFinite::Skip") != std::string::npos);
    CHECK(dtrain::test::all_ranks(!what.empty()));
    opt.zero_grad();  // the optimizer goes on after a caught error
    backward(m, -1);
    CHECK_NOTHROW(opt.step());
}

}  // namespace

TEMPLATE_TEST_CASE("A non-finite gradient stops every rank, naming the step, the value and the layer",
                   "[dist][nonfinite]", dtrain::Collective, dtrain::Ring, dtrain::Naive) {
    check_policy<TestType>(true);
    check_policy<TestType>(false);
}

TEST_CASE("NonFinite::Skip skips the step on every rank alike and counts it", "[dist][nonfinite]") {
    Model<float> m = mlp();
    dtrain::SyncOptions o;
    o.nonfinite = dtrain::NonFinite::Skip;
    dtrain::DistOptimizer<dtrain::Ring, dtrain::SGD<float>> opt(m, dtrain::SGD<float>(0.1), o);
    opt.zero_grad();
    backward(m, 3);
    const std::vector<float> before(m.parameters().begin(), m.parameters().end());
    opt.step();
    CHECK(opt.skipped_steps() == 1);
    CHECK(opt.optimizer().steps() == 0);
    const std::vector<float> after(m.parameters().begin(), m.parameters().end());
    CHECK(after == before);
    opt.zero_grad();
    backward(m, -1);
    opt.step();
    CHECK(opt.skipped_steps() == 1);
    CHECK(opt.optimizer().steps() == 1);
    CHECK(std::isfinite(m.parameters()[3]));
}

TEST_CASE("NonFinite::Ignore applies the step unchecked: the NaN reaches the parameters",
          "[dist][nonfinite]") {
    for (bool overlap : {false, true}) {
        INFO((overlap ? "overlap" : "no overlap"));
        Model<float> m = mlp();
        dtrain::SyncOptions o;
        o.nonfinite = dtrain::NonFinite::Ignore;
        o.overlap = overlap;
        dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>> opt(m, dtrain::SGD<float>(0.1), o);
        opt.zero_grad();
        backward(m, 45);
        CHECK_NOTHROW(opt.step());
        CHECK(opt.skipped_steps() == 0);
        CHECK(opt.optimizer().steps() == 1);
        CHECK(std::isnan(m.parameters()[45]));  // what Stop and Skip exist to prevent
        CHECK(std::isfinite(m.parameters()[3]));
    }
}

TEST_CASE("Async: a worker's non-finite gradient ends run() on every rank with its message, or is skipped",
          "[dist][async][nonfinite]") {
    if (dtrain::test::world_size() < 2) return;
    for (auto mode : {dtrain::NonFinite::Stop, dtrain::NonFinite::Skip}) {
        Model<float> m = mlp();
        dtrain::AsyncOptions o;
        o.nonfinite = mode;
        dtrain::DistOptimizer<dtrain::Async, dtrain::SGD<float>> opt(m, dtrain::SGD<float>(0.1), o);
        std::string what;
        try {
            opt.run([&] {
                for (int s = 0; s < 4; ++s) {
                    opt.zero_grad();
                    backward(m, s == 2 ? 45 : -1);
                    opt.step();
                }
            });
        } catch (const dtrain::Error& e) {
            what = e.what();
        }
        INFO(what);
        if (mode == dtrain::NonFinite::Stop) {
            CHECK(what.find("gradient of step 2 is not finite: nan at index 45, in layer 2 (Dense(8, 3))") !=
                  std::string::npos);
            CHECK(dtrain::test::all_ranks(!what.empty()));
        } else {
            CHECK(what.empty());
            const bool poisoned = opt.is_worker() && opt.worker_rank() == opt.num_workers() - 1;
            CHECK(opt.skipped_steps() == (poisoned ? 1u : 0u));
        }
    }
}

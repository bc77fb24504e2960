// DistOptimizer<Async, Opt> with gradient accumulation: a worker sends the MEAN of its k accumulated
// gradients, so k backward passes of one batch give the update of one pass (and of single-process SGD).
#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

#include <dtrain/core/rng.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/distributed/async.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/losses/cross_entropy.hpp>
#include <dtrain/optim/sgd.hpp>
#include <support/test_utils.hpp>

namespace {

using dtrain::Model;
using dtrain::Tensor;

constexpr std::size_t kSteps = 3;
constexpr double kLr = 0.5;

Model<float> make_model() {
    Model<float> m({4}, 3);
    m.add(dtrain::Dense<float>(4, 8)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(8, 3));
    return m;
}

/// One fixed batch of 8 samples, the same on every rank.
struct Batch {
    Tensor<float> x = Tensor<float>::from_shape({8, 4});
    dtrain::Labels y = dtrain::Labels::from_shape({8});
    Batch() {
        dtrain::Rng rng(11);
        x = dtrain::test::random_tensor<float>({8, 4}, rng);
        for (std::size_t i = 0; i < 8; ++i)
            y(i) = std::int32_t(rng.below(3));
    }
};

/// kSteps Async steps (staleness 0: each master update is the mean over the workers, who all use the same
/// batch) with `accum` backward passes of the batch per step; every rank returns the final parameters.
std::vector<float> train_async(std::size_t accum) {
    Model<float> model = make_model();
    dtrain::AsyncOptions o;
    o.accumulation_steps = accum;
    o.staleness = 0;
    o.gather_to_all = true;
    dtrain::DistOptimizer<dtrain::Async, dtrain::SGD<float>> opt(model, dtrain::SGD<float>(kLr), o);
    const Batch b;
    dtrain::SoftmaxCrossEntropy<float> loss;
    Tensor<float> grad;
    opt.run([&] {
        for (std::size_t s = 0; s < kSteps; ++s) {
            opt.zero_grad();
            for (std::size_t j = 0; j < accum; ++j) {
                loss.compute(model.forward(b.x), b.y, grad);
                model.backward(grad);
            }
            opt.step();
        }
    });
    return {model.parameters().begin(), model.parameters().end()};
}

/// The same kSteps with plain SGD in one process.
std::vector<float> train_local() {
    Model<float> model = make_model();
    dtrain::SGD<float> sgd(kLr);
    const Batch b;
    dtrain::SoftmaxCrossEntropy<float> loss;
    Tensor<float> grad;
    for (std::size_t s = 0; s < kSteps; ++s) {
        model.zero_grad();
        loss.compute(model.forward(b.x), b.y, grad);
        model.backward(grad);
        sgd.step(model.parameters(), model.gradients());
    }
    return {model.parameters().begin(), model.parameters().end()};
}

}  // namespace

TEST_CASE("Async: k accumulated backward passes of one batch give the update of one pass", "[dist][async]") {
    if (dtrain::test::world_size() < 2) return;  // Async needs a master and a worker
    const std::vector<float> one = train_async(1);
    const std::vector<float> three = train_async(3);
    const std::vector<float> local = train_local();
    const Model<float> init = make_model();
    REQUIRE(three.size() == one.size());
    REQUIRE(local.size() == one.size());
    // Without the division by k the accumulated steps would be 3 times as large.
    CHECK(dtrain::test::max_rel_diff(three, one) <= 1e-5);
    CHECK(dtrain::test::max_rel_diff(one, local) <= 1e-5);
    CHECK(dtrain::test::max_rel_diff(one, init.parameters()) > 1e-2);  // training moved the parameters
}

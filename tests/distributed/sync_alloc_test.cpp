// Steady-state training with DistOptimizer performs no C++ heap allocation: the global operator new is
// replaced by a counting one (tests/optim/alloc_counter.hpp, every form of new and delete), and the count
// must not change over backward() + step() after warm-up.
#include <catch2/catch.hpp>

#include <cstddef>
#include <string>

#include <dtrain/comm/collective.hpp>
#include <dtrain/comm/naive.hpp>
#include <dtrain/comm/ring.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/losses/mse.hpp>
#include <dtrain/optim/sgd.hpp>
#include <optim/alloc_counter.hpp>
#include <support/test_utils.hpp>

TEMPLATE_TEST_CASE("DistOptimizer::step and the overlapped backward do not allocate in steady state",
                   "[dist][sync][alloc]", dtrain::Collective, dtrain::Ring, dtrain::Naive) {
    const bool overlap = GENERATE(true, false);
    const std::size_t accum = GENERATE(1, 2);
    const std::size_t bucket_bytes = GENERATE(0, 64);  // 64: split layers, partial gradient reports
    INFO("overlap " << overlap << ", accumulation_steps " << accum << ", bucket_bytes " << bucket_bytes);
    dtrain::Model<float> model({8}, 1);
    model.add(dtrain::Dense<float>(8, 32)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(32, 4));
    dtrain::SyncOptions o;
    o.bucket_bytes = bucket_bytes;
    o.overlap = overlap;
    o.accumulation_steps = accum;
    dtrain::DistOptimizer<TestType, dtrain::SGD<float>> opt(
        model, dtrain::SGD<float>(dtrain::SGDOptions().lr(0.01).momentum(0.9)), o);
    dtrain::Rng rng(3);
    const auto x = dtrain::test::random_tensor<float>({5, 8}, rng);
    const auto y = dtrain::test::random_tensor<float>({5, 4}, rng);
    dtrain::MeanSquaredError<float> loss;
    dtrain::Tensor<float> grad;
    std::size_t in_backward = 0, in_step = 0;
    for (int s = 0; s < 6; ++s) {
        opt.zero_grad();
        for (std::size_t j = 0; j < accum; ++j) {
            loss.compute(model.forward(x), y, grad);
            const std::size_t a = dtrain::test::allocation_count;
            model.backward(grad);
            if (s >= 2) in_backward += dtrain::test::allocation_count - a;
        }
        const std::size_t a = dtrain::test::allocation_count;
        opt.step();
        if (s >= 2) in_step += dtrain::test::allocation_count - a;
    }
    // The counter does see allocations (so the checks below can fail).
    const std::size_t before = dtrain::test::allocation_count;
    std::string probe(64 + std::size_t(dtrain::test::world_rank()), 'x');
    CHECK(dtrain::test::allocation_count > before);
    CHECK(in_backward == 0);
    CHECK(in_step == 0);
}

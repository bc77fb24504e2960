// Regression end to end, the way a user writes it: a CSV with two float target columns, a shuffled
// train/test split, a sharded DataLoader whose target batches go straight into MeanSquaredError, and
// DistOptimizer averaging the gradients over the ranks.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>

#include <mpi.h>

#include <dtrain/comm/collective.hpp>
#include <dtrain/core/rng.hpp>
#include <dtrain/data/csv.hpp>
#include <dtrain/data/loader.hpp>
#include <dtrain/data/sampler.hpp>
#include <dtrain/data/split.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/losses/mse.hpp>
#include <dtrain/optim/sgd.hpp>
#include <support/test_utils.hpp>

namespace {

/// 200 rows "x1,x2,y1,y2" with y1 = 2 x1 - x2 + 0.5 and y2 = x1 + x2 - 1, x uniform in [-1, 1): the same
/// text on every rank.
std::string linear_csv() {
    dtrain::Rng rng(17);
    std::string text = "x1,y1,x2,y2\n";  // targets between the features: columns are chosen by name
    for (int i = 0; i < 200; ++i) {
        const double a = rng.uniform(-1.0, 1.0), b = rng.uniform(-1.0, 1.0);
        text += std::to_string(a) + "," + std::to_string(2 * a - b + 0.5) + "," + std::to_string(b) + "," +
                std::to_string(a + b - 1) + "\n";
    }
    return text;
}

}  // namespace

TEST_CASE("A regression CSV trains a linear model with MeanSquaredError across ranks",
          "[data][regression][mpi]") {
    dtrain::CsvOptions csv;
    csv.target_columns = {"y1", "y2"};
    const auto all = dtrain::parse_csv(linear_csv(), "linear.csv", csv);
    REQUIRE(all.targets.shape() == std::vector<std::size_t>{200, 2});
    REQUIRE(all.features.shape() == std::vector<std::size_t>{200, 2});
    const auto [train, test] = dtrain::train_test_split(all, 0.25, 3, dtrain::SplitMode::Shuffled);
    CHECK(test.size() == 50);

    dtrain::Model<float> model({2}, 5);
    model.add(dtrain::Dense<float>(2, 2));
    dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>> opt(
        model, dtrain::SGD<float>(dtrain::SGDOptions().lr(0.1).momentum(0.5)));
    dtrain::MeanSquaredError<float> loss;
    dtrain::Tensor<float> grad;
    const float before = loss.compute(model.forward(test.features), test.targets, grad);
    std::size_t seen = 0;
    opt.run([&] {
        dtrain::DataLoader loader(
            train, dtrain::DistributedSampler(train.size(), opt.worker_rank(), opt.num_workers(), {true, 9}),
            {10});
        for (std::uint64_t epoch = 0; epoch < 60; ++epoch)
            for (loader.start_epoch(epoch); loader.next();) {
                opt.zero_grad();
                loss.compute(model.forward(loader.features()), loader.targets(), grad);
                model.backward(grad);
                opt.step();
                seen += loader.current_batch_size();
            }
    });
    const float after = loss.compute(model.forward(test.features), test.targets, grad);
    INFO("test MSE " << before << " -> " << after);
    CHECK(before > 0.5f);
    CHECK(after < 1e-4f);
    // Every rank saw its shard of the 150 training samples each epoch, and all hold the same model.
    CHECK(seen == 60 * ((150 + std::size_t(dtrain::test::world_size()) - 1) / dtrain::test::world_size()));
    const float w = model.parameters()[0];
    float lo = 0, hi = 0;
    MPI_Allreduce(&w, &lo, 1, MPI_FLOAT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&w, &hi, 1, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
    CHECK(lo == hi);
}

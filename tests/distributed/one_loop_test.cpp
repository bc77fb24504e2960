// One training loop, written once, compiles and runs unchanged against every policy (Collective, Ring,
// Naive and the Async parameter servers), with report() and the metric helpers meaningful under each.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>

#include <dtrain/comm/collective.hpp>
#include <dtrain/comm/naive.hpp>
#include <dtrain/comm/ring.hpp>
#include <dtrain/data/csv.hpp>
#include <dtrain/data/loader.hpp>
#include <dtrain/data/sampler.hpp>
#include <dtrain/data/transform.hpp>
#include <dtrain/distributed/async.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/distributed/evaluate.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/losses/cross_entropy.hpp>
#include <dtrain/nn/losses/mse.hpp>
#include <dtrain/nn/metrics.hpp>
#include <dtrain/optim/sgd.hpp>
#include <support/test_utils.hpp>

namespace {

struct Outcome {
    bool looped = false;         // this rank ran the loop (every rank, or an Async worker)
    double reported_loss = 0.0;  // global mean of what report() recorded in the last epoch
    double in_loop_accuracy = 0.0;
    dtrain::Evaluation final;
};

// The loop of the README, as a user writes it once.
template <class Policy>
Outcome train_iris(const dtrain::Dataset& data) {
    dtrain::Model<float> model({4}, 42);
    model.add(dtrain::Dense<float>(4, 16)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(16, 3));
    dtrain::DistOptimizer<Policy, dtrain::SGD<float>> opt(
        model, dtrain::SGD<float>(dtrain::SGDOptions().lr(0.05).momentum(0.9)),
        dtrain::options_for<Policy>{});
    dtrain::SoftmaxCrossEntropy<float> loss;
    dtrain::Tensor<float> grad;
    Outcome out;
    opt.run([&] {
        out.looped = true;
        dtrain::DataLoader loader(
            data, dtrain::DistributedSampler(data.size(), opt.worker_rank(), opt.num_workers()), {8});
        for (std::uint64_t epoch = 0; epoch < 25; ++epoch) {
            opt.reset_report();
            for (loader.start_epoch(epoch); loader.next();) {
                opt.zero_grad();
                const float l = loss.compute(model.forward(loader.features()), loader.labels(), grad);
                model.backward(grad);
                opt.report(l, loader.labels().size());
                opt.step();
            }
            out.reported_loss =
                opt.global_sum(opt.reported().loss_sum) / opt.global_sum(opt.reported().samples);
        }
        out.in_loop_accuracy = dtrain::evaluate(opt, loss, data).accuracy;
    });
    out.final = dtrain::evaluate(opt, loss, data);
    return out;
}

template <class Policy>
void check_policy(const char* name, const dtrain::Dataset& data) {
    INFO(name);
    const Outcome o = train_iris<Policy>(data);
    CHECK(o.final.samples == 150);
    CHECK(o.final.accuracy >= 0.9);
    CHECK(o.looped == (std::string(name) != "Async" || dtrain::test::world_rank() >= 1));
    if (o.looped) {
        CHECK(o.reported_loss > 0.0);
        CHECK(o.reported_loss < 0.5);  // trained: far below chance (ln 3 = 1.1)
        CHECK(o.in_loop_accuracy >= 0.85);
    }
    CHECK(dtrain::test::all_ranks(o.final.accuracy == o.final.accuracy));  // no NaN anywhere
    double acc[2] = {o.final.accuracy, -o.final.accuracy}, low[2] = {0, 0};
    MPI_Allreduce(acc, low, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    CHECK(low[0] == -low[1]);  // every rank got the same figure
}

}  // namespace

TEST_CASE("One training loop runs unchanged under Collective, Ring, Naive and Async", "[dist][loop]") {
    dtrain::Dataset data = dtrain::read_csv(std::string(DTRAIN_SOURCE_DIR) + "/data/iris.csv");
    dtrain::Standardizer scale;
    scale.fit(data.features);
    scale.apply(data.features);
    check_policy<dtrain::Collective>("Collective", data);
    check_policy<dtrain::Ring>("Ring", data);
    check_policy<dtrain::Naive>("Naive", data);
    if (dtrain::test::world_size() >= 2) check_policy<dtrain::Async>("Async", data);
}

// A loss that computes against class labels only.
struct LabelsOnlyLoss {
    float compute(const dtrain::Tensor<float>&, const dtrain::Labels&, dtrain::Tensor<float>&) const {
        return 0;
    }
};

TEST_CASE("evaluate on float targets: the global mean squared error, accuracy NaN; a label loss is an error",
          "[dist][loop][regression]") {
    dtrain::Rng rng(5);
    dtrain::Tensor<float> x = dtrain::test::random_tensor<float>({37, 3}, rng),
                          y = dtrain::test::random_tensor<float>({37, 2}, rng);
    const dtrain::Dataset data = dtrain::make_regression_dataset(x, y);
    dtrain::Model<float> model({3}, 7);
    model.add(dtrain::Dense<float>(3, 2));
    dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>> opt(model, dtrain::SGD<float>(0.1));
    const dtrain::Evaluation e = dtrain::evaluate(opt, dtrain::MeanSquaredError<float>(), data, 8);
    // The same figure computed directly on every sample (MSELoss: mean over samples and outputs).
    const dtrain::Tensor<float> out = model.forward(x);
    double sse = 0.0;
    for (std::size_t i = 0; i < out.size(); ++i)
        sse += (double(out.data()[i]) - double(y.data()[i])) * (double(out.data()[i]) - double(y.data()[i]));
    CHECK(e.samples == 37);
    CHECK(e.loss == Approx(sse / double(out.size())).epsilon(1e-5));
    CHECK(std::isnan(e.accuracy));
    CHECK_THROWS_WITH(
        dtrain::evaluate(opt, LabelsOnlyLoss(), data),
        Catch::Contains("holds float targets (regression)") && Catch::Contains("MeanSquaredError"));
}

TEST_CASE("evaluate with fewer test rows than ranks: finite global figures, those of one rank",
          "[dist][loop][evaluate]") {
    // 2 test rows at 3 ranks: rank 0's part is empty (the examples printed `test acc nan%`). Every rank must
    // get the figures of a single process evaluating both rows.
    const dtrain::Dataset test = dtrain::make_dataset(
        dtrain::Tensor<float>({{0.5f, -1.0f, 2.0f, 0.25f}, {-0.5f, 1.5f, 0.0f, 1.0f}}), dtrain::Labels{2, 0});
    dtrain::Model<float> model({4}, 11);
    model.add(dtrain::Dense<float>(4, 6)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(6, 3));
    dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>> opt(model, dtrain::SGD<float>(0.1));
    const dtrain::SoftmaxCrossEntropy<float> loss;
    const dtrain::Evaluation e = dtrain::evaluate(opt, loss, test, 1);
    // The one-process figures, from the same (broadcast) parameters.
    model.eval();
    const dtrain::Tensor<float> out = model.forward(test.features);
    const double loss_1 = double(loss.value(out, test.labels));
    const double accuracy_1 = double(dtrain::count_correct(out, test.labels)) / 2.0;
    INFO("loss " << e.loss << " (1 rank: " << loss_1 << "), accuracy " << e.accuracy
                 << " (1 rank: " << accuracy_1 << ")");
    CHECK(e.samples == 2);
    CHECK(std::isfinite(e.loss));
    CHECK(std::isfinite(e.accuracy));
    CHECK(e.loss == Approx(loss_1).epsilon(1e-6));
    CHECK(e.accuracy == accuracy_1);
    CHECK(dtrain::test::all_ranks(std::isfinite(e.loss) && std::isfinite(e.accuracy)));
}

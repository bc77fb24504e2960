// diabetes_regression: an MLP regressor (10-16-1, mean squared error, AdamW) on the diabetes table (442
// patients, 10 features, a float target), trained data-parallel over the MPI ranks.
//
//   mpiexec.mpich -n 2 ./diabetes_regression                  # Ring; prints test RMSE and R^2
//   mpiexec.mpich -n 3 ./diabetes_regression --comm async
//
// The target column is read as a float target (CsvOptions::target_columns), the rows are split by a seeded
// shuffle (SplitMode::Shuffled: stratification needs classes), features and target are standardised with
// the training part's statistics, and the loader's targets() batches go to MeanSquaredError as they are.
// The test figures are in the target's own units.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include <dtrain/dtrain.hpp>

#include "../common/command_line.hpp"

#ifndef DTRAIN_DIABETES_CSV
#define DTRAIN_DIABETES_CSV "data/diabetes.csv"
#endif

namespace {

struct Flags {
    std::string data = DTRAIN_DIABETES_CSV;
    std::string comm = "ring";
    int epochs = 60;
    std::size_t hidden = 16;
    double weight_decay = 0.1;
    std::size_t batch_size = 16;
    double lr = 0.003;
    std::uint64_t seed = 1;
    double test_fraction = 0.2;
    double min_r2 = -1e9;
};

// Test RMSE and R^2 of `model` in the target's units (predictions un-standardised with `y`'s statistics).
std::pair<double, double> test_figures(dtrain::Model<float>& model, const dtrain::Dataset& test,
                                       const dtrain::Standardizer& y) {
    const dtrain::Tensor<float> out = dtrain::predict(model, test.features);
    double mean = 0.0;
    for (std::size_t i = 0; i < test.size(); ++i)
        mean += test.targets(i, 0);
    mean /= double(test.size());
    double sse = 0.0, sst = 0.0;
    for (std::size_t i = 0; i < test.size(); ++i) {
        const double predicted = double(out(i, 0)) * y.stddev()[0] + y.mean()[0], truth = test.targets(i, 0);
        sse += (predicted - truth) * (predicted - truth);
        sst += (truth - mean) * (truth - mean);
    }
    return {std::sqrt(sse / double(test.size())), 1.0 - sse / sst};
}

}  // namespace

int main(int argc, char** argv) {
    dtrain::Environment env(argc, argv);
    Flags f;
    example::App app("diabetes_regression",
                     "Trains a 10-16-1 MLP regressor on the diabetes table, data-parallel over the MPI\n"
                     "ranks, and reports the held-out RMSE and R^2 in the target's units.\n");
    app.add_option("--data", f.data, "CSV with a header, 10 feature columns and a 'target' column")
        ->type_name("PATH");
    app.add_option("--comm", f.comm, "communication policy")->check(CLI::IsMember(dtrain::policy_names()));
    example::add_number(app, "--epochs", f.epochs, "epochs", 1);
    example::add_number(app, "--batch-size", f.batch_size, "samples per step and worker", std::size_t(1));
    example::add_number(app, "--lr", f.lr, "AdamW's learning rate", 0.0);
    example::add_number(app, "--weight-decay", f.weight_decay, "AdamW's decoupled weight decay", 0.0);
    example::add_number(app, "--hidden", f.hidden, "units of the hidden layer", std::size_t(1));
    example::add_number(app, "--seed", f.seed, "seed of the split, the initial weights and the shuffling");
    example::add_number(app, "--test-fraction", f.test_fraction, "held-out fraction", 0.05, 0.9);
    example::add_number(app, "--min-r2", f.min_r2, "exit with status 1 when the test R^2 is below this");
    const int status = example::parse_command_line(app, argc, argv, [&] {
        DTRAIN_CHECK(f.comm != "async" || env.size() > 1, "command line: --comm async needs 2 or more ranks");
    });
    if (status != example::keep_going) return status;

    dtrain::Dataset train, test;
    dtrain::Standardizer x_scale, y_scale;
    std::vector<std::string> warnings;
    try {
        dtrain::collectively([&] {
            dtrain::CsvOptions o;
            o.target_columns = {"target"};
            const dtrain::Dataset all = dtrain::read_csv(f.data, o);
            warnings = all.warnings;
            std::tie(train, test) =
                dtrain::train_test_split(all, f.test_fraction, f.seed, dtrain::SplitMode::Shuffled);
        });
    } catch (const dtrain::Error& e) {
        if (env.rank() == 0) std::cerr << "diabetes_regression: error: " << e.what() << "\n";
        return 2;
    }
    if (env.rank() == 0)
        for (const std::string& w : warnings)
            std::cerr << "diabetes_regression: warning: " << w << "\n";
    x_scale.fit(train.features);
    x_scale.apply(train.features);
    x_scale.apply(test.features);
    y_scale.fit(train.targets);
    y_scale.apply(train.targets);  // the test targets stay in their units

    dtrain::Model<float> model({train.sample_size()}, f.seed);
    model.add(dtrain::Dense<float>(train.sample_size(), f.hidden)).add(dtrain::ReLU<float>());
    model.add(dtrain::Dense<float>(f.hidden, 1));
    if (env.rank() == 0)
        std::printf("diabetes_regression: %zu training / %zu test rows, %d rank(s), communicator %s\n",
                    train.size(), test.size(), env.size(), f.comm.c_str());

    dtrain::with_policy(f.comm, [&](auto tag) {
        using Policy = typename decltype(tag)::type;
        dtrain::DistOptimizer<Policy, dtrain::AdamW<float>> opt(
            model, dtrain::AdamW<float>(dtrain::AdamWOptions().lr(f.lr).weight_decay(f.weight_decay)));
        opt.run([&] {
            dtrain::ShardOptions so;
            so.seed = f.seed;
            dtrain::LoaderOptions lo;
            lo.batch_size = f.batch_size;
            lo.seed = f.seed;
            dtrain::DataLoader loader(
                train, dtrain::DistributedSampler(train.size(), opt.worker_rank(), opt.num_workers(), so),
                lo);
            dtrain::MeanSquaredError<float> mse;
            dtrain::Tensor<float> grad;
            for (int epoch = 1; epoch <= f.epochs; ++epoch) {
                opt.reset_report();
                for (loader.start_epoch(std::uint64_t(epoch - 1)); loader.next();) {
                    opt.zero_grad();
                    const float loss = mse.compute(model.forward(loader.features()), loader.targets(), grad);
                    model.backward(grad);
                    opt.report(double(loss), loader.current_batch_size());
                    opt.step();
                }
                const auto r = opt.reported();
                const double train_mse =
                    opt.global_sum(r.loss_sum) / std::max(1.0, opt.global_sum(r.samples));
                if (opt.worker_rank() == 0 && (epoch % 10 == 0 || epoch == f.epochs))
                    std::printf("epoch %3d/%d  train MSE %.4f (standardised target)\n", epoch, f.epochs,
                                train_mse);
            }
        });
    });

    // Synchronous policies: every rank holds the model; Async: rank 0 holds the final one after run().
    double figures[2] = {0.0, 0.0};
    if (env.rank() == 0) std::tie(figures[0], figures[1]) = test_figures(model, test, y_scale);
    MPI_Bcast(figures, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (env.rank() == 0)
        std::printf("test RMSE %.2f  R^2 %.3f  (target range 25-346)\n", figures[0], figures[1]);
    return figures[1] >= f.min_r2 ? 0 : 1;
}

// iris_mlp: a 4-30-20-3 multilayer perceptron on the Iris table, trained data-parallel over MPI ranks.
//
//   mpiexec.mpich -n 2 ./iris_mlp                # defaults: ReLU, cross-entropy, Adam; >= 95% test acc
//   mpiexec.mpich -n 3 ./iris_mlp --comm async --masters 1 --staleness 2
//   mpiexec.mpich -n 2 ./iris_mlp --preset sigmoid-mse-sgd  # sigmoid, L2 loss, plain SGD, raw features
//   mpiexec.mpich -n 2 ./iris_mlp --save-model iris.model && ./iris_predict --model iris.model
//
// The 150 rows are split (stratified, seeded) into a training and a held-out test part; the training
// part is divided equally between the workers every epoch. Rank 0 prints loss and accuracy per epoch.
#include <cstdio>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include <dtrain/dtrain.hpp>

#include "../common/iris_network.hpp"
#include "../common/train_classifier.hpp"

#ifndef DTRAIN_IRIS_CSV
#define DTRAIN_IRIS_CSV "data/iris.csv"
#endif

namespace {

struct IrisFlags {
    std::string data = DTRAIN_IRIS_CSV;
    double test_fraction = 0.2;
    std::uint64_t split_seed = 42;
    std::string activation = "relu";
    std::string loss = "cross-entropy";
    std::string optimizer = "adam";
    double momentum = 0.0;
    bool standardize = true;
    std::string preset = "default";
};

template <class Policy, class Opt>
example::TrainResult run(dtrain::Model<float>& model, Opt opt, const IrisFlags& i,
                         const dtrain::Dataset& train, const dtrain::Dataset& test,
                         const example::CommonFlags& f) {
    example::TrainSetup setup;
    if (i.loss == "mse")
        return example::train_classifier<Policy>(model, std::move(opt), dtrain::MeanSquaredError<float>(),
                                                 train, test, f, setup);
    return example::train_classifier<Policy>(model, std::move(opt), dtrain::SoftmaxCrossEntropy<float>(),
                                             train, test, f, setup);
}

}  // namespace

int main(int argc, char** argv) {
    dtrain::Environment env(argc, argv);
    example::CommonFlags f;
    f.epochs = 100;
    f.batch_size = 8;
    f.lr = 0.01;
    IrisFlags i;
    example::App app(
        "iris_mlp",
        "Trains a 4-30-20-3 MLP on the Iris table, data-parallel over the MPI ranks, and reports\n"
        "training and held-out test loss and accuracy per epoch.\n"
        "--preset sigmoid-mse-sgd uses the settings of S. Zhao, \"Parallel Deep Learning pipelines\n"
        "using Go and MPI\" (2022): sigmoid activations, L2 (mean squared error) loss against one-hot\n"
        "labels, plain SGD, lr 0.01, batch 4, 100 epochs, raw features.\n");
    example::add_common_flags(app, f);
    app.add_option("--data", i.data, "Iris CSV file (header + 4 features + species)")->type_name("PATH");
    example::add_number(app, "--split-seed", i.split_seed,
                        "seed of the train/test split (independent of --seed)");
    example::add_number(app, "--test-fraction", i.test_fraction, "held-out fraction of every class", 0.01,
                        0.9);
    app.add_option("--activation", i.activation, "hidden activation")
        ->check(CLI::IsMember({"relu", "tanh", "sigmoid"}));
    app.add_option("--loss", i.loss, "loss: softmax cross-entropy, or mean squared error to one-hot labels")
        ->check(CLI::IsMember({"cross-entropy", "mse"}));
    app.add_option("--optimizer", i.optimizer, "local optimizer")->check(CLI::IsMember({"adam", "sgd"}));
    example::add_number(app, "--momentum", i.momentum, "SGD momentum", 0.0, 0.999);
    app.add_flag("--standardize", i.standardize,
                 "z-score the features with the training split's statistics (--standardize=false: raw)");
    app.add_option("--preset", i.preset, "settings preset; explicit flags override it")
        ->check(CLI::IsMember({"default", "sigmoid-mse-sgd"}));
    app.add_option("--save-model", f.save_model,
                   "after training, write the model, the features' statistics and the class names to PATH "
                   "(for iris_predict)")
        ->type_name("PATH");
    const int status = example::parse_flags(app, f, argc, argv);
    if (status != example::keep_going) return status;
    if (i.preset == "sigmoid-mse-sgd") {  // unless given explicitly
        if (!example::given(app, "activation")) i.activation = "sigmoid";
        if (!example::given(app, "loss")) i.loss = "mse";
        if (!example::given(app, "optimizer")) i.optimizer = "sgd";
        if (!example::given(app, "lr")) f.lr = 0.01;
        if (!example::given(app, "batch-size")) f.batch_size = 4;
        if (!example::given(app, "epochs")) f.epochs = 100;
        if (!example::given(app, "standardize")) i.standardize = false;
    }

    dtrain::Dataset train, test;
    std::vector<std::string> warnings;
    try {  // every rank learns of a failure on any rank (a file missing on one node) and exits 2
        dtrain::collectively([&] {
            const dtrain::Dataset all = dtrain::read_csv(i.data);
            warnings = all.warnings;
            DTRAIN_CHECK(all.sample_size() == 4 && all.num_classes() == 3, "'", i.data,
                         "' must have 4 feature columns and 3 classes, got ", all.sample_size(), " and ",
                         all.num_classes());
            std::tie(train, test) = dtrain::train_test_split(all, i.test_fraction, i.split_seed);
            DTRAIN_CHECK(train.size() >= std::size_t(example::world_size()), train.size(),
                         " training rows cannot be divided among ", example::world_size(), " ranks");
        });
    } catch (const dtrain::Error& e) {
        if (env.rank() == 0) std::cerr << "iris_mlp: error: " << e.what() << "\n";
        return 2;
    }
    if (env.rank() == 0)
        for (const std::string& w : warnings)
            std::cerr << "iris_mlp: warning: " << w << "\n";
    dtrain::Standardizer z;
    if (i.standardize) {
        z.fit(train.features);
        z.apply(train.features);
        z.apply(test.features);
    }

    dtrain::Model<float> model = example::iris_network(i.activation, f.seed);
    if (env.rank() == 0) {
        std::printf(
            "iris_mlp: preset %s, %s activations, %s loss, %s lr %g%s, %d epochs, %s features\n",
            i.preset.c_str(), i.activation.c_str(), i.loss.c_str(), i.optimizer.c_str(), f.lr,
            i.optimizer == "sgd" && i.momentum > 0 ? (" momentum " + std::to_string(i.momentum)).c_str() : "",
            f.epochs, i.standardize ? "standardised" : "raw");
        model.summary(std::cout);
    }

    const auto result = dtrain::with_policy(f.comm, [&](auto tag) {
        using Policy = typename decltype(tag)::type;
        if (i.optimizer == "sgd")
            return run<Policy>(model, dtrain::SGD<float>(dtrain::SGDOptions().lr(f.lr).momentum(i.momentum)),
                               i, train, test, f);
        return run<Policy>(model, dtrain::Adam<float>(dtrain::AdamOptions().lr(f.lr)), i, train, test, f);
    });
    if (!f.save_model.empty()) {  // what iris_predict needs to rebuild and use the model
        dtrain::ModelExtras extras;
        if (i.standardize) extras.arrays["standardizer"] = z.state();
        extras.texts["activation"] = i.activation;
        std::string classes;
        for (const std::string& name : train.class_names)
            classes += name + "\n";
        extras.texts["classes"] = classes;
        try {
            dtrain::save_model(f.save_model, model, extras);
        } catch (const dtrain::Error& e) {  // thrown on every rank
            if (env.rank() == 0) std::cerr << "iris_mlp: error: " << e.what() << "\n";
            return 2;
        }
        if (env.rank() == 0) std::printf("model written to %s\n", f.save_model.c_str());
    }
    return example::accuracy_status(f, result);
}

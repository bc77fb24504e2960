// fashion_mnist_cnn: the CNN of the SINGA tutorial on Fashion-MNIST, trained data-parallel over MPI ranks
// with SINGA's hyper-parameters (SGD lr 0.005, momentum 0.9, weight decay 1e-5, batch 64 per rank).
//
//   mpiexec.mpich -n 2 ./fashion_mnist_cnn                    # full data set, 10 epochs
//   mpiexec.mpich -n 2 ./fashion_mnist_cnn --train-limit 2000 --test-limit 500 --epochs 2
//   mpiexec.mpich -n 2 ./fashion_mnist_cnn --compression topk --topk-ratio 0.01   # or fp16, bf16, powersgd
//
// The training images are sharded by rank every epoch; every epoch the first rank prints the global
// training loss and accuracy, the evaluation accuracy and the elapsed time, reduced over the ranks, like
// SINGA's train_cnn.py.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <dtrain/dtrain.hpp>

#include "../common/train_classifier.hpp"

namespace {

// The first `limit` samples of `d` (all when limit is 0 or at least its size).
dtrain::Dataset first(const dtrain::Dataset& d, std::size_t limit) {
    if (limit == 0 || limit >= d.size()) return d;
    std::vector<std::size_t> idx(limit);
    for (std::size_t k = 0; k < limit; ++k)
        idx[k] = k;
    return dtrain::subset(d, idx);
}

}  // namespace

int main(int argc, char** argv) {
    dtrain::Environment env(argc, argv);
    example::CommonFlags f;
    f.epochs = 10;
    f.batch_size = 64;
    f.lr = 0.005;
    std::string data = dtrain::default_fashion_mnist_dir();
    std::size_t train_limit = 0, test_limit = 0;
    double momentum = 0.9, weight_decay = 1e-5;
    bool augment = false;
    bool scale_lr = true;
    example::App app(
        "fashion_mnist_cnn",
        "Trains the SINGA tutorial's CNN (Conv2d(1,20,5)-ReLU-MaxPool(2)-Conv2d(20,50,5)-ReLU-MaxPool(2)-\n"
        "Flatten-Dense(800,500)-ReLU-Dense(500,10)) on Fashion-MNIST, data-parallel over the MPI ranks.\n"
        "The data directory holds train-images-idx3-ubyte(.gz), train-labels-idx1-ubyte(.gz),\n"
        "t10k-images-idx3-ubyte(.gz) and t10k-labels-idx1-ubyte(.gz) (Debian: dataset-fashion-mnist;\n"
        "the default directory is $DTRAIN_FASHION_MNIST_DIR when set).\n");
    example::add_common_flags(app, f);
    app.add_option("--data", data, "Fashion-MNIST directory")->type_name("DIR");
    example::add_number(app, "--train-limit", train_limit,
                        "use only the first N training images (0 = all 60000)");
    example::add_number(app, "--test-limit", test_limit, "use only the first N test images (0 = all 10000)");
    example::add_number(app, "--momentum", momentum, "SGD momentum", 0.0, 0.999);
    example::add_number(app, "--weight-decay", weight_decay, "SGD weight decay (L2)", 0.0);
    app.add_flag("--augment", augment,
                 "augment training images: random crop after 2-pixel padding, random flip");
    app.add_flag("--scale-lr", scale_lr,
                 "linear scaling rule (Goyal et al.): with N ranks the rate is N x --lr, reached by a linear "
                 "warm-up over the first epoch (on by default; --scale-lr=false keeps --lr)");
    const int status = example::parse_flags(app, f, argc, argv);
    if (status != example::keep_going) return status;

    dtrain::Dataset train, test;
    try {  // every rank learns of a failure on any rank (a file missing on one node) and exits 2
        dtrain::collectively([&] {
            train = first(dtrain::load_fashion_mnist(dtrain::Split::Train, data), train_limit);
            test = first(dtrain::load_fashion_mnist(dtrain::Split::Test, data), test_limit);
            DTRAIN_CHECK(train.size() >= std::size_t(env.size()), train.size(),
                         " training images cannot be divided among ", env.size(), " ranks");
        });
    } catch (const dtrain::Error& e) {
        if (env.rank() == 0)
            std::cerr
                << "fashion_mnist_cnn: error: " << e.what()
                << "\n(pass the directory holding the Fashion-MNIST IDX files with --data DIR; on Debian "
                   "install the package dataset-fashion-mnist)\n";
        return 2;
    }

    dtrain::Model<float> model = dtrain::zoo::singa_cnn<float>(f.seed);
    if (env.rank() == 0) {
        std::printf(
            "fashion_mnist_cnn: SGD lr %g momentum %g weight decay %g, batch %zu per rank, %d epochs%s\n",
            f.lr, momentum, weight_decay, f.batch_size, f.epochs, augment ? ", augmented" : "");
        model.summary(std::cout);
    }

    example::TrainSetup setup;
    setup.singa_style = true;
    if (augment) {
        setup.augment.crop_padding = 2;
        setup.augment.horizontal_flip = true;
    }
    const auto sgd_options = dtrain::SGDOptions().lr(f.lr).momentum(momentum).weight_decay(weight_decay);
    dtrain::SGD<float> sgd(sgd_options);
    // Synchronous data parallelism averages gradients over `workers` times the samples per step; the
    // linear scaling rule keeps the per-sample progress of one process (asynchronous masters apply
    // every worker's update separately, so it does not apply there).
    const int workers = f.comm == "async" ? 1 : env.size();
    if (scale_lr && workers > 1) {
        const std::uint64_t steps_per_epoch = train.size() / (f.batch_size * std::size_t(workers));
        dtrain::apply_linear_scaling(sgd, workers, std::max<std::uint64_t>(1, steps_per_epoch));
        if (env.rank() == 0)
            std::printf("linear scaling rule: lr %g x %d ranks = %g after a %llu-step warm-up\n", f.lr,
                        workers, f.lr * workers, static_cast<unsigned long long>(steps_per_epoch));
    }
    const auto result = dtrain::with_policy(f.comm, [&](auto tag) {
        using Policy = typename decltype(tag)::type;
        return example::train_classifier<Policy>(model, sgd, dtrain::SoftmaxCrossEntropy<float>(), train,
                                                 test, f, setup);
    });
    return example::accuracy_status(f, result);
}

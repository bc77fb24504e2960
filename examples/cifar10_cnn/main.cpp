// cifar10_cnn: the CIFAR-10 CNN of the PyTorch benchmark project (or, with --model resnet9, the Needle
// project's ResNet9) on CIFAR-10, trained data-parallel over MPI ranks.
//
//   mpiexec.mpich -n 2 ./cifar10_cnn --data /path/to/cifar-10-batches-bin
//   mpiexec.mpich -n 2 ./cifar10_cnn --synthetic --epochs 2      # no data set needed
//   mpiexec.mpich -n 2 ./cifar10_cnn --model resnet9 --synthetic  # ResNet9 with Adam(lr 0.001, wd 0.001)
//
// Reads the CIFAR-10 binary version (data_batch_1.bin ... data_batch_5.bin, test_batch.bin) from a
// directory; --synthetic generates CIFAR-shaped images of ten learnable classes instead, so the program
// (and the scaling study) runs without the data set.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
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

// `n` synthetic [3, 32, 32] images in [0, 1]: class c is a fixed random smooth pattern (seeded by `seed`,
// the same for both splits) plus per-image noise drawn from `sample_seed`; labels cycle 0..9.
dtrain::Dataset synthetic(std::size_t n, std::uint64_t seed, std::uint64_t sample_seed) {
    constexpr std::size_t c = 3, h = 32, w = 32, m = c * h * w, classes = 10;
    dtrain::Rng pattern_rng(seed);
    std::vector<float> patterns(classes * m);
    for (std::size_t k = 0; k < classes; ++k) {
        // A few random low-frequency waves per channel make each class's template.
        for (std::size_t ch = 0; ch < c; ++ch) {
            const double fy = pattern_rng.uniform(0.5, 3.0), fx = pattern_rng.uniform(0.5, 3.0);
            const double py = pattern_rng.uniform(0, 6.283), px = pattern_rng.uniform(0, 6.283);
            for (std::size_t y = 0; y < h; ++y)
                for (std::size_t x = 0; x < w; ++x)
                    patterns[k * m + (ch * h + y) * w + x] =
                        float(0.5 + 0.25 * std::sin(fy * 6.283 * double(y) / h + py) *
                                        std::cos(fx * 6.283 * double(x) / w + px));
        }
    }
    dtrain::Rng rng(sample_seed);
    dtrain::Tensor<float> x = dtrain::Tensor<float>::from_shape({n, c, h, w});
    dtrain::Labels y = dtrain::Labels::from_shape({n});
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t k = i % classes;
        y(i) = std::int32_t(k);
        for (std::size_t j = 0; j < m; ++j) {
            const double v = patterns[k * m + j] + 0.45 * rng.normal();
            x.data()[i * m + j] = float(v < 0 ? 0 : v > 1 ? 1 : v);
        }
    }
    auto d = dtrain::make_dataset(std::move(x), std::move(y), dtrain::cifar10_class_names());
    d.source = "synthetic CIFAR-shaped data";
    return d;
}

}  // namespace

int main(int argc, char** argv) {
    dtrain::Environment env(argc, argv);
    example::CommonFlags f;
    f.epochs = 10;
    f.batch_size = 32;
    f.lr = 0.01;
    std::string data = "data/cifar-10-batches-bin";
    std::size_t train_limit = 0, test_limit = 0;
    double momentum = 0.9, weight_decay = 5e-4;
    bool augment = false, use_synthetic = false;
    std::string model_name = "cnn", optimizer = "auto";
    example::App app(
        "cifar10_cnn",
        "Trains the CIFAR-10 CNN (Conv2d(3,64,5)-ReLU-MaxPool(2)-Conv2d(64,16,5)-ReLU-MaxPool(2)-\n"
        "Dense(400,120)-ReLU-Dense(120,84)-ReLU-Dense(84,10), with a Flatten before the first Dense) on\n"
        "CIFAR-10, data-parallel over the MPI ranks; --model resnet9 trains the ResNet9\n"
        "(zoo::resnet9, two residual blocks) with Adam(lr 0.001, weight decay 0.001) instead. Download the\n"
        "binary version from https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz and extract it; pass\n"
        "the directory cifar-10-batches-bin with --data. --synthetic needs no data set.\n");
    example::add_common_flags(app, f);
    app.add_option("--model", model_name, "network: the CIFAR-10 CNN (cnn) or ResNet9 (resnet9)")
        ->check(CLI::IsMember({"cnn", "resnet9"}));
    app.add_option("--optimizer", optimizer,
                   "auto = sgd for cnn, adam for resnet9; unless given, --lr and --weight-decay are 0.01 and "
                   "5e-4 with sgd, 0.001 and 0.001 with adam")
        ->check(CLI::IsMember({"auto", "sgd", "adam"}));
    app.add_option("--data", data, "directory of the CIFAR-10 binary batches")->type_name("DIR");
    app.add_flag("--synthetic", use_synthetic,
                 "train on generated CIFAR-shaped images instead of the data set");
    example::add_number(app, "--train-limit", train_limit,
                        "use only the first N training images (0 = all; synthetic: 5000)");
    example::add_number(app, "--test-limit", test_limit,
                        "use only the first N test images (0 = all; synthetic: 1000)");
    example::add_number(app, "--momentum", momentum, "SGD momentum (sgd only)", 0.0, 0.999);
    example::add_number(app, "--weight-decay", weight_decay, "weight decay (L2, added to the gradient)", 0.0);
    app.add_flag("--augment", augment,
                 "augment training images: random crop after 4-pixel padding, random flip");
    const int status = example::parse_flags(app, f, argc, argv);
    if (status != example::keep_going) return status;
    // The optimizer each source document used: SGD for the CIFAR-10 CNN, Adam for the Needle
    // project's ResNet9; --lr and --weight-decay default to that optimizer's settings unless given.
    if (optimizer == "auto") optimizer = model_name == "resnet9" ? "adam" : "sgd";
    if (optimizer == "adam") {
        if (!example::given(app, "lr")) f.lr = 0.001;
        if (!example::given(app, "weight-decay")) weight_decay = 0.001;
        if (example::given(app, "momentum")) {
            if (env.rank() == 0)
                std::cerr << "cifar10_cnn: error: command line: --momentum applies to --optimizer sgd only\n";
            return 2;
        }
    }

    dtrain::Dataset train, test;
    try {  // every rank learns of a failure on any rank (a file missing on one node) and exits 2
        dtrain::collectively([&] {
            if (use_synthetic) {
                train = synthetic(train_limit ? train_limit : 5000, f.seed, f.seed + 1);
                test = synthetic(test_limit ? test_limit : 1000, f.seed, f.seed + 2);
            } else {
                DTRAIN_CHECK(
                    std::filesystem::is_regular_file(data + "/data_batch_1.bin") ||
                        std::filesystem::is_regular_file(data + "/data_batch_1.bin.gz"),
                    "CIFAR-10 not found: '", data,
                    "/data_batch_1.bin' does not exist.\n"
                    "  Download https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz, extract it (tar "
                    "xzf) "
                    "and pass\n  --data <where>/cifar-10-batches-bin (it holds data_batch_1.bin ... "
                    "data_batch_5.bin and test_batch.bin),\n  or run with --synthetic to train on generated "
                    "images without the data set");
                train = first(dtrain::load_cifar10(data, dtrain::Split::Train), train_limit);
                test = first(dtrain::load_cifar10(data, dtrain::Split::Test), test_limit);
            }
            DTRAIN_CHECK(train.size() >= std::size_t(env.size()), train.size(),
                         " training images cannot be divided among ", env.size(), " ranks");
            if (model_name == "resnet9") {
                // BatchNorm2d(128) sees 1x1 feature maps, so it needs two samples in every training batch.
                const std::size_t workers =
                    std::size_t(f.comm == "async" ? env.size() - f.masters : env.size());
                const std::size_t shard = (train.size() + workers - 1) / workers;
                DTRAIN_CHECK(
                    f.batch_size > 1 && shard % f.batch_size != 1,
                    "ResNet9 normalises 1x1 feature maps (its last BatchNorm2d layers), so every training "
                    "batch needs at least 2 samples, but ",
                    shard, " samples per worker in batches of ", f.batch_size,
                    " leave a batch of 1: change --batch-size or --train-limit");
            }
        });
    } catch (const dtrain::Error& e) {
        if (env.rank() == 0) std::cerr << "cifar10_cnn: error: " << e.what() << "\n";
        return 2;
    }
    // The published CIFAR-10 channel statistics.
    const dtrain::ChannelNormalizer norm({0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f});
    norm.apply(train.features);
    norm.apply(test.features);

    const bool resnet9 = model_name == "resnet9";
    dtrain::Model<float> model =
        resnet9 ? dtrain::zoo::resnet9<float>(f.seed) : dtrain::zoo::cifar_cnn<float>(f.seed);
    if (env.rank() == 0) {
        const std::string opt_text = optimizer == "adam"
                                         ? dtrain::detail::concat("Adam lr ", f.lr)
                                         : dtrain::detail::concat("SGD lr ", f.lr, " momentum ", momentum);
        std::printf("cifar10_cnn: %s%s; %s weight decay %g, batch %zu per rank, %d epochs%s\n",
                    resnet9 ? "ResNet9 on " : "", train.source.c_str(), opt_text.c_str(), weight_decay,
                    f.batch_size, f.epochs, augment ? ", augmented" : "");
        model.summary(std::cout);
    }

    example::TrainSetup setup;
    setup.singa_style = true;
    if (augment) {
        setup.augment.crop_padding = 4;
        setup.augment.horizontal_flip = true;
    }
    const auto sgd = dtrain::SGDOptions().lr(f.lr).momentum(momentum).weight_decay(weight_decay);
    const auto adam = dtrain::AdamOptions().lr(f.lr).weight_decay(weight_decay);
    const auto result = dtrain::with_policy(f.comm, [&](auto tag) {
        using Policy = typename decltype(tag)::type;
        const dtrain::SoftmaxCrossEntropy<float> loss;
        if (optimizer == "adam")
            return example::train_classifier<Policy>(model, dtrain::Adam<float>(adam), loss, train, test, f,
                                                     setup);
        return example::train_classifier<Policy>(model, dtrain::SGD<float>(sgd), loss, train, test, f, setup);
    });
    return example::accuracy_status(f, result);
}

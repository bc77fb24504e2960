// Training throughput of a full single-process training step (forward, loss, backward, optimizer step)
// for the SINGA CNN and the 784-512-256-10 MLP at batch 64, the models of issue 2's benchmark.
//
// Usage: OPENBLAS_NUM_THREADS=1 bench_train_throughput [--models cnn,mlp] [--steps N] [--reps R] [--batch B]
// Prints "dtrain <model> <median samples/s>" per model and the peak RSS of the process.
#include <dtrain/dtrain.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

dtrain::Model<float> singa_cnn() {
    return dtrain::zoo::singa_cnn<float>(0);
}

dtrain::Model<float> mlp() {
    return dtrain::zoo::mlp<float>({784, 512, 256, 10}, 0);
}

double bench(dtrain::Model<float>& model, dtrain::SGD<float>& opt, std::size_t batch, int steps, int reps) {
    dtrain::Rng rng(1);
    dtrain::Tensor<float> x =
        dtrain::Tensor<float>::from_shape(dtrain::batch_shape(batch, model.input_shape()));
    for (auto& v : x)
        v = float(rng.uniform());
    dtrain::Labels y = dtrain::Labels::from_shape({batch});
    for (auto& v : y)
        v = std::int32_t(rng.below(10));
    dtrain::SoftmaxCrossEntropy<float> loss;
    dtrain::Tensor<float> grad;
    auto step = [&] {
        model.zero_grad();
        loss.compute(model.forward(x), y, grad);
        model.backward(grad);
        opt.step(model.parameters(), model.gradients());
    };
    for (int i = 0; i < std::max(5, steps / 10); ++i)
        step();
    std::vector<double> rates;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < steps; ++i)
            step();
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        rates.push_back(double(steps) * double(batch) / s);
    }
    std::sort(rates.begin(), rates.end());
    return rates[rates.size() / 2];
}

[[noreturn]] void usage(const std::string& error) {
    if (!error.empty()) std::cerr << "bench_train_throughput: " << error << "\n";
    std::cerr << "usage: bench_train_throughput [--models cnn,mlp] [--steps N] [--reps R] [--batch B]\n";
    std::exit(error.empty() ? 0 : 2);
}

int parse_int(const std::string& flag, const char* v) {
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    if (!v[0] || *end || x <= 0) usage(flag + " needs a positive integer, got '" + v + "'");
    return int(x);
}

}  // namespace

int main(int argc, char** argv) {
    std::string models = "cnn,mlp";
    int steps = 100, reps = 5, batch = 64;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--help" || a == "-h") usage("");
        if (i + 1 >= argc) usage("missing value after " + a);
        if (a == "--models")
            models = argv[++i];
        else if (a == "--steps")
            steps = parse_int(a, argv[++i]);
        else if (a == "--reps")
            reps = parse_int(a, argv[++i]);
        else if (a == "--batch")
            batch = parse_int(a, argv[++i]);
        else
            usage("unknown flag " + a);
    }
    std::stringstream ss(models);
    std::string name;
    while (std::getline(ss, name, ',')) {
        if (name == "cnn") {
            auto m = singa_cnn();
            dtrain::SGD<float> opt(dtrain::SGDOptions().lr(0.005).momentum(0.9).weight_decay(1e-5));
            std::printf("dtrain cnn %.1f\n", bench(m, opt, std::size_t(batch), steps, reps));
        } else if (name == "mlp") {
            auto m = mlp();
            dtrain::SGD<float> opt(dtrain::SGDOptions().lr(0.01).momentum(0.9));
            std::printf("dtrain mlp %.1f\n", bench(m, opt, std::size_t(batch), steps, reps));
        } else {
            usage("unknown model '" + name + "' (known: cnn, mlp)");
        }
        std::fflush(stdout);
    }
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    std::printf("peak_rss_mib %.1f\n", double(ru.ru_maxrss) / 1024.0);
    return 0;
}

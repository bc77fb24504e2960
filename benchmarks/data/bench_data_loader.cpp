// bench_data_loader: how long loading Fashion-MNIST takes, and how fast the DataLoader yields shuffled
// batches, next to the time of one training epoch of a small MLP measured in the same run.
//
// Usage: bench_data_loader [--dir DIR] [--reps N] [--epochs N] [--batch N] [--no-train]
// Reports medians (min, max) over repetitions; single process, run with OPENBLAS_NUM_THREADS=1.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include <mpi.h>

#include <dtrain/data.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/flatten.hpp>
#include <dtrain/nn/losses/cross_entropy.hpp>
#include <dtrain/nn/model.hpp>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Stats {
    double median, min, max;
};

Stats stats(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    const double med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    return {med, v.front(), v.back()};
}

/// Seconds per epoch of the loader (median over `epochs` after one warm-up epoch).
Stats time_loader(const dtrain::Dataset& d, dtrain::LoaderOptions o, int epochs, double& checksum) {
    dtrain::DataLoader loader(d, o);
    std::vector<double> t;
    for (int e = 0; e <= epochs; ++e) {
        const auto t0 = Clock::now();
        loader.start_epoch(static_cast<std::uint64_t>(e));
        while (loader.next())
            checksum += loader.features().data()[0] + loader.labels()(0);
        if (e > 0) t.push_back(seconds_since(t0));
    }
    return stats(t);
}

}  // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    std::string dir = dtrain::default_fashion_mnist_dir();
    int reps = 5, epochs = 5;
    std::size_t batch = 64;
    bool train = true;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "bench_data_loader: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--dir")
            dir = value();
        else if (a == "--reps")
            reps = std::max(1, std::atoi(value().c_str()));
        else if (a == "--epochs")
            epochs = std::max(1, std::atoi(value().c_str()));
        else if (a == "--batch")
            batch = static_cast<std::size_t>(std::max(1, std::atoi(value().c_str())));
        else if (a == "--no-train")
            train = false;
        else {
            std::fprintf(
                stderr,
                "usage: bench_data_loader [--dir DIR] [--reps N] [--epochs N] [--batch N] [--no-train]\n");
            MPI_Finalize();
            return 2;
        }
    }

    int rc = 0;
    try {
        // 1. Load the training set from the gzip files.
        std::vector<double> load_t, load_cpu;
        dtrain::Dataset d;
        for (int r = 0; r < reps; ++r) {
            const auto t0 = Clock::now();
            const std::clock_t c0 = std::clock();
            d = dtrain::load_fashion_mnist(dtrain::Split::Train, dir);
            load_cpu.push_back(double(std::clock() - c0) / CLOCKS_PER_SEC);
            load_t.push_back(seconds_since(t0));
        }
        const auto ls = stats(load_t), lc = stats(load_cpu);
        const double mb = double(d.size() * d.sample_size()) / 1e6;
        std::printf("Fashion-MNIST train from %s: %zu images %s\n", dir.c_str(), d.size(),
                    dtrain::detail::shape_str(d.sample_shape()).c_str());
        std::printf(
            "load (gunzip + parse + scale to float), %d reps: median %.3f s (min %.3f, max %.3f), %.0f MB "
            "of pixels/s\n",
            reps, ls.median, ls.min, ls.max, mb / ls.median);
        std::printf("  process CPU time of the load: median %.3f s (min %.3f, max %.3f)\n", lc.median, lc.min,
                    lc.max);

        // 2. Loader steady state, shuffled, with and without augmentation.
        double checksum = 0.0;
        dtrain::LoaderOptions o;
        o.batch_size = batch;
        o.shuffle = true;
        o.seed = 1;
        const double nb = double((d.size() + batch - 1) / batch);
        const auto plain = time_loader(d, o, epochs, checksum);
        o.augment.crop_padding = 2;
        o.augment.horizontal_flip = true;
        const auto aug = time_loader(d, o, epochs, checksum);
        std::printf("loader, batch %zu, shuffled, %d epochs after 1 warm-up (%.0f batches/epoch):\n", batch,
                    epochs, nb);
        std::printf("  plain:                 %.4f s/epoch (min %.4f, max %.4f) = %.0f batches/s\n",
                    plain.median, plain.min, plain.max, nb / plain.median);
        std::printf("  crop(pad 2) + flip:    %.4f s/epoch (min %.4f, max %.4f) = %.0f batches/s\n",
                    aug.median, aug.min, aug.max, nb / aug.median);

        // 3. One training epoch of a small MLP (forward + loss + backward; no loader) for comparison.
        if (train) {
            dtrain::Model<float> m({1, 28, 28}, 3);
            m.add(dtrain::Flatten<float>());
            m.add(dtrain::Dense<float>(784, 128));
            m.add(dtrain::ReLU<float>());
            m.add(dtrain::Dense<float>(128, 10));
            dtrain::SoftmaxCrossEntropy<float> loss;
            dtrain::Tensor<float> grad;
            o.augment = {};
            dtrain::LoaderOptions tro = o;
            tro.shuffle = false;
            dtrain::DataLoader pre(d, tro);  // batches prepared outside the timed region
            std::vector<dtrain::Tensor<float>> xs;
            std::vector<dtrain::Labels> ys;
            while (pre.next()) {
                xs.push_back(pre.features());
                ys.push_back(pre.labels());
            }
            std::vector<double> tt;
            const int train_reps = 3;
            for (int e = 0; e <= train_reps; ++e) {
                const auto t0 = Clock::now();
                for (std::size_t b = 0; b < xs.size(); ++b) {
                    m.zero_grad();
                    const auto& out = m.forward(xs[b]);
                    checksum += loss.compute(out, ys[b], grad);
                    m.backward(grad);
                }
                if (e > 0) tt.push_back(seconds_since(t0));
            }
            const auto ts = stats(tt);
            std::printf(
                "training epoch, MLP 784-128-10, batch %zu, forward+loss+backward only, %d epochs after 1 "
                "warm-up: median %.3f s (min %.3f, max %.3f)\n",
                batch, train_reps, ts.median, ts.min, ts.max);
            std::printf(
                "ratios (same run): loader/training epoch = %.3f (augmented %.3f); one-off load/training "
                "epoch = %.3f\n",
                plain.median / ts.median, aug.median / ts.median, ls.median / ts.median);
        }
        std::printf("(checksum %.1f)\n", checksum);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_data_loader: %s\n", e.what());
        rc = 1;
    }
    MPI_Finalize();
    return rc;
}

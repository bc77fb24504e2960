// Synchronous versus asynchronous (parameter-server) training: samples/s and final test accuracy of an MLP
// on a synthetic 10-class problem, for DistOptimizer<Collective>, <Ring> and <Async> (1 or 2 masters,
// staleness 0 / 4 / unbounded). The training program is written ONCE (train<Policy>); the policy is the only
// thing that changes, dispatched from --policy.
//
// Usage: OPENBLAS_NUM_THREADS=1 mpiexec.mpich -n P bench_async --policy collective|ring|async
//            [--masters M] [--staleness S|inf] [--average-rounds] [--epochs E] [--samples N] [--batch B]
//            [--hidden H] [--lr LR] [--seed S]
// Prints one line on rank 0:
//   result policy=<p> ranks=<P> workers=<W> masters=<M> staleness=<s> epochs=<E> samples_per_s=<> accuracy=<>
//          seconds=<> max_staleness=<> mean_delay=<> updates=<>
#include <dtrain/dtrain.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace {

struct Args {
    std::string policy = "async";
    int masters = 1;
    std::uint64_t staleness = dtrain::unbounded_staleness;
    bool average_rounds = false;
    int epochs = 3;
    std::size_t samples = 4096;
    std::size_t batch = 32;
    std::size_t hidden = 128;
    double lr = 0.02;
    std::uint64_t seed = 1;
};

Args parse(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        const std::string k = argv[i];
        auto next = [&]() -> std::string {
            DTRAIN_CHECK(i + 1 < argc, "bench_async: ", k, " needs a value");
            return argv[++i];
        };
        if (k == "--policy")
            a.policy = next();
        else if (k == "--masters")
            a.masters = std::stoi(next());
        else if (k == "--staleness") {
            const std::string v = next();
            a.staleness = v == "inf" ? dtrain::unbounded_staleness : std::stoull(v);
        } else if (k == "--average-rounds")
            a.average_rounds = true;
        else if (k == "--epochs")
            a.epochs = std::stoi(next());
        else if (k == "--samples")
            a.samples = std::stoull(next());
        else if (k == "--batch")
            a.batch = std::stoull(next());
        else if (k == "--hidden")
            a.hidden = std::stoull(next());
        else if (k == "--lr")
            a.lr = std::stod(next());
        else if (k == "--seed")
            a.seed = std::stoull(next());
        else
            DTRAIN_CHECK(false, "bench_async: unknown argument ", k);
    }
    return a;
}

struct Data {
    dtrain::Tensor<float> x;
    dtrain::Labels y;
};

constexpr std::size_t features = 32, classes = 10;

// Gaussian clusters around 10 random centres (the same on every rank for a given seed); noisy enough that
// the classes overlap and accuracy depends on training.
Data synthetic(std::size_t n, std::uint64_t seed, std::uint64_t stream) {
    dtrain::Rng centres_rng(seed);
    std::vector<float> centres(classes * features);
    for (auto& c : centres)
        c = float(centres_rng.normal(0.0, 1.0));
    dtrain::Rng rng(seed * 1000 + stream);
    Data d{dtrain::Tensor<float>::from_shape({n, features}), dtrain::Labels::from_shape({n})};
    for (std::size_t i = 0; i < n; ++i) {
        const std::size_t c = std::size_t(rng.below(classes));
        d.y(i) = std::int32_t(c);
        for (std::size_t j = 0; j < features; ++j)
            d.x(i, j) = centres[c * features + j] + float(rng.normal(0.0, 1.6));
    }
    return d;
}

dtrain::Model<float> make_model(std::size_t hidden) {
    dtrain::Model<float> m({features}, 7);
    m.add(dtrain::Dense<float>(features, hidden))
        .add(dtrain::ReLU<float>())
        .add(dtrain::Dense<float>(hidden, hidden))
        .add(dtrain::ReLU<float>())
        .add(dtrain::Dense<float>(hidden, classes));
    return m;
}

template <class Opt>
std::uint64_t updates_of(Opt& opt) {
    return opt.optimizer().steps();
}

// The one training program: identical for every policy.
template <class Policy>
void train(const Args& a) {
    const Data train_set = synthetic(a.samples, a.seed, 1);
    const Data test_set = synthetic(2000, a.seed, 2);
    dtrain::Model<float> model = make_model(a.hidden);
    dtrain::options_for<Policy> options;
    if constexpr (std::is_same_v<Policy, dtrain::Async>) {
        options.masters = a.masters;
        options.staleness = a.staleness;
        options.average_rounds = a.average_rounds;
    }
    dtrain::DistOptimizer<Policy, dtrain::SGD<float>> opt(
        model, dtrain::SGD<float>(dtrain::SGDOptions().lr(a.lr).momentum(0.9)), options);

    std::uint64_t processed = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    opt.run([&] {
        // This worker's shard of the data, then the batch loop.
        std::vector<std::size_t> mine;
        for (std::size_t i = std::size_t(opt.worker_rank()); i < a.samples;
             i += std::size_t(opt.num_workers()))
            mine.push_back(i);
        dtrain::Rng rng(a.seed + std::uint64_t(opt.worker_rank()));
        dtrain::SoftmaxCrossEntropy<float> loss;
        dtrain::Tensor<float> bx = dtrain::Tensor<float>::from_shape({a.batch, features}), grad;
        dtrain::Labels by = dtrain::Labels::from_shape({a.batch});
        for (int e = 0; e < a.epochs; ++e) {
            dtrain::shuffle(mine.begin(), mine.end(), rng);
            for (std::size_t b = 0; b + a.batch <= mine.size(); b += a.batch) {
                for (std::size_t r = 0; r < a.batch; ++r) {
                    for (std::size_t j = 0; j < features; ++j)
                        bx(r, j) = train_set.x(mine[b + r], j);
                    by(r) = train_set.y(mine[b + r]);
                }
                opt.zero_grad();
                loss.compute(model.forward(bx), by, grad);
                model.backward(grad);
                opt.step();
                processed += a.batch;
            }
        }
    });
    const double seconds = MPI_Wtime() - t0;
    std::uint64_t total = 0;
    MPI_Reduce(&processed, &total, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);

    std::uint64_t max_staleness = 0;
    double mean_delay = 0.0;
    std::uint64_t updates = 0;
    if constexpr (std::is_same_v<Policy, dtrain::Async>) {
        max_staleness = opt.stats().max_staleness;
        mean_delay = opt.stats().mean_delay;
        updates = opt.stats().updates;
    } else {
        updates = updates_of(opt);
    }
    if (opt.rank() == 0) {
        model.eval();
        const double acc = dtrain::accuracy(model.forward(test_set.x), test_set.y);
        const std::string s =
            a.staleness == dtrain::unbounded_staleness ? "inf" : std::to_string(a.staleness);
        std::printf(
            "result policy=%s ranks=%d workers=%d masters=%d staleness=%s average_rounds=%d epochs=%d "
            "samples_per_s=%.1f accuracy=%.4f seconds=%.3f max_staleness=%llu mean_delay=%.2f updates=%llu\n",
            a.policy.c_str(), opt.size(), opt.num_workers(),
            std::is_same_v<Policy, dtrain::Async> ? a.masters : 0, s.c_str(), int(a.average_rounds), a.epochs,
            double(total) / seconds, acc, seconds, (unsigned long long)max_staleness, mean_delay,
            (unsigned long long)updates);
        std::fflush(stdout);
    }
}

}  // namespace

int main(int argc, char** argv) {
    dtrain::Environment env(argc, argv);
    try {
        const Args a = parse(argc, argv);
        if (a.policy == "collective")
            train<dtrain::Collective>(a);
        else if (a.policy == "ring")
            train<dtrain::Ring>(a);
        else if (a.policy == "async")
            train<dtrain::Async>(a);
        else
            DTRAIN_CHECK(false, "bench_async: unknown policy ", a.policy, " (collective, ring, async)");
    } catch (const dtrain::Error& e) {
        std::cerr << "bench_async: " << e.what() << '\n';
        return 1;
    }
    return 0;
}

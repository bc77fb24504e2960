// Data-parallel training throughput with the synchronous DistOptimizer: samples/s of a full step
// (zero_grad, forward, loss, backward, DistOptimizer::step) summed over all ranks, for the SINGA CNN and
// the 784-512-256-10 MLP at a fixed batch per rank, for each communicator policy with and without overlap.
// With --overhead (one rank), it also times the bare local optimizer against DistOptimizer in alternating
// repetitions of the same program and prints the median ratio.
//
// Usage: OPENBLAS_NUM_THREADS=1 mpiexec.mpich -n P bench_train_dist [--model cnn|mlp]
//            [--policies collective,ring,naive] [--overlap 0,1] [--bucket-bytes B] [--steps N] [--reps R]
//            [--batch B] [--overhead] [--compare] [--funneled] [--timeline trace.json]
// Prints, per configuration, one line
//   result <model> <policy> overlap=<0|1> ranks=<P> bucket_bytes=<B> buckets=<n> median=<samples/s> min=<>
//          max=<> backward_ms=<mean ms in zero_grad+forward+backward> step_ms=<mean ms in step()>
// and with --overhead
//   overhead <model> bare_median=<> dist_median=<> ratio_median=<dist time / bare time> ratios=<...>
// and with --compare (any number of ranks; bare local steps, DistOptimizer without and with overlap in
// alternating repetitions of the same program)
//   compare <model> <policy> ranks=<P> eff_no_overlap=<bare time / dist time> eff_overlap=<>
//           overlap_speedup=<time without / time with overlap>
#include <dtrain/dtrain.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
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

struct Setup {
    std::string model;
    std::size_t batch = 64;
    int steps = 50;
    int reps = 5;
    std::string timeline;  // Chrome trace of the (last) timed configuration, if not empty
};

dtrain::Model<float> make_model(const std::string& name) {
    return name == "cnn" ? singa_cnn() : mlp();
}

dtrain::SGD<float> make_sgd(const std::string& name) {
    return name == "cnn" ? dtrain::SGD<float>(dtrain::SGDOptions().lr(0.005).momentum(0.9).weight_decay(1e-5))
                         : dtrain::SGD<float>(dtrain::SGDOptions().lr(0.01).momentum(0.9));
}

/// A fixed synthetic batch (MNIST-shaped), different on every rank.
struct Data {
    dtrain::Tensor<float> x;
    dtrain::Labels y;
};

Data make_data(const dtrain::Model<float>& m, std::size_t batch, int rank) {
    dtrain::Rng rng(1 + std::uint64_t(rank));
    Data d{dtrain::Tensor<float>::from_shape(dtrain::batch_shape(batch, m.input_shape())),
           dtrain::Labels::from_shape({batch})};
    for (auto& v : d.x)
        v = float(rng.uniform());
    for (auto& v : d.y)
        v = std::int32_t(rng.below(10));
    return d;
}

/// Times `reps` repetitions of `steps` calls of `step` (after a barrier each); returns samples/s per
/// repetition summed over ranks (rank 0's clock; every step synchronises the ranks anyway).
template <class Step>
std::vector<double> time_reps(Step&& step, const Setup& s, int size, int reps) {
    std::vector<double> rates;
    for (int r = 0; r < reps; ++r) {
        MPI_Barrier(MPI_COMM_WORLD);
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < s.steps; ++i)
            step();
        MPI_Barrier(MPI_COMM_WORLD);
        const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        rates.push_back(double(s.steps) * double(s.batch) * double(size) / sec);
    }
    return rates;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Builds the model and DistOptimizer<Comm> and returns a callable doing one full training step.
template <class Comm>
struct DistRun {
    dtrain::Model<float> model;
    Data data;
    dtrain::SoftmaxCrossEntropy<float> loss;
    dtrain::Tensor<float> grad;
    std::unique_ptr<dtrain::DistOptimizer<Comm, dtrain::SGD<float>>> opt;

    DistRun(const Setup& s, const dtrain::DistOptions& o, int rank)
        : model(make_model(s.model)), data(make_data(model, s.batch, rank)) {
        opt = std::make_unique<dtrain::DistOptimizer<Comm, dtrain::SGD<float>>>(model, make_sgd(s.model), o);
    }
    double compute_s = 0.0, step_s = 0.0;  // time in zero_grad + forward + backward, and in step()
    void step() {
        const auto t0 = std::chrono::steady_clock::now();
        {
            dtrain::TimelineScope scope("forward+backward", "compute");
            opt->zero_grad();
            loss.compute(model.forward(data.x), data.y, grad);
            model.backward(grad);
        }
        const auto t1 = std::chrono::steady_clock::now();
        {
            dtrain::TimelineScope scope("step", "dist");
            opt->step();
        }
        const auto t2 = std::chrono::steady_clock::now();
        compute_s += std::chrono::duration<double>(t1 - t0).count();
        step_s += std::chrono::duration<double>(t2 - t1).count();
    }
};

template <class Comm>
void bench_policy(const std::string& policy, const Setup& s, const dtrain::DistOptions& o, int rank,
                  int size) {
    DistRun<Comm> run(s, o, rank);
    for (int i = 0; i < std::max(5, s.steps / 5); ++i)
        run.step();  // warm-up
    run.compute_s = run.step_s = 0.0;
    if (!s.timeline.empty()) dtrain::timeline().enable(std::size_t(1) << 16, MPI_COMM_WORLD);
    const auto rates = time_reps([&] { run.step(); }, s, size, s.reps);
    const double n = double(s.steps) * double(s.reps);
    if (!s.timeline.empty()) {
        dtrain::timeline().disable();
        dtrain::timeline().write(s.timeline, MPI_COMM_WORLD);
    }
    if (rank == 0) {
        std::printf(
            "result %s %s overlap=%d ranks=%d bucket_bytes=%zu buckets=%zu median=%.1f min=%.1f max=%.1f "
            "backward_ms=%.3f step_ms=%.3f\n",
            s.model.c_str(), policy.c_str(), int(o.overlap), size, o.bucket_bytes, run.opt->buckets().size(),
            median(rates), *std::min_element(rates.begin(), rates.end()),
            *std::max_element(rates.begin(), rates.end()), 1e3 * run.compute_s / n, 1e3 * run.step_s / n);
        std::fflush(stdout);
    }
}

/// One rank: alternating repetitions of the bare optimizer and of DistOptimizer<Collective> (default
/// options) on identical models and data; prints the median of per-pair time ratios dist / bare.
void bench_overhead(const Setup& s, int reps) {
    dtrain::Model<float> bare_model = make_model(s.model);
    dtrain::SGD<float> bare_opt = make_sgd(s.model);
    Data bare_data = make_data(bare_model, s.batch, 0);
    dtrain::SoftmaxCrossEntropy<float> loss;
    dtrain::Tensor<float> grad;
    auto bare_step = [&] {
        bare_model.zero_grad();
        loss.compute(bare_model.forward(bare_data.x), bare_data.y, grad);
        bare_model.backward(grad);
        bare_opt.step(bare_model.parameters(), bare_model.gradients());
    };
    DistRun<dtrain::Collective> dist(s, dtrain::DistOptions{}, 0);
    for (int i = 0; i < std::max(5, s.steps / 5); ++i) {
        bare_step();
        dist.step();
    }
    std::vector<double> bare, with, ratios;
    for (int r = 0; r < reps; ++r) {
        // Alternate which one runs first, so cache and frequency effects of the order cancel.
        double b = 0.0, d = 0.0;
        if (r % 2 == 0) {
            b = time_reps(bare_step, s, 1, 1)[0];
            d = time_reps([&] { dist.step(); }, s, 1, 1)[0];
        } else {
            d = time_reps([&] { dist.step(); }, s, 1, 1)[0];
            b = time_reps(bare_step, s, 1, 1)[0];
        }
        bare.push_back(b);
        with.push_back(d);
        ratios.push_back(b / d);  // time(dist) / time(bare)
    }
    std::printf("overhead %s bare_median=%.1f dist_median=%.1f ratio_median=%.4f ratios=", s.model.c_str(),
                median(bare), median(with), median(ratios));
    for (double x : ratios)
        std::printf("%.4f,", x);
    std::printf("\n");
    std::fflush(stdout);
}

/// Any number of ranks: alternating repetitions of (a) the bare local step on every rank (no communication),
/// (b) DistOptimizer<Comm> without and (c) with overlap, on identical models and data; prints the medians of
/// the per-round time ratios, so slow machine-load drifts cancel. bare/dist is the in-process scaling
/// efficiency (every rank computes concurrently in (a) too, so memory-bandwidth sharing is factored out).
template <class Comm>
void bench_compare(const std::string& policy, const Setup& s, std::size_t bucket_bytes, int rank, int size) {
    dtrain::Model<float> bare_model = make_model(s.model);
    dtrain::SGD<float> bare_opt = make_sgd(s.model);
    Data bare_data = make_data(bare_model, s.batch, rank);
    dtrain::SoftmaxCrossEntropy<float> loss;
    dtrain::Tensor<float> grad;
    auto bare_step = [&] {
        bare_model.zero_grad();
        loss.compute(bare_model.forward(bare_data.x), bare_data.y, grad);
        bare_model.backward(grad);
        bare_opt.step(bare_model.parameters(), bare_model.gradients());
    };
    dtrain::DistOptions o;
    o.bucket_bytes = bucket_bytes;
    o.overlap = false;
    DistRun<Comm> plain(s, o, rank);
    o.overlap = true;
    DistRun<Comm> overlapped(s, o, rank);
    for (int i = 0; i < std::max(3, s.steps / 5); ++i) {
        bare_step();
        plain.step();
        overlapped.step();
    }
    std::vector<double> eff0, eff1, gain, bare_rates;
    for (int r = 0; r < s.reps; ++r) {
        const double b = time_reps(bare_step, s, size, 1)[0];
        const double d0 = time_reps([&] { plain.step(); }, s, size, 1)[0];
        const double d1 = time_reps([&] { overlapped.step(); }, s, size, 1)[0];
        bare_rates.push_back(b);
        eff0.push_back(d0 / b);  // rates: dist / bare = time(bare) / time(dist)
        eff1.push_back(d1 / b);
        gain.push_back(d1 / d0);
    }
    if (rank == 0) {
        std::printf(
            "compare %s %s ranks=%d bucket_bytes=%zu eff_no_overlap=%.4f eff_overlap=%.4f "
            "overlap_speedup=%.4f (medians of %d rounds; speedup min %.3f max %.3f) "
            "bare_samples_per_s=%.1f\n",
            s.model.c_str(), policy.c_str(), size, bucket_bytes, median(eff0), median(eff1), median(gain),
            s.reps, *std::min_element(gain.begin(), gain.end()), *std::max_element(gain.begin(), gain.end()),
            median(bare_rates));
        std::fflush(stdout);
    }
}

[[noreturn]] void usage(const std::string& error) {
    if (!error.empty()) std::cerr << "bench_train_dist: " << error << "\n";
    std::cerr
        << "usage: bench_train_dist [--model cnn|mlp] [--policies collective,ring,naive] [--overlap 0,1]\n"
           "                        [--bucket-bytes B] [--steps N] [--reps R] [--batch B] [--overhead]\n"
           "                        [--compare] [--funneled]\n";
    std::exit(error.empty() ? 0 : 2);
}

long parse_long(const std::string& flag, const char* v, long min) {
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    if (!v[0] || *end || x < min)
        usage(flag + " needs an integer >= " + std::to_string(min) + ", got '" + v + "'");
    return x;
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ','))
        out.push_back(item);
    return out;
}

}  // namespace

/// Type tag carrying a communicator policy to a generic lambda.
template <class Comm>
struct PolicyTag {
    using type = Comm;
};

/// Calls fn(PolicyTag<Comm>{}) for the policy named `name`; exits with usage() for an unknown name.
template <class Fn>
void with_policy(const std::string& name, Fn&& fn) {
    if (name == "collective")
        fn(PolicyTag<dtrain::Collective>{});
    else if (name == "ring")
        fn(PolicyTag<dtrain::Ring>{});
    else if (name == "naive")
        fn(PolicyTag<dtrain::Naive>{});
    else
        usage("unknown policy '" + name + "' (known: collective, ring, naive)");
}

int main(int argc, char** argv) {
    // --funneled initialises MPI with MPI_THREAD_FUNNELED instead of MPI_THREAD_MULTIPLE (which also
    // disables DistOptimizer's progress thread), to measure what the thread level costs.
    bool funneled = false;
    for (int i = 1; i < argc; ++i)
        funneled = funneled || std::string(argv[i]) == "--funneled";
    dtrain::Environment env(argc, argv, funneled ? MPI_THREAD_FUNNELED : MPI_THREAD_MULTIPLE);
    Setup s;
    s.model = "mlp";
    std::string policies = "collective,ring,naive", overlaps = "0,1";
    std::size_t bucket_bytes = dtrain::DistOptions{}.bucket_bytes;
    bool overhead = false, compare = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--help" || a == "-h") usage("");
        if (a == "--overhead") {
            overhead = true;
            continue;
        }
        if (a == "--funneled") continue;
        if (a == "--compare") {
            compare = true;
            continue;
        }
        if (i + 1 >= argc) usage("missing value after " + a);
        if (a == "--model")
            s.model = argv[++i];
        else if (a == "--policies")
            policies = argv[++i];
        else if (a == "--overlap")
            overlaps = argv[++i];
        else if (a == "--bucket-bytes")
            bucket_bytes = std::size_t(parse_long(a, argv[++i], 0));
        else if (a == "--steps")
            s.steps = int(parse_long(a, argv[++i], 1));
        else if (a == "--reps")
            s.reps = int(parse_long(a, argv[++i], 1));
        else if (a == "--timeline")
            s.timeline = argv[++i];
        else if (a == "--batch")
            s.batch = std::size_t(parse_long(a, argv[++i], 1));
        else
            usage("unknown flag " + a);
    }
    if (s.model != "cnn" && s.model != "mlp") usage("unknown model '" + s.model + "' (known: cnn, mlp)");
    if (overhead) {
        if (env.size() != 1) usage("--overhead needs exactly one rank");
        bench_overhead(s, s.reps);
        return 0;
    }
    if (compare) {
        for (const auto& p : split(policies)) {
            with_policy(p, [&](auto tag) {
                using Comm = typename decltype(tag)::type;
                bench_compare<Comm>(p, s, bucket_bytes, env.rank(), env.size());
            });
        }
        return 0;
    }
    for (const auto& ov : split(overlaps)) {
        dtrain::DistOptions o;
        o.bucket_bytes = bucket_bytes;
        o.overlap = ov == "1";
        for (const auto& p : split(policies)) {
            with_policy(p, [&](auto tag) {
                using Comm = typename decltype(tag)::type;
                bench_policy<Comm>(p, s, o, env.rank(), env.size());
            });
        }
    }
    return 0;
}

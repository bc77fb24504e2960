// Data-parallel training throughput with the synchronous DistOptimizer: samples/s of a full step
// (zero_grad, forward, loss, backward, DistOptimizer::step) summed over all ranks, for the SINGA CNN and
// the 784-512-256-10 MLP at a fixed batch per rank, for each communicator policy with and without overlap.
// With --overhead (one rank), it also times the bare local optimizer against DistOptimizer in alternating
// pairs of repetitions of the same program and prints the (placement-balanced) median time ratio with a
// bootstrap confidence interval; --overhead-count runs both loops once in functions of their own for
// callgrind (overhead.sh).
//
// Usage: OPENBLAS_NUM_THREADS=1 mpiexec.mpich -n P bench_train_dist [--model cnn|mlp]
//            [--policies collective,ring,naive] [--overlap 0,1] [--bucket-bytes B] [--steps N] [--reps R]
//            [--batch B] [--overhead [--control] [--rounds K]] [--overhead-count [--warmup W]]
//            [--compare] [--budget [--budget-reduce buckets|barrier|whole]] [--funneled]
//            [--timeline trace.json]
//            [--compression none|fp16|bf16|topk|powersgd [--topk-ratio R] [--powersgd-rank R]
//            [--powersgd-start S]]
// --compression sets SyncOptions::compression (and --topk-ratio its topk_ratio, default 0.01) of every
// DistOptimizer the run builds (also those of --compare and --budget; --budget's all-reduce alone stays
// uncompressed). --compression powersgd registers PowerSgdHook (distributed/powersgd_hook.hpp; rank
// --powersgd-rank, default 1, after --powersgd-start plain steps, default 10) on the DistOptimizers of the
// per-policy results (not with --compare or --budget). Prints, per configuration, one line
//   result <model> <policy> overlap=<0|1> ranks=<P> bucket_bytes=<B> buckets=<n> median=<samples/s> min=<>
//          max=<> backward_ms=<mean ms in zero_grad+forward+backward> step_ms=<mean ms in step()>
//          compression=<none|fp16|bf16|topk(ratio=R)|powersgd(rank=R,start=S)> grad_bytes=<bytes of the
//          float gradient> wire_bytes=<bytes the ranks all-reduce per step: the gradient, its 16-bit form,
//          top-k's ranks x k (index, value) pairs of 8 bytes per bucket, or PowerSGD's P, Q and
//          uncompressed values once started>
// and with --overhead (--reps = number of pairs, --steps = steps per timed half, --rounds = rounds with
// fresh models, the roles of the two model slots swapped every round; default reps/20 within 2..20)
//   overhead <model> pairs=<> rounds=<> steps_per_half=<> ratio_balanced=<dist time / bare time, placement-
//            balanced> ci95_lo=<> ci95_hi=<> target_1pct=<shown|missed|inconclusive> ratio_median=<median
//            of all per-pair ratios> ratio_median_dist_slot0=<> ratio_median_dist_slot1=<>
//            bare_ms_per_step=<mean> dist_ms_per_step=<mean> ratio_of_means=<> pairs_dist_slower=<>
//            bare_median=<samples/s> dist_median=<samples/s> params_identical=<0|1>
//   overhead_rounds <model> slot<0|1>:<median ratio of the round> ...
//   overhead_ratios <model> <per-pair ratios, comma-separated>
// (with --overhead --control: the same lines starting with overhead_control, for a second bare loop)
// and with --overhead-count (--steps per loop after --warmup W steps of each, default 3)
//   overhead_count <model> steps=<> warmup=<> bare_ms=<> dist_ms=<> params_identical=<0|1>
// and with --compare (any number of ranks; bare local steps, DistOptimizer without and with overlap in
// alternating repetitions of the same program)
//   compare <model> <policy> ranks=<P> eff_no_overlap=<bare time / dist time> eff_overlap=<>
//           overlap_speedup=<time without / time with overlap>
// and with --budget (two or more ranks; see bench_budget)
//   budget <model> <policy> ranks=<P> ... eff_no_overlap=<> eff_overlap=<> ceiling=<> comm=<> bound=<>
//          residual_overlap=<> t1_ms=<> reduce_ms=<> both_ms=<> grad_bytes=<> budget_reduce=<form>
//   (medians over rounds; t1_ms: rank 0's bare step alone, both_ms: the bare step on every rank with no
//   communication, reduce_ms: the blocking all-reduce of every gradient bucket alone, all per step; with
//   --budget-reduce barrier a barrier precedes each bucket, with whole one call reduces the gradient)
#include <dtrain/distributed/powersgd_hook.hpp>
#include <dtrain/dtrain.hpp>
#include <support/cli.hpp>
#include <support/stats.hpp>
#include <support/zoo_models.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using dtrain::bench::median;

struct Setup {
    std::string model;
    std::size_t batch = 64;
    int steps = 50;
    int reps = 5;
    std::string timeline;                   // Chrome trace of the (last) timed configuration, if not empty
    std::string budget_reduce = "buckets";  // --budget's all-reduce alone: buckets, barrier or whole
    bool powersgd = false;                  // --compression powersgd: PowerSgdHook with `psgd`
    dtrain::PowerSgdOptions psgd;
};

dtrain::Model<float> make_model(const std::string& name) {
    return dtrain::bench::zoo_model<float>(name, 0);
}

dtrain::SGD<float> make_sgd(const std::string& name) {
    return dtrain::SGD<float>(dtrain::bench::zoo_sgd_options(name));
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

/// Bytes every rank contributes to the all-reduces of one step with options `o` over `buckets`: the float
/// gradient (None), its 16-bit form (Fp16, Bf16), or for TopK the zero-padded ranks x k (index, value)
/// pairs of 32-bit words per bucket (see dtrain::GradientCompressor).
std::size_t wire_bytes(const std::vector<dtrain::Bucket>& buckets, const dtrain::SyncOptions& o, int ranks) {
    std::size_t bytes = 0;
    for (const dtrain::Bucket& b : buckets) {
        switch (o.compression) {
            case dtrain::Compression::Fp16:
            case dtrain::Compression::Bf16:
                bytes += 2 * b.size;
                break;
            case dtrain::Compression::TopK:
                bytes += std::size_t(ranks) * dtrain::topk_count(b.size, o.topk_ratio) * 8;
                break;
            default:
                bytes += sizeof(float) * b.size;
                break;
        }
    }
    return bytes;
}

/// Builds the model and DistOptimizer<Comm> and returns a callable doing one full training step.
template <class Comm>
struct DistRun {
    dtrain::Model<float> model;
    Data data;
    dtrain::SoftmaxCrossEntropy<float> loss;
    dtrain::Tensor<float> grad;
    std::unique_ptr<dtrain::DistOptimizer<Comm, dtrain::SGD<float>>> opt;

    DistRun(const Setup& s, const dtrain::SyncOptions& o, int rank)
        : model(make_model(s.model)), data(make_data(model, s.batch, rank)) {
        opt = std::make_unique<dtrain::DistOptimizer<Comm, dtrain::SGD<float>>>(model, make_sgd(s.model), o);
        if (s.powersgd) opt->register_comm_hook(dtrain::PowerSgdHook<float>(model, s.psgd));
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
void bench_policy(const std::string& policy, const Setup& s, const dtrain::SyncOptions& o, int rank,
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
    std::string compression = dtrain::describe_compression(o.compression, o.topk_ratio);
    std::size_t wire = wire_bytes(run.opt->buckets(), o, size);
    if (const auto* h = run.opt->template comm_hook<dtrain::PowerSgdHook<float>>()) {
        compression = h->describe();
        wire = 0;
        for (std::size_t b = 0; b < run.opt->buckets().size(); ++b)
            wire += sizeof(float) * h->wire_values(b);
    }
    if (rank == 0) {
        std::printf(
            "result %s %s overlap=%d ranks=%d bucket_bytes=%zu buckets=%zu median=%.1f min=%.1f max=%.1f "
            "backward_ms=%.3f step_ms=%.3f compression=%s grad_bytes=%zu wire_bytes=%zu\n",
            s.model.c_str(), policy.c_str(), int(o.overlap), size, o.bucket_bytes, run.opt->buckets().size(),
            median(rates), *std::min_element(rates.begin(), rates.end()),
            *std::max_element(rates.begin(), rates.end()), 1e3 * run.compute_s / n, 1e3 * run.step_s / n,
            compression.c_str(), sizeof(float) * run.model.num_parameters(), wire);
        std::fflush(stdout);
    }
}

/// One model with its own SGD, loss, gradient buffer and data (rank `rank`'s batch): one side of an
/// OverheadPair, or the bare baseline of bench_compare.
struct Side {
    dtrain::Model<float> model;
    dtrain::SGD<float> opt;
    Data data;
    dtrain::SoftmaxCrossEntropy<float> loss;
    dtrain::Tensor<float> grad;

    explicit Side(const Setup& s, int rank = 0)
        : model(make_model(s.model)), opt(make_sgd(s.model)), data(make_data(model, s.batch, rank)) {}
    Side(const Side&) = delete;
    Side& operator=(const Side&) = delete;

    /// One bare training step: model.zero_grad, forward, loss, backward, SGD::step.
    void bare_step() {
        model.zero_grad();
        loss.compute(model.forward(data.x), data.y, grad);
        model.backward(grad);
        opt.step(model.parameters(), model.gradients());
    }
};

/// One rank: a bare local training loop (Side::bare_step) and the same loop through
/// DistOptimizer<Collective, SGD<float>> with default options, each on its own but identical model,
/// optimizer, loss and data, so both do bitwise the same arithmetic (checked by same_parameters()).
/// Neither step does anything else (no clocks, no timeline scopes). The two sides are built one after the
/// other (slot 0, then slot 1); `dist_slot` says which one DistOptimizer drives, so that a benchmark can
/// swap the roles between rounds and cancel what the placement of a side in memory does to its speed. With
/// `control` (A/A test of the harness) there is no DistOptimizer and the other side runs the bare loop too
/// (control_step()). Must not be moved: the DistOptimizer holds a reference to its model.
struct OverheadPair {
    Side slot0, slot1;
    Side& bare;   // the side trained by the bare loop
    Side& other;  // the side trained through DistOptimizer (or, with control, by a second bare loop)
    std::optional<dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>>> dist_opt;  // none if control

    OverheadPair(const Setup& s, bool control, int dist_slot)
        : slot0(s), slot1(s), bare(dist_slot == 0 ? slot1 : slot0), other(dist_slot == 0 ? slot0 : slot1) {
        if (!control) dist_opt.emplace(other.model, make_sgd(s.model), dtrain::SyncOptions{});
    }
    OverheadPair(const OverheadPair&) = delete;
    OverheadPair& operator=(const OverheadPair&) = delete;

    /// One training step with the bare local optimizer.
    void bare_step() { bare.bare_step(); }
    /// The same step through DistOptimizer (requires !control).
    void dist_step() {
        dist_opt->zero_grad();
        other.loss.compute(other.model.forward(other.data.x), other.data.y, other.grad);
        other.model.backward(other.grad);
        dist_opt->step();
    }
    /// The bare step on the other side (requires control).
    void control_step() { other.bare_step(); }
    /// True if both models hold bitwise-identical parameters (after the same number of steps of each).
    bool same_parameters() const {
        const auto a = slot0.model.parameters(), b = slot1.model.parameters();
        return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
    }
};

// Not inlined and not cloned, so that callgrind reports each loop as one function with a distinctive name
// whose INCLUSIVE instruction count is exactly the cost of its `steps` training steps (overhead.sh).
#if defined(__GNUC__) && !defined(__clang__)
#define DTRAIN_BENCH_NOINLINE __attribute__((noinline, noipa))
#else
#define DTRAIN_BENCH_NOINLINE __attribute__((noinline))
#endif

/// `steps` bare training steps of `p` (the callgrind target of overhead.sh).
DTRAIN_BENCH_NOINLINE void overhead_count_bare_loop(OverheadPair& p, int steps) {
    for (int i = 0; i < steps; ++i)
        p.bare_step();
}

/// `steps` DistOptimizer training steps of `p` (the callgrind target of overhead.sh).
DTRAIN_BENCH_NOINLINE void overhead_count_dist_loop(OverheadPair& p, int steps) {
    for (int i = 0; i < steps; ++i)
        p.dist_step();
}

/// --overhead-count (one rank): `warmup` steps of each loop, then overhead_count_bare_loop and
/// overhead_count_dist_loop with `steps` steps each, for an instruction count under callgrind (overhead.sh);
/// prints the native wall time of both loops (meaningless under valgrind) and whether the two models ended
/// bitwise identical.
void bench_overhead_count(const Setup& s, int warmup) {
    OverheadPair p(s, false, 1);
    for (int i = 0; i < warmup; ++i) {
        p.bare_step();
        p.dist_step();
    }
    const auto t0 = std::chrono::steady_clock::now();
    overhead_count_bare_loop(p, s.steps);
    const auto t1 = std::chrono::steady_clock::now();
    overhead_count_dist_loop(p, s.steps);
    const auto t2 = std::chrono::steady_clock::now();
    std::printf("overhead_count %s steps=%d warmup=%d bare_ms=%.3f dist_ms=%.3f params_identical=%d\n",
                s.model.c_str(), s.steps, warmup, 1e3 * std::chrono::duration<double>(t1 - t0).count(),
                1e3 * std::chrono::duration<double>(t2 - t1).count(), int(p.same_parameters()));
    std::fflush(stdout);
}

/// Seconds taken by `steps` calls of `step`.
template <class Step>
double time_steps(Step&& step, int steps) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i)
        step();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// The per-pair time ratios of one round of bench_overhead, and which slot DistOptimizer drove.
struct OverheadRound {
    int dist_slot = 0;
    std::vector<double> ratios;
};

/// Median of the per-pair ratios of all `rounds` together (1 if there are none); `pool` is scratch space.
double pooled_median(const std::vector<const OverheadRound*>& rounds, std::vector<double>& pool) {
    pool.clear();
    for (const OverheadRound* r : rounds)
        pool.insert(pool.end(), r->ratios.begin(), r->ratios.end());
    return pool.empty() ? 1.0 : median(pool);
}

/// The placement-balanced ratio: geometric mean of the median per-pair ratio of the rounds with
/// DistOptimizer in slot 0 and of those with it in slot 1 (a placement factor multiplies one median and
/// divides the other, so it cancels); `pool` is scratch space.
double balanced_ratio(const std::vector<const OverheadRound*>& slot0,
                      const std::vector<const OverheadRound*>& slot1, std::vector<double>& pool) {
    const double m0 = pooled_median(slot0, pool);
    return std::sqrt(m0 * pooled_median(slot1, pool));
}

/// Two-stage percentile bootstrap confidence interval (`level`, e.g. 0.95) of balanced_ratio(): each of
/// `resamples` resamples draws, within each slot group, as many rounds as the group has with replacement
/// and, within each drawn round, as many pairs as it has with replacement (so both the pair-to-pair and
/// the round-to-round variation are included; slightly conservative). dtrain::Rng(seed) makes it
/// reproducible.
std::pair<double, double> bootstrap_balanced_ci(const std::vector<OverheadRound>& rounds, double level,
                                                int resamples, std::uint64_t seed) {
    dtrain::Rng rng(seed);
    std::vector<const OverheadRound*> group[2];
    for (const auto& r : rounds)
        group[r.dist_slot].push_back(&r);
    std::vector<OverheadRound> drawn(rounds.size());
    std::vector<const OverheadRound*> pick[2];
    std::vector<double> stats(static_cast<std::size_t>(resamples)), pool;
    for (auto& stat : stats) {
        std::size_t k = 0;
        for (int g = 0; g < 2; ++g) {
            pick[g].clear();
            for (std::size_t i = 0; i < group[g].size(); ++i, ++k) {
                const OverheadRound& src = *group[g][rng.below(group[g].size())];
                drawn[k].ratios.resize(src.ratios.size());
                for (auto& v : drawn[k].ratios)
                    v = src.ratios[rng.below(src.ratios.size())];
                pick[g].push_back(&drawn[k]);
            }
        }
        stat = balanced_ratio(pick[0], pick[1], pool);
    }
    std::sort(stats.begin(), stats.end());
    const double tail = 0.5 * (1.0 - level) * double(resamples - 1);
    return {stats[std::size_t(std::floor(tail))],
            stats[std::size_t(std::ceil(double(resamples - 1) - tail))]};
}

/// --overhead (one rank): `pairs` pairs of timed halves of `s.steps` steps each, bare and DistOptimizer
/// (which half runs first alternates every pair, so cache, frequency and slow load effects of the order
/// cancel), spread over `rounds` rounds; every round builds a fresh OverheadPair with the roles of the two
/// slots swapped from the round before and warms it up (so the speed a side gets from where it lies in
/// memory, up to 1.2% for the CNN in a --control run, cancels too). Prints
///  - the placement-balanced ratio dist / bare (balanced_ratio()) with its two-stage bootstrap 95%
///    confidence interval, and whether the <= 1% target is shown (upper end <= 1.01), missed (lower end
///    > 1.01) or neither;
///  - the plain median of all per-pair ratios, the medians per slot, and the mean time per step of each;
/// then the per-round medians and the per-pair ratios on two more lines. With `control` the other side
/// runs a second bare loop (A/A test: the resolution and bias of the harness itself; its interval should
/// contain 1) and the lines start with overhead_control instead of overhead.
void bench_overhead(const Setup& s, int pairs, int rounds, bool control) {
    std::vector<OverheadRound> results(static_cast<std::size_t>(rounds));
    std::vector<double> ratios, bare_rates, other_rates;
    double bare_s = 0.0, other_s = 0.0;
    bool identical = true;
    int pair = 0;
    for (int k = 0; k < rounds; ++k) {
        OverheadRound& round = results[std::size_t(k)];
        round.dist_slot = k % 2;
        OverheadPair p(s, control, round.dist_slot);
        auto other_step = [&] {
            if (control)
                p.control_step();
            else
                p.dist_step();
        };
        for (int i = 0; i < std::max(5, s.steps); ++i) {
            // In slot order, so that buffers allocated lazily by the first steps are allocated in the same
            // order (slot 0 first) in every round.
            if (round.dist_slot == 0) other_step();
            p.bare_step();
            if (round.dist_slot == 1) other_step();
        }
        const int n = pairs / rounds + (k < pairs % rounds ? 1 : 0);
        for (int r = 0; r < n; ++r, ++pair) {
            double b = 0.0, d = 0.0;
            if (pair % 2 == 0) {
                b = time_steps([&] { p.bare_step(); }, s.steps);
                d = time_steps(other_step, s.steps);
            } else {
                d = time_steps(other_step, s.steps);
                b = time_steps([&] { p.bare_step(); }, s.steps);
            }
            bare_s += b;
            other_s += d;
            bare_rates.push_back(double(s.steps) * double(s.batch) / b);
            other_rates.push_back(double(s.steps) * double(s.batch) / d);
            round.ratios.push_back(d / b);
            ratios.push_back(d / b);
        }
        identical = identical && p.same_parameters();
    }
    std::vector<const OverheadRound*> group[2];
    for (const auto& r : results)
        group[r.dist_slot].push_back(&r);
    std::vector<double> pool;
    const double balanced = balanced_ratio(group[0], group[1], pool);
    const double slot_median[2] = {pooled_median(group[0], pool), pooled_median(group[1], pool)};
    const auto [lo, hi] = bootstrap_balanced_ci(results, 0.95, 10000, 20240601);
    const char* verdict = hi <= 1.01 ? "shown" : lo > 1.01 ? "missed" : "inconclusive";
    const double steps = double(pairs) * double(s.steps);
    const auto slower = std::count_if(ratios.begin(), ratios.end(), [](double x) { return x > 1.0; });
    const char* tag = control ? "overhead_control" : "overhead";
    const char* other = control ? "bare2" : "dist";
    std::printf(
        "%s %s pairs=%d rounds=%d steps_per_half=%d ratio_balanced=%.4f ci95_lo=%.4f ci95_hi=%.4f "
        "target_1pct=%s ratio_median=%.4f ratio_median_%s_slot0=%.4f ratio_median_%s_slot1=%.4f "
        "bare_ms_per_step=%.4f %s_ms_per_step=%.4f ratio_of_means=%.4f pairs_%s_slower=%ld bare_median=%.1f "
        "%s_median=%.1f params_identical=%d\n",
        tag, s.model.c_str(), pairs, rounds, s.steps, balanced, lo, hi, control ? "n/a" : verdict,
        median(ratios), other, slot_median[0], other, slot_median[1], 1e3 * bare_s / steps, other,
        1e3 * other_s / steps, other_s / bare_s, other, long(slower), median(bare_rates), other,
        median(other_rates), int(identical));
    std::printf("%s_rounds %s", tag, s.model.c_str());
    for (const auto& r : results)
        std::printf(" slot%d:%.4f", r.dist_slot, r.ratios.empty() ? 0.0 : median(r.ratios));
    std::printf("\n%s_ratios %s ", tag, s.model.c_str());
    for (std::size_t i = 0; i < ratios.size(); ++i)
        std::printf(i ? ",%.4f" : "%.4f", ratios[i]);
    std::printf("\n");
    std::fflush(stdout);
}

/// The three sides that bench_compare and bench_budget time against each other on identical models and
/// data: the bare local step, and DistOptimizer<Comm> without and with overlap.
template <class Comm>
struct CompareSides {
    Side bare;
    DistRun<Comm> plain, overlapped;

    CompareSides(const Setup& s, const dtrain::SyncOptions& base, int rank)
        : bare(s, rank), plain(s, options(base, false), rank), overlapped(s, options(base, true), rank) {}

    /// A few untimed steps of each side.
    void warm_up(const Setup& s) {
        for (int i = 0; i < std::max(3, s.steps / 5); ++i) {
            bare.bare_step();
            plain.step();
            overlapped.step();
        }
    }

private:
    static dtrain::SyncOptions options(dtrain::SyncOptions o, bool overlap) {
        o.overlap = overlap;
        return o;
    }
};

/// Any number of ranks: alternating repetitions of (a) the bare local step on every rank (no communication),
/// (b) DistOptimizer<Comm> without and (c) with overlap, on identical models and data; prints the medians of
/// the per-round time ratios, so slow machine-load drifts cancel. bare/dist is the in-process scaling
/// efficiency (every rank computes concurrently in (a) too, so memory-bandwidth sharing is factored out).
template <class Comm>
void bench_compare(const std::string& policy, const Setup& s, const dtrain::SyncOptions& base, int rank,
                   int size) {
    const std::size_t bucket_bytes = base.bucket_bytes;
    CompareSides<Comm> sides(s, base, rank);
    auto& plain = sides.plain;
    auto& overlapped = sides.overlapped;
    auto bare_step = [&] { sides.bare.bare_step(); };
    sides.warm_up(s);
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

/// Seconds per step of `steps` calls of `step` run by rank 0 ALONE while the other ranks sleep (they wait
/// for a nonblocking barrier, testing it once a millisecond, so they take next to no CPU): the one-rank
/// speed measured inside the multi-rank job. Collective; every rank returns rank 0's figure.
template <class Step>
double solo_seconds_per_step(Step&& step, int steps, int rank) {
    MPI_Barrier(MPI_COMM_WORLD);
    double sec = rank == 0 ? time_steps(step, steps) / steps : 0.0;
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    for (int done = 0; !done;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (!done && rank != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    MPI_Bcast(&sec, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return sec;
}

/// Seconds per step of `steps` calls of `step` on every rank at once, between barriers (rank 0's clock,
/// so the slowest rank's time). Collective.
template <class Step>
double all_seconds_per_step(Step&& step, int steps) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i)
        step();
    MPI_Barrier(MPI_COMM_WORLD);
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / steps;
    MPI_Bcast(&sec, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return sec;
}

/// --budget (two or more ranks): where the scaling efficiency goes, every factor measured in the same
/// rounds of one program. Per round, interleaved: (solo) rank 0's bare local step while the other ranks
/// sleep = the one-rank time T1; (both) the bare local step on every rank, no communication = T_both;
/// (reduce) only the blocking all-reduce of every gradient bucket on every rank, on a zero buffer of the
/// model's size = T_red; and the full DistOptimizer<Comm> step without and with overlap = T_dist. Prints
/// the medians over rounds of
///   efficiency = T1 / T_dist (the scaling efficiency with the one-rank time of the same round),
///   ceiling = T1 / T_both (what running the ranks side by side costs before any communication),
///   comm = T_both / (T_both + T_red) (what the reduction costs if it hides behind nothing),
///   bound = ceiling x comm = T1 / (T_both + T_red), the efficiency to expect when no CPU is idle to
///   overlap the reduction with (one rank per core), and residual = efficiency / bound (waiting for the
///   slowest rank at every step, interference between compute and communication, and any overlap gain).
template <class Comm>
void bench_budget(const std::string& policy, const Setup& s, const dtrain::SyncOptions& base, int rank,
                  int size) {
    const std::size_t bucket_bytes = base.bucket_bytes;
    CompareSides<Comm> sides(s, base, rank);
    auto& plain = sides.plain;
    auto& overlapped = sides.overlapped;
    auto bare_step = [&] { sides.bare.bare_step(); };
    std::vector<float> zeros(plain.model.num_parameters(), 0.0f);
    // The all-reduce alone in the form --budget-reduce names: the buckets back to back as DistOptimizer
    // runs them, the same with a barrier before each bucket, or the whole gradient in one call.
    const std::string form = s.budget_reduce;
    auto reduce_step = [&] {
        if (form == "whole") {
            plain.opt->comm().allreduce_sum(dtrain::Span<float>(zeros.data(), zeros.size()));
            return;
        }
        for (const dtrain::Bucket& b : plain.opt->buckets()) {
            if (form == "barrier") MPI_Barrier(MPI_COMM_WORLD);
            plain.opt->comm().allreduce_sum(dtrain::Span<float>(zeros.data() + b.offset, b.size));
        }
    };
    for (int i = 0; i < std::max(3, s.steps / 5); ++i)
        reduce_step();
    sides.warm_up(s);
    std::vector<double> eff0, eff1, ceiling, comm, bound, residual, t1s, treds, boths;
    for (int r = 0; r < s.reps; ++r) {
        // Alternate the order of the measurements between rounds so drifts within a round cancel.
        double t1 = 0, both = 0, red = 0, d0 = 0, d1 = 0;
        auto measure = [&](int which) {
            switch (which) {
                case 0:
                    t1 = solo_seconds_per_step(bare_step, s.steps, rank);
                    break;
                case 1:
                    both = all_seconds_per_step(bare_step, s.steps);
                    break;
                case 2:
                    red = all_seconds_per_step(reduce_step, s.steps);
                    break;
                case 3:
                    d0 = all_seconds_per_step([&] { plain.step(); }, s.steps);
                    break;
                default:
                    d1 = all_seconds_per_step([&] { overlapped.step(); }, s.steps);
                    break;
            }
        };
        for (int k = 0; k < 5; ++k)
            measure(r % 2 == 0 ? k : 4 - k);
        eff0.push_back(t1 / d0);
        eff1.push_back(t1 / d1);
        ceiling.push_back(t1 / both);
        comm.push_back(both / (both + red));
        bound.push_back(t1 / (both + red));
        residual.push_back(t1 / d1 / (t1 / (both + red)));
        t1s.push_back(t1);
        treds.push_back(red);
        boths.push_back(both);
    }
    if (rank == 0) {
        std::printf(
            "budget %s %s ranks=%d bucket_bytes=%zu rounds=%d eff_no_overlap=%.4f eff_overlap=%.4f "
            "(min %.3f max %.3f) ceiling=%.4f comm=%.4f bound=%.4f residual_overlap=%.4f t1_ms=%.3f "
            "reduce_ms=%.3f both_ms=%.3f grad_bytes=%zu budget_reduce=%s\n",
            s.model.c_str(), policy.c_str(), size, bucket_bytes, s.reps, median(eff0), median(eff1),
            *std::min_element(eff1.begin(), eff1.end()), *std::max_element(eff1.begin(), eff1.end()),
            median(ceiling), median(comm), median(bound), median(residual), 1e3 * median(t1s),
            1e3 * median(treds), 1e3 * median(boths), sizeof(float) * zeros.size(), form.c_str());
        std::fflush(stdout);
    }
}

[[noreturn]] void usage(const std::string& error) {
    if (!error.empty()) std::cerr << "bench_train_dist: " << error << "\n";
    std::cerr
        << "usage: bench_train_dist [--model cnn|mlp] [--policies collective,ring,naive] [--overlap 0,1]\n"
           "         [--bucket-bytes B] [--steps N] [--reps R] [--batch B] [--overhead [--control]\n"
           "         [--rounds K]] [--overhead-count [--warmup W]] [--compare] [--funneled]\n"
           "         [--timeline trace.json] [--budget [--budget-reduce buckets|barrier|whole]]\n"
           "         [--compression none|fp16|bf16|topk|powersgd]\n"
           "         [--topk-ratio R] [--powersgd-rank R] [--powersgd-start S]\n"
           "  --compression     SyncOptions::compression of every DistOptimizer (default none); powersgd\n"
           "                    registers PowerSgdHook instead (per-policy results only)\n"
           "  --powersgd-rank   with --compression powersgd: rank of the approximation (default 1)\n"
           "  --powersgd-start  with --compression powersgd: plain all-reduce steps first (default 10)\n"
           "  --topk-ratio      with --compression topk: share of each gradient bucket sent (default 0.01)\n"
           "  --budget          2+ ranks: per round, rank 0's bare step alone, the bare step on every rank,\n"
           "                    the gradient all-reduce alone and the DistOptimizer step; prints the\n"
           "                    efficiency and its factors (ceiling, comm, bound; see the source)\n"
           "  --budget-reduce   with --budget, the form of the all-reduce alone: buckets (back to back, as\n"
           "                    DistOptimizer runs them; default), barrier (a barrier before each bucket)\n"
           "                    or whole (the whole gradient in one call)\n"
           "  --overhead        one rank: R alternating pairs of N bare / N DistOptimizer steps in K rounds\n"
           "                    (default R/20 within 2..20) with the two models' roles swapped every round;\n"
           "                    median time ratio with a bootstrap 95% confidence interval\n"
           "  --control         with --overhead: a second bare loop instead of DistOptimizer (A/A test)\n"
           "  --overhead-count  one rank: W warm-up steps of each, then N bare and N DistOptimizer steps\n"
           "                    in overhead_count_bare_loop / overhead_count_dist_loop (for callgrind)\n";
    std::exit(error.empty() ? 0 : 2);
}

long parse_long(const std::string& flag, const char* v, long min) {
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    if (!v[0] || *end || x < min)
        usage(flag + " needs an integer >= " + std::to_string(min) + ", got '" + v + "'");
    return x;
}

double parse_double(const std::string& flag, const char* v) {
    char* end = nullptr;
    const double x = std::strtod(v, &end);
    if (!v[0] || *end) usage(flag + " needs a number, got '" + v + "'");
    return x;
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
    dtrain::SyncOptions base;  // bucket_bytes, compression and topk_ratio of every DistOptimizer
    bool topk_ratio_given = false, psgd_given = false;
    s.psgd.start_iter = 10;
    bool overhead = false, overhead_count = false, overhead_control = false, compare = false, budget = false;
    int warmup = 3, rounds = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--help" || a == "-h") usage("");
        if (a == "--overhead") {
            overhead = true;
            continue;
        }
        if (a == "--overhead-count") {
            overhead_count = true;
            continue;
        }
        if (a == "--control") {
            overhead_control = true;
            continue;
        }
        if (a == "--funneled") continue;
        if (a == "--compare") {
            compare = true;
            continue;
        }
        if (a == "--budget") {
            budget = true;
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
            base.bucket_bytes = std::size_t(parse_long(a, argv[++i], 0));
        else if (a == "--compression") {
            try {
                s.powersgd = std::string(argv[i + 1]) == "powersgd";
                if (s.powersgd) {
                    ++i;
                    continue;
                }
                base.compression = dtrain::compression_from_name(argv[++i]);
            } catch (const dtrain::Error& e) {
                usage(std::string("--compression: ") + e.what());
            }
        } else if (a == "--topk-ratio") {
            base.topk_ratio = parse_double(a, argv[++i]);
            topk_ratio_given = true;
        } else if (a == "--powersgd-rank") {
            s.psgd.rank = std::size_t(parse_long(a, argv[++i], 1));
            psgd_given = true;
        } else if (a == "--powersgd-start") {
            s.psgd.start_iter = std::uint64_t(parse_long(a, argv[++i], 0));
            psgd_given = true;
        } else if (a == "--steps")
            s.steps = int(parse_long(a, argv[++i], 1));
        else if (a == "--reps")
            s.reps = int(parse_long(a, argv[++i], 1));
        else if (a == "--timeline")
            s.timeline = argv[++i];
        else if (a == "--rounds")
            rounds = int(parse_long(a, argv[++i], 2));
        else if (a == "--warmup")
            warmup = int(parse_long(a, argv[++i], 0));
        else if (a == "--batch")
            s.batch = std::size_t(parse_long(a, argv[++i], 1));
        else if (a == "--budget-reduce") {
            s.budget_reduce = argv[++i];
            if (s.budget_reduce != "buckets" && s.budget_reduce != "barrier" && s.budget_reduce != "whole")
                usage("--budget-reduce needs buckets, barrier or whole, got '" + s.budget_reduce + "'");
        } else
            usage("unknown flag " + a);
    }
    if (s.model != "cnn" && s.model != "mlp") usage("unknown model '" + s.model + "' (known: cnn, mlp)");
    if (topk_ratio_given && base.compression != dtrain::Compression::TopK)
        usage("--topk-ratio applies to --compression topk only");
    if (psgd_given && !s.powersgd)
        usage("--powersgd-rank and --powersgd-start apply to --compression powersgd only");
    if (s.powersgd && (compare || budget || overhead || overhead_count))
        usage("--compression powersgd applies to the per-policy results only");
    if (!(base.topk_ratio > 0.0 && base.topk_ratio <= 1.0))
        usage("--topk-ratio must be in (0, 1], got " + std::to_string(base.topk_ratio));
    if (overhead || overhead_count) {
        if (env.size() != 1) usage("--overhead and --overhead-count need exactly one rank");
        if (overhead_count)
            bench_overhead_count(s, warmup);
        else if (s.reps < 2)
            usage("--overhead needs --reps >= 2 (pairs)");
        else
            bench_overhead(s, s.reps, std::min(s.reps, rounds > 0 ? rounds : std::clamp(s.reps / 20, 2, 20)),
                           overhead_control);
        return 0;
    }
    if (budget && env.size() < 2) usage("--budget needs at least two ranks");
    if (compare || budget) {
        for (const auto& p : dtrain::bench::split(policies)) {
            with_policy(p, [&](auto tag) {
                using Comm = typename decltype(tag)::type;
                if (budget)
                    bench_budget<Comm>(p, s, base, env.rank(), env.size());
                else
                    bench_compare<Comm>(p, s, base, env.rank(), env.size());
            });
        }
        return 0;
    }
    std::vector<bool> overlap_values;  // checked before anything runs: a typo must not measure "off" twice
    for (const auto& ov : dtrain::bench::split(overlaps)) {
        if (ov != "0" && ov != "1" && ov != "off" && ov != "on")
            usage("--overlap takes a list of 0/off and 1/on, got '" + ov + "' in '" + overlaps + "'");
        overlap_values.push_back(ov == "1" || ov == "on");
    }
    for (const bool overlap : overlap_values) {
        dtrain::SyncOptions o = base;
        o.overlap = overlap;
        for (const auto& p : dtrain::bench::split(policies)) {
            with_policy(p, [&](auto tag) {
                using Comm = typename decltype(tag)::type;
                bench_policy<Comm>(p, s, o, env.rank(), env.size());
            });
        }
    }
    return 0;
}

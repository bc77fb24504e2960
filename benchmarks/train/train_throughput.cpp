// Single-process throughput of the training step (forward, loss, backward, SGD step) and of inference
// (Model::infer(): the forward pass in eval mode) for the SINGA CNN and the 784-512-256-10 MLP at batch 64
// and the Needle ResNet9 at batch 128 (CIFAR-shaped input), next to the machine's own single-thread sgemm
// rate: on a 1024^3 product and on every GEMM the model's Conv2d and Dense layers run (forward, weight
// gradient, input gradient), with their exact shapes and transposes.
//
// Usage: OPENBLAS_NUM_THREADS=1 bench_train_throughput [--models cnn,mlp,resnet9] [--modes train,infer]
//                                                      [--steps N] [--reps R] [--batch B] [--no-gemm]
//                                                      [--no-avx512-gemm]
// Output, one record per line (whitespace-separated, for compare.sh):
//   sgemm 1024x1024x1024 <GFLOP/s>                                      the peak the fractions refer to
//   gemm <model> <layer#> <pass> <M>x<N>x<K> <NN|NT|TN|TT> <GFLOP/s>      each layer GEMM at batch B, as run
//                                                      (per sample or chunk, times x per step, on GemmConv)
//   flop <model> train|infer <FLOP per sample>                          nominal Conv2d/Dense FLOP (2 per MAC)
//   gemm_bound <model> train|infer <samples/s>     the step if it were only its products, at GEMM rates
//   dtrain <model> train|infer <samples/s> <GFLOP/s> <fraction of the 1024^3 rate>
//   peak_rss_mib <MiB>                                                  of the whole process
// GFLOP/s and fractions use the nominal FLOP, so a Conv2d that skips taps seeing only padding (ResNet9's
// 1x1 maps) counts the skipped work as done, as FLOP counters and vendor libraries report it.
// --batch overrides every model's batch (default 64, ResNet9 128). Rates are medians over R repetitions.
// --no-avx512-gemm switches the AVX-512 GEMM kernel off (DTRAIN_KERNELS=avx2): Dense<float> then runs
// BLAS sgemm and Conv2d<float> its AVX2 kernels, as on a CPU without AVX-512F (the before of a change).
#include <dtrain/dtrain.hpp>
#include <support/cli.hpp>
#include <support/stats.hpp>
#include <support/zoo_models.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

namespace {

using dtrain::bench::median;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// One GEMM of a layer: C[M, N] = op(A) op(B) with op(A) M x K and op(B) K x N, contiguous row-major.
struct Gemm {
    std::string pass;  // fwd, dW or dX
    std::size_t m, n, k;
    bool ta, tb;
    double nominal =
        1.0;              // nominal FLOP / executed FLOP (> 1 when a Conv2d skips taps that see only padding)
    bool direct = false;  // the layer computes this product with its direct kernels, not a GEMM
    bool avx512 = false;  // Dense<float> or GemmConv computes it with detail::gemm_avx512, not BLAS
    bool accumulate = false;  // gemm_avx512 adds to C (a weight gradient, a GemmConv forward from the bias)
    std::size_t times = 1;    // calls per step: GemmConv runs one per sample (dW: per chunk of samples)
    // FLOP of one call, and of the product's `times` calls in a step.
    double call_flop() const { return 2.0 * double(m) * double(n) * double(k); }
    double flop() const { return call_flop() * double(times); }
};

// Median GFLOP/s of `g` over `reps` timings of at least ~50 ms each.
double gemm_rate(const Gemm& g, int reps) {
    std::vector<float> a(g.m * g.k), b(g.k * g.n), c(g.m * g.n);
    dtrain::Rng rng(7);
    for (auto* v : {&a, &b})
        for (auto& x : *v)
            x = float(rng.uniform()) - 0.5f;
    const std::size_t lda = g.ta ? g.m : g.k, ldb = g.tb ? g.k : g.n;
    const bool dense_fwd = g.avx512 && g.tb;  // Dense's forward pass: A = x [batch, in], B = W [out, in]
    std::vector<float> xt(dense_fwd ? g.k * g.m : 0), ot(dense_fwd ? g.m * g.n : 0), bias(g.n);
    auto once = [&] {
        if (dense_fwd)
            return dtrain::detail::dense_forward_avx512(g.m, g.k, g.n, a.data(), b.data(), bias.data(),
                                                        xt.data(), ot.data(), c.data());
        if (g.avx512)
            return dtrain::detail::gemm_avx512(g.accumulate, g.m, g.n, g.k, a.data(), g.ta ? 1 : g.k,
                                               g.ta ? g.m : 1, b.data(), g.n, c.data(), g.n);
        dtrain::detail::gemm(g.ta, g.tb, g.m, g.n, g.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(),
                             g.n);
    };
    once();
    const int iters = std::max(1, int(5e-2 * 50e9 / g.call_flop()));  // ~50 ms at 50 GFLOP/s
    std::vector<double> rates;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = Clock::now();
        for (int i = 0; i < iters; ++i)
            once();
        rates.push_back(g.call_flop() * iters / seconds_since(t0) / 1e9);
    }
    return median(rates);
}

// Appends the GEMMs of `layer` (and of a Residual's children) for input shape `in` at batch n;
// `grad_in` says whether backward computes the layer's input gradient.
void collect_gemms(const dtrain::Layer<float>& layer, const dtrain::Shape& in, std::size_t n, bool grad_in,
                   std::vector<std::pair<std::string, Gemm>>& out) {
    if (const auto* c = dynamic_cast<const dtrain::Conv2d<float>*>(&layer)) {
        const dtrain::Shape o = c->output_shape(in);
        const std::size_t np = n * o[1] * o[2];
        // The GEMMs Conv2d runs: K counts only the kernel taps that meet the input (see Conv2d), while the
        // FLOP count is the nominal one (every tap), as FLOP counters report convolutions.
        const dtrain::detail::ConvGeometry geo = c->geometry(in[1], in[2]);
        const std::size_t rows = geo.col_rows(), nominal = geo.c * geo.kh * geo.kw, co = c->out_channels();
        const double f = double(nominal) / double(rows);
        // Conv2d's forms (see its class comment): the transposed forward product for <= 32 output channels,
        // the weight gradient always as dW^T.
        // A stride-1, unpadded Conv2d<float> runs its forward pass, its input gradient and, when thin, its
        // weight gradient with direct kernels on AVX2: the product is listed with its GEMM shape, marked
        // "direct".
        const std::string algo = dtrain::choose_conv_algorithm<float>({geo, n, co}).name;
        const bool dfwd = algo.rfind("direct", 0) == 0;  // DirectConv, DirectConvBlasWeights
        const bool ddw = algo == dtrain::DirectConv::label;
        const bool ddx = dfwd;
        if (algo == dtrain::GemmAvx512Conv::label) {  // GemmConv: per sample, dW per chunk of samples
            const std::size_t pos = o[1] * o[2],
                              chunk = dtrain::detail::col_chunk_samples(n, sizeof(float) * rows * pos);
            out.push_back({c->name(), {"fwd", co, pos, rows, false, false, f, false, true, true, n}});
            out.push_back(
                {c->name(), {"dW", rows, co, chunk * pos, false, false, f, false, true, true, n / chunk}});
            if (n % chunk != 0)
                out.push_back(
                    {c->name(), {"dW", rows, co, n % chunk * pos, false, false, f, false, true, true}});
            if (grad_in)
                out.push_back({c->name(), {"dX", rows, pos, co, true, false, f, false, true, false, n}});
            return;
        }
        if (co <= 32)
            out.push_back({c->name(), {"fwd", np, co, rows, true, true, f, dfwd}});
        else
            out.push_back({c->name(), {"fwd", co, np, rows, false, false, f, dfwd}});
        out.push_back({c->name(), {"dW", rows, co, np, false, true, f, ddw}});
        if (grad_in) out.push_back({c->name(), {"dX", rows, np, co, true, false, f, ddx}});
    } else if (const auto* d = dynamic_cast<const dtrain::Dense<float>*>(&layer)) {
        const std::size_t fi = d->in_features(), fo = d->out_features();
        const bool k512 = dtrain::detail::gemm_avx512_available();
        out.push_back({d->name(), {"fwd", n, fo, fi, false, true, 1.0, false, k512}});
        out.push_back({d->name(), {"dW", fo, fi, n, true, false, 1.0, false, k512, true}});
        if (grad_in) out.push_back({d->name(), {"dX", n, fi, fo, false, false, 1.0, false, k512}});
    } else if (const auto* r = dynamic_cast<const dtrain::Residual<float>*>(&layer)) {
        dtrain::Shape s = in;
        for (std::size_t i = 0; i < r->num_layers(); ++i) {
            collect_gemms(r->layer(i), s, n, true, out);
            s = r->layer(i).output_shape(s);
        }
    }
}

struct Result {
    double samples_s, flop_per_sample;
};

// Median samples/s of `steps` training steps (or forward passes, train == false) over `reps` repetitions.
double run_steps(dtrain::Model<float>& model, dtrain::SGD<float>& opt, std::size_t batch, bool train,
                 int steps, int reps) {
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
    float sink = 0;
    auto step = [&] {
        if (!train) {
            sink += model.infer(x).data()[0];
            return;
        }
        model.zero_grad();
        loss.compute(model.forward(x), y, grad);
        model.backward(grad);
        opt.step(model.parameters(), model.gradients());
    };
    if (train)
        model.train();
    else
        model.eval();
    for (int i = 0; i < std::max(5, steps / 10); ++i)
        step();
    std::vector<double> rates;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = Clock::now();
        for (int i = 0; i < steps; ++i)
            step();
        rates.push_back(double(steps) * double(batch) / seconds_since(t0));
    }
    if (sink == 12345.f) std::puts("");  // keeps the forward passes observable
    return median(rates);
}

[[noreturn]] void usage(const std::string& error) {
    if (!error.empty()) std::cerr << "bench_train_throughput: " << error << "\n";
    std::cerr << "usage: bench_train_throughput [--models cnn,mlp,resnet9] [--modes train,infer] [--steps N] "
                 "[--reps R] [--batch B] [--no-gemm] [--no-avx512-gemm]\n";
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
    std::string models = "cnn,mlp,resnet9", modes = "train,infer";
    int steps = 100, reps = 5, batch = 0;
    bool gemms = true;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--help" || a == "-h") usage("");
        if (a == "--no-gemm") {
            gemms = false;
            continue;
        }
        if (a == "--no-avx512-gemm") {  // BLAS and the AVX2 kernels even where the AVX-512 kernel could run
            dtrain::detail::kernel_set() = dtrain::detail::KernelSet::avx2;
            continue;
        }
        if (i + 1 >= argc) usage("missing value after " + a);
        if (a == "--models")
            models = argv[++i];
        else if (a == "--modes")
            modes = argv[++i];
        else if (a == "--steps")
            steps = parse_int(a, argv[++i]);
        else if (a == "--reps")
            reps = parse_int(a, argv[++i]);
        else if (a == "--batch")
            batch = parse_int(a, argv[++i]);
        else
            usage("unknown flag " + a);
    }
    for (const auto& m : dtrain::bench::split(modes))
        if (m != "train" && m != "infer") usage("unknown mode '" + m + "' (known: train, infer)");
    const double peak = gemm_rate({"", 1024, 1024, 1024, false, false}, std::max(reps, 3));
    std::printf("sgemm 1024x1024x1024 %.1f\n", peak);
    for (const auto& name : dtrain::bench::split(models)) {
        if (!dtrain::bench::is_zoo_model(name))
            usage("unknown model '" + name + "' (known: cnn, mlp, resnet9)");
        dtrain::Model<float> model = dtrain::bench::zoo_model<float>(name, 0);
        std::size_t b = dtrain::bench::zoo_default_batch(name);
        const dtrain::SGDOptions so = dtrain::bench::zoo_sgd_options(name);
        if (batch > 0) b = std::size_t(batch);
        std::vector<std::pair<std::string, Gemm>> gs;
        dtrain::Shape in = model.input_shape();
        for (std::size_t i = 0; i < model.num_layers(); ++i) {
            collect_gemms(model.layer(i), in, b, i > 0, gs);
            in = model.layer_output_shape(i);
        }
        double flop_train = 0, flop_infer = 0, bound_train = 0, bound_infer = 0;
        for (std::size_t i = 0; i < gs.size(); ++i) {
            const Gemm& g = gs[i].second;
            const double rate = gemms ? gemm_rate(g, 3) : 0.0;
            if (gemms)
                std::printf("gemm %s %zu %s %zux%zux%zu %c%c %.1f  # %s%s%s\n", name.c_str(), i,
                            g.pass.c_str(), g.m, g.n, g.k, g.ta ? 'T' : 'N', g.tb ? 'T' : 'N', rate,
                            gs[i].first.c_str(),
                            g.direct   ? " (runs direct, not as this GEMM)"
                            : g.avx512 ? " (AVX-512 kernel, as the layer runs it)"
                                       : "",
                            g.times > 1 ? (" x " + std::to_string(g.times) + " per step").c_str() : "");
            flop_train += g.flop() * g.nominal / double(b);
            if (gemms) bound_train += g.flop() / (rate * 1e9);
            if (g.pass == "fwd") {
                flop_infer += g.flop() * g.nominal / double(b);
                if (gemms) bound_infer += g.flop() / (rate * 1e9);
            }
        }
        dtrain::SGD<float> opt(so);
        for (const auto& mode : dtrain::bench::split(modes)) {
            const bool train = mode == "train";
            const double flop = train ? flop_train : flop_infer;
            std::printf("flop %s %s %.0f\n", name.c_str(), mode.c_str(), flop);
            if (gemms)
                std::printf("gemm_bound %s %s %.1f\n", name.c_str(), mode.c_str(),
                            double(b) / (train ? bound_train : bound_infer));
            const double rate = run_steps(model, opt, b, train, steps, reps);
            const double gflops = rate * flop / 1e9;
            std::printf("dtrain %s %s %.1f %.2f %.3f\n", name.c_str(), mode.c_str(), rate, gflops,
                        gflops / peak);
            std::fflush(stdout);
        }
    }
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    std::printf("peak_rss_mib %.1f\n", double(ru.ru_maxrss) / 1024.0);
    return 0;
}

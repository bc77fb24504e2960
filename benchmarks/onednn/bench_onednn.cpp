// dtrain's own kernels side by side with oneDNN's primitives on the SINGA CNN, the 784-512-256-10 MLP and
// ResNet9 at batch 64, float, one thread: samples/s of the training step (forward, softmax cross-entropy,
// backward data and weights of every layer, SGD with momentum) and of inference (forward), interleaved in
// one process, medians over rounds; per-layer forward/backward times of both; a correctness check first:
// from the same initial weights and input, the first step's logits, gradients and updated weights of both
// sides, and each side's logits and gradients against the same step computed in double (dtrain's
// Model<double>).
//
// The oneDNN side (onednn_net.hpp) is written as oneDNN's own training example does it: every primitive
// and memory created once before timing, format_tag::any for activations and weights (oneDNN's blocked
// layouts), reorders only where two primitives want different layouts, ReLU fused into the convolution /
// inner product as a post-op and its backward computed from the fused output
// (eltwise_relu_use_dst_for_bwd), max pooling with its workspace, the inner product reading 4D activations
// directly (no flatten), batch normalisation with scale and shift and its ReLU fused (fuse_norm_relu), the
// residual adds as binary primitives, separate forward_inference primitives (weights reordered once,
// batch normalisation on the running statistics) for inference. Loss gradient and SGD are plain loops.
//
// Usage: bench_onednn [--models cnn,mlp,resnet9] [--rounds R] [--steps N] [--fma-peak GFLOPS] [--no-layers]
// --fma-peak: the core's FP32 FMA peak (bench_fma_peak's fma_peak line), for the "of peak" fractions.
// Each round runs, per model, N training steps of each side, then N forward passes of each (the side that
// goes first alternates between rounds); one warm-up round is not counted. One thread: oneDNN's OpenMP
// runtime is set to 1 thread (omp_set_num_threads) and OpenBLAS to 1 (dtrain::set_blas_threads).
#include <dtrain/dtrain.hpp>
#include <support/cli.hpp>
#include <support/stats.hpp>
#include <support/step_layer_times.hpp>
#include <support/zoo_models.hpp>

#include "onednn_net.hpp"

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

using dtrain::bench::Clock;
using dtrain::bench::OneDnnNet;
using dtrain::bench::seconds_since;

// Nominal FLOP per sample (2 per multiply-add) of the Conv2d and Dense layers: forward, and training
// (forward, weight gradient, input gradient except for the first layer). Nominal as benchmarks/train counts
// it: ResNet9's 3x3 convolutions on 1x1 maps count all nine taps, though eight meet only padding.
std::pair<double, double> flop_per_sample(const std::string& model) {
    // per layer: output values x multiply-adds per output value
    std::vector<double> macs{784.0 * 512, 512.0 * 256, 256.0 * 10};
    if (model == "cnn") macs = {20.0 * 24 * 24 * 25, 50.0 * 8 * 8 * 500, 800.0 * 500, 500.0 * 10};
    if (model == "resnet9")
        macs = {16.0 * 8 * 8 * 3 * 49,
                32.0 * 4 * 4 * 16 * 9,
                32.0 * 4 * 4 * 32 * 9,
                32.0 * 4 * 4 * 32 * 9,
                64.0 * 2 * 2 * 32 * 9,
                128.0 * 1 * 1 * 64 * 9,
                128.0 * 1 * 1 * 128 * 9,
                128.0 * 1 * 1 * 128 * 9,
                128.0 * 128,
                128.0 * 10};
    double f = 0, t = 0;
    for (std::size_t i = 0; i < macs.size(); ++i) {
        f += 2 * macs[i];
        t += 2 * macs[i] * (i == 0 ? 2 : 3);
    }
    return {t, f};
}

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    return "unknown";
}

const char* isa_name(dnnl::cpu_isa isa) {
    switch (isa) {
        case dnnl::cpu_isa::sse41:
            return "sse41";
        case dnnl::cpu_isa::avx:
            return "avx";
        case dnnl::cpu_isa::avx2:
            return "avx2";
        case dnnl::cpu_isa::avx2_vnni:
            return "avx2_vnni";
        case dnnl::cpu_isa::avx512_core:
            return "avx512_core";
        case dnnl::cpu_isa::avx512_core_vnni:
            return "avx512_core_vnni";
        case dnnl::cpu_isa::avx512_core_bf16:
            return "avx512_core_bf16";
        case dnnl::cpu_isa::avx512_core_amx:
            return "avx512_core_amx";
        default:
            return "other";
    }
}

double max_abs_diff(const float* a, const float* b, std::size_t n) {
    double m = 0;
    for (std::size_t i = 0; i < n; ++i)
        m = std::max(m, double(std::fabs(a[i] - b[i])));
    return m;
}

double max_abs(const float* a, std::size_t n) {
    double m = 0;
    for (std::size_t i = 0; i < n; ++i)
        m = std::max(m, double(std::fabs(a[i])));
    return m;
}

// Windows of a 2x2, stride-2 max pooling over `a` [n, c, h, w] whose two largest values are positive and
// within a relative 1e-5: where two libraries' forward roundings may pick different maxima and so send the
// window's gradient to different inputs (a legitimate difference of float results, not an error).
std::size_t pool_near_ties(const dtrain::Tensor<float>& a) {
    const auto& s = a.shape();
    std::size_t ties = 0;
    for (std::size_t p = 0; p < s[0] * s[1]; ++p)
        for (std::size_t h = 0; h + 1 < s[2]; h += 2)
            for (std::size_t w = 0; w + 1 < s[3]; w += 2) {
                const float* q = a.data() + (p * s[2] + h) * s[3] + w;
                float v[4] = {q[0], q[1], q[s[3]], q[s[3] + 1]};
                std::sort(v, v + 4);
                if (v[3] > 0 && v[3] - v[2] <= 1e-5f * v[3]) ++ties;
            }
    return ties;
}

// The model `name` ("cnn", "mlp" or "resnet9") of dtrain's zoo, initialised from seed 1.
template <class T>
dtrain::Model<T> make_model(const std::string& name) {
    return dtrain::bench::zoo_model<T>(name, 1);
}

// A layer with parameters and where they sit in the model's flat buffer.
struct ParamSlice {
    std::string name;
    std::size_t offset, size;
};

// The layers with parameters under `layer` (itself, or a Residual block's children one by one, named
// "res<block>/<child>"), in the flat buffer's order; `offset` is the layer's first parameter.
void param_slices(dtrain::Layer<float>& layer, std::size_t offset, int& blocks,
                  std::vector<ParamSlice>& out) {
    if (auto* r = dynamic_cast<dtrain::Residual<float>*>(&layer)) {
        const std::string prefix = "res" + std::to_string(++blocks) + "/";
        for (std::size_t i = 0; i < r->num_layers(); ++i) {
            std::vector<ParamSlice> child;
            param_slices(r->layer(i), offset + r->parameter_ranges()[i].offset, blocks, child);
            for (auto& c : child)
                out.push_back({prefix + c.name, c.offset, c.size});
        }
    } else if (layer.num_params() > 0) {
        out.push_back({layer.name(), offset, layer.num_params()});
    }
}

// A layer's name for the per-layer times: a Residual block by the number of its children.
std::string short_name(const dtrain::Layer<float>& layer) {
    if (auto* r = dynamic_cast<const dtrain::Residual<float>*>(&layer))
        return "Residual(" + std::to_string(r->num_layers()) + " layers)";
    return layer.name();
}

// Both sides of one model: dtrain's Model and the oneDNN training and inference nets, same weights, running
// statistics, input and labels.
struct Pair {
    std::string name;
    long batch;
    dtrain::Model<float> model;
    dtrain::SGD<float> opt;
    dtrain::SoftmaxCrossEntropy<float> loss;
    dtrain::Tensor<float> x, grad;
    dtrain::Labels y;
    OneDnnNet train, infer;
    float sink = 0;

    Pair(const std::string& m, long n, dtrain::SGDOptions so, dnnl::engine& eng, dnnl::stream& s)
        : name(m),
          batch(n),
          model(make_model<float>(m)),
          opt(so),
          train(m, n, true, eng, s),
          infer(m, n, false, eng, s) {
        dtrain::Rng rng(1);
        x = dtrain::Tensor<float>::from_shape(dtrain::batch_shape(std::size_t(n), model.input_shape()));
        for (auto& v : x)
            v = float(rng.uniform());
        y = dtrain::Labels::from_shape({std::size_t(n)});
        std::vector<int> labels;
        for (auto& v : y) {
            v = std::int32_t(rng.below(10));
            labels.push_back(int(v));
        }
        std::memcpy(train.input().get_data_handle(), x.data(), sizeof(float) * x.size());
        std::memcpy(infer.input().get_data_handle(), x.data(), sizeof(float) * x.size());
        train.set_training(labels, float(so.lr()), float(so.momentum()), float(so.weight_decay()));
        train.load(model.parameters().data(), model.state().data());
        infer.copy_weights(train);
    }

    void dtrain_train_step() {
        model.zero_grad();
        loss.compute(model.forward(x), y, grad);
        model.backward(grad);
        opt.step(model.parameters(), model.gradients());
    }
    void dtrain_infer_step() { sink += model.infer(x).data()[0]; }  // what predict() and evaluate() run

    // The first step of both from the same weights: logits, gradients and updated weights compared. One
    // forward pass per side: in training mode each pass updates BatchNorm's running statistics.
    void check() {
        const std::size_t nl = std::size_t(batch) * 10, np = model.num_parameters();
        model.train();
        const std::vector<float> w0(model.parameters().begin(), model.parameters().end());
        const std::vector<float> s0(model.state().begin(), model.state().end());
        model.zero_grad();
        const dtrain::Tensor<float>& out = model.forward(x);
        const std::vector<float> logits(out.begin(), out.end());
        loss.compute(out, y, grad);
        model.backward(grad);
        const std::vector<float> g(model.gradients().begin(), model.gradients().end());
        opt.step(model.parameters(), model.gradients());
        train.step();
        const std::vector<float> og = train.store(true), ow = train.store(false);
        std::printf(
            "check %s logits_max_abs_diff %.3g (max |logit| %.3g) grads_max_abs_diff %.3g (max |grad| "
            "%.3g) weights_after_step_max_abs_diff %.3g\n",
            name.c_str(), max_abs_diff(logits.data(), train.logits(), nl), max_abs(logits.data(), nl),
            max_abs_diff(g.data(), og.data(), np), max_abs(g.data(), np),
            max_abs_diff(model.parameters().data(), ow.data(), np));
        if (!s0.empty()) {
            const std::vector<float> os = train.store_state();
            std::printf("check %s running_stats_after_step_max_abs_diff %.3g (max |value| %.3g)\n",
                        name.c_str(), max_abs_diff(model.state().data(), os.data(), os.size()),
                        max_abs(model.state().data(), os.size()));
        }
        // the same step in double, from the same float weights and input: the reference for both sides
        dtrain::Model<double> md = make_model<double>(name);
        std::copy(w0.begin(), w0.end(), md.parameters().begin());
        std::copy(s0.begin(), s0.end(), md.state().begin());
        dtrain::Tensor<double> xd = dtrain::Tensor<double>::from_shape(x.shape()), gd;
        std::copy(x.begin(), x.end(), xd.begin());
        md.train();
        md.zero_grad();
        const dtrain::Tensor<double>& out64 = md.forward(xd);
        double ld = 0, lo = 0;
        for (std::size_t j = 0; j < nl; ++j) {
            ld = std::max(ld, std::fabs(double(logits[j]) - out64.data()[j]));
            lo = std::max(lo, std::fabs(double(train.logits()[j]) - out64.data()[j]));
        }
        std::printf("check %s logits max_abs_err vs float64: dtrain %.3g onednn %.3g\n", name.c_str(), ld,
                    lo);
        dtrain::SoftmaxCrossEntropy<double>().compute(out64, y, gd);
        md.backward(gd);
        const auto g64 = md.gradients();
        std::vector<ParamSlice> slices;
        int blocks = 0;
        for (std::size_t i = 0; i < model.num_layers(); ++i)
            param_slices(model.layer(i), model.parameter_ranges()[i].offset, blocks, slices);
        std::size_t width = 0;
        for (const auto& sl : slices)
            width = std::max(width, sl.name.size());
        for (const auto& sl : slices) {
            double ed = 0, eo = 0, m = 0;
            for (std::size_t j = sl.offset; j < sl.offset + sl.size; ++j) {
                ed = std::max(ed, std::fabs(double(g[j]) - g64[j]));
                eo = std::max(eo, std::fabs(double(og[j]) - g64[j]));
                m = std::max(m, std::fabs(g64[j]));
            }
            std::printf(
                "check %s grad %-*s max_abs %.3g, max_abs_err vs float64: dtrain %.3g onednn %.3g "
                "(dtrain-onednn %.3g)\n",
                name.c_str(), int(width), sl.name.c_str(), m, ed, eo,
                max_abs_diff(g.data() + sl.offset, og.data() + sl.offset, sl.size));
        }
        if (name == "cnn") {  // the inputs of the two MaxPool2d layers, from the same first-step weights
            dtrain::Model<float> m0 = make_model<float>(name);
            std::copy(w0.begin(), w0.end(), m0.parameters().begin());
            dtrain::Tensor<float> a = x, b;
            std::printf("check %s max-pool windows with a near-tie (top two within 1e-5):", name.c_str());
            for (std::size_t i = 0; i < m0.num_layers(); ++i) {
                if (m0.layer(i).name().rfind("MaxPool2d", 0) == 0) std::printf(" %zu", pool_near_ties(a));
                m0.layer(i).forward(a, b, true);
                std::swap(a, b);
            }
            std::printf("\n");
        }
        infer.copy_weights(train);
        infer.step();
        model.eval();
        std::printf("check %s inference_logits_max_abs_diff %.3g\n", name.c_str(),
                    max_abs_diff(model.infer(x).data(), infer.logits(), nl));
        model.train();
    }

    // Per-layer times in microseconds per step, medians of `reps` x `steps`.
    void layer_times(int steps, int reps) {
        std::printf("layers %s onednn (per primitive group, us per step: fwd bwd)\n", name.c_str());
        std::map<std::pair<int, bool>, std::vector<double>> od;
        for (int r = 0; r < reps; ++r) {
            std::map<std::pair<int, bool>, double> t;
            for (int s = 0; s < steps; ++s)
                train.timed_step(t);
            for (auto& [k, v] : t)
                od[k].push_back(v / steps * 1e6);
        }
        auto med = [&](int l, bool b) { return od.count({l, b}) ? dtrain::bench::median(od[{l, b}]) : 0.0; };
        double tf = 0, tb = 0, bf = 0, bb = 0;  // bf, bb: the residual block so far
        bool in_block = false;                  // the layers of a block are named block/...
        for (int i = 0; i < int(train.num_layers()); ++i) {
            const auto kind = train.spec(std::size_t(i)).kind;
            if (kind == dtrain::bench::LayerSpec::Skip) {  // no operations of its own
                bf = bb = 0;
                in_block = true;
                continue;
            }
            std::printf("  onednn %2d %-22s fwd_us %8.1f bwd_us %8.1f\n", i,
                        ((in_block ? "block/" : "") + train.layer_name(std::size_t(i))).c_str(),
                        med(i, false), med(i, true));
            tf += med(i, false), tb += med(i, true);
            bf += med(i, false), bb += med(i, true);
            if (kind == dtrain::bench::LayerSpec::Add) {
                std::printf("  onednn    %-22s fwd_us %8.1f bwd_us %8.1f\n", "Residual block total", bf, bb);
                in_block = false;
            }
        }
        std::printf("  onednn loss_us %.1f sgd_us %.1f total fwd_us %.1f bwd_us %.1f\n", med(-1, true),
                    med(-2, true), tf, tb);

        std::printf("layers %s dtrain (per layer, us per step: fwd bwd)\n", name.c_str());
        const dtrain::bench::StepLayerTimes d =
            dtrain::bench::step_layer_times(model, opt, loss, x, y, steps, reps);
        tf = tb = 0;
        int width = 22;
        for (std::size_t i = 0; i < model.num_layers(); ++i)
            width = std::max(width, int(short_name(model.layer(i)).size()));
        for (std::size_t i = 0; i < model.num_layers(); ++i) {
            tf += d.forward[i], tb += d.backward[i];
            std::printf("  dtrain %2zu %-*s fwd_us %8.1f bwd_us %8.1f\n", i, width,
                        short_name(model.layer(i)).c_str(), d.forward[i], d.backward[i]);
        }
        std::printf("  dtrain zero_grad_us %.1f loss_us %.1f sgd_us %.1f total fwd_us %.1f bwd_us %.1f\n",
                    d.zero_grad, d.loss, d.update, tf, tb);
    }
};

// samples/s of `steps` calls of f.
template <class F>
double rate(F&& f, int steps, long batch) {
    const auto t0 = Clock::now();
    for (int i = 0; i < steps; ++i)
        f();
    return double(steps) * double(batch) / seconds_since(t0);
}

[[noreturn]] void usage(const std::string& error) {
    std::fprintf(stderr,
                 "bench_onednn: %s\nusage: bench_onednn [--models cnn,mlp,resnet9] [--rounds R] [--steps N] "
                 "[--fma-peak GFLOPS] [--no-layers]\n",
                 error.c_str());
    std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> models{"cnn", "mlp", "resnet9"};
    int rounds = 7, steps = 50;
    double peak = 0;
    bool layers = true;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has = i + 1 < argc;
        if (a == "--models" && has)
            models = dtrain::bench::split(argv[++i]);
        else if (a == "--rounds" && has)
            rounds = std::stoi(argv[++i]);
        else if (a == "--steps" && has)
            steps = std::stoi(argv[++i]);
        else if (a == "--fma-peak" && has)
            peak = std::stod(argv[++i]);
        else if (a == "--no-layers")
            layers = false;
        else
            usage("unknown or incomplete argument '" + a + "'");
    }
    for (const auto& m : models)
        if (!dtrain::bench::is_zoo_model(m)) usage("--models takes cnn, mlp and resnet9, got '" + m + "'");
    if (rounds < 1 || steps < 1) usage("--rounds and --steps must be at least 1");

    // One thread on both sides: oneDNN's OpenMP runtime and dtrain's BLAS.
    omp_set_num_threads(1);
    dtrain::set_blas_threads(1);
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream s(eng);
    const dnnl_version_t* v = dnnl_version();
    std::printf("cpu %s\n", cpu_model().c_str());
    std::printf("onednn %d.%d.%d (%s), cpu runtime %s, isa %s, omp threads %d\n", v->major, v->minor,
                v->patch, v->hash, v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other",
                isa_name(dnnl::get_effective_cpu_isa()), omp_get_max_threads());
    std::printf("dtrain kernels: %s (Dense: %s)\n",
                dtrain::detail::kernel_set_name(dtrain::detail::kernel_set()),
                dtrain::choose_dense_algorithm<float>({64, 784, 512}).name);
    std::printf("batch 64, rounds %d x %d steps, medians; fma_peak %.1f GFLOP/s\n", rounds, steps, peak);

    std::vector<std::unique_ptr<Pair>> pairs;
    for (const auto& m : models) {
        pairs.push_back(std::make_unique<Pair>(m, 64, dtrain::bench::zoo_sgd_options(m), eng, s));
        pairs.back()->check();
    }
    // warm-up, then interleaved rounds (order reversed every other round)
    std::map<std::string, std::vector<double>> r;
    for (int round = -1; round < rounds; ++round) {
        for (auto& p : pairs) {
            for (int mode = 0; mode < 2; ++mode) {
                const bool train = mode == 0;
                if (train)
                    p->model.train();
                else
                    p->model.eval();
                double d = 0, o = 0;
                auto run_d = [&] {
                    d = train ? rate([&] { p->dtrain_train_step(); }, steps, p->batch)
                              : rate([&] { p->dtrain_infer_step(); }, steps, p->batch);
                };
                auto run_o = [&] {
                    o = train ? rate([&] { p->train.step(); }, steps, p->batch)
                              : rate([&] { p->infer.step(); }, steps, p->batch);
                };
                if (round % 2 == 0)
                    run_d(), run_o();
                else
                    run_o(), run_d();
                if (round < 0) continue;
                const std::string key = p->name + (train ? " train" : " infer");
                r[key + " dtrain"].push_back(d);
                r[key + " onednn"].push_back(o);
                r[key + " ratio"].push_back(d / o);
            }
            p->model.train();
        }
    }
    std::printf("%-10s %-6s %12s %12s %7s %12s %12s %9s %9s\n", "model", "mode", "dtrain/s", "onednn/s",
                "ratio", "dtrain_GF/s", "onednn_GF/s", "dt_peak", "dnnl_peak");
    for (auto& p : pairs) {
        const auto [ft, fi] = flop_per_sample(p->name);
        for (const char* mode : {"train", "infer"}) {
            const std::string key = p->name + " " + mode;
            const double d = dtrain::bench::median(r[key + " dtrain"]),
                         o = dtrain::bench::median(r[key + " onednn"]);
            const double f = std::string(mode) == "train" ? ft : fi;
            const double gd = d * f / 1e9, go = o * f / 1e9;
            std::printf("%-10s %-6s %12.0f %12.0f %7.3f %12.1f %12.1f %9.3f %9.3f\n", p->name.c_str(), mode,
                        d, o, dtrain::bench::median(r[key + " ratio"]), gd, go, peak > 0 ? gd / peak : 0.0,
                        peak > 0 ? go / peak : 0.0);
        }
    }
    if (layers)
        for (auto& p : pairs)
            p->layer_times(steps, 5);
    if (pairs.size() == 12345) std::printf("%g\n", double(pairs[0]->sink));
    return 0;
}

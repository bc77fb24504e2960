// dtrain's own kernels side by side with oneDNN's primitives on the SINGA CNN and the 784-512-256-10 MLP
// at batch 64, float, one thread: samples/s of the training step (forward, softmax cross-entropy,
// backward data and weights of every layer, SGD with momentum) and of inference (forward), interleaved in
// one process, medians over rounds; per-layer forward/backward times of both; a correctness check first:
// from the same initial weights and input, the first step's logits, gradients and updated weights of both
// sides, and each side's gradients against the same step computed in double (dtrain's Model<double>).
//
// The oneDNN side is written as oneDNN's own training example does it: every primitive and memory created
// once before timing, format_tag::any for activations and weights (oneDNN's blocked layouts), reorders only
// where two primitives want different layouts, ReLU fused into the convolution / inner product as a
// post-op and its backward computed from the fused output (eltwise_relu_use_dst_for_bwd), max pooling
// with its workspace, the inner product reading the pooled 4D activations directly (no flatten), separate
// forward_inference primitives (weights reordered once) for inference. Loss gradient and SGD are plain loops.
//
// Usage: bench_onednn [--models cnn,mlp] [--rounds R] [--steps N] [--fma-peak GFLOPS] [--no-layers]
// --fma-peak: the core's FP32 FMA peak (bench_fma_peak's fma_peak line), for the "of peak" fractions.
// Each round runs, per model, N training steps of each side, then N forward passes of each (the side that
// goes first alternates between rounds); one warm-up round is not counted. One thread: oneDNN's OpenMP
// runtime is set to 1 thread (omp_set_num_threads) and OpenBLAS to 1 (dtrain::set_blas_threads).
#include <dtrain/dtrain.hpp>
#include <support/cli.hpp>
#include <support/stats.hpp>

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

using dnnl::memory;
using Clock = std::chrono::steady_clock;
using dt = memory::data_type;
using tag = memory::format_tag;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// One layer of the architecture as oneDNN runs it (ReLU fused into Conv and Dense).
struct Spec {
    enum Kind { Conv, Pool, Dense } kind;
    long oc = 0, k = 0;  // output channels / features, kernel (Conv; Pool: window = stride)
    bool relu = false;
};

std::vector<Spec> specs_of(const std::string& model) {
    if (model == "cnn")
        return {{Spec::Conv, 20, 5, true}, {Spec::Pool, 0, 2},          {Spec::Conv, 50, 5, true},
                {Spec::Pool, 0, 2},        {Spec::Dense, 500, 0, true}, {Spec::Dense, 10, 0, false}};
    return {{Spec::Dense, 512, 0, true}, {Spec::Dense, 256, 0, true}, {Spec::Dense, 10, 0, false}};
}

std::string spec_name(const Spec& s) {
    switch (s.kind) {
        case Spec::Conv:
            return "Conv2d(k=" + std::to_string(s.k) + ")" + (s.relu ? "+ReLU" : "");
        case Spec::Pool:
            return "MaxPool2d(" + std::to_string(s.k) + ")";
        default:
            return "Dense(" + std::to_string(s.oc) + ")" + (s.relu ? "+ReLU" : "");
    }
}

// A step as a list of operations, each tagged with its layer and pass for the per-layer times.
struct Op {
    int layer;  // -1: loss, -2: SGD
    bool bwd;
    std::function<void()> run;
};

// The oneDNN network: forward (training or inference), loss gradient, backward, SGD.
class OneDnnNet {
public:
    OneDnnNet(const std::string& model, long batch, bool training, dnnl::engine& eng, dnnl::stream& s)
        : eng_(eng), s_(s), specs_(specs_of(model)) {
        memory::dims dims = model == "cnn" ? memory::dims{batch, 1, 28, 28} : memory::dims{batch, 784};
        input_ = memory({dims, dt::f32, dims.size() == 4 ? tag::nchw : tag::nc}, eng_);
        const auto prop = training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
        memory cur = input_;
        for (std::size_t i = 0; i < specs_.size(); ++i) {
            const Spec& sp = specs_[i];
            L l;
            l.src_dims = dims;
            if (sp.kind == Spec::Pool) {
                dims = {dims[0], dims[1], dims[2] / sp.k, dims[3] / sp.k};
                l.pool = dnnl::pooling_forward::primitive_desc({prop,
                                                                dnnl::algorithm::pooling_max,
                                                                cur.get_desc(),
                                                                {dims, dt::f32, tag::any},
                                                                {sp.k, sp.k},
                                                                {sp.k, sp.k},
                                                                {0, 0},
                                                                {0, 0}},
                                                               eng_);
                l.src = cur;
                l.dst = memory(l.pool.dst_desc(), eng_);
                std::unordered_map<int, memory> args{{DNNL_ARG_SRC, l.src}, {DNNL_ARG_DST, l.dst}};
                if (training) {
                    l.ws = memory(l.pool.workspace_desc(), eng_);
                    args[DNNL_ARG_WORKSPACE] = l.ws;
                }
                add(int(i), false, dnnl::pooling_forward(l.pool), args);
            } else {
                memory::dims wd;
                if (sp.kind == Spec::Conv) {
                    wd = {sp.oc, dims[1], sp.k, sp.k};
                    dims = {dims[0], sp.oc, dims[2] - sp.k + 1, dims[3] - sp.k + 1};
                } else {
                    wd = dims;
                    wd[0] = sp.oc;
                    dims = {dims[0], sp.oc};
                }
                l.w_dims = wd;
                const memory::desc src_any(l.src_dims, dt::f32, tag::any), w_any(wd, dt::f32, tag::any),
                    b_md({sp.oc}, dt::f32, tag::x), dst_any(dims, dt::f32, tag::any);
                dnnl::primitive_attr attr;
                if (sp.relu) {
                    dnnl::post_ops po;
                    po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
                    attr.set_post_ops(po);
                }
                memory::desc src_md, w_md, dst_md;
                dnnl::primitive fwd;
                if (sp.kind == Spec::Conv) {
                    l.conv = dnnl::convolution_forward::primitive_desc({prop,
                                                                        dnnl::algorithm::convolution_direct,
                                                                        src_any,
                                                                        w_any,
                                                                        b_md,
                                                                        dst_any,
                                                                        {1, 1},
                                                                        {0, 0},
                                                                        {0, 0}},
                                                                       attr, eng_);
                    src_md = l.conv.src_desc(), w_md = l.conv.weights_desc(), dst_md = l.conv.dst_desc();
                    fwd = dnnl::convolution_forward(l.conv);
                } else {
                    l.ip = dnnl::inner_product_forward::primitive_desc({prop, src_any, w_any, b_md, dst_any},
                                                                       attr, eng_);
                    src_md = l.ip.src_desc(), w_md = l.ip.weights_desc(), dst_md = l.ip.dst_desc();
                    fwd = dnnl::inner_product_forward(l.ip);
                }
                l.src = need(cur, src_md, int(i), false);
                l.w = memory(w_md, eng_);
                l.b = memory(b_md, eng_);
                l.dst = memory(dst_md, eng_);
                add(int(i), false, fwd,
                    {{DNNL_ARG_SRC, l.src},
                     {DNNL_ARG_WEIGHTS, l.w},
                     {DNNL_ARG_BIAS, l.b},
                     {DNNL_ARG_DST, l.dst}});
            }
            cur = l.dst;
            layers_.push_back(std::move(l));
        }
        logits_ = need(cur, {dims, dt::f32, tag::nc}, int(specs_.size()) - 1, false);
        if (training) build_backward();
    }

    memory& input() { return input_; }
    const float* logits() const { return static_cast<const float*>(logits_.get_data_handle()); }
    std::size_t num_layers() const { return specs_.size(); }
    std::string layer_name(std::size_t i) const { return spec_name(specs_[i]); }

    /// Sets the labels and SGD settings of the training step.
    void set_training(const std::vector<int>& labels, float lr, float momentum, float weight_decay) {
        labels_ = labels, lr_ = lr, mom_ = momentum, wd_ = weight_decay;
    }

    /// Loads weights and biases from dtrain's flat parameter buffer (PyTorch's layouts, layer order).
    void load(const float* params) {
        for (auto& l : layers_) {
            if (!l.w) continue;
            const bool conv_like = l.w_dims.size() == 4;
            memory user({l.w_dims, dt::f32, conv_like ? tag::oihw : tag::oi}, eng_,
                        const_cast<float*>(params));
            dnnl::reorder(user, l.w).execute(s_, user, l.w);
            params += product(l.w_dims);
            const long nb = l.w_dims[0];
            std::memcpy(l.b.get_data_handle(), params, sizeof(float) * std::size_t(nb));
            params += nb;
        }
        s_.wait();
    }

    /// Writes the weights (or, `grads`, the gradients of the last step) back in dtrain's layout.
    std::vector<float> store(bool grads) {
        std::vector<float> out;
        for (auto& l : layers_) {
            if (!l.w) continue;
            const bool conv_like = l.w_dims.size() == 4;
            std::vector<float> w(std::size_t(product(l.w_dims)));
            memory user({l.w_dims, dt::f32, conv_like ? tag::oihw : tag::oi}, eng_, w.data());
            memory& src = grads ? l.dw : l.w;
            dnnl::reorder(src, user).execute(s_, src, user);
            s_.wait();
            out.insert(out.end(), w.begin(), w.end());
            const float* b = static_cast<const float*>((grads ? l.db : l.b).get_data_handle());
            out.insert(out.end(), b, b + l.w_dims[0]);
        }
        return out;
    }

    /// Copies the weights of a training net into this (inference) net, reordering to its layouts.
    void copy_weights(OneDnnNet& from) {
        for (std::size_t i = 0; i < layers_.size(); ++i) {
            if (!layers_[i].w) continue;
            dnnl::reorder(from.layers_[i].w, layers_[i].w).execute(s_, from.layers_[i].w, layers_[i].w);
            std::memcpy(layers_[i].b.get_data_handle(), from.layers_[i].b.get_data_handle(),
                        layers_[i].b.get_desc().get_size());
        }
        s_.wait();
    }

    /// One training step (or forward pass for an inference net).
    void step() {
        for (auto& op : ops_)
            op.run();
        s_.wait();
    }

    /// Adds the time of each operation of one step to `times` (key: layer, pass).
    void timed_step(std::map<std::pair<int, bool>, double>& times) {
        for (auto& op : ops_) {
            const auto t0 = Clock::now();
            op.run();
            s_.wait();
            times[{op.layer, op.bwd}] += seconds_since(t0);
        }
    }

private:
    struct L {
        memory::dims src_dims, w_dims;
        dnnl::convolution_forward::primitive_desc conv;
        dnnl::inner_product_forward::primitive_desc ip;
        dnnl::pooling_forward::primitive_desc pool;
        memory src, dst, w, b, ws, dw, db, dw_upd, mw, mb;  // dw_upd: dw in w's layout; mw, mb: momentum
    };

    static long product(const memory::dims& d) {
        long p = 1;
        for (long v : d)
            p *= v;
        return p;
    }

    void add(int layer, bool bwd, dnnl::primitive p, std::unordered_map<int, memory> args) {
        ops_.push_back({layer, bwd, [this, p, args]() mutable { p.execute(s_, args); }});
    }

    // `m` if it has layout `want`, else a memory of layout `want` filled by a reorder added to the step.
    memory need(const memory& m, const memory::desc& want, int layer, bool bwd) {
        if (m.get_desc() == want) return m;
        memory r(want, eng_);
        add(layer, bwd, dnnl::reorder(m, r), {{DNNL_ARG_FROM, m}, {DNNL_ARG_TO, r}});
        return r;
    }

    void build_backward() {
        const memory::desc ldesc = logits_.get_desc();
        dlogits_ = memory(ldesc, eng_);
        ops_.push_back({-1, true, [this] { loss_grad(); }});
        memory dcur = dlogits_;
        for (std::size_t j = layers_.size(); j-- > 0;) {
            L& l = layers_[j];
            const Spec& sp = specs_[j];
            const int i = int(j);
            if (sp.kind == Spec::Pool) {
                const memory dd = need(dcur, l.dst.get_desc(), i, true);
                dnnl::pooling_backward::primitive_desc pd({dnnl::algorithm::pooling_max,
                                                           l.src.get_desc(),
                                                           l.dst.get_desc(),
                                                           {sp.k, sp.k},
                                                           {sp.k, sp.k},
                                                           {0, 0},
                                                           {0, 0}},
                                                          eng_, l.pool);
                memory ds(pd.diff_src_desc(), eng_);
                add(i, true, dnnl::pooling_backward(pd),
                    {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_DIFF_SRC, ds}, {DNNL_ARG_WORKSPACE, l.ws}});
                dcur = ds;
                continue;
            }
            if (sp.relu) {  // in place on the output gradient, from the fused ReLU's output
                const memory dd = need(dcur, l.dst.get_desc(), i, true);
                const auto alg = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
                dnnl::eltwise_forward::primitive_desc hint(
                    {dnnl::prop_kind::forward_training, alg, l.dst.get_desc(), 0.f}, eng_);
                dnnl::eltwise_backward::primitive_desc pd({alg, dd.get_desc(), l.dst.get_desc(), 0.f}, eng_,
                                                          hint);
                add(i, true, dnnl::eltwise_backward(pd),
                    {{DNNL_ARG_DST, l.dst}, {DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_DIFF_SRC, dd}});
                dcur = dd;
            }
            const memory::desc src_any(l.src_dims, dt::f32, tag::any), w_any(l.w_dims, dt::f32, tag::any),
                b_md({sp.oc}, dt::f32, tag::x), dst_any(dcur.get_desc().dims(), dt::f32, tag::any);
            memory::desc bw_src, bw_ddst, bw_dw, bd_w, bd_ddst, bd_dsrc;
            dnnl::primitive bw, bd;
            if (sp.kind == Spec::Conv) {
                const auto alg = dnnl::algorithm::convolution_direct;
                dnnl::convolution_backward_weights::primitive_desc pw(
                    {alg, src_any, w_any, b_md, dst_any, {1, 1}, {0, 0}, {0, 0}}, eng_, l.conv);
                bw_src = pw.src_desc(), bw_ddst = pw.diff_dst_desc(), bw_dw = pw.diff_weights_desc();
                bw = dnnl::convolution_backward_weights(pw);
                if (j > 0) {
                    dnnl::convolution_backward_data::primitive_desc pdd(
                        {alg, src_any, w_any, dst_any, {1, 1}, {0, 0}, {0, 0}}, eng_, l.conv);
                    bd_w = pdd.weights_desc(), bd_ddst = pdd.diff_dst_desc(), bd_dsrc = pdd.diff_src_desc();
                    bd = dnnl::convolution_backward_data(pdd);
                }
            } else {
                dnnl::inner_product_backward_weights::primitive_desc pw({src_any, w_any, b_md, dst_any}, eng_,
                                                                        l.ip);
                bw_src = pw.src_desc(), bw_ddst = pw.diff_dst_desc(), bw_dw = pw.diff_weights_desc();
                bw = dnnl::inner_product_backward_weights(pw);
                if (j > 0) {
                    dnnl::inner_product_backward_data::primitive_desc pdd({src_any, w_any, dst_any}, eng_,
                                                                          l.ip);
                    bd_w = pdd.weights_desc(), bd_ddst = pdd.diff_dst_desc(), bd_dsrc = pdd.diff_src_desc();
                    bd = dnnl::inner_product_backward_data(pdd);
                }
            }
            l.dw = memory(bw_dw, eng_);
            l.db = memory(b_md, eng_);
            add(i, true, bw,
                {{DNNL_ARG_SRC, need(l.src, bw_src, i, true)},
                 {DNNL_ARG_DIFF_DST, need(dcur, bw_ddst, i, true)},
                 {DNNL_ARG_DIFF_WEIGHTS, l.dw},
                 {DNNL_ARG_DIFF_BIAS, l.db}});
            // the SGD update runs on the weights' layout
            l.dw_upd = need(l.dw, l.w.get_desc(), -2, true);
            l.mw = memory(l.w.get_desc(), eng_);
            l.mb = memory(b_md, eng_);
            if (j > 0) {
                memory ds(bd_dsrc, eng_);
                add(i, true, bd,
                    {{DNNL_ARG_DIFF_DST, need(dcur, bd_ddst, i, true)},
                     {DNNL_ARG_WEIGHTS, need(l.w, bd_w, i, true)},
                     {DNNL_ARG_DIFF_SRC, ds}});
                dcur = ds;
            }
        }
        ops_.push_back({-2, true, [this] { sgd(); }});
    }

    // Softmax cross-entropy gradient (softmax - one_hot) / batch, as dtrain's SoftmaxCrossEntropy.
    void loss_grad() {
        const auto d = logits_.get_desc().dims();
        const long n = d[0], c = d[1];
        const float* z = logits();
        float* g = static_cast<float*>(dlogits_.get_data_handle());
        for (long r = 0; r < n; ++r) {
            const float* zr = z + r * c;
            float* gr = g + r * c;
            const float mx = *std::max_element(zr, zr + c);
            double sum = 0;
            for (long j = 0; j < c; ++j)
                sum += std::exp(double(zr[j] - mx));
            for (long j = 0; j < c; ++j)
                gr[j] = float(std::exp(double(zr[j] - mx)) / sum / double(n));
            gr[labels_[std::size_t(r)]] -= 1.f / float(n);
        }
    }

    // SGD with momentum and weight decay (PyTorch's rule, as dtrain's SGD), on every parameter buffer.
    void sgd() {
        const bool first = steps_++ == 0;
        for (auto& l : layers_) {
            if (!l.w) continue;
            auto upd = [&](memory& p, memory& g, memory& m) {
                const std::size_t n = p.get_desc().get_size() / sizeof(float);
                float* __restrict pv = static_cast<float*>(p.get_data_handle());
                const float* __restrict gv = static_cast<const float*>(g.get_data_handle());
                float* __restrict mv = static_cast<float*>(m.get_data_handle());
                const float lr = lr_, mom = mom_, wd = wd_;
                dtrain::detail::with_avx2([&] {
                    if (first)
                        for (std::size_t k = 0; k < n; ++k) {
                            mv[k] = gv[k] + wd * pv[k];
                            pv[k] -= lr * mv[k];
                        }
                    else
                        for (std::size_t k = 0; k < n; ++k) {
                            mv[k] = mom * mv[k] + (gv[k] + wd * pv[k]);
                            pv[k] -= lr * mv[k];
                        }
                });
            };
            // (dw_upd's reorder, where dw's layout is not w's, is an earlier op of the step)
            upd(l.w, l.dw_upd, l.mw);
            upd(l.b, l.db, l.mb);
        }
    }

    dnnl::engine& eng_;
    dnnl::stream& s_;
    std::vector<Spec> specs_;
    std::vector<L> layers_;
    std::vector<Op> ops_;
    memory input_, logits_, dlogits_;
    std::vector<int> labels_;
    float lr_ = 0, mom_ = 0, wd_ = 0;
    long steps_ = 0;
};

// Nominal FLOP per sample (2 per multiply-add) of the Conv2d and Dense layers: forward, and training
// (forward, weight gradient, input gradient except for the first layer).
std::pair<double, double> flop_per_sample(const std::string& model) {
    const std::vector<double> macs =
        model == "cnn" ? std::vector<double>{20.0 * 24 * 24 * 25, 50.0 * 8 * 8 * 500, 800.0 * 500, 500.0 * 10}
                       : std::vector<double>{784.0 * 512, 512.0 * 256, 256.0 * 10};
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

// Both sides of one model: dtrain's Model and the oneDNN training and inference nets, same weights, input
// and labels.
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
          model(m == "cnn" ? dtrain::zoo::singa_cnn<float>(1)
                           : dtrain::zoo::mlp<float>({784, 512, 256, 10}, 1)),
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
        train.load(model.parameters().data());
        infer.copy_weights(train);
    }

    void dtrain_train_step() {
        model.zero_grad();
        loss.compute(model.forward(x), y, grad);
        model.backward(grad);
        opt.step(model.parameters(), model.gradients());
    }
    void dtrain_infer_step() { sink += model.forward(x).data()[0]; }

    // The first step of both from the same weights: logits, gradients and updated weights compared.
    void check() {
        const std::size_t nl = std::size_t(batch) * 10, np = model.num_parameters();
        model.train();
        const std::vector<float> w0(model.parameters().begin(), model.parameters().end());
        model.zero_grad();
        const std::vector<float> logits(model.forward(x).begin(), model.forward(x).end());
        loss.compute(model.forward(x), y, grad);
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
        // the same step in double, from the same float weights and input: the reference for both sides
        dtrain::Model<double> md = name == "cnn" ? dtrain::zoo::singa_cnn<double>(1)
                                                 : dtrain::zoo::mlp<double>({784, 512, 256, 10}, 1);
        std::copy(w0.begin(), w0.end(), md.parameters().begin());
        dtrain::Tensor<double> xd = dtrain::Tensor<double>::from_shape(x.shape()), gd;
        std::copy(x.begin(), x.end(), xd.begin());
        md.train();
        md.zero_grad();
        dtrain::SoftmaxCrossEntropy<double>().compute(md.forward(xd), y, gd);
        md.backward(gd);
        const auto g64 = md.gradients();
        for (std::size_t i = 0, off = 0; i < model.num_layers(); off += model.layer(i++).num_params()) {
            const std::size_t k = model.layer(i).num_params();
            if (k == 0) continue;
            double ed = 0, eo = 0, m = 0;
            for (std::size_t j = off; j < off + k; ++j) {
                ed = std::max(ed, std::fabs(double(g[j]) - g64[j]));
                eo = std::max(eo, std::fabs(double(og[j]) - g64[j]));
                m = std::max(m, std::fabs(g64[j]));
            }
            std::printf(
                "check %s grad %-24s max_abs %.3g, max_abs_err vs float64: dtrain %.3g onednn %.3g "
                "(dtrain-onednn %.3g)\n",
                name.c_str(), model.layer(i).name().c_str(), m, ed, eo,
                max_abs_diff(g.data() + off, og.data() + off, k));
        }
        if (name == "cnn") {  // the inputs of the two MaxPool2d layers, from the same first-step weights
            dtrain::Model<float> m0 = dtrain::zoo::singa_cnn<float>(1);
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
                    max_abs_diff(model.forward(x).data(), infer.logits(), nl));
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
        double tf = 0, tb = 0;
        for (int i = 0; i < int(train.num_layers()); ++i) {
            std::printf("  onednn %d %-22s fwd_us %8.1f bwd_us %8.1f\n", i,
                        train.layer_name(std::size_t(i)).c_str(), med(i, false), med(i, true));
            tf += med(i, false), tb += med(i, true);
        }
        std::printf("  onednn loss_us %.1f sgd_us %.1f total fwd_us %.1f bwd_us %.1f\n", med(-1, true),
                    med(-2, true), tf, tb);

        std::printf("layers %s dtrain (per layer, us per step: fwd bwd)\n", name.c_str());
        const std::size_t layers = model.num_layers();
        std::vector<dtrain::Tensor<float>> acts(layers + 1), grads(layers + 1);
        acts[0] = x;
        for (std::size_t i = 0; i < layers; ++i)
            model.layer(i).forward(acts[i], acts[i + 1], true);
        grads[layers] = acts[layers];
        loss.compute(acts[layers], y, grads[layers]);
        for (std::size_t i = layers; i-- > 0;)
            model.layer(i).backward(acts[i], acts[i + 1], grads[i + 1], grads[i], i > 0);
        tf = tb = 0;
        for (std::size_t i = 0; i < layers; ++i) {
            auto& layer = model.layer(i);
            std::vector<double> f, b;
            for (int r = 0; r < reps; ++r) {
                const auto t0 = Clock::now();
                for (int s = 0; s < steps; ++s)
                    layer.forward(acts[i], acts[i + 1], true);
                const double tfw = seconds_since(t0);
                const auto t1 = Clock::now();
                for (int s = 0; s < steps; ++s)
                    layer.backward(acts[i], acts[i + 1], grads[i + 1], grads[i], i > 0);
                b.push_back(seconds_since(t1) / steps * 1e6);
                f.push_back(tfw / steps * 1e6);
            }
            const double mf = dtrain::bench::median(f), mb = dtrain::bench::median(b);
            tf += mf, tb += mb;
            std::printf("  dtrain %zu %-22s fwd_us %8.1f bwd_us %8.1f\n", i, layer.name().c_str(), mf, mb);
        }
        std::printf("  dtrain total fwd_us %.1f bwd_us %.1f (loss and SGD not included)\n", tf, tb);
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
                 "bench_onednn: %s\nusage: bench_onednn [--models cnn,mlp] [--rounds R] [--steps N] "
                 "[--fma-peak GFLOPS] [--no-layers]\n",
                 error.c_str());
    std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> models{"cnn", "mlp"};
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
        if (m != "cnn" && m != "mlp") usage("--models takes cnn and mlp, got '" + m + "'");
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
    std::printf("dtrain kernels: %s\n", dtrain::detail::gemm_avx512_available() ? "AVX-512" : "AVX2/BLAS");
    std::printf("batch 64, rounds %d x %d steps, medians; fma_peak %.1f GFLOP/s\n", rounds, steps, peak);

    std::vector<std::unique_ptr<Pair>> pairs;
    for (const auto& m : models) {
        const auto so = m == "cnn" ? dtrain::SGDOptions().lr(0.005).momentum(0.9).weight_decay(1e-5)
                                   : dtrain::SGDOptions().lr(0.01).momentum(0.9);
        pairs.push_back(std::make_unique<Pair>(m, 64, so, eng, s));
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

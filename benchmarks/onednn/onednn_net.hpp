#pragma once

// The oneDNN side of bench_onednn (benchmarks/onednn/README.md, "Method"): the SINGA CNN, the MLP and
// ResNet9 written directly on oneDNN 2.6 primitives, as oneDNN's own training example (cnn_training_f32)
// is. Every primitive and memory is created once, when the network is built; a step only executes them.

#include <dtrain/core/cpu.hpp>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dtrain::bench {

/// The clock of bench_onednn's timings.
using Clock = std::chrono::steady_clock;

/// Seconds from `t0` to now.
inline double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// One layer of a network as the oneDNN side runs it. ReLU is fused into the convolution or inner product
/// before it (a post-op) or into its batch normalisation (fuse_norm_relu); the layers between a Skip and
/// the next Add form a residual block, whose output is its input plus theirs.
struct LayerSpec {
    /// What the layer computes.
    enum Kind { Conv, BatchNorm, Pool, Dense, Skip, Add } kind;
    /// Output channels (Conv, BatchNorm) or features (Dense).
    long oc = 0;
    /// Kernel size (Conv); window and stride (Pool).
    long k = 0;
    /// Whether a ReLU follows, fused into the layer (Conv, Dense, BatchNorm).
    bool relu = false;
    /// Stride on both axes (Conv).
    long stride = 1;
    /// Zero padding on both axes (Conv).
    long pad = 0;
};

/// The layers of `model` ("cnn", "mlp" or "resnet9", as dtrain::zoo builds them).
inline std::vector<LayerSpec> specs_of(const std::string& model) {
    using S = LayerSpec;
    if (model == "cnn")
        return {{S::Conv, 20, 5, true}, {S::Pool, 0, 2},          {S::Conv, 50, 5, true},
                {S::Pool, 0, 2},        {S::Dense, 500, 0, true}, {S::Dense, 10, 0, false}};
    if (model == "resnet9") {
        std::vector<S> v;
        // ConvBN(oc, k, s): Conv2d(stride s, padding k / 2), BatchNorm2d, ReLU (zoo::resnet9)
        auto conv_bn = [&v](long oc, long k, long s) {
            v.push_back({S::Conv, oc, k, false, s, k / 2});
            v.push_back({S::BatchNorm, oc, 0, true});
        };
        // Residual{ConvBN(oc, 3, 1) x 2}: the block's input added to its output
        auto residual = [&](long oc) {
            v.push_back({S::Skip});
            conv_bn(oc, 3, 1);
            conv_bn(oc, 3, 1);
            v.push_back({S::Add});
        };
        conv_bn(16, 7, 4);
        conv_bn(32, 3, 2);
        residual(32);
        conv_bn(64, 3, 2);
        conv_bn(128, 3, 2);
        residual(128);
        v.push_back({S::Dense, 128, 0, true});
        v.push_back({S::Dense, 10, 0, false});
        return v;
    }
    return {{S::Dense, 512, 0, true}, {S::Dense, 256, 0, true}, {S::Dense, 10, 0, false}};
}

/// The input dimensions of `model` for `batch` samples (NCHW, or NC for the MLP).
inline dnnl::memory::dims input_dims_of(const std::string& model, long batch) {
    if (model == "cnn") return {batch, 1, 28, 28};
    if (model == "resnet9") return {batch, 3, 32, 32};
    return {batch, 784};
}

/// A short name of the layer for the per-layer times ("Conv2d(k=3,s=2,p=1)", "BatchNorm2d+ReLU").
inline std::string spec_name(const LayerSpec& s) {
    const std::string relu = s.relu ? "+ReLU" : "";
    switch (s.kind) {
        case LayerSpec::Conv:
            return "Conv2d(k=" + std::to_string(s.k) +
                   (s.stride != 1 ? ",s=" + std::to_string(s.stride) : "") +
                   (s.pad != 0 ? ",p=" + std::to_string(s.pad) : "") + ")" + relu;
        case LayerSpec::BatchNorm:
            return "BatchNorm2d" + relu;
        case LayerSpec::Pool:
            return "MaxPool2d(" + std::to_string(s.k) + ")";
        case LayerSpec::Skip:
            return "Residual skip";
        case LayerSpec::Add:
            return "Residual add";
        default:
            return "Dense(" + std::to_string(s.oc) + ")" + relu;
    }
}

/// One operation of a step, tagged with its layer and pass for the per-layer times.
struct Op {
    /// Index of the layer (LayerSpec); -1: the loss gradient, -2: the SGD update.
    int layer;
    /// Whether it belongs to the backward pass.
    bool bwd;
    /// Executes it on the stream.
    std::function<void()> run;
};

/// A network on oneDNN primitives: forward (training or inference), softmax cross-entropy gradient,
/// backward, SGD with momentum and weight decay. Activations and weights use format_tag::any (oneDNN's
/// blocked layouts), with a reorder only where two primitives want different layouts. Batch normalisation
/// runs in training mode (batch statistics; the running statistics updated as dtrain's BatchNorm2d does,
/// momentum 0.1, eps 1e-5) in a training net and on the running statistics in an inference net.
class OneDnnNet {
    using memory = dnnl::memory;
    using dt = memory::data_type;
    using tag = memory::format_tag;

public:
    /// Builds `model` ("cnn", "mlp" or "resnet9") for `batch` samples on `eng` and `s`, which must outlive
    /// the net: the training step when `training`, else the forward pass with forward_inference
    /// primitives.
    OneDnnNet(const std::string& model, long batch, bool training, dnnl::engine& eng, dnnl::stream& s)
        : eng_(eng), s_(s), specs_(specs_of(model)), training_(training) {
        memory::dims dims = input_dims_of(model, batch);
        input_ = memory({dims, dt::f32, dims.size() == 4 ? tag::nchw : tag::nc}, eng_);
        memory cur = input_;
        for (std::size_t i = 0; i < specs_.size(); ++i) {
            L l;
            l.src_dims = dims;
            switch (specs_[i].kind) {
                case LayerSpec::Pool:
                    forward_pool(i, l, cur, dims);
                    break;
                case LayerSpec::BatchNorm:
                    forward_bnorm(i, l, cur);
                    break;
                case LayerSpec::Skip:
                    l.src = l.dst = cur;
                    break;
                case LayerSpec::Add:
                    l.src = cur;
                    l.dst = memory(cur.get_desc(), eng_);
                    add_tensors(cur, layers_[block_start(i)].src, l.dst, int(i), false);
                    break;
                default:
                    forward_weighted(i, l, cur, dims);
            }
            cur = l.dst;
            layers_.push_back(std::move(l));
        }
        logits_ = need(cur, {dims, dt::f32, tag::nc}, int(specs_.size()) - 1, false);
        if (training) build_backward();
    }

    /// The input batch (NCHW or NC, plain).
    memory& input() { return input_; }
    /// The logits [batch, classes] of the last forward pass.
    const float* logits() const { return static_cast<const float*>(logits_.get_data_handle()); }
    /// Number of layers (LayerSpec entries).
    std::size_t num_layers() const { return specs_.size(); }
    /// Layer `i`.
    const LayerSpec& spec(std::size_t i) const { return specs_[i]; }
    /// The short name of layer `i`.
    std::string layer_name(std::size_t i) const { return spec_name(specs_[i]); }

    /// Sets the labels and SGD settings of the training step.
    void set_training(const std::vector<int>& labels, float lr, float momentum, float weight_decay) {
        labels_ = labels, lr_ = lr, mom_ = momentum, wd_ = weight_decay;
    }

    /// Loads the parameters from dtrain's flat parameter buffer (layer order; Conv2d and Dense: weights in
    /// PyTorch's layout, then biases; BatchNorm2d: gamma, then beta) and the running statistics from its
    /// state buffer (per BatchNorm2d: mean, then variance).
    void load(const float* params, const float* state) {
        for (auto& l : layers_) {
            if (l.w) {
                memory user = user_weights(l, const_cast<float*>(params));
                dnnl::reorder(user, l.w).execute(s_, user, l.w);
                params += product(l.w_dims);
                params += copy_in(l.b, params);
            } else if (l.ss) {
                params += copy_in(l.ss, params);
                state += copy_in(l.rmean, state);
                state += copy_in(l.rvar, state);
            }
        }
        s_.wait();
    }

    /// The parameters (or, `grads`, the gradients of the last step) in dtrain's flat layout.
    std::vector<float> store(bool grads) {
        std::vector<float> out;
        for (auto& l : layers_) {
            if (l.w) {
                std::vector<float> w(std::size_t(product(l.w_dims)));
                memory user = user_weights(l, w.data());
                memory& src = grads ? l.dw : l.w;
                dnnl::reorder(src, user).execute(s_, src, user);
                s_.wait();
                out.insert(out.end(), w.begin(), w.end());
                append(out, grads ? l.db : l.b);
            } else if (l.ss) {
                append(out, grads ? l.dss : l.ss);
            }
        }
        return out;
    }

    /// The running statistics in dtrain's state layout (per BatchNorm2d: mean, then variance).
    std::vector<float> store_state() const {
        std::vector<float> out;
        for (const auto& l : layers_)
            if (l.ss) append(out, l.rmean), append(out, l.rvar);
        return out;
    }

    /// Copies the parameters and running statistics of a training net into this (inference) net,
    /// reordering the weights to its layouts.
    void copy_weights(OneDnnNet& from) {
        for (std::size_t i = 0; i < layers_.size(); ++i) {
            L& l = layers_[i];
            L& f = from.layers_[i];
            if (l.w) {
                dnnl::reorder(f.w, l.w).execute(s_, f.w, l.w);
                copy_in(l.b, static_cast<const float*>(f.b.get_data_handle()));
            } else if (l.ss) {
                copy_in(l.ss, static_cast<const float*>(f.ss.get_data_handle()));
                copy_in(l.rmean, static_cast<const float*>(f.rmean.get_data_handle()));
                copy_in(l.rvar, static_cast<const float*>(f.rvar.get_data_handle()));
            }
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
    // dtrain's BatchNorm2d defaults (zoo::resnet9 keeps them).
    static constexpr float bn_eps = 1e-5f;
    static constexpr double bn_momentum = 0.1;

    struct L {
        memory::dims src_dims, w_dims, strides, pad_l, pad_r;
        dnnl::convolution_forward::primitive_desc conv;
        dnnl::inner_product_forward::primitive_desc ip;
        dnnl::pooling_forward::primitive_desc pool;
        dnnl::batch_normalization_forward::primitive_desc bn;
        memory src, dst, ws;
        memory w, b, dw, db, dw_upd, mw, mb;  // Conv, Dense; dw_upd: dw in w's layout; mw, mb: momentum
        memory ss, dss, mss;                  // BatchNorm: gamma and beta [2, C], their gradient, momentum
        memory mean, var, rmean, rvar;        // BatchNorm: batch (training) and running statistics
        memory dskip;                         // Add: the gradient of the block's output
    };

    static long product(const memory::dims& d) {
        long p = 1;
        for (long v : d)
            p *= v;
        return p;
    }

    static std::size_t floats(const memory& m) { return m.get_desc().get_size() / sizeof(float); }

    // Copies floats(m) values from `from` into the plain memory `m`; returns the count.
    static std::size_t copy_in(memory& m, const float* from) {
        std::memcpy(m.get_data_handle(), from, m.get_desc().get_size());
        return floats(m);
    }

    static void append(std::vector<float>& out, const memory& m) {
        const float* p = static_cast<const float*>(m.get_data_handle());
        out.insert(out.end(), p, p + floats(m));
    }

    // A memory over `data` with l's weights in dtrain's layout (OIHW, or OI for a Dense on 2D input).
    memory user_weights(const L& l, float* data) const {
        return memory({l.w_dims, dt::f32, l.w_dims.size() == 4 ? tag::oihw : tag::oi}, eng_, data);
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

    // The Skip that opens the residual block closed by the Add at `add_index`, and the reverse.
    std::size_t block_start(std::size_t add_index) const {
        std::size_t i = add_index;
        while (specs_[i].kind != LayerSpec::Skip)
            --i;
        return i;
    }
    std::size_t block_end(std::size_t skip_index) const {
        std::size_t i = skip_index;
        while (specs_[i].kind != LayerSpec::Add)
            ++i;
        return i;
    }

    // Adds to the step dst = a + b with a binary primitive (b reordered to a's layout if needed); dst may
    // be a (in place).
    void add_tensors(const memory& a, const memory& b, const memory& dst, int layer, bool bwd) {
        const memory::desc md = a.get_desc();
        const memory bb = need(b, md, layer, bwd);
        dnnl::binary::primitive_desc pd({dnnl::algorithm::binary_add, md, md, md}, eng_);
        add(layer, bwd, dnnl::binary(pd), {{DNNL_ARG_SRC_0, a}, {DNNL_ARG_SRC_1, bb}, {DNNL_ARG_DST, dst}});
    }

    void forward_pool(std::size_t i, L& l, const memory& cur, memory::dims& dims) {
        const long k = specs_[i].k;
        dims = {dims[0], dims[1], dims[2] / k, dims[3] / k};
        l.pool = dnnl::pooling_forward::primitive_desc({prop(),
                                                        dnnl::algorithm::pooling_max,
                                                        cur.get_desc(),
                                                        {dims, dt::f32, tag::any},
                                                        {k, k},
                                                        {k, k},
                                                        {0, 0},
                                                        {0, 0}},
                                                       eng_);
        l.src = cur;
        l.dst = memory(l.pool.dst_desc(), eng_);
        std::unordered_map<int, memory> args{{DNNL_ARG_SRC, l.src}, {DNNL_ARG_DST, l.dst}};
        if (training_) {
            l.ws = memory(l.pool.workspace_desc(), eng_);
            args[DNNL_ARG_WORKSPACE] = l.ws;
        }
        add(int(i), false, dnnl::pooling_forward(l.pool), args);
    }

    // Convolution or inner product, with its ReLU as a post-op; the inner product reads 4D input as is.
    void forward_weighted(std::size_t i, L& l, const memory& cur, memory::dims& dims) {
        const LayerSpec& sp = specs_[i];
        memory::dims wd;
        if (sp.kind == LayerSpec::Conv) {
            // PyTorch's output size; padding_r: the padding the last window actually reaches
            const long oh = (dims[2] + 2 * sp.pad - sp.k) / sp.stride + 1;
            const long ow = (dims[3] + 2 * sp.pad - sp.k) / sp.stride + 1;
            wd = {sp.oc, dims[1], sp.k, sp.k};
            l.strides = {sp.stride, sp.stride};
            l.pad_l = {sp.pad, sp.pad};
            l.pad_r = {(oh - 1) * sp.stride + sp.k - dims[2] - sp.pad,
                       (ow - 1) * sp.stride + sp.k - dims[3] - sp.pad};
            dims = {dims[0], sp.oc, oh, ow};
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
        if (sp.kind == LayerSpec::Conv) {
            l.conv = dnnl::convolution_forward::primitive_desc(
                {prop(), dnnl::algorithm::convolution_direct, src_any, w_any, b_md, dst_any, l.strides,
                 l.pad_l, l.pad_r},
                attr, eng_);
            src_md = l.conv.src_desc(), w_md = l.conv.weights_desc(), dst_md = l.conv.dst_desc();
            fwd = dnnl::convolution_forward(l.conv);
        } else {
            l.ip = dnnl::inner_product_forward::primitive_desc({prop(), src_any, w_any, b_md, dst_any}, attr,
                                                               eng_);
            src_md = l.ip.src_desc(), w_md = l.ip.weights_desc(), dst_md = l.ip.dst_desc();
            fwd = dnnl::inner_product_forward(l.ip);
        }
        l.src = need(cur, src_md, int(i), false);
        l.w = memory(w_md, eng_);
        l.b = memory(b_md, eng_);
        l.dst = memory(dst_md, eng_);
        add(int(i), false, fwd,
            {{DNNL_ARG_SRC, l.src}, {DNNL_ARG_WEIGHTS, l.w}, {DNNL_ARG_BIAS, l.b}, {DNNL_ARG_DST, l.dst}});
    }

    // Gamma and beta as one [2, C] scale-shift tensor (dtrain's order: gamma, then beta); the ReLU fused.
    static dnnl::normalization_flags bn_flags(const LayerSpec& sp) {
        auto f = dnnl::normalization_flags::use_scale_shift;
        if (sp.relu) f |= dnnl::normalization_flags::fuse_norm_relu;
        return f;
    }

    // Batch normalisation on the layout of its input, its ReLU fused. Training: batch statistics into mean
    // and var, then the running statistics updated from them (oneDNN keeps none); the ReLU mask goes to the
    // workspace for the backward pass. Inference: the running statistics are the mean and var it reads.
    void forward_bnorm(std::size_t i, L& l, const memory& cur) {
        auto flags = bn_flags(specs_[i]);
        if (!training_) flags |= dnnl::normalization_flags::use_global_stats;
        l.bn =
            dnnl::batch_normalization_forward::primitive_desc({prop(), cur.get_desc(), bn_eps, flags}, eng_);
        l.src = cur;
        l.dst = memory(l.bn.dst_desc(), eng_);
        l.ss = memory(l.bn.weights_desc(), eng_);
        l.mean = memory(l.bn.mean_desc(), eng_);
        l.var = memory(l.bn.variance_desc(), eng_);
        std::unordered_map<int, memory> args{{DNNL_ARG_SRC, l.src},
                                             {DNNL_ARG_DST, l.dst},
                                             {DNNL_ARG_SCALE_SHIFT, l.ss},
                                             {DNNL_ARG_MEAN, l.mean},
                                             {DNNL_ARG_VARIANCE, l.var}};
        if (!training_) {
            l.rmean = l.mean, l.rvar = l.var;
            add(int(i), false, dnnl::batch_normalization_forward(l.bn), args);
            return;
        }
        if (specs_[i].relu) {
            l.ws = memory(l.bn.workspace_desc(), eng_);
            args[DNNL_ARG_WORKSPACE] = l.ws;
        }
        l.rmean = memory(l.bn.mean_desc(), eng_);
        l.rvar = memory(l.bn.variance_desc(), eng_);
        add(int(i), false, dnnl::batch_normalization_forward(l.bn), args);
        ops_.push_back({int(i), false, [this, i] { update_running_stats(layers_[i]); }});
    }

    // running = (1 - momentum) * running + momentum * batch statistic, the variance unbiased (PyTorch's and
    // dtrain's rule; oneDNN's batch variance is the biased one).
    static void update_running_stats(L& l) {
        const double count = double(l.src_dims[0] * l.src_dims[2] * l.src_dims[3]), m = bn_momentum;
        const float* mean = static_cast<const float*>(l.mean.get_data_handle());
        const float* var = static_cast<const float*>(l.var.get_data_handle());
        float* rm = static_cast<float*>(l.rmean.get_data_handle());
        float* rv = static_cast<float*>(l.rvar.get_data_handle());
        for (long c = 0; c < l.src_dims[1]; ++c) {
            rm[c] = float((1.0 - m) * double(rm[c]) + m * double(mean[c]));
            rv[c] = float((1.0 - m) * double(rv[c]) + m * double(var[c]) * count / (count - 1.0));
        }
    }

    dnnl::prop_kind prop() const {
        return training_ ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
    }

    void build_backward() {
        dlogits_ = memory(logits_.get_desc(), eng_);
        ops_.push_back({-1, true, [this] { loss_grad(); }});
        memory dcur = dlogits_;
        for (std::size_t j = layers_.size(); j-- > 0;) {
            switch (specs_[j].kind) {
                case LayerSpec::Pool:
                    backward_pool(j, dcur);
                    break;
                case LayerSpec::BatchNorm:
                    backward_bnorm(j, dcur);
                    break;
                case LayerSpec::Add:
                    // the block's output gradient goes to the branch and to the skip as is, in the layout of
                    // the block's output: one reorder where it comes in another, for both
                    dcur = need(dcur, layers_[j].dst.get_desc(), int(j), true);
                    layers_[j].dskip = dcur;
                    break;
                case LayerSpec::Skip: {  // the block's input gradient: the branch's plus the skip's
                    const std::size_t a = block_end(j);
                    add_tensors(dcur, layers_[a].dskip, dcur, int(a), true);
                    break;
                }
                default:
                    backward_weighted(j, dcur);
            }
        }
        ops_.push_back({-2, true, [this] { sgd(); }});
    }

    void backward_pool(std::size_t j, memory& dcur) {
        L& l = layers_[j];
        const long k = specs_[j].k;
        const memory dd = need(dcur, l.dst.get_desc(), int(j), true);
        dnnl::pooling_backward::primitive_desc pd({dnnl::algorithm::pooling_max,
                                                   l.src.get_desc(),
                                                   l.dst.get_desc(),
                                                   {k, k},
                                                   {k, k},
                                                   {0, 0},
                                                   {0, 0}},
                                                  eng_, l.pool);
        memory ds(pd.diff_src_desc(), eng_);
        add(int(j), true, dnnl::pooling_backward(pd),
            {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_DIFF_SRC, ds}, {DNNL_ARG_WORKSPACE, l.ws}});
        dcur = ds;
    }

    // The input gradient and the gamma and beta gradients of batch normalisation in training mode, through
    // its fused ReLU (the workspace's mask).
    void backward_bnorm(std::size_t j, memory& dcur) {
        L& l = layers_[j];
        const int i = int(j);
        dnnl::batch_normalization_backward::primitive_desc pd(
            {dnnl::prop_kind::backward, l.dst.get_desc(), l.src.get_desc(), bn_eps, bn_flags(specs_[j])},
            eng_, l.bn);
        const memory dd = need(dcur, pd.diff_dst_desc(), i, true);
        memory ds(pd.diff_src_desc(), eng_);
        l.dss = memory(pd.diff_weights_desc(), eng_);
        l.mss = memory(l.ss.get_desc(), eng_);
        std::unordered_map<int, memory> args{{DNNL_ARG_SRC, l.src},
                                             {DNNL_ARG_MEAN, l.mean},
                                             {DNNL_ARG_VARIANCE, l.var},
                                             {DNNL_ARG_SCALE_SHIFT, l.ss},
                                             {DNNL_ARG_DIFF_DST, dd},
                                             {DNNL_ARG_DIFF_SRC, ds},
                                             {DNNL_ARG_DIFF_SCALE_SHIFT, l.dss}};
        if (specs_[j].relu) args[DNNL_ARG_WORKSPACE] = l.ws;
        add(i, true, dnnl::batch_normalization_backward(pd), args);
        dcur = ds;
    }

    // Convolution or inner product: the ReLU post-op's backward (in place on the output gradient, from the
    // fused output), the weight and bias gradients, and the input gradient except for the first layer.
    void backward_weighted(std::size_t j, memory& dcur) {
        L& l = layers_[j];
        const LayerSpec& sp = specs_[j];
        const int i = int(j);
        if (sp.relu) {
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
        if (sp.kind == LayerSpec::Conv) {
            const auto alg = dnnl::algorithm::convolution_direct;
            dnnl::convolution_backward_weights::primitive_desc pw(
                {alg, src_any, w_any, b_md, dst_any, l.strides, l.pad_l, l.pad_r}, eng_, l.conv);
            bw_src = pw.src_desc(), bw_ddst = pw.diff_dst_desc(), bw_dw = pw.diff_weights_desc();
            bw = dnnl::convolution_backward_weights(pw);
            if (j > 0) {
                dnnl::convolution_backward_data::primitive_desc pdd(
                    {alg, src_any, w_any, dst_any, l.strides, l.pad_l, l.pad_r}, eng_, l.conv);
                bd_w = pdd.weights_desc(), bd_ddst = pdd.diff_dst_desc(), bd_dsrc = pdd.diff_src_desc();
                bd = dnnl::convolution_backward_data(pdd);
            }
        } else {
            dnnl::inner_product_backward_weights::primitive_desc pw({src_any, w_any, b_md, dst_any}, eng_,
                                                                    l.ip);
            bw_src = pw.src_desc(), bw_ddst = pw.diff_dst_desc(), bw_dw = pw.diff_weights_desc();
            bw = dnnl::inner_product_backward_weights(pw);
            if (j > 0) {
                dnnl::inner_product_backward_data::primitive_desc pdd({src_any, w_any, dst_any}, eng_, l.ip);
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

    // SGD with momentum and weight decay (PyTorch's rule, as dtrain's SGD) on one parameter buffer `p`
    // with gradient `g` and momentum `m`; weight decay applies to every parameter, as in dtrain's flat
    // buffer (biases, gamma and beta included).
    void sgd_update(memory& p, const memory& g, memory& m, bool first) const {
        const std::size_t n = floats(p);
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
    }

    // The SGD update of every parameter buffer.
    void sgd() {
        const bool first = steps_++ == 0;
        for (auto& l : layers_) {
            if (l.w) {
                // (dw_upd's reorder, where dw's layout is not w's, is an earlier op of the step)
                sgd_update(l.w, l.dw_upd, l.mw, first);
                sgd_update(l.b, l.db, l.mb, first);
            } else if (l.ss) {
                sgd_update(l.ss, l.dss, l.mss, first);
            }
        }
    }

    dnnl::engine& eng_;
    dnnl::stream& s_;
    std::vector<LayerSpec> specs_;
    bool training_;
    std::vector<L> layers_;
    std::vector<Op> ops_;
    memory input_, logits_, dlogits_;
    std::vector<int> labels_;
    float lr_ = 0, mom_ = 0, wd_ = 0;
    long steps_ = 0;
};

}  // namespace dtrain::bench

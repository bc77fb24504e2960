// The oneDNN algorithms behind the kernel seam (oneDNN 2.x, Debian libdnnl-dev), compiled into the programs
// that link the CMake target dtrain::onednn: convolution primitives in the layouts oneDNN chooses, reordered
// from and to dtrain's (NCHW, OIHW), and inner-product primitives on dtrain's own (NC, OI), created once per
// shape, on compute_threads() OpenMP threads. Linking this file registers them in conv_algorithms<float>()
// and dense_algorithms<float>() (after the native kernels, before the reference) and makes
// DTRAIN_KERNELS=onednn valid (include/dtrain/nn/kernels/onednn.hpp).
#include <omp.h>

#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include <dtrain/core/error.hpp>
#include <dtrain/nn/kernels/conv_algorithms.hpp>
#include <dtrain/nn/kernels/dense_algorithms.hpp>
#include <dtrain/nn/kernels/onednn.hpp>

namespace dtrain {

namespace detail {

/// The CPU engine and stream every oneDNN algorithm runs on, made at first use; sets OpenMP's thread count
/// to compute_threads() then.
struct OneDnnContext {
    dnnl::engine engine{dnnl::engine::kind::cpu, 0};
    dnnl::stream stream{engine};

    static OneDnnContext& get() {
        static OneDnnContext context = [] {
            omp_set_num_threads(compute_threads());
            return OneDnnContext{};
        }();
        return context;
    }
};

/// A memory object over dims with format `tag` whose data handle is set per call.
inline dnnl::memory onednn_memory(const dnnl::memory::dims& dims, dnnl::memory::format_tag tag) {
    return dnnl::memory({dims, dnnl::memory::data_type::f32, tag}, OneDnnContext::get().engine,
                        DNNL_MEMORY_NONE);
}

/// Runs `p` on the context's stream with `args` and waits for it.
inline void onednn_run(const dnnl::primitive& p, const std::unordered_map<int, dnnl::memory>& args) {
    p.execute(OneDnnContext::get().stream, args);
    OneDnnContext::get().stream.wait();
}

/// One argument of a primitive: dtrain's buffer in its plain layout (handle set per call) and the layout the
/// primitive chose for it (format `any`). Where the two differ, a buffer of the chosen layout and the
/// reorders between them; where they agree, the plain memory itself.
struct OneDnnArg {
    dnnl::memory plain, chosen;
    dnnl::primitive to_chosen, to_plain;
    bool reordered = false;

    OneDnnArg() = default;
    OneDnnArg(const dnnl::memory::desc& plain_md, const dnnl::memory::desc& chosen_md)
        : plain(plain_md, OneDnnContext::get().engine, DNNL_MEMORY_NONE), reordered(plain_md != chosen_md) {
        if (!reordered) {
            chosen = plain;
            return;
        }
        chosen = dnnl::memory(chosen_md, OneDnnContext::get().engine);
        to_chosen = dnnl::reorder(plain, chosen);
        to_plain = dnnl::reorder(chosen, plain);
    }

    /// The primitive's input, holding what p holds.
    const dnnl::memory& in(const float* p) {
        plain.set_data_handle(const_cast<float*>(p));
        if (reordered) onednn_run(to_chosen, {{DNNL_ARG_FROM, plain}, {DNNL_ARG_TO, chosen}});
        return chosen;
    }
    /// The primitive's output, which done() copies to p.
    const dnnl::memory& out(float* p) {
        plain.set_data_handle(p);
        return chosen;
    }
    /// Copies the output into dtrain's buffer.
    void done() {
        if (reordered) onednn_run(to_plain, {{DNNL_ARG_FROM, chosen}, {DNNL_ARG_TO, plain}});
    }
};

/// The right padding oneDNN needs for dtrain's output size along one axis (may be negative).
inline long onednn_right_padding(std::size_t in, std::size_t k, std::size_t s, std::size_t p,
                                 std::size_t out) {
    return long((out - 1) * s + k) - long(in) - long(p);
}

/// The three inner-product primitives of one Dense shape and memory objects over dtrain's buffers (handles
/// set per call), with the forward and input-gradient products.
struct OneDnnProducts {
    dnnl::primitive fwd, bwd_data, bwd_weights;
    dnnl::memory x, w, b, y, dx, dw;

    /// y = fwd(x, w, bias).
    void forward(const float* xp, const float* wp, const float* bp, float* yp) {
        x.set_data_handle(const_cast<float*>(xp));
        w.set_data_handle(const_cast<float*>(wp));
        b.set_data_handle(const_cast<float*>(bp));
        y.set_data_handle(yp);
        onednn_run(fwd, {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, b}, {DNNL_ARG_DST, y}});
    }

    /// dx = bwd_data(dy, w).
    void backward_data(const float* dyp, const float* wp, float* dxp) {
        y.set_data_handle(const_cast<float*>(dyp));
        w.set_data_handle(const_cast<float*>(wp));
        dx.set_data_handle(dxp);
        onednn_run(bwd_data, {{DNNL_ARG_DIFF_DST, y}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_SRC, dx}});
    }
};

}  // namespace detail

/// Convolution by oneDNN's primitives (forward, backward data, backward weights with the bias), each in the
/// layouts oneDNN chooses for the shape (format `any`: blocked by channels where its JIT kernels want it)
/// with reorders from and to dtrain's NCHW and OIHW around each call, or on NCHW and OIHW directly where
/// that blocking would pad the channels; on compute_threads() OpenMP threads.
/// Deterministic for a given thread count and CPU; the weight gradient's sums may be ordered by thread, so
/// results can differ between thread counts, and a sample's results may depend on the batch size. Applies
/// where oneDNN is compiled in and allowed (KernelCpu::onednn) and the right padding dtrain's output size
/// implies is not negative.
class OneDnnConv final : public ConvAlgorithm<float> {
public:
    /// KernelCpu::onednn, and a non-negative right padding on both axes.
    static bool applies(const ConvProblem& p, const KernelCpu& cpu) noexcept {
        const detail::ConvGeometry& g = p.g;
        return cpu.onednn && detail::onednn_right_padding(g.h, g.kh, g.sh, g.ph, g.oh) >= 0 &&
               detail::onednn_right_padding(g.w, g.kw, g.sw, g.pw, g.ow) >= 0;
    }
    /// "oneDNN".
    static constexpr const char* label = "oneDNN";

    std::string name() const override { return label; }

    void prepare(const ConvProblem& p) override {
        using dnnl::memory;
        using tag = memory::format_tag;
        const detail::ConvGeometry& g = p.g;
        const long n = long(p.batch), c = long(g.c), o = long(p.out);
        const memory::dims src{n, c, long(g.h), long(g.w)}, wts{o, c, long(g.kh), long(g.kw)}, bias{o},
            dst{n, o, long(g.oh), long(g.ow)}, strides{long(g.sh), long(g.sw)}, pl{long(g.ph), long(g.pw)},
            pr{detail::onednn_right_padding(g.h, g.kh, g.sh, g.ph, g.oh),
               detail::onednn_right_padding(g.w, g.kw, g.sw, g.pw, g.ow)};
        const auto md = [](const memory::dims& d, tag t) {
            return memory::desc(d, memory::data_type::f32, t);
        };
        const auto alg = dnnl::algorithm::convolution_direct;
        auto& eng = detail::OneDnnContext::get().engine;
        // The three primitives with the layouts ts, tw, td (src, weights, dst) and their arguments; returns the
        // forward's weights layout.
        const auto make = [&](tag ts, tag tw, tag td) {
            const dnnl::convolution_forward::primitive_desc fwd(
                {dnnl::prop_kind::forward_training, alg, md(src, ts), md(wts, tw), md(bias, tag::x),
                 md(dst, td), strides, pl, pr},
                eng);
            const dnnl::convolution_backward_data::primitive_desc bwd_data(
                {alg, md(src, ts), md(wts, tw), md(dst, td), strides, pl, pr}, eng, fwd);
            const dnnl::convolution_backward_weights::primitive_desc bwd_weights(
                {alg, md(src, ts), md(wts, tw), md(bias, tag::x), md(dst, td), strides, pl, pr}, eng, fwd);
            fwd_ = dnnl::convolution_forward(fwd);
            bwd_data_ = dnnl::convolution_backward_data(bwd_data);
            bwd_weights_ = dnnl::convolution_backward_weights(bwd_weights);
            f_ = {{md(src, tag::nchw), fwd.src_desc()},
                  {md(wts, tag::oihw), fwd.weights_desc()},
                  {md(dst, tag::nchw), fwd.dst_desc()}};
            d_ = {{md(dst, tag::nchw), bwd_data.diff_dst_desc()},
                  {md(wts, tag::oihw), bwd_data.weights_desc()},
                  {md(src, tag::nchw), bwd_data.diff_src_desc()}};
            w_ = {{md(src, tag::nchw), bwd_weights.src_desc()},
                  {md(dst, tag::nchw), bwd_weights.diff_dst_desc()},
                  {md(wts, tag::oihw), bwd_weights.diff_weights_desc()}};
            return fwd.weights_desc();
        };
        try {
            // The layouts oneDNN chooses (blocked by 16 or 8 channels for its JIT kernels) where they fill
            // their blocks. Where they pad the channels (the SINGA CNN's 20 and 50: twice the work on
            // AVX-512), oneDNN's GEMM convolution on NCHW was faster, with no reorders.
            const memory::desc w = make(tag::any, tag::any, tag::any);
            bool padded = false;
            for (int i = 0; i < w.data.ndims; ++i)
                padded = padded || w.data.padded_dims[i] != w.data.dims[i];
            if (padded) make(tag::nchw, tag::oihw, tag::nchw);
        } catch (const dnnl::error& e) {
            throw Error(detail::concat("oneDNN has no convolution for input ", detail::shape_str(src),
                                       ", weights ", detail::shape_str(wts), ": ", e.what(),
                                       " (set DTRAIN_KERNELS=native or reference)"));
        }
        b_ = detail::onednn_memory(bias, tag::x);
        db_ = detail::onednn_memory(bias, tag::x);
        dwt_.resize(p.out * p.fan_in());
        dbt_.resize(p.out);
    }

    void forward(const float* x, const float* w, const float* bias, float* y) override {
        b_.set_data_handle(const_cast<float*>(bias));
        detail::onednn_run(fwd_, {{DNNL_ARG_SRC, f_.first.in(x)},
                                  {DNNL_ARG_WEIGHTS, f_.second.in(w)},
                                  {DNNL_ARG_BIAS, b_},
                                  {DNNL_ARG_DST, f_.out.out(y)}});
        f_.out.done();
    }

    void backward_weights(const float* x, const float* dy, float* dw, float* db) override {
        db_.set_data_handle(dbt_.data());
        detail::onednn_run(bwd_weights_, {{DNNL_ARG_SRC, w_.first.in(x)},
                                          {DNNL_ARG_DIFF_DST, w_.second.in(dy)},
                                          {DNNL_ARG_DIFF_WEIGHTS, w_.out.out(dwt_.data())},
                                          {DNNL_ARG_DIFF_BIAS, db_}});
        w_.out.done();
        for (std::size_t i = 0; i < dwt_.size(); ++i)
            dw[i] += dwt_[i];
        for (std::size_t i = 0; i < dbt_.size(); ++i)
            db[i] += dbt_[i];
    }

    void backward_data(const float* dy, const float* w, float* dx) override {
        detail::onednn_run(bwd_data_, {{DNNL_ARG_DIFF_DST, d_.first.in(dy)},
                                       {DNNL_ARG_WEIGHTS, d_.second.in(w)},
                                       {DNNL_ARG_DIFF_SRC, d_.out.out(dx)}});
        d_.out.done();
    }

private:
    // The arguments of one primitive: its two inputs (data, then weights or the output gradient) and its
    // output.
    struct Args {
        detail::OneDnnArg first, second, out;
    };
    dnnl::primitive fwd_, bwd_data_, bwd_weights_;
    Args f_, d_, w_;  // of the forward, backward-data and backward-weights primitives
    dnnl::memory b_, db_;
    std::vector<float> dwt_, dbt_;  // oneDNN writes the gradients; dtrain adds them
};

/// Dense's products by oneDNN's inner-product primitives on NC and OI directly, on compute_threads() OpenMP
/// threads; the weight gradient computed whole at the call for the last rows (Dense asks for its parts last
/// rows first) and handed out by rows. Determinism as OneDnnConv. Applies wherever KernelCpu::onednn.
class OneDnnDense final : public DenseAlgorithm<float> {
public:
    /// KernelCpu::onednn.
    static bool applies(const DenseProblem&, const KernelCpu& cpu) noexcept { return cpu.onednn; }
    /// "oneDNN".
    static constexpr const char* label = "oneDNN";

    std::string name() const override { return label; }

    void prepare(const DenseProblem& p) override {
        using dnnl::memory;
        using tag = memory::format_tag;
        p_ = p;
        const long n = long(p.batch), in = long(p.in), o = long(p.out);
        const auto md = [](const memory::dims& d, tag t) {
            return memory::desc(d, memory::data_type::f32, t);
        };
        auto& eng = detail::OneDnnContext::get().engine;
        try {
            const dnnl::inner_product_forward::primitive_desc fwd(
                {dnnl::prop_kind::forward_training, md({n, in}, tag::nc), md({o, in}, tag::oi),
                 md({o}, tag::x), md({n, o}, tag::nc)},
                eng);
            m_.fwd = dnnl::inner_product_forward(fwd);
            m_.bwd_data = dnnl::inner_product_backward_data(dnnl::inner_product_backward_data::primitive_desc(
                {md({n, in}, tag::nc), md({o, in}, tag::oi), md({n, o}, tag::nc)}, eng, fwd));
            m_.bwd_weights =
                dnnl::inner_product_backward_weights(dnnl::inner_product_backward_weights::primitive_desc(
                    {md({n, in}, tag::nc), md({o, in}, tag::oi), md({n, o}, tag::nc)}, eng, fwd));
        } catch (const dnnl::error& e) {
            throw Error(detail::concat("oneDNN has no inner product for a batch of ", n, " from ", in, " to ",
                                       o, " features: ", e.what(),
                                       " (set DTRAIN_KERNELS=native or reference)"));
        }
        m_.x = detail::onednn_memory({n, in}, tag::nc);
        m_.w = detail::onednn_memory({o, in}, tag::oi);
        m_.b = detail::onednn_memory({o}, tag::x);
        m_.y = detail::onednn_memory({n, o}, tag::nc);
        m_.dx = detail::onednn_memory({n, in}, tag::nc);
        m_.dw = detail::onednn_memory({o, in}, tag::oi);
        dwt_.resize(p.out * p.in);
    }

    void forward(const float* x, const float* w, const float* bias, float* y) override {
        m_.forward(x, w, bias, y);
    }

    void backward_weights(const float* x, const float* dy, std::size_t lo, std::size_t hi, bool add,
                          float* dw) override {
        if (hi == p_.out || x != grads_x_ || dy != grads_dy_) {
            m_.x.set_data_handle(const_cast<float*>(x));
            m_.y.set_data_handle(const_cast<float*>(dy));
            m_.dw.set_data_handle(dwt_.data());
            detail::onednn_run(
                m_.bwd_weights,
                {{DNNL_ARG_SRC, m_.x}, {DNNL_ARG_DIFF_DST, m_.y}, {DNNL_ARG_DIFF_WEIGHTS, m_.dw}});
            grads_x_ = x;
            grads_dy_ = dy;
        }
        for (std::size_t i = lo * p_.in; i < hi * p_.in; ++i)
            dw[i] = add ? dw[i] + dwt_[i] : dwt_[i];
    }

    void backward_data(const float* dy, const float* w, float* dx) override { m_.backward_data(dy, w, dx); }

private:
    DenseProblem p_;
    detail::OneDnnProducts m_;
    std::vector<float> dwt_;           // the whole weight gradient of the last computation
    const float* grads_x_ = nullptr;   // its input
    const float* grads_dy_ = nullptr;  // and output gradient
};

namespace {

// Registers both algorithms before main() runs (the lists are built at their first use, in main()).
const bool registered = [] {
    detail::onednn_linked() = true;
    detail::extra_conv_algorithms().push_back(
        {OneDnnConv::label, &OneDnnConv::applies,
         []() -> std::unique_ptr<ConvAlgorithm<float>> { return std::make_unique<OneDnnConv>(); }});
    detail::extra_dense_algorithms().push_back(
        {OneDnnDense::label, &OneDnnDense::applies,
         []() -> std::unique_ptr<DenseAlgorithm<float>> { return std::make_unique<OneDnnDense>(); }});
    return true;
}();

}  // namespace

}  // namespace dtrain

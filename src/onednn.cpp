// The oneDNN algorithms behind the kernel seam (oneDNN 2.x, Debian libdnnl-dev), compiled into the programs
// that link the CMake target dtrain::onednn: convolution and inner-product primitives on dtrain's own
// layouts (NCHW, OIHW; NC, OI), created once per shape, on compute_threads() OpenMP threads. Linking this
// file registers them in conv_algorithms<float>() and dense_algorithms<float>() (after the native kernels,
// before the reference) and makes DTRAIN_KERNELS=onednn valid (include/dtrain/nn/kernels/onednn.hpp).
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

/// The right padding oneDNN needs for dtrain's output size along one axis (may be negative).
inline long onednn_right_padding(std::size_t in, std::size_t k, std::size_t s, std::size_t p,
                                 std::size_t out) {
    return long((out - 1) * s + k) - long(in) - long(p);
}

/// The three primitives of one layer shape and memory objects over dtrain's buffers (handles set per
/// call), with the two products whose arguments both layer kinds share.
struct OneDnnProducts {
    dnnl::primitive fwd, bwd_data, bwd_weights;
    dnnl::memory x, w, b, y, dx, dw, db;

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

/// Convolution by oneDNN's primitives (forward, backward data, backward weights with the bias) on NCHW and
/// OIHW directly, no reorders, on compute_threads() OpenMP threads. Deterministic for a given thread count
/// and CPU; the weight gradient's sums may be ordered by thread, so results can differ between thread
/// counts, and a sample's results may depend on the batch size. Applies where oneDNN is compiled in and
/// allowed (KernelCpu::onednn) and the right padding dtrain's output size implies is not negative.
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
        try {
            const dnnl::convolution_forward::primitive_desc fwd(
                {dnnl::prop_kind::forward_training, alg, md(src, tag::nchw), md(wts, tag::oihw),
                 md(bias, tag::x), md(dst, tag::nchw), strides, pl, pr},
                eng);
            m_.fwd = dnnl::convolution_forward(fwd);
            m_.bwd_data = dnnl::convolution_backward_data(dnnl::convolution_backward_data::primitive_desc(
                {alg, md(src, tag::nchw), md(wts, tag::oihw), md(dst, tag::nchw), strides, pl, pr}, eng,
                fwd));
            m_.bwd_weights =
                dnnl::convolution_backward_weights(dnnl::convolution_backward_weights::primitive_desc(
                    {alg, md(src, tag::nchw), md(wts, tag::oihw), md(bias, tag::x), md(dst, tag::nchw),
                     strides, pl, pr},
                    eng, fwd));
        } catch (const dnnl::error& e) {
            throw Error(detail::concat("oneDNN has no convolution for input ", detail::shape_str(src),
                                       ", weights ", detail::shape_str(wts), ": ", e.what(),
                                       " (set DTRAIN_KERNELS=native or reference)"));
        }
        m_.x = detail::onednn_memory(src, tag::nchw);
        m_.w = detail::onednn_memory(wts, tag::oihw);
        m_.b = detail::onednn_memory(bias, tag::x);
        m_.y = detail::onednn_memory(dst, tag::nchw);
        m_.dx = detail::onednn_memory(src, tag::nchw);
        m_.dw = detail::onednn_memory(wts, tag::oihw);
        m_.db = detail::onednn_memory(bias, tag::x);
        dwt_.resize(p.out * p.fan_in());
        dbt_.resize(p.out);
    }

    void forward(const float* x, const float* w, const float* bias, float* y) override {
        m_.forward(x, w, bias, y);
    }

    void backward_weights(const float* x, const float* dy, float* dw, float* db) override {
        m_.x.set_data_handle(const_cast<float*>(x));
        m_.y.set_data_handle(const_cast<float*>(dy));
        m_.dw.set_data_handle(dwt_.data());
        m_.db.set_data_handle(dbt_.data());
        detail::onednn_run(m_.bwd_weights, {{DNNL_ARG_SRC, m_.x},
                                            {DNNL_ARG_DIFF_DST, m_.y},
                                            {DNNL_ARG_DIFF_WEIGHTS, m_.dw},
                                            {DNNL_ARG_DIFF_BIAS, m_.db}});
        for (std::size_t i = 0; i < dwt_.size(); ++i)
            dw[i] += dwt_[i];
        for (std::size_t i = 0; i < dbt_.size(); ++i)
            db[i] += dbt_[i];
    }

    void backward_data(const float* dy, const float* w, float* dx) override { m_.backward_data(dy, w, dx); }

private:
    detail::OneDnnProducts m_;
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

#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <dtrain/core/blas.hpp>
#include <dtrain/core/cpu.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/init.hpp>
#include <dtrain/nn/kernel_description.hpp>
#include <dtrain/nn/layer.hpp>
#include <dtrain/nn/layers/detail/conv_gemm.hpp>
#include <dtrain/nn/layers/detail/conv_layout.hpp>
#include <dtrain/nn/layers/detail/direct_conv.hpp>
#include <dtrain/nn/layers/detail/direct_conv_grad.hpp>
#include <dtrain/nn/layers/detail/im2col.hpp>
#include <dtrain/nn/layers/detail/implicit_conv.hpp>

namespace dtrain {

/// 2-D convolution (cross-correlation, like PyTorch's Conv2d) over NCHW batches: input
/// [batch, in_channels, H, W], output [batch, out_channels, OH, OW] with OH = (H + 2 ph - kh) / sh + 1
/// (likewise OW). Parameters in the flat buffer: weight [out, in, kh, kw] then bias [out] (PyTorch's
/// layout). Weights are initialised by `init` (default He uniform, fan_in = in * kh * kw), biases to 0.
///
/// Three implementations, chosen per input shape; all agree within float rounding and are deterministic:
/// - Conv2d<float> with stride 1 and no padding on a CPU with AVX2 and FMA: the direct kernels of
///   nn/layers/detail/direct_conv.hpp and direct_conv_grad.hpp compute the forward pass (no columns; the
///   bias added to the first partial sum), the input gradient and, with a fan-in of at most
///   detail::direct_conv_max_fan_in, the weight gradient. Otherwise the weight gradient is a GEMM over
///   columns unfolded in backward a chunk of samples at a time (detail::col_chunk_samples, so they stay in
///   cache); with AVX-512F, detail::GemmConv runs such a layer's three products on the AVX-512 GEMM kernel
///   instead (forward bitwise the direct one's).
/// - Every other Conv2d<float> there (strided or padded): detail::ImplicitConv, implicit GEMMs per class of
///   positions with the same taps, input read in place (AVX-512 tiles with AVX-512F, bitwise the same).
/// - Conv2d<double>, any CPU without AVX2, and DTRAIN_KERNELS=reference (detail::kernel_set()): the batch
///   is unfolded (im2col) into one column matrix [in*kh*kw, batch*OH*OW] times the weights in ONE GEMM
///   (transposed with <= 32 output channels, which OpenBLAS runs faster), reordered into NCHW with the
///   bias; backward computes dW^T = cols * dY^T and dcols = W^T * dY, folded into dX (col2im), reusing the
///   columns of a forward of the same input tensor (same data pointer and shape) that no backward has
///   consumed yet.
///
/// Kernel taps that meet only padding at every output position (all but the centre of a 3x3 kernel with
/// padding 1 on a 1x1 map) are left out of every path. Scratch is sized per input shape and batch size and
/// reused; the passes besides the kernels and GEMMs run through detail::with_avx2. Measurements:
/// benchmarks/train/README.md.
template <class T = float>
class Conv2d final : public Layer<T>, public DescribesKernels {
public:
    /// A square kernel `kernel` x `kernel` with the same `stride` and zero `padding` on both axes.
    /// All sizes except `padding` must be positive.
    Conv2d(std::size_t in_channels, std::size_t out_channels, std::size_t kernel, std::size_t stride = 1,
           std::size_t padding = 0, Init init = Init::HeUniform)
        : Conv2d(in_channels, out_channels, {kernel, kernel}, {stride, stride}, {padding, padding}, init) {}

    /// Separate sizes per axis, each given as {height, width}; all except `padding` must be positive.
    Conv2d(std::size_t in_channels, std::size_t out_channels, std::array<std::size_t, 2> kernel,
           std::array<std::size_t, 2> stride, std::array<std::size_t, 2> padding = {0, 0},
           Init init = Init::HeUniform)
        : in_(in_channels), out_(out_channels), k_(kernel), s_(stride), p_(padding), init_(init) {
        DTRAIN_CHECK(in_ > 0 && out_ > 0 && k_[0] > 0 && k_[1] > 0 && s_[0] > 0 && s_[1] > 0,
                     "Conv2d: channels, kernel and stride must be positive, got in_channels=", in_,
                     ", out_channels=", out_, ", kernel=", detail::shape_str(k_),
                     ", stride=", detail::shape_str(s_));
    }

    std::string name() const override {
        std::string s = detail::concat("Conv2d(", in_, ", ", out_, ", kernel=", axes(k_));
        if (s_[0] != 1 || s_[1] != 1) s += ", stride=" + axes(s_);
        if (p_[0] != 0 || p_[1] != 0) s += ", padding=" + axes(p_);
        return s + ")";
    }

    Shape output_shape(const Shape& input) const override {
        DTRAIN_CHECK(input.size() == 3 && input[0] == in_, name(), ": expected input of shape [batch, ", in_,
                     ", H, W] but got [batch, ", detail::shape_str(input).substr(1));
        const detail::ConvGeometry g = geometry(input[1], input[2]);
        return {out_, g.oh, g.ow};
    }

    std::size_t num_params() const override { return out_ * fan_in() + out_; }

    /// DescribesKernels::kernels: the path of the class comment that samples of shape `input` [C, H, W] take.
    std::string kernels(const Shape& input) const override {
        if constexpr (!std::is_same_v<T, float>) return "im2col + BLAS";
        const detail::ConvGeometry g = geometry(input.at(1), input.at(2));
        const char* tiles = detail::gemm_avx512_available() ? "AVX-512" : "AVX2";
        if (detail::use_gemm_conv(g)) return "GEMM (AVX-512)";
        if (detail::use_implicit_conv(g)) return detail::concat("implicit GEMM (", tiles, ")");
        if (detail::use_direct_conv_weight_grad(g)) return "direct (AVX2)";
        if (detail::use_direct_conv_forward(g)) return "direct (AVX2), weight gradient im2col + BLAS";
        return "im2col + BLAS";
    }

    /// Layer<T>::bind: the weights [out_channels, in_channels * kernel height * kernel width], then the
    /// biases.
    void bind(T* params, T* grads, T*) override {
        w_ = params;
        b_ = params + out_ * fan_in();
        dw_ = grads;
        db_ = grads + out_ * fan_in();
        cols_src_ = nullptr;  // the next backward gathers from the new parameters
    }

    void init_params(Rng& rng) override {
        init_weights(w_, out_ * fan_in(), init_, fan_in(), out_ * k_[0] * k_[1], rng);
        std::fill(b_, b_ + out_, T(0));
    }

    /// Layer<T>::forward: the convolution of `in` [batch, C, H, W] plus the bias, into `out`.
    void forward(const Tensor<T>& in, Tensor<T>& out, bool) override {
        prepare(in);
        ensure_shape(out, std::array<std::size_t, 4>{n_, out_, g_.oh, g_.ow});
        if (n_ > 0) detail::with_avx2([&] { compute_forward(in.data(), out.data()); });
    }

    /// Layer<T>::backward: accumulates the weight and bias gradients; writes `grad_in` when asked.
    void backward(const Tensor<T>& in, const Tensor<T>&, const Tensor<T>& grad_out, Tensor<T>& grad_in,
                  bool need_grad_in) override {
        prepare(in);
        const std::size_t np = n_ * g_.positions();
        DTRAIN_CHECK(grad_out.size() == out_ * np, name(), ": grad_out has ", grad_out.size(),
                     " elements but the output of input ", detail::shape_str(in.shape()), " has ", out_ * np);
        if (need_grad_in) ensure_shape(grad_in, in.shape());
        T* dx = need_grad_in ? grad_in.data() : nullptr;
        if (n_ > 0) detail::with_avx2([&] { compute_backward(in.data(), grad_out.data(), dx); });
    }

    std::unique_ptr<Layer<T>> clone() const override {
        return std::make_unique<Conv2d>(in_, out_, k_, s_, p_, init_);
    }

    /// Input channels.
    std::size_t in_channels() const noexcept { return in_; }
    /// Output channels.
    std::size_t out_channels() const noexcept { return out_; }
    /// Kernel size {height, width}.
    std::array<std::size_t, 2> kernel_size() const noexcept { return k_; }
    /// Strides {vertical, horizontal}.
    std::array<std::size_t, 2> stride() const noexcept { return s_; }
    /// Zero padding {rows, columns}.
    std::array<std::size_t, 2> padding() const noexcept { return p_; }

    /// Weight view [out_channels, in_channels, kh, kw] (valid once bound to a model).
    TensorView<T, 4> weight() { return make_view<T, 4>(w_, {out_, in_, k_[0], k_[1]}); }
    /// Bias view [out_channels].
    TensorView<T, 1> bias() { return make_view<T, 1>(b_, {out_}); }

    /// The geometry this layer computes on an input of height h and width w: output size, column-matrix
    /// rows, the taps that meet the input, and whether the direct kernels apply
    /// (detail::use_direct_conv_forward). Throws when h or w is 0 or the kernel exceeds the padded input.
    detail::ConvGeometry geometry(std::size_t h, std::size_t w) const {
        DTRAIN_CHECK(h > 0 && w > 0, name(), ": input height and width must be positive, got [batch, ", in_,
                     ", ", h, ", ", w, "]");
        DTRAIN_CHECK(h + 2 * p_[0] >= k_[0] && w + 2 * p_[1] >= k_[1], name(), ": kernel ",
                     detail::shape_str(k_), " is larger than the padded input [", h + 2 * p_[0], ", ",
                     w + 2 * p_[1], "] (input [batch, ", in_, ", ", h, ", ", w, "], padding ",
                     detail::shape_str(p_), ")");
        detail::ConvGeometry g{in_, h, w, k_[0], k_[1], s_[0], s_[1], p_[0], p_[1]};
        g.finish();
        return g;
    }

private:
    // forward() of a non-empty batch x into y, run through detail::with_avx2 (the passes besides the
    // kernels and GEMMs: im2col, reorders, padding).
    void compute_forward(const T* x, T* y) {
        const std::size_t pos = g_.positions(), np = n_ * pos, rows = g_.col_rows();
        if constexpr (std::is_same_v<T, float>)
            if (gemm_ || implicit_) {
                gemm_ ? gemm_path_.forward(x, w_, b_, y) : implicit_path_.forward(x, w_, b_, y);
                return;
            }
        if (direct_fwd_) {
            direct_forward(x, y);
            return;
        }
        detail::im2col(x, n_, g_, cols_.data());
        cols_src_ = x;
        const T* w = used_weights_ = used_weights();
        if (rows == 0) std::fill(tmp_.begin(), tmp_.end(), T(0));  // every tap sees only padding
        if (rows > 0 && out_ <= narrow_out) {
            // tmp [n*pos, out] = cols^T [n*pos, rows] * W^T [rows, out], then
            // out[s][c][p] = tmp[s*pos + p][c] + bias[c]: faster with few output channels (class comment).
            detail::gemm(true, true, np, out_, rows, T(1), cols_.data(), np, w, rows, T(0), tmp_.data(),
                         out_);
            detail::nchw_from_rows(tmp_.data(), n_, pos, out_, b_, y);
            return;
        }
        // tmp [out, n*pos] = W [out, rows] * cols [rows, n*pos], then
        // out[s][c][p] = tmp[c][s*pos + p] + bias[c]
        if (rows > 0)
            detail::gemm(false, false, out_, np, rows, T(1), w, rows, cols_.data(), np, T(0), tmp_.data(),
                         np);
        detail::nchw_from_cols(tmp_.data(), n_, pos, out_, b_, y);
    }

    // backward() of a non-empty batch: parameter gradients from x and dy, and dx unless it is null.
    void compute_backward(const T* x, const T* dy, T* dx) {
        const std::size_t pos = g_.positions(), np = n_ * pos, rows = g_.col_rows();
        if constexpr (std::is_same_v<T, float>)
            if (gemm_ || implicit_) {
                gemm_ ? gemm_path_.backward(x, dy, w_, dw_, db_, dx)
                      : implicit_path_.backward(x, dy, w_, dw_, db_, dx);
                return;
            }
        if (direct_dw_) {
            direct_backward(x, dy);
            if (dx != nullptr) direct_input_grad(dy, dx);
            return;
        }
        detail::cols_from_nchw(dy, n_, pos, out_, tmp_.data());
        for (std::size_t c = 0; c < out_; ++c)
            db_[c] += detail::lane_sum(tmp_.data() + c * np, np);
        if (direct_fwd_) {
            chunked_backward(x);
            if (dx != nullptr) direct_input_grad(dy, dx);
            return;
        }
        const bool after_forward = cols_src_ == x;  // then cols_ and wused_ are that forward's
        if (!after_forward) detail::im2col(x, n_, g_, cols_.data());
        // dW^T [rows, out] = cols [rows, n*pos] * gY^T, then dW [out, rows] += its transpose: with the longer
        // side (rows) as the GEMM's M this runs faster than dW = gY * cols^T (see the class comment).
        // Taps that see only padding are not in the columns; their weight gradient is 0.
        if (rows > 0)
            detail::gemm(false, true, rows, out_, np, T(1), cols_.data(), np, tmp_.data(), np, T(0),
                         dwt_.data(), out_);
        detail::add_used_taps_transposed(dwt_.data(), g_, out_, dw_);
        cols_src_ = nullptr;
        if (dx != nullptr) input_grad(after_forward ? used_weights_ : used_weights(), dx);
    }

    static std::string axes(const std::array<std::size_t, 2>& a) {
        return a[0] == a[1] ? std::to_string(a[0]) : detail::concat("(", a[0], ", ", a[1], ")");
    }

    // Output channels up to which forward computes the transposed product (see the class comment).
    static constexpr std::size_t narrow_out = 32;

    std::size_t fan_in() const { return in_ * k_[0] * k_[1]; }

    // The weights of the used taps as a [out, col_rows()] matrix: the bound weights themselves when every
    // tap is used, else a copy of the used [k0h, k1h) x [k0w, k1w) window of each kernel.
    const T* used_weights() {
        if (g_.full_kernel()) return w_;
        const std::size_t nkh = g_.k1h - g_.k0h, nkw = g_.k1w - g_.k0w;
        T* d = wused_.data();
        for (std::size_t c = 0; c < out_; ++c)
            for (std::size_t ci = 0; ci < in_; ++ci)
                for (std::size_t ki = 0; ki < nkh; ++ki, d += nkw) {
                    const T* src = w_ + c * fan_in() + (ci * k_[0] + g_.k0h + ki) * k_[1] + g_.k0w;
                    std::copy(src, src + nkw, d);
                }
        return wused_.data();
    }

    // dX from gY in tmp_ and the used weights `w`: dcols [rows, n*pos] = W^T * gY, written over the
    // columns, then folded back into dX (col2im).
    void input_grad(const T* w, T* grad_in) {
        const std::size_t np = n_ * g_.positions(), rows = g_.col_rows();
        if (rows > 0)
            detail::gemm(true, false, rows, np, out_, T(1), w, rows, tmp_.data(), np, T(0), cols_.data(), np);
        detail::col2im(cols_.data(), n_, g_, grad_in);
    }

    // dW after a direct forward: dW^T += cols * gY^T (gY in tmp_), chunk_ samples of columns at a time.
    void chunked_backward(const T* x) {
        const std::size_t pos = g_.positions(), np = n_ * pos, rows = g_.col_rows(),
                          in_sample = in_ * g_.h * g_.w;
        for (std::size_t s0 = 0; s0 < n_; s0 += chunk_) {
            const std::size_t m = std::min(chunk_, n_ - s0), cp = m * pos;
            const T* gy = tmp_.data() + s0 * pos;
            detail::im2col(x + s0 * in_sample, m, g_, cols_.data());
            detail::gemm(false, true, rows, out_, cp, T(1), cols_.data(), cp, gy, np, s0 == 0 ? T(0) : T(1),
                         dwt_.data(), out_);
        }
        detail::add_used_taps_transposed(dwt_.data(), g_, out_, dw_);
    }

    // Forward by the direct kernel (detail::use_direct_conv_forward; float only), from packed weights.
    void direct_forward([[maybe_unused]] const T* x, [[maybe_unused]] T* y) {
#ifdef DTRAIN_DIRECT_CONV
        if constexpr (std::is_same_v<T, float>) {
            detail::pack_direct_weights(w_, out_, fan_in(), fan_in(), 1, wt_.data());
            detail::direct_conv_forward(x, n_, g_, wt_.data(), out_, b_, offsets_.data(), y);
        }
#endif
    }

    // dX by the direct kernel (float only), from the weights packed per tap block over wt_ (forward repacks).
    void direct_input_grad([[maybe_unused]] const T* grad_out, [[maybe_unused]] T* grad_in) {
#ifdef DTRAIN_DIRECT_CONV
        if constexpr (std::is_same_v<T, float>) {
            detail::pack_direct_dx_weights(w_, g_, out_, wt_.data());
            detail::direct_conv_input_grad(grad_out, n_, g_, wt_.data(), out_, offsets_.data(), grad_in);
        }
#endif
    }

    // db += sums of dY, dW += the direct kernel's products (detail::use_direct_conv_weight_grad).
    void direct_backward([[maybe_unused]] const T* x, const T* grad_out) {
        const std::size_t pos = g_.positions();
        detail::add_bias_grad(grad_out, n_, out_, pos, db_);
#ifdef DTRAIN_DIRECT_CONV
        if constexpr (std::is_same_v<T, float>)
            detail::direct_conv_weight_grad(x, n_, g_, grad_out, out_, offsets_.data(), dw_);
#endif
    }

    // Validates the batch shape and sizes the scratch buffers; cheap when the shape is unchanged.
    void prepare(const Tensor<T>& in) {
        const auto& s = in.shape();
        if (in.dimension() == 4 && s[0] == n_ && s[1] == in_ && s[2] == g_.h && s[3] == g_.w) return;
        DTRAIN_CHECK(in.dimension() == 4 && s[1] == in_, name(), ": expected input of shape [batch, ", in_,
                     ", H, W] but got ", detail::shape_str(s));
        g_ = geometry(s[2], s[3]);
        n_ = s[0];
        direct_fwd_ = std::is_same_v<T, float> && detail::use_direct_conv_forward(g_);
        direct_dw_ = std::is_same_v<T, float> && detail::use_direct_conv_weight_grad(g_);
        implicit_ = std::is_same_v<T, float> && detail::use_implicit_conv(g_);
        gemm_ = std::is_same_v<T, float> && detail::use_gemm_conv(g_);
        const std::size_t np = n_ * g_.positions(), rows = g_.col_rows();
        if constexpr (std::is_same_v<T, float>) {  // these two paths hold their own scratch
            if (gemm_) return gemm_path_.prepare(g_, n_, out_);
            if (implicit_) return implicit_path_.prepare(g_, n_, out_);
        }
        chunk_ = direct_fwd_ && !direct_dw_ ? detail::col_chunk_samples(n_, sizeof(T) * rows * g_.positions())
                                            : n_;
        cols_.resize(direct_dw_ ? 0 : rows * chunk_ * g_.positions());
        tmp_.resize(direct_dw_ ? 0 : out_ * np);
        dwt_.resize(direct_dw_ ? 0 : out_ * rows);
        wused_.resize(g_.full_kernel() ? 0 : out_ * rows);
        wt_.resize(direct_fwd_ ? out_ * rows : 0);
        offsets_.resize(direct_fwd_ ? rows : 0);
        if (direct_fwd_) detail::tap_offsets(g_, offsets_.data());
        cols_src_ = nullptr;
    }

    std::size_t in_, out_;
    std::array<std::size_t, 2> k_, s_, p_;
    Init init_;
    T* w_ = nullptr;
    T* b_ = nullptr;
    T* dw_ = nullptr;
    T* db_ = nullptr;
    detail::ConvGeometry g_;
    std::size_t n_ = 0;      // batch size the scratch buffers are sized for
    std::size_t chunk_ = 0;  // samples per column chunk of chunked_backward (n_ on the other paths)
    std::vector<T> cols_;    // column matrix [col_rows, n*OH*OW] of the last forward, or its gradient
    std::vector<T> tmp_;     // forward's GEMM output ([out, n*OH*OW] or [n*OH*OW, out]); dY as [out, n*OH*OW]
    std::vector<T> dwt_;     // the weight gradient of one backward, transposed: [col_rows, out]
    std::vector<T> wused_;   // the used taps' weights [out, col_rows] when some taps see only padding
    bool direct_fwd_ = false;             // detail::use_direct_conv_forward for this shape
    bool direct_dw_ = false;              // detail::use_direct_conv_weight_grad for this shape
    bool implicit_ = false;               // detail::use_implicit_conv for this shape
    detail::ImplicitConv implicit_path_;  // the implicit-GEMM path (used when implicit_)
    bool gemm_ = false;                   // detail::use_gemm_conv for this shape
    detail::GemmConv gemm_path_;          // the AVX-512 GEMM path (used when gemm_)
    std::vector<T> wt_;                   // direct path: the weights packed by detail::pack_direct_weights
    std::vector<std::size_t> offsets_;    // direct path: each tap's offset in an input sample (tap_offsets)
    const T* cols_src_ = nullptr;         // input whose columns cols_ holds (nullptr: none)
    const T* used_weights_ = nullptr;     // used_weights() of the last forward (valid while cols_src_ is set)
};

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class Conv2d<float>)
DTRAIN_PRECOMPILED_INSTANCE(class Conv2d<double>)

}  // namespace dtrain

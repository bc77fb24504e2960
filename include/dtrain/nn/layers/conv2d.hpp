#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <dtrain/core/blas.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/init.hpp>
#include <dtrain/nn/layer.hpp>
#include <dtrain/nn/layers/detail/im2col.hpp>

namespace dtrain {

/// 2-D convolution (cross-correlation, like PyTorch's Conv2d) over NCHW batches: input
/// [batch, in_channels, H, W], output [batch, out_channels, OH, OW] with OH = (H + 2 ph - kh) / sh + 1
/// (likewise OW). Parameters in the flat buffer: weight [out, in, kh, kw] then bias [out] (PyTorch's
/// layout). Weights are initialised by `init` (default He uniform, fan_in = in * kh * kw), biases to 0.
///
/// Implementation: each sample is unfolded (im2col) into a [in*kh*kw, OH*OW] column matrix and
/// multiplied by the [out, in*kh*kw] weight matrix in one GEMM whose result is already the sample's
/// NCHW output; backward recomputes the columns (rather than keeping the whole batch's) for
/// dW += dY_s * col_s^T and folds dcol_s = W^T * dY_s back (col2im). On the 2-core target machine a
/// full SINGA-CNN training step was measured equally fast (within noise) as with one whole-batch
/// [in*kh*kw, batch*OH*OW] im2col GEMM, while needing scratch memory for one sample instead of the whole
/// batch (8 MB for Conv2d(20, 50, 5) at batch 64). The scratch buffer is sized on the first batch of a
/// given input shape and reused.
template <class T = float>
class Conv2d final : public Layer<T> {
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

    void bind(T* params, T* grads, T*) override {
        w_ = params;
        b_ = params + out_ * fan_in();
        dw_ = grads;
        db_ = grads + out_ * fan_in();
    }

    void init_params(Rng& rng) override {
        init_weights(w_, out_ * fan_in(), init_, fan_in(), out_ * k_[0] * k_[1], rng);
        std::fill(b_, b_ + out_, T(0));
    }

    void forward(const Tensor<T>& in, Tensor<T>& out, bool) override {
        prepare(in);
        const std::size_t n = in.shape()[0], pos = g_.positions(), rows = g_.col_rows();
        const std::size_t in_size = in_ * g_.h * g_.w, out_size = out_ * pos;
        ensure_shape(out, std::array<std::size_t, 4>{n, out_, g_.oh, g_.ow});
        for (std::size_t s = 0; s < n; ++s) {
            // out_s [out, pos] = W [out, rows] * col_s [rows, pos], then + bias per row
            const T* col = columns(in.data() + s * in_size);
            T* o = out.data() + s * out_size;
            detail::gemm(false, false, out_, pos, rows, T(1), w_, rows, col, pos, T(0), o, pos);
            for (std::size_t c = 0; c < out_; ++c) {
                const T bias = b_[c];
                T* oc = o + c * pos;
                for (std::size_t p = 0; p < pos; ++p)
                    oc[p] += bias;
            }
        }
    }

    void backward(const Tensor<T>& in, const Tensor<T>&, const Tensor<T>& grad_out, Tensor<T>& grad_in,
                  bool need_grad_in) override {
        prepare(in);
        const std::size_t n = in.shape()[0], pos = g_.positions(), rows = g_.col_rows();
        const std::size_t in_size = in_ * g_.h * g_.w, out_size = out_ * pos;
        if (need_grad_in) ensure_shape(grad_in, in.shape());
        for (std::size_t s = 0; s < n; ++s) {
            const T* gs = grad_out.data() + s * out_size;
            for (std::size_t c = 0; c < out_; ++c) {
                const T* gc = gs + c * pos;
                T acc = T(0);
                for (std::size_t p = 0; p < pos; ++p)
                    acc += gc[p];
                db_[c] += acc;
            }
            // dW [out, rows] += dY_s [out, pos] * col_s^T
            const T* col = columns(in.data() + s * in_size);
            detail::gemm(false, true, out_, rows, pos, T(1), gs, pos, col, pos, T(1), dw_, rows);
            if (!need_grad_in) continue;
            // dcol_s [rows, pos] = W^T * dY_s, folded back into dX_s
            T* dx = grad_in.data() + s * in_size;
            if (direct_) {
                detail::gemm(true, false, rows, pos, out_, T(1), w_, rows, gs, pos, T(0), dx, pos);
            } else {
                detail::gemm(true, false, rows, pos, out_, T(1), w_, rows, gs, pos, T(0), col_.data(), pos);
                detail::col2im(col_.data(), 1, g_, dx);
            }
        }
    }

    std::unique_ptr<Layer<T>> clone() const override {
        return std::make_unique<Conv2d>(in_, out_, k_, s_, p_, init_);
    }

    /// Weight view [out_channels, in_channels, kh, kw] (valid once bound to a model).
    TensorView<T, 4> weight() { return make_view<T, 4>(w_, {out_, in_, k_[0], k_[1]}); }
    /// Bias view [out_channels].
    TensorView<T, 1> bias() { return make_view<T, 1>(b_, {out_}); }

private:
    static std::string axes(const std::array<std::size_t, 2>& a) {
        return a[0] == a[1] ? std::to_string(a[0]) : detail::concat("(", a[0], ", ", a[1], ")");
    }

    std::size_t fan_in() const { return in_ * k_[0] * k_[1]; }

    detail::ConvGeometry geometry(std::size_t h, std::size_t w) const {
        DTRAIN_CHECK(h > 0 && w > 0, name(), ": input height and width must be positive, got [batch, ", in_,
                     ", ", h, ", ", w, "]");
        DTRAIN_CHECK(h + 2 * p_[0] >= k_[0] && w + 2 * p_[1] >= k_[1], name(), ": kernel ",
                     detail::shape_str(k_), " is larger than the padded input [", h + 2 * p_[0], ", ",
                     w + 2 * p_[1], "] (input [batch, ", in_, ", ", h, ", ", w, "], padding ",
                     detail::shape_str(p_), ")");
        detail::ConvGeometry g;
        g.c = in_;
        g.h = h;
        g.w = w;
        g.kh = k_[0];
        g.kw = k_[1];
        g.sh = s_[0];
        g.sw = s_[1];
        g.ph = p_[0];
        g.pw = p_[1];
        g.finish();
        return g;
    }

    // Validates the batch shape and sizes the buffers; cheap when the shape is unchanged.
    void prepare(const Tensor<T>& in) {
        const auto& s = in.shape();
        if (in.dimension() == 4 && s[1] == in_ && s[2] == g_.h && s[3] == g_.w) return;
        DTRAIN_CHECK(in.dimension() == 4 && s[1] == in_, name(), ": expected input of shape [batch, ", in_,
                     ", H, W] but got ", detail::shape_str(s));
        g_ = geometry(s[2], s[3]);
        direct_ = k_[0] == 1 && k_[1] == 1 && s_[0] == 1 && s_[1] == 1 && p_[0] == 0 && p_[1] == 0;
        col_.resize(direct_ ? 0 : g_.col_rows() * g_.positions());
    }

    // The column matrix [in*kh*kw, OH*OW] of one sample (the sample itself for a 1x1 convolution).
    const T* columns(const T* x) {
        if (direct_) return x;
        detail::im2col(x, 1, g_, col_.data());
        return col_.data();
    }

    std::size_t in_, out_;
    std::array<std::size_t, 2> k_, s_, p_;
    Init init_;
    T* w_ = nullptr;
    T* b_ = nullptr;
    T* dw_ = nullptr;
    T* db_ = nullptr;
    detail::ConvGeometry g_;
    bool direct_ = false;  // 1x1 kernel, stride 1, no padding: the input is its own column matrix
    std::vector<T> col_;   // one sample's column matrix [in*kh*kw, OH*OW], or its gradient
};

}  // namespace dtrain

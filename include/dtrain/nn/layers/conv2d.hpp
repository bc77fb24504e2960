#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/init.hpp>
#include <dtrain/nn/kernel_description.hpp>
#include <dtrain/nn/kernels/compute_threads.hpp>
#include <dtrain/nn/kernels/conv_algorithms.hpp>
#include <dtrain/nn/layer.hpp>
#include <dtrain/nn/layers/detail/im2col.hpp>

namespace dtrain {

/// 2-D convolution (cross-correlation, like PyTorch's Conv2d) over NCHW batches: input
/// [batch, in_channels, H, W], output [batch, out_channels, OH, OW] with OH = (H + 2 ph - kh) / sh + 1
/// (likewise OW). Parameters in the flat buffer: weight [out, in, kh, kw] then bias [out] (PyTorch's
/// layout). Weights are initialised by `init` (default He uniform, fan_in = in * kh * kw), biases to 0.
///
/// The products run on the first algorithm of conv_algorithms<T>() (nn/kernels/) that applies to the input
/// shape, the batch size and the CPU (kernel_cpu(), which follows DTRAIN_KERNELS), chosen again when the
/// input shape changes; Model::summary() names it. All agree within float rounding and are deterministic.
/// With compute_threads() T > 1 and an algorithm whose results per sample do not depend on the batch (the
/// native kernels), the forward pass and the input gradient run on T parts of the batch at once, bitwise
/// as on one thread; the weight gradient runs on one thread beside the input gradient's parts.
/// Kernel taps that meet only padding at every output position (all but the centre of a 3x3 kernel with
/// padding 1 on a 1x1 map) are left out by every algorithm.
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

    /// DescribesKernels::kernels: the name of the algorithm samples of shape `input` [C, H, W] run on (for
    /// a batch of 64; no algorithm chooses by batch size today).
    std::string kernels(const Shape& input) const override {
        return choose_conv_algorithm<T>(ConvProblem{geometry(input.at(1), input.at(2)), 64, out_}).name;
    }

    /// Layer<T>::bind: the weights [out_channels, in_channels * kernel height * kernel width], then the
    /// biases.
    void bind(T* params, T* grads, T*) override {
        w_ = params;
        b_ = params + out_ * fan_in();
        dw_ = grads;
        db_ = grads + out_ * fan_in();
        algo_.reset();  // the next call prepares an algorithm for the new parameters
    }

    void init_params(Rng& rng) override {
        init_weights(w_, out_ * fan_in(), init_, fan_in(), out_ * k_[0] * k_[1], rng);
        std::fill(b_, b_ + out_, T(0));
    }

    /// Layer<T>::forward: the convolution of `in` [batch, C, H, W] plus the bias, into `out`.
    void forward(const Tensor<T>& in, Tensor<T>& out, bool) override {
        prepare(in);
        ensure_shape(out, std::array<std::size_t, 4>{n_, out_, g_.oh, g_.ow});
        if (n_ == 0) return;
        if (split_.empty()) return algo_->forward(in.data(), w_, b_, out.data());
        const std::size_t xs = in_ * g_.h * g_.w, ys = out_ * g_.positions();
        const T* x = in.data();
        T* y = out.data();
        split_.run([&](auto& part, std::size_t s0) { part.forward(x + s0 * xs, w_, b_, y + s0 * ys); });
    }

    /// Layer<T>::backward: accumulates the weight and bias gradients; writes `grad_in` when asked.
    void backward(const Tensor<T>& in, const Tensor<T>&, const Tensor<T>& grad_out, Tensor<T>& grad_in,
                  bool need_grad_in) override {
        prepare(in);
        const std::size_t np = n_ * g_.positions();
        DTRAIN_CHECK(grad_out.size() == out_ * np, name(), ": grad_out has ", grad_out.size(),
                     " elements but the output of input ", detail::shape_str(in.shape()), " has ", out_ * np);
        if (need_grad_in) ensure_shape(grad_in, in.shape());
        if (n_ == 0) return;
        if (!need_grad_in || split_.empty()) {
            algo_->backward_weights(in.data(), grad_out.data(), dw_, db_);
            if (need_grad_in) algo_->backward_data(grad_out.data(), w_, grad_in.data());
            return;
        }
        // The weight gradient on one thread beside the input gradient's parts on the others: the parts'
        // input gradients need no weight gradient before them (splits_batch), and each product is computed
        // as on one thread.
        const std::size_t xs = in_ * g_.h * g_.w, ys = out_ * g_.positions();
        const T* dy = grad_out.data();
        T* dx = grad_in.data();
        split_.run_beside(
            [&] { algo_->backward_weights(in.data(), dy, dw_, db_); },
            [&](auto& part, std::size_t s0) { part.backward_data(dy + s0 * ys, w_, dx + s0 * xs); });
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
    /// rows and the taps that meet the input. Throws when h or w is 0 or the kernel exceeds the padded input.
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
    static std::string axes(const std::array<std::size_t, 2>& a) {
        return a[0] == a[1] ? std::to_string(a[0]) : detail::concat("(", a[0], ", ", a[1], ")");
    }

    std::size_t fan_in() const { return in_ * k_[0] * k_[1]; }

    // Validates the batch shape and, for a new one, chooses and prepares the algorithm.
    void prepare(const Tensor<T>& in) {
        const auto& s = in.shape();
        if (algo_ && in.dimension() == 4 && s[0] == n_ && s[1] == in_ && s[2] == g_.h && s[3] == g_.w &&
            !split_.stale())
            return;
        DTRAIN_CHECK(in.dimension() == 4 && s[1] == in_, name(), ": expected input of shape [batch, ", in_,
                     ", H, W] but got ", detail::shape_str(s));
        g_ = geometry(s[2], s[3]);
        n_ = s[0];
        const ConvProblem problem{g_, n_, out_};
        const ConvAlgorithmEntry<T>& chosen = choose_conv_algorithm<T>(problem);
        if (!algo_ || algo_->name() != chosen.name) algo_ = chosen.make();
        algo_->prepare(problem);
        split_.prepare(chosen, n_, [&](std::size_t samples) { return ConvProblem{g_, samples, out_}; });
    }

    std::size_t in_, out_;
    std::array<std::size_t, 2> k_, s_, p_;
    Init init_;
    T* w_ = nullptr;
    T* b_ = nullptr;
    T* dw_ = nullptr;
    T* db_ = nullptr;
    detail::ConvGeometry g_;
    std::size_t n_ = 0;                           // batch size the algorithm is prepared for
    std::unique_ptr<ConvAlgorithm<T>> algo_;      // the algorithm of this shape (null: none prepared yet)
    detail::BatchSplit<ConvAlgorithm<T>> split_;  // the batch split over threads (or none)
};

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class Conv2d<float>)
DTRAIN_PRECOMPILED_INSTANCE(class Conv2d<double>)

}  // namespace dtrain

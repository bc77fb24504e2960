#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <dtrain/core/cpu.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/layer.hpp>
#include <dtrain/nn/layer_fusion.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/detail/channel_passes.hpp>

namespace dtrain {

/// Batch normalisation over the channel axis (axis 1) of [batch, C] (Spatial = 0) or
/// [batch, C, H, W] (Spatial = 2), with PyTorch's semantics:
/// - training: y = gamma * (x - mean) / sqrt(var + eps) + beta with the batch mean and biased variance
///   per channel (over batch and spatial positions); the running statistics are updated as
///   running = (1 - momentum) * running + momentum * batch_stat, using the UNBIASED variance;
/// - eval: the running mean and variance replace the batch statistics.
/// gamma [C] then beta [C] are trainable (flat parameter buffer; initialised to 1 and 0); running mean
/// [C] then running var [C] live in the model's state buffer (initialised to 0 and 1). Training needs
/// more than one value per channel. A ReLU after it runs inside it (FusesWithNext): applied as the output
/// is written, so that the normalised values are never stored. Use the aliases BatchNorm1d and BatchNorm2d.
template <class T, std::size_t Spatial>
class BatchNorm final : public Layer<T>, public FusesWithNext<T> {
    static_assert(Spatial == 0 || Spatial == 2, "dtrain::BatchNorm: Spatial must be 0 (1d) or 2 (2d)");

public:
    /// Normalises `channels` (> 0) channels; requires 0 <= momentum <= 1 and eps > 0.
    explicit BatchNorm(std::size_t channels, double momentum = 0.1, double eps = 1e-5)
        : c_(channels), momentum_(momentum), eps_(eps), passes_(channels) {
        DTRAIN_CHECK(c_ > 0 && momentum_ >= 0.0 && momentum_ <= 1.0 && eps_ > 0.0, kind(),
                     ": need channels > 0, momentum in [0, 1] and eps > 0, got (", c_,
                     ", momentum=", momentum_, ", eps=", eps_, ")");
    }

    std::string name() const override { return detail::concat(kind(), "(", c_, ")"); }

    Shape output_shape(const Shape& input) const override {
        DTRAIN_CHECK(input.size() == Spatial + 1 && input[0] == c_, name(),
                     ": expected input of shape [batch, ", c_, Spatial == 2 ? ", H, W" : "",
                     "] but got [batch, ", detail::shape_str(input).substr(1));
        return input;
    }

    std::size_t num_params() const override { return 2 * c_; }
    std::size_t num_state() const override { return 2 * c_; }

    void bind(T* params, T* grads, T* state) override {
        gamma_ = params;
        beta_ = params + c_;
        dgamma_ = grads;
        dbeta_ = grads + c_;
        rmean_ = state;
        rvar_ = state + c_;
    }

    void init_params(Rng&) override {
        std::fill(gamma_, gamma_ + c_, T(1));
        std::fill(beta_, beta_ + c_, T(0));
        std::fill(rmean_, rmean_ + c_, T(0));
        std::fill(rvar_, rvar_ + c_, T(1));
    }

    void forward(const Tensor<T>& in, Tensor<T>& out, bool training) override {
        detail::with_avx2([&] { forward_impl(in, out, training, [](T v) { return v; }); });
    }

    void backward(const Tensor<T>& in, const Tensor<T>&, const Tensor<T>& grad_out, Tensor<T>& grad_in,
                  bool need_grad_in) override {
        check_gradient(in, grad_out);
        const T* g = grad_out.data();
        detail::with_avx2([&] { backward_impl(in, g, grad_in, need_grad_in); });
    }

    /// FusesWithNext: a ReLU, on every CPU and kernel set.
    bool fuses_with_next(const Layer<T>& next) const override {
        return dynamic_cast<const ReLU<T>*>(&next) != nullptr;
    }

    /// FusesWithNext: ReLU(this layer's output), the ReLU applied as each value is written.
    void forward_with_next(const Tensor<T>& in, Tensor<T>& out, bool training) override {
        detail::with_avx2([&] { forward_impl(in, out, training, [](T v) { return detail::ReluFn::f(v); }); });
    }

    /// FusesWithNext: ReLU passes the gradient where its input is not <= 0; `out`, ReLU's output, is <= 0
    /// exactly where that input is (NaN passes both), so the gradient is masked by `out`, then taken
    /// through this layer as backward() takes it.
    void backward_with_next(const Tensor<T>& in, const Tensor<T>& out, const Tensor<T>& grad_out,
                            Tensor<T>& grad_in, bool need_grad_in) override {
        check_gradient(in, grad_out);
        DTRAIN_CHECK(out.shape() == in.shape(), name(), " with a ReLU: output of shape ",
                     detail::shape_str(out.shape()), " for an input of shape ",
                     detail::shape_str(in.shape()));
        // ReLU's own backward, in a pass of its own (applied inside this layer's sums, the mask became a
        // branch per value there and they ran 7x slower), into grad_in, which this layer's backward then
        // overwrites in place; into scratch only when no input gradient is wanted.
        Tensor<T>& masked = need_grad_in ? grad_in : masked_;
        ReLU<T>().backward(out, out, grad_out, masked, true);
        const T* m = masked.data();
        detail::with_avx2([&] { backward_impl(in, m, grad_in, need_grad_in); });
    }

    std::unique_ptr<Layer<T>> clone() const override {
        return std::make_unique<BatchNorm>(c_, momentum_, eps_);
    }

    /// Number of channels C.
    std::size_t channels() const noexcept { return c_; }
    /// The eps added to the variance.
    double eps() const noexcept { return eps_; }

    /// Scale view [C] (valid once bound to a model).
    TensorView<T, 1> gamma() { return make_view<T, 1>(gamma_, {c_}); }
    /// Shift view [C].
    TensorView<T, 1> beta() { return make_view<T, 1>(beta_, {c_}); }
    /// Running mean view [C] (in the model's state buffer).
    TensorView<T, 1> running_mean() { return make_view<T, 1>(rmean_, {c_}); }
    /// Running (unbiased) variance view [C] (in the model's state buffer).
    TensorView<T, 1> running_var() { return make_view<T, 1>(rvar_, {c_}); }

private:
    // y = act(the normalised in): act is the identity, or ReLU when a ReLU runs inside this layer.
    template <class Act>
    void forward_impl(const Tensor<T>& in, Tensor<T>& out, bool training, Act act) {
        const auto [n, inner] = dims(in);
        const std::size_t count = n * inner;
        ensure_shape(out, in.shape());
        passes_.size_for(inner);
        const T* x = in.data();
        T* y = out.data();
        double* const mean = passes_.mean();
        double* const invstd = passes_.invstd();
        training_ = training;
        if (training) {
            DTRAIN_CHECK(count > 1, name(), ": training needs more than one value per channel, got input ",
                         detail::shape_str(in.shape()),
                         " (a last batch of one sample? drop it with LoaderOptions::drop_last = true, or "
                         "choose a batch size that does not leave one)");
            passes_.sums(
                n, inner, [&](double, double, std::size_t i) { return double(x[i]); }, nullptr);
            for (std::size_t c = 0; c < c_; ++c)
                mean[c] = passes_.sum1(c) / double(count);
            passes_.statistics_set(inner);
            passes_.sums(
                n, inner,
                [&](double mc, double, std::size_t i) {
                    const double d = double(x[i]) - mc;
                    return d * d;
                },
                nullptr);
            const double m = momentum_;
            for (std::size_t c = 0; c < c_; ++c) {
                const double var = passes_.sum1(c) / double(count);
                invstd[c] = 1.0 / std::sqrt(var + eps_);
                rmean_[c] = T((1.0 - m) * double(rmean_[c]) + m * mean[c]);
                rvar_[c] = T((1.0 - m) * double(rvar_[c]) + m * var * double(count) / double(count - 1));
            }
        } else {
            for (std::size_t c = 0; c < c_; ++c) {
                mean[c] = double(rmean_[c]);
                invstd[c] = 1.0 / std::sqrt(double(rvar_[c]) + eps_);
            }
        }
        passes_.statistics_set(inner);  // also for the backward's sums
        // y = (x - mean) * a + beta per channel, a = gamma * invstd: centred before it is scaled, the mean
        // split into hi = T(mean) and lo = mean - hi, y = (x - hi) * a + (beta - lo * a). Where x lies near a
        // mean that is large against the spread, x - hi is exact, so the result keeps the digits that
        // x * a + (beta - mean * a) loses where its large terms cancel.
        passes_.template elementwise<3>(
            n, inner,
            [&](std::size_t c) {
                const T hi = T(mean[c]);
                const double a = double(gamma_[c]) * invstd[c];
                return std::array<T, 3>{T(a), hi, T(double(beta_[c]) - (mean[c] - double(hi)) * a)};
            },
            [&](std::size_t i, const auto& k) { y[i] = act((x[i] - k(1)) * k(0) + k(2)); });
    }

    // Adds dgamma and dbeta and, when need_grad_in, writes dx, given g = dLoss/dy (of in's shape; it may be
    // grad_in's own data, which dx then overwrites value by value).
    void backward_impl(const Tensor<T>& in, const T* g, Tensor<T>& grad_in, bool need_grad_in) {
        const auto [n, inner] = dims(in);
        const std::size_t count = n * inner;
        const T* x = in.data();
        const double* const mean = passes_.mean();
        const double* const invstd = passes_.invstd();
        // sum1 = sum(dy), sum2 = sum(dy * xhat) per channel
        passes_.sums(
            n, inner, [&](double, double, std::size_t i) { return double(g[i]); },
            [&](double mc, double ic, std::size_t i) { return double(g[i]) * (double(x[i]) - mc) * ic; });
        for (std::size_t c = 0; c < c_; ++c) {
            dgamma_[c] += T(passes_.sum2(c));
            dbeta_[c] += T(passes_.sum1(c));
        }
        if (!need_grad_in) return;
        ensure_shape(grad_in, in.shape());
        T* d = grad_in.data();
        if (training_) {
            // dx = gamma * invstd * (dy - sum(dy) / M - xhat * sum(dy * xhat) / M)
            //    = k * dy - k * s1 - (x - mean) * (k * invstd * s2), in T with x centred first (exact
            //      enough when the mean is large against the spread), coefficients in double.
            passes_.template elementwise<4>(
                n, inner,
                [&](std::size_t c) {
                    const double k = double(gamma_[c]) * invstd[c];
                    const double s1 = passes_.sum1(c) / double(count), s2 = passes_.sum2(c) / double(count);
                    return std::array<T, 4>{T(k), T(k * s1), T(k * invstd[c] * s2), T(mean[c])};
                },
                [&](std::size_t i, const auto& k) { d[i] = k(0) * g[i] - k(1) - (x[i] - k(3)) * k(2); });
        } else {
            passes_.template elementwise<1>(
                n, inner, [&](std::size_t c) { return std::array<T, 1>{T(double(gamma_[c]) * invstd[c])}; },
                [&](std::size_t i, const auto& k) { d[i] = g[i] * k(0); });
        }
    }

    void check_gradient(const Tensor<T>& in, const Tensor<T>& grad_out) const {
        DTRAIN_CHECK(grad_out.shape() == in.shape(), name(), ": gradient of shape ",
                     detail::shape_str(grad_out.shape()), " for an input of shape ",
                     detail::shape_str(in.shape()));
    }

    static const char* kind() { return Spatial == 0 ? "BatchNorm1d" : "BatchNorm2d"; }

    // Returns (batch, spatial size) after checking the batch shape.
    std::pair<std::size_t, std::size_t> dims(const Tensor<T>& in) const {
        const auto& s = in.shape();
        DTRAIN_CHECK(in.dimension() == Spatial + 2 && s[1] == c_, name(),
                     ": expected input of shape [batch, ", c_, Spatial == 2 ? ", H, W" : "", "] but got ",
                     detail::shape_str(s));
        return {s[0], Spatial == 2 ? s[2] * s[3] : 1};
    }

    std::size_t c_;
    double momentum_, eps_;
    T* gamma_ = nullptr;
    T* beta_ = nullptr;
    T* dgamma_ = nullptr;
    T* dbeta_ = nullptr;
    T* rmean_ = nullptr;
    T* rvar_ = nullptr;
    bool training_ = true;
    detail::ChannelPasses<T> passes_;  // also the statistics of the last forward
    Tensor<T> masked_;                 // backward_with_next() without an input gradient: the masked gradient
};

/// Batch normalisation of [batch, features]; see BatchNorm.
template <class T = float>
using BatchNorm1d = BatchNorm<T, 0>;

/// Batch normalisation of [batch, C, H, W] per channel; see BatchNorm.
template <class T = float>
using BatchNorm2d = BatchNorm<T, 2>;

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class BatchNorm<float, 0>)
DTRAIN_PRECOMPILED_INSTANCE(class BatchNorm<double, 0>)
DTRAIN_PRECOMPILED_INSTANCE(class BatchNorm<float, 2>)
DTRAIN_PRECOMPILED_INSTANCE(class BatchNorm<double, 2>)

}  // namespace dtrain

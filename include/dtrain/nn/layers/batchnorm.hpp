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

#include <dtrain/core/aligned_allocator.hpp>
#include <dtrain/core/cpu.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/layer.hpp>

namespace dtrain {

/// Batch normalisation over the channel axis (axis 1) of [batch, C] (Spatial = 0) or
/// [batch, C, H, W] (Spatial = 2), with PyTorch's semantics:
/// - training: y = gamma * (x - mean) / sqrt(var + eps) + beta with the batch mean and biased variance
///   per channel (over batch and spatial positions); the running statistics are updated as
///   running = (1 - momentum) * running + momentum * batch_stat, using the UNBIASED variance;
/// - eval: the running mean and variance replace the batch statistics.
/// gamma [C] then beta [C] are trainable (flat parameter buffer; initialised to 1 and 0); running mean
/// [C] then running var [C] live in the model's state buffer (initialised to 0 and 1). Training needs
/// more than one value per channel. Use the aliases BatchNorm1d and BatchNorm2d.
template <class T, std::size_t Spatial>
class BatchNorm final : public Layer<T> {
    static_assert(Spatial == 0 || Spatial == 2, "dtrain::BatchNorm: Spatial must be 0 (1d) or 2 (2d)");

public:
    /// Normalises `channels` (> 0) channels; requires 0 <= momentum <= 1 and eps > 0.
    explicit BatchNorm(std::size_t channels, double momentum = 0.1, double eps = 1e-5)
        : c_(channels),
          momentum_(momentum),
          eps_(eps),
          mean_(channels),
          invstd_(channels),
          acc1_(channels),
          acc2_(channels),
          lane1_(channels * lanes),
          lane2_(channels * lanes) {
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
        detail::with_avx2([&] { forward_impl(in, out, training); });
    }

    void backward(const Tensor<T>& in, const Tensor<T>&, const Tensor<T>& grad_out, Tensor<T>& grad_in,
                  bool need_grad_in) override {
        detail::with_avx2([&] { backward_impl(in, grad_out, grad_in, need_grad_in); });
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
    void forward_impl(const Tensor<T>& in, Tensor<T>& out, bool training) {
        const auto [n, inner] = dims(in);
        const std::size_t count = n * inner;
        ensure_shape(out, in.shape());
        size_blocks(inner);
        const T* x = in.data();
        T* y = out.data();
        training_ = training;
        if (training) {
            DTRAIN_CHECK(count > 1, name(), ": training needs more than one value per channel, got input ",
                         detail::shape_str(in.shape()),
                         " (a last batch of one sample? drop it with LoaderOptions::drop_last = true, or "
                         "choose a batch size that does not leave one)");
            channel_sums(
                n, inner, [&](double, double, std::size_t i) { return double(x[i]); }, nullptr);
            for (std::size_t c = 0; c < c_; ++c)
                mean_[c] = acc1_[c] / double(count);
            spread(stat_.data(), inner, [&](std::size_t c) { return mean_[c]; });
            channel_sums(
                n, inner,
                [&](double mean, double, std::size_t i) {
                    const double d = double(x[i]) - mean;
                    return d * d;
                },
                nullptr);
            const double m = momentum_;
            for (std::size_t c = 0; c < c_; ++c) {
                const double var = acc1_[c] / double(count);
                invstd_[c] = 1.0 / std::sqrt(var + eps_);
                rmean_[c] = T((1.0 - m) * double(rmean_[c]) + m * mean_[c]);
                rvar_[c] = T((1.0 - m) * double(rvar_[c]) + m * var * double(count) / double(count - 1));
            }
        } else {
            for (std::size_t c = 0; c < c_; ++c) {
                mean_[c] = double(rmean_[c]);
                invstd_[c] = 1.0 / std::sqrt(double(rvar_[c]) + eps_);
            }
            spread(stat_.data(), inner, [&](std::size_t c) { return mean_[c]; });
        }
        spread(stat_.data() + c_ * inner, inner, [&](std::size_t c) { return invstd_[c]; });
        // y = (x - mean) * a + beta per channel, a = gamma * invstd: centred before it is scaled, the mean
        // split into hi = T(mean) and lo = mean - hi, y = (x - hi) * a + (beta - lo * a). Where x lies near a
        // mean that is large against the spread, x - hi is exact, so the result keeps the digits that
        // x * a + (beta - mean * a) loses where its large terms cancel.
        elementwise<3>(
            n, inner,
            [&](std::size_t c) {
                const T hi = T(mean_[c]);
                const double a = double(gamma_[c]) * invstd_[c];
                return std::array<T, 3>{T(a), hi, T(double(beta_[c]) - (mean_[c] - double(hi)) * a)};
            },
            [&](std::size_t i, const auto& k) { y[i] = (x[i] - k(1)) * k(0) + k(2); });
    }

    void backward_impl(const Tensor<T>& in, const Tensor<T>& grad_out, Tensor<T>& grad_in,
                       bool need_grad_in) {
        const auto [n, inner] = dims(in);
        const std::size_t count = n * inner;
        const T* x = in.data();
        const T* g = grad_out.data();
        // acc1 = sum(dy), acc2 = sum(dy * xhat) per channel
        channel_sums(
            n, inner, [&](double, double, std::size_t i) { return double(g[i]); },
            [&](double mean, double invstd, std::size_t i) {
                return double(g[i]) * (double(x[i]) - mean) * invstd;
            });
        for (std::size_t c = 0; c < c_; ++c) {
            dgamma_[c] += T(acc2_[c]);
            dbeta_[c] += T(acc1_[c]);
        }
        if (!need_grad_in) return;
        ensure_shape(grad_in, in.shape());
        T* d = grad_in.data();
        if (training_) {
            // dx = gamma * invstd * (dy - sum(dy) / M - xhat * sum(dy * xhat) / M)
            //    = k * dy - k * s1 - (x - mean) * (k * invstd * s2), in T with x centred first (exact
            //      enough when the mean is large against the spread), coefficients in double.
            elementwise<4>(
                n, inner,
                [&](std::size_t c) {
                    const double k = double(gamma_[c]) * invstd_[c];
                    const double s1 = acc1_[c] / double(count), s2 = acc2_[c] / double(count);
                    return std::array<T, 4>{T(k), T(k * s1), T(k * invstd_[c] * s2), T(mean_[c])};
                },
                [&](std::size_t i, const auto& k) { d[i] = k(0) * g[i] - k(1) - (x[i] - k(3)) * k(2); });
        } else {
            elementwise<1>(
                n, inner, [&](std::size_t c) { return std::array<T, 1>{T(double(gamma_[c]) * invstd_[c])}; },
                [&](std::size_t i, const auto& k) { d[i] = g[i] * k(0); });
        }
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

    // True when a sample's block of C * inner values is small enough (or its rows too short) for per-value
    // partial sums and coefficients: the loops then run over whole blocks, not over rows of one channel,
    // which at ResNet9's 1x1 to 4x4 maps are 1 to 16 values long. Larger blocks keep the row sums, whose
    // partial sums stay in registers (measured: benchmarks/train/README.md).
    bool blockwise(std::size_t inner) const { return c_ * inner <= block_max || inner < lanes; }

    // Sizes the blockwise scratch for blocks of C * inner values; allocates only when a block grows.
    void size_blocks(std::size_t inner) {
        if (!blockwise(inner)) return;
        const std::size_t b = c_ * inner;
        if (lane1_.size() < b) lane1_.resize(b), lane2_.resize(b);
        if (stat_.size() < 2 * b) stat_.resize(2 * b), coef_.resize(4 * b);
    }

    // Blockwise: lays v(c) out over channel c's values of a block of C * inner at dst. stat_ holds mean_
    // then invstd_ so laid out, the backward's channel_sums reads them from there.
    template <class U, class V>
    void spread(U* dst, std::size_t inner, V&& v) const {
        if (!blockwise(inner)) return;
        for (std::size_t c = 0; c < c_; ++c)
            std::fill_n(dst + c * inner, inner, v(c));
    }

    // Sets acc1_[c] (and acc2_[c], unless f2 is nullptr) to the sums of f1(mean, invstd, i) (and f2) over
    // channel c's values i, in double, mean and invstd being the channel's. The order is fixed (the same
    // result on every call): blockwise, each value of a block is summed over the samples and then each
    // channel's values in order; otherwise each row of one channel in 8 interleaved partial sums, added lane
    // by lane into 8 per channel that are added up at the end. Either way the loops vectorise.
    template <class F1, class F2>
    void channel_sums(std::size_t n, std::size_t inner, F1&& f1, F2&& f2) {
        constexpr bool two = !std::is_same_v<std::decay_t<F2>, std::nullptr_t>;
        std::fill(acc1_.begin(), acc1_.end(), 0.0);
        std::fill(acc2_.begin(), acc2_.end(), 0.0);
        double* p1 = lane1_.data();
        double* p2 = lane2_.data();
        if (blockwise(inner)) {
            const std::size_t b = c_ * inner;
            const double* mean = stat_.data();
            const double* invstd = mean + b;
            std::fill_n(p1, b, 0.0);
            if constexpr (two) std::fill_n(p2, b, 0.0);
            for (std::size_t s = 0; s < n; ++s)
                for (std::size_t k = 0; k < b; ++k) {
                    p1[k] += f1(mean[k], invstd[k], s * b + k);
                    if constexpr (two) p2[k] += f2(mean[k], invstd[k], s * b + k);
                }
            for (std::size_t c = 0; c < c_; ++c)
                for (std::size_t j = 0; j < inner; ++j) {
                    acc1_[c] += p1[c * inner + j];
                    if constexpr (two) acc2_[c] += p2[c * inner + j];
                }
            return;
        }
        std::fill_n(p1, c_ * lanes, 0.0);
        std::fill_n(p2, c_ * lanes, 0.0);
        for (std::size_t s = 0; s < n; ++s)
            for (std::size_t c = 0; c < c_; ++c) {
                double a[lanes] = {}, z[lanes] = {};  // in registers over the row
                const double mean = mean_[c], invstd = invstd_[c];
                const std::size_t base = (s * c_ + c) * inner;
                std::size_t j = 0;
                for (; j + lanes <= inner; j += lanes)
                    for (std::size_t k = 0; k < lanes; ++k) {
                        a[k] += f1(mean, invstd, base + j + k);
                        if constexpr (two) z[k] += f2(mean, invstd, base + j + k);
                    }
                for (std::size_t k = 0; j < inner; ++j, ++k) {
                    a[k] += f1(mean, invstd, base + j);
                    if constexpr (two) z[k] += f2(mean, invstd, base + j);
                }
                for (std::size_t k = 0; k < lanes; ++k) {
                    p1[c * lanes + k] += a[k];
                    p2[c * lanes + k] += z[k];
                }
            }
        for (std::size_t c = 0; c < c_; ++c)
            for (std::size_t k = 0; k < lanes; ++k) {
                acc1_[c] += p1[c * lanes + k];
                acc2_[c] += p2[c * lanes + k];
            }
    }

    // For every value i (flat index) of channel c, calls op(i, k) with k(q) the q-th of the K coefficients
    // make(c) returns (a std::array<T, K>). Blockwise, the coefficients are first laid out per value of a
    // block, so that the loop runs over whole blocks.
    template <std::size_t K, class Make, class Op>
    void elementwise(std::size_t n, std::size_t inner, Make&& make, Op&& op) {
        if (blockwise(inner)) {
            const std::size_t b = c_ * inner;
            T* e = coef_.data();
            for (std::size_t q = 0; q < K; ++q)
                spread(e + q * b, inner, [&](std::size_t c) { return make(c)[q]; });
            for (std::size_t s = 0; s < n; ++s)
                for (std::size_t k = 0; k < b; ++k)
                    op(s * b + k, [&](std::size_t q) { return e[q * b + k]; });
            return;
        }
        for (std::size_t s = 0; s < n; ++s)
            for (std::size_t c = 0; c < c_; ++c) {
                const std::array<T, K> a = make(c);
                const std::size_t base = (s * c_ + c) * inner;
                for (std::size_t j = 0; j < inner; ++j)
                    op(base + j, [&](std::size_t q) { return a[q]; });
            }
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
    std::vector<double> mean_, invstd_;  // statistics used by the last forward
    std::vector<double> acc1_, acc2_;    // per-channel scratch
    static constexpr std::size_t lanes = 8;
    static constexpr std::size_t block_max = 512;  // largest block of C * inner values taken blockwise
    // channel_sums' partial sums, [C][lanes] or (blockwise) [C * inner]
    detail::AlignedVector<double> lane1_, lane2_;
    detail::AlignedVector<double> stat_;  // blockwise: mean_ and invstd_ per value of a block, [2][C * inner]
    detail::AlignedVector<T> coef_;       // blockwise: elementwise()'s coefficients, [K][C * inner]
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

#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <dtrain/core/aligned_allocator.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/layer.hpp>

namespace dtrain {

/// Layer normalisation over the last axis (PyTorch's LayerNorm(features) with elementwise_affine): every
/// vector of `features` values along the input's last axis is normalised by its own mean and biased
/// variance, y = (x - mean) / sqrt(var + eps) * gamma + beta. Works on [batch, features] and on any input
/// whose last axis has `features` values ([batch, tokens, features], ...). Parameters in the flat buffer:
/// gamma [features] (initialised to 1), then beta [features] (0). No running statistics: training and
/// evaluation compute the same. Each vector's sums run in double in a fixed order, so a sample's output
/// does not depend on the rest of its batch. Requires features > 0 and eps > 0.
template <class T = float>
class LayerNorm final : public Layer<T> {
public:
    /// Normalises vectors of `features` values; `eps` is added to the variance (PyTorch's default 1e-5).
    explicit LayerNorm(std::size_t features, double eps = 1e-5) : n_(features), eps_(eps) {
        DTRAIN_CHECK(n_ > 0, "LayerNorm: features must be positive, got 0");
        DTRAIN_CHECK(eps_ > 0 && std::isfinite(eps_), "LayerNorm: eps must be positive and finite, got ",
                     eps_);
    }

    std::string name() const override { return detail::concat("LayerNorm(", n_, ")"); }

    Shape output_shape(const Shape& input) const override {
        DTRAIN_CHECK(!input.empty() && input.back() == n_, name(), ": expected input whose last axis has ",
                     n_, " values, [batch, ..., ", n_, "], but got [batch, ",
                     detail::shape_str(input).substr(1));
        return input;
    }

    std::size_t num_params() const override { return 2 * n_; }

    /// Layer<T>::bind: gamma [features], then beta [features].
    void bind(T* params, T* grads, T*) override {
        gamma_ = params;
        beta_ = params + n_;
        dgamma_ = grads;
        dbeta_ = grads + n_;
    }

    void init_params(Rng&) override {
        std::fill(gamma_, gamma_ + n_, T(1));
        std::fill(beta_, beta_ + n_, T(0));
    }

    /// Layer<T>::forward: normalises every vector along the last axis of `in` into `out`.
    void forward(const Tensor<T>& in, Tensor<T>& out, bool) override {
        DTRAIN_CHECK(in.dimension() >= 2 && in.shape().back() == n_, name(), ": expected input [batch, ..., ",
                     n_, "] but got ", detail::shape_str(in.shape()));
        ensure_shape(out, in.shape());
        const std::size_t rows = in.size() / n_;
        xhat_.resize(in.size());
        rstd_.resize(rows);
        for (std::size_t r = 0; r < rows; ++r) {
            const T* x = in.data() + r * n_;
            double mean = 0.0, var = 0.0;
            for (std::size_t i = 0; i < n_; ++i)
                mean += double(x[i]);
            mean /= double(n_);
            for (std::size_t i = 0; i < n_; ++i)
                var += (double(x[i]) - mean) * (double(x[i]) - mean);
            const double rstd = 1.0 / std::sqrt(var / double(n_) + eps_);
            rstd_[r] = rstd;
            T* xh = xhat_.data() + r * n_;
            T* y = out.data() + r * n_;
            for (std::size_t i = 0; i < n_; ++i) {
                xh[i] = T((double(x[i]) - mean) * rstd);
                y[i] = xh[i] * gamma_[i] + beta_[i];
            }
        }
    }

    /// Layer<T>::backward: dgamma += sum(dy * xhat), dbeta += sum(dy) over the vectors; grad_in, when
    /// asked, is rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) with dxhat = dy * gamma.
    void backward(const Tensor<T>& in, const Tensor<T>&, const Tensor<T>& grad_out, Tensor<T>& grad_in,
                  bool need_grad_in) override {
        DTRAIN_CHECK(grad_out.size() == in.size() && xhat_.size() == in.size(), name(),
                     ": backward() needs the forward() of the same input first");
        const std::size_t rows = in.size() / n_;
        if (need_grad_in) ensure_shape(grad_in, in.shape());
        for (std::size_t r = 0; r < rows; ++r) {
            const T* dy = grad_out.data() + r * n_;
            const T* xh = xhat_.data() + r * n_;
            double sum_d = 0.0, sum_dx = 0.0;
            for (std::size_t i = 0; i < n_; ++i) {
                dgamma_[i] += dy[i] * xh[i];
                dbeta_[i] += dy[i];
                const double d = double(dy[i]) * double(gamma_[i]);
                sum_d += d;
                sum_dx += d * double(xh[i]);
            }
            if (!need_grad_in) continue;
            T* dx = grad_in.data() + r * n_;
            const double md = sum_d / double(n_), mdx = sum_dx / double(n_);
            for (std::size_t i = 0; i < n_; ++i)
                dx[i] = T(rstd_[r] * (double(dy[i]) * double(gamma_[i]) - md - double(xh[i]) * mdx));
        }
    }

    std::unique_ptr<Layer<T>> clone() const override { return std::make_unique<LayerNorm>(n_, eps_); }

    /// Values per normalised vector.
    std::size_t features() const noexcept { return n_; }
    /// The constant added to the variance.
    double eps() const noexcept { return eps_; }
    /// Gamma view [features] (valid once bound to a model).
    TensorView<T, 1> weight() { return make_view<T, 1>(gamma_, {n_}); }
    /// Beta view [features].
    TensorView<T, 1> bias() { return make_view<T, 1>(beta_, {n_}); }

private:
    std::size_t n_;
    double eps_;
    T* gamma_ = nullptr;
    T* beta_ = nullptr;
    T* dgamma_ = nullptr;
    T* dbeta_ = nullptr;
    detail::AlignedVector<T> xhat_;  // the last forward's normalised input
    std::vector<double> rstd_;       // its 1 / sqrt(var + eps) per vector
};

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class LayerNorm<float>)
DTRAIN_PRECOMPILED_INSTANCE(class LayerNorm<double>)

}  // namespace dtrain

#pragma once

#include <cmath>
#include <cstddef>
#include <memory>
#include <string>

#include <dtrain/core/cpu.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/layer.hpp>

namespace dtrain {

namespace detail {

/// An elementwise activation layer; `Fn` provides static `name()`, `f(x)` and `grad(x, y, g)` = g * f'(x),
/// the derivative expressed through the input x and the output y = f(x), written so that the backward
/// loop vectorises (a ReLU select instead of a multiply by a branchy 0/1).
template <class T, class Fn>
class Elementwise final : public Layer<T> {
public:
    std::string name() const override { return Fn::name(); }
    Shape output_shape(const Shape& input) const override { return input; }

    void forward(const Tensor<T>& in, Tensor<T>& out, bool) override {
        ensure_shape(out, in.shape());
        const T* x = in.data();
        T* y = out.data();
        const std::size_t n = in.size();
        detail::with_avx2([&] {
            for (std::size_t i = 0; i < n; ++i)
                y[i] = Fn::f(x[i]);
        });
    }

    void backward(const Tensor<T>& in, const Tensor<T>& out, const Tensor<T>& grad_out, Tensor<T>& grad_in,
                  bool need_grad_in) override {
        if (!need_grad_in) return;
        ensure_shape(grad_in, in.shape());
        const T* x = in.data();
        const T* y = out.data();
        const T* g = grad_out.data();
        T* d = grad_in.data();
        const std::size_t n = in.size();
        detail::with_avx2([&] {
            for (std::size_t i = 0; i < n; ++i)
                d[i] = Fn::grad(x[i], y[i], g[i]);
        });
    }

    std::unique_ptr<Layer<T>> clone() const override { return std::make_unique<Elementwise>(); }
};

// PyTorch's relu is clamp_min(x, 0), i.e. std::max(x, 0) = x < 0 ? 0 : x, so NaN (and -0.0) pass through;
// its gradient is threshold_backward(g, relu(x), 0) = relu(x) <= 0 ? 0 : g, so a NaN input passes g
// through (NaN <= 0 is false), +inf passes g and -inf gets 0. Both are one compare and a select.
struct ReluFn {
    static std::string name() { return "ReLU"; }
    template <class T>
    static T f(T x) {
        return x < T(0) ? T(0) : x;
    }
    template <class T>
    static T grad(T x, T, T g) {
        return x <= T(0) ? T(0) : g;
    }
};

struct SigmoidFn {
    static std::string name() { return "Sigmoid"; }
    template <class T>
    static T f(T x) {
        return x >= T(0) ? T(1) / (T(1) + std::exp(-x)) : std::exp(x) / (T(1) + std::exp(x));
    }
    template <class T>
    static T grad(T, T y, T g) {
        return g * (y * (T(1) - y));
    }
};

struct TanhFn {
    static std::string name() { return "Tanh"; }
    template <class T>
    static T f(T x) {
        return std::tanh(x);
    }
    template <class T>
    static T grad(T, T y, T g) {
        return g * (T(1) - y * y);
    }
};

}  // namespace detail

/// Rectified linear unit, max(x, 0), elementwise; any input shape. Like torch.relu, a NaN input gives NaN
/// (and +-inf give +inf and 0); backward passes the output gradient where x > 0 or x is NaN, 0 elsewhere.
template <class T = float>
using ReLU = detail::Elementwise<T, detail::ReluFn>;

/// Logistic sigmoid 1 / (1 + exp(-x)), elementwise and overflow-safe; any input shape. As in PyTorch, NaN
/// gives NaN, +inf gives 1 and -inf 0 (gradient 0 there).
template <class T = float>
using Sigmoid = detail::Elementwise<T, detail::SigmoidFn>;

/// Hyperbolic tangent, elementwise; any input shape. As in PyTorch, NaN gives NaN and +-inf give +-1
/// (gradient 0 there).
template <class T = float>
using Tanh = detail::Elementwise<T, detail::TanhFn>;

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class detail::Elementwise<float, detail::ReluFn>)
DTRAIN_PRECOMPILED_INSTANCE(class detail::Elementwise<double, detail::ReluFn>)
DTRAIN_PRECOMPILED_INSTANCE(class detail::Elementwise<float, detail::SigmoidFn>)
DTRAIN_PRECOMPILED_INSTANCE(class detail::Elementwise<double, detail::SigmoidFn>)
DTRAIN_PRECOMPILED_INSTANCE(class detail::Elementwise<float, detail::TanhFn>)
DTRAIN_PRECOMPILED_INSTANCE(class detail::Elementwise<double, detail::TanhFn>)

}  // namespace dtrain

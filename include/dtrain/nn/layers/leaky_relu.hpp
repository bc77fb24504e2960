#pragma once

#include <cmath>
#include <cstddef>
#include <memory>
#include <string>

#include <dtrain/core/cpu.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/layer.hpp>

namespace dtrain {

/// Leaky rectified linear unit, elementwise on any input shape: x where x > 0, negative_slope * x
/// elsewhere (torch.nn.LeakyReLU, default slope 0.01). As in PyTorch both passes are one compare and a
/// select: a NaN input gives NaN, +inf gives +inf and -inf gives -inf (for a positive slope); backward
/// passes the output gradient where x > 0 and multiplies it by the slope elsewhere, NaN inputs included
/// (torch's leaky_relu_backward).
template <class T = float>
class LeakyReLU final : public Layer<T> {
public:
    /// A layer with slope `negative_slope` for x <= 0, which must be finite.
    explicit LeakyReLU(double negative_slope = 0.01) : slope_(negative_slope) {
        DTRAIN_CHECK(std::isfinite(negative_slope), "LeakyReLU: negative_slope must be finite, got ",
                     negative_slope);
    }

    /// "LeakyReLU(negative_slope=0.01)", as PyTorch prints it.
    std::string name() const override { return detail::concat("LeakyReLU(negative_slope=", slope_, ")"); }

    /// The input shape: any shape.
    Shape output_shape(const Shape& input) const override { return input; }

    /// `out` = x > 0 ? x : negative_slope * x, elementwise.
    void forward(const Tensor<T>& in, Tensor<T>& out, bool) override {
        ensure_shape(out, in.shape());
        const T* x = in.data();
        T* y = out.data();
        const std::size_t n = in.size();
        const T a = T(slope_);
        detail::with_avx2([&] {
            for (std::size_t i = 0; i < n; ++i)
                y[i] = x[i] > T(0) ? x[i] : x[i] * a;
        });
    }

    /// `grad_in` = x > 0 ? grad_out : negative_slope * grad_out, elementwise, when asked.
    void backward(const Tensor<T>& in, const Tensor<T>&, const Tensor<T>& grad_out, Tensor<T>& grad_in,
                  bool need_grad_in) override {
        if (!need_grad_in) return;
        ensure_shape(grad_in, in.shape());
        const T* x = in.data();
        const T* g = grad_out.data();
        T* d = grad_in.data();
        const std::size_t n = in.size();
        const T a = T(slope_);
        detail::with_avx2([&] {
            for (std::size_t i = 0; i < n; ++i)
                d[i] = x[i] > T(0) ? g[i] : g[i] * a;
        });
    }

    /// A new layer with the same slope.
    std::unique_ptr<Layer<T>> clone() const override { return std::make_unique<LeakyReLU>(slope_); }

    /// The slope for x <= 0.
    double negative_slope() const noexcept { return slope_; }

private:
    double slope_;
};

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class LeakyReLU<float>)
DTRAIN_PRECOMPILED_INSTANCE(class LeakyReLU<double>)

}  // namespace dtrain

#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <memory>
#include <string>

#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/layer.hpp>

namespace dtrain {

/// Reshapes a batch [batch, d1, d2, ...] into [batch, d1 * d2 * ...] (row-major order, so an NCHW image
/// becomes channel-major features, like PyTorch's Flatten). Has no parameters; forward and backward
/// copy the values.
template <class T = float>
class Flatten final : public Layer<T> {
public:
    std::string name() const override { return "Flatten"; }

    Shape output_shape(const Shape& input) const override {
        DTRAIN_CHECK(!input.empty(), name(),
                     ": expected input of shape [batch, ...] with at least one sample "
                     "dimension but got [batch]");
        return {shape_size(input)};
    }

    /// Layer<T>::forward: `in` [batch, ...] as [batch, product of the rest] (a copy).
    void forward(const Tensor<T>& in, Tensor<T>& out, bool) override {
        DTRAIN_CHECK(in.dimension() >= 2, name(), ": expected input of shape [batch, ...] but got ",
                     detail::shape_str(in.shape()));
        const std::size_t n = in.shape()[0];
        ensure_shape(out, std::array<std::size_t, 2>{n, n == 0 ? 0 : in.size() / n});
        std::copy(in.data(), in.data() + in.size(), out.data());
    }

    /// Layer<T>::backward: `grad_out` reshaped to the input's shape.
    void backward(const Tensor<T>& in, const Tensor<T>&, const Tensor<T>& grad_out, Tensor<T>& grad_in,
                  bool need_grad_in) override {
        if (!need_grad_in) return;
        ensure_shape(grad_in, in.shape());
        std::copy(grad_out.data(), grad_out.data() + grad_out.size(), grad_in.data());
    }

    std::unique_ptr<Layer<T>> clone() const override { return std::make_unique<Flatten>(); }
};

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class Flatten<float>)
DTRAIN_PRECOMPILED_INSTANCE(class Flatten<double>)

}  // namespace dtrain

#pragma once

#include <cmath>
#include <cstddef>

#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/losses/mean_loss.hpp>

namespace dtrain {

/// Mean squared error over all elements (PyTorch's MSELoss with reduction='mean'):
/// L = sum((out - target)^2) / (batch * width). With integer labels the target is the one-hot encoding
/// (the L2 loss of Zhao's Go and MPI pipelines, README References 1). compute() returns L and writes dL/dout
/// into `grad`. Throws on mismatched shapes or a label out of range. A NaN or infinite output or target gives
/// a NaN or infinite gradient element and a non-finite loss, which is returned, not thrown, as in PyTorch:
/// DistOptimizer's gradient check then names the step and the layer and stops every rank (or skips the step
/// with NonFinite::Skip). A loss that overflows while every gradient element is finite comes with an all-NaN
/// gradient (detail::mean_loss), so such a step is caught too.
template <class T = float>
class MeanSquaredError {
public:
    /// Loss and gradient against explicit targets of the output's shape.
    T compute(const Tensor<T>& out, const Tensor<T>& targets, Tensor<T>& grad) const {
        DTRAIN_CHECK(targets.shape() == out.shape(), "MeanSquaredError: targets of shape ",
                     detail::shape_str(targets.shape()), " do not match outputs of shape ",
                     detail::shape_str(out.shape()));
        DTRAIN_CHECK(out.size() > 0, "MeanSquaredError: empty output");
        ensure_shape(grad, out.shape());
        const std::size_t n = out.size();
        const T scale = T(2) / T(n);
        double total = 0.0;
        for (std::size_t i = 0; i < n; ++i) {
            const T d = out.data()[i] - targets.data()[i];
            total += double(d) * double(d);
            grad.data()[i] = scale * d;
        }
        return detail::mean_loss(total, n, &grad);
    }

    /// Loss and gradient against the one-hot encoding of integer labels; output must be [batch, classes].
    T compute(const Tensor<T>& out, const Labels& labels, Tensor<T>& grad) const {
        DTRAIN_CHECK(out.dimension() == 2 && out.shape()[0] == labels.size() && out.size() > 0,
                     "MeanSquaredError: expected outputs [", labels.size(), ", classes] for ", labels.size(),
                     " labels but got ", detail::shape_str(out.shape()));
        ensure_shape(grad, out.shape());
        const std::size_t rows = out.shape()[0], c = out.shape()[1], n = out.size();
        const T scale = T(2) / T(n);
        double total = 0.0;
        for (std::size_t r = 0; r < rows; ++r) {
            const auto y = labels(r);
            DTRAIN_CHECK(y >= 0 && std::size_t(y) < c, "MeanSquaredError: label ", y, " at row ", r,
                         " is outside the class range [0, ", c, ")");
            for (std::size_t j = 0; j < c; ++j) {
                const T d = out.data()[r * c + j] - (j == std::size_t(y) ? T(1) : T(0));
                total += double(d) * double(d);
                grad.data()[r * c + j] = scale * d;
            }
        }
        return detail::mean_loss(total, n, &grad);
    }
};

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class MeanSquaredError<float>)
DTRAIN_PRECOMPILED_INSTANCE(class MeanSquaredError<double>)

}  // namespace dtrain

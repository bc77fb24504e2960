#pragma once

/// @file
/// The last step the losses share: the batch mean of the summed loss, and the rule that a non-finite loss
/// always comes with a non-finite gradient, so that a training step on it is caught by the distributed
/// optimizers' gradient check (which names the step and the layer, and stops or skips on every rank).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include <dtrain/core/tensor.hpp>

namespace dtrain::detail {

/// Returns total / n in T. A NaN or infinite mean is returned as it is (PyTorch's losses return it too; the
/// caller decides). When `grad` is given and the mean is not finite while every gradient element is (a -inf
/// logit at the label, a squared error beyond double's range), `grad` is filled with NaN: a non-finite loss
/// never trains on silently. Otherwise `grad` is left as the loss wrote it, PyTorch's gradient.
template <class T>
T mean_loss(double total, std::size_t n, Tensor<T>* grad = nullptr) {
    const T loss = T(total / double(n));  // a double mean beyond T's range becomes an infinity here
    if (grad != nullptr && !std::isfinite(loss) &&
        std::all_of(grad->begin(), grad->end(), [](T v) { return std::isfinite(v); }))
        std::fill(grad->begin(), grad->end(), std::numeric_limits<T>::quiet_NaN());
    return loss;
}

}  // namespace dtrain::detail

#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/losses/mean_loss.hpp>

namespace dtrain {

/// Sigmoid fused with binary cross-entropy, averaged over all elements (PyTorch's BCEWithLogitsLoss with
/// reduction='mean', no weights): for a logit x and a target y in [0, 1],
/// l = max(x, 0) - x * y + log(1 + exp(-|x|)), which stays finite for any finite x (no exp overflow, no
/// log of 0). dl/dx = (sigmoid(x) - y) / count. Takes logits of any shape with targets of the same shape
/// (several independent yes/no outputs per sample), or logits [batch, 1] or [batch] with labels 0 or 1.
/// compute() returns the mean loss and writes dLoss/dlogits into `grad`. Throws on mismatched shapes, a
/// target outside [0, 1] or a label other than 0 and 1, naming the value and its position. A NaN logit gives
/// a NaN loss and gradient element, returned, not thrown, as in PyTorch (see detail::mean_loss).
template <class T = float>
class BinaryCrossEntropyWithLogits {
public:
    /// Loss and gradient against targets of the logits' shape, each in [0, 1].
    T compute(const Tensor<T>& logits, const Tensor<T>& targets, Tensor<T>& grad) const {
        DTRAIN_CHECK(targets.shape() == logits.shape(), "BinaryCrossEntropyWithLogits: targets of shape ",
                     detail::shape_str(targets.shape()), " do not match logits of shape ",
                     detail::shape_str(logits.shape()));
        DTRAIN_CHECK(logits.size() > 0, "BinaryCrossEntropyWithLogits: empty logits");
        ensure_shape(grad, logits.shape());
        const std::size_t n = logits.size();
        double total = 0.0;
        for (std::size_t i = 0; i < n; ++i) {
            const T y = targets.data()[i];
            DTRAIN_CHECK(y >= T(0) && y <= T(1), "BinaryCrossEntropyWithLogits: target ", y, " at element ",
                         i, " is outside [0, 1]");
            total += element(logits.data()[i], y, n, grad.data()[i]);
        }
        return detail::mean_loss(total, n, &grad);
    }

    /// Loss and gradient against labels 0 and 1, one per row of logits [batch, 1] or [batch].
    T compute(const Tensor<T>& logits, const Labels& labels, Tensor<T>& grad) const {
        const auto& s = logits.shape();
        DTRAIN_CHECK((logits.dimension() == 1 || (logits.dimension() == 2 && s[1] == 1)) &&
                         s[0] == labels.size() && labels.size() > 0,
                     "BinaryCrossEntropyWithLogits: expected logits [", labels.size(), ", 1] for ",
                     labels.size(), " labels but got ", detail::shape_str(s),
                     " (for several outputs per sample, give targets of the logits' shape)");
        ensure_shape(grad, s);
        const std::size_t n = labels.size();
        double total = 0.0;
        for (std::size_t r = 0; r < n; ++r) {
            const auto y = labels(r);
            DTRAIN_CHECK(y == 0 || y == 1, "BinaryCrossEntropyWithLogits: label ", y, " at row ", r,
                         " is not 0 or 1");
            total += element(logits.data()[r], T(y), n, grad.data()[r]);
        }
        return detail::mean_loss(total, n, &grad);
    }

private:
    // The loss of one logit x with target y (in double), and its share of the gradient into `g`.
    static double element(T x, T y, std::size_t count, T& g) {
        const double xd = double(x), yd = double(y);
        const double e = std::exp(-std::abs(xd));  // in (0, 1]: no overflow
        const double sigmoid = xd >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
        g = T((sigmoid - yd) / double(count));
        return std::max(xd, 0.0) - xd * yd + std::log1p(e);
    }
};

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class BinaryCrossEntropyWithLogits<float>)
DTRAIN_PRECOMPILED_INSTANCE(class BinaryCrossEntropyWithLogits<double>)

}  // namespace dtrain

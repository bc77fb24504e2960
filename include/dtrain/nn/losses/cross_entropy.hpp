#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/losses/mean_loss.hpp>

namespace dtrain {

/// Softmax fused with cross-entropy, averaged over the batch. Numerically stable (log-sum-exp).
/// Takes logits [batch, classes] and either integer labels in [0, classes) or one-hot / probability
/// targets of the logits' shape. compute() returns the mean loss and writes dLoss/dlogits into `grad`
/// (softmax - target) / batch. Throws on a label out of range or mismatched shapes.
/// Non-finite logits propagate as in PyTorch's log_softmax (max shift, then exp-sum): a row holding a NaN
/// or a +inf logit has a NaN loss and an all-NaN gradient row, so the mean loss is NaN; rows without one
/// are unaffected. A NaN or infinite loss is returned, not thrown, as PyTorch returns it: the NaN gradient
/// then reaches the parameters' gradients, where DistOptimizer's check names the step and the layer and
/// stops every rank, or skips the step with NonFinite::Skip. Where PyTorch's gradient would stay finite
/// under an infinite loss (a -inf logit at the label), the whole gradient is NaN instead
/// (detail::mean_loss), so such a step is caught too. A -inf logit elsewhere is an ordinary zero
/// probability.
template <class T = float>
class SoftmaxCrossEntropy {
public:
    /// Loss and gradient for integer labels.
    T compute(const Tensor<T>& logits, const Labels& labels, Tensor<T>& grad) const {
        const auto [n, c] = dims(logits);
        DTRAIN_CHECK(labels.size() == n, "SoftmaxCrossEntropy: ", n, " logits rows but ", labels.size(),
                     " labels");
        ensure_shape(grad, logits.shape());
        double total = 0.0;
        for (std::size_t r = 0; r < n; ++r) {
            const auto y = labels(r);
            DTRAIN_CHECK(y >= 0 && std::size_t(y) < c, "SoftmaxCrossEntropy: label ", y, " at row ", r,
                         " is outside the class range [0, ", c, ")");
            const double lse = softmax_row(logits.data() + r * c, grad.data() + r * c, c, n);
            total += lse - double(logits.data()[r * c + std::size_t(y)]);
            grad.data()[r * c + std::size_t(y)] -= T(1) / T(n);
        }
        return detail::mean_loss(total, n, &grad);
    }

    /// Loss and gradient for one-hot (or probability) targets of the logits' shape.
    T compute(const Tensor<T>& logits, const Tensor<T>& targets, Tensor<T>& grad) const {
        const auto [n, c] = dims(logits);
        DTRAIN_CHECK(targets.shape() == logits.shape(), "SoftmaxCrossEntropy: targets of shape ",
                     detail::shape_str(targets.shape()), " do not match logits of shape ",
                     detail::shape_str(logits.shape()));
        ensure_shape(grad, logits.shape());
        double total = 0.0;
        for (std::size_t r = 0; r < n; ++r) {
            const T* z = logits.data() + r * c;
            const T* t = targets.data() + r * c;
            T* g = grad.data() + r * c;
            const double lse = softmax_row(z, g, c, n);
            for (std::size_t j = 0; j < c; ++j) {
                total += double(t[j]) * (lse - double(z[j]));
                g[j] -= t[j] / T(n);
            }
        }
        return detail::mean_loss(total, n, &grad);
    }

    /// Mean loss only (no gradient), for evaluation; NaN or infinite under the same rules as compute().
    T value(const Tensor<T>& logits, const Labels& labels) const {
        const auto [n, c] = dims(logits);
        DTRAIN_CHECK(labels.size() == n, "SoftmaxCrossEntropy: ", n, " logits rows but ", labels.size(),
                     " labels");
        double total = 0.0;
        for (std::size_t r = 0; r < n; ++r) {
            const T* z = logits.data() + r * c;
            const auto y = labels(r);
            DTRAIN_CHECK(y >= 0 && std::size_t(y) < c, "SoftmaxCrossEntropy: label ", y, " at row ", r,
                         " is outside the class range [0, ", c, ")");
            const T m = *std::max_element(z, z + c);
            double s = 0.0;
            for (std::size_t j = 0; j < c; ++j)
                s += std::exp(double(z[j] - m));
            total += double(m) + std::log(s) - double(z[std::size_t(y)]);
        }
        return detail::mean_loss<T>(total, n);
    }

private:
    static std::pair<std::size_t, std::size_t> dims(const Tensor<T>& logits) {
        DTRAIN_CHECK(logits.dimension() == 2 && logits.shape()[0] > 0 && logits.shape()[1] > 0,
                     "SoftmaxCrossEntropy: expected logits of shape [batch, classes] but got ",
                     detail::shape_str(logits.shape()));
        return {logits.shape()[0], logits.shape()[1]};
    }
    // Writes softmax(z) / n into g and returns log-sum-exp(z).
    static double softmax_row(const T* z, T* g, std::size_t c, std::size_t n) {
        const T m = *std::max_element(z, z + c);
        double s = 0.0;
        for (std::size_t j = 0; j < c; ++j) {
            const T e = std::exp(z[j] - m);
            g[j] = e;
            s += double(e);
        }
        const T scale = T(1.0 / (s * double(n)));
        for (std::size_t j = 0; j < c; ++j)
            g[j] *= scale;
        return double(m) + std::log(s);
    }
};

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class SoftmaxCrossEntropy<float>)
DTRAIN_PRECOMPILED_INSTANCE(class SoftmaxCrossEntropy<double>)

}  // namespace dtrain

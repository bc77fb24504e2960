#pragma once

#include <cstddef>

#include <dtrain/core/error.hpp>
#include <dtrain/core/tensor.hpp>

namespace dtrain {

/// Number of rows of `scores` [batch, classes] whose arg-max (first on ties) equals the label. As in
/// torch.argmax, NaN counts as the maximum: a row holding a NaN has the arg-max of its first NaN.
template <class T>
std::size_t count_correct(const Tensor<T>& scores, const Labels& labels) {
    DTRAIN_CHECK(scores.dimension() == 2 && scores.shape()[0] == labels.size(),
                 "count_correct: expected scores [", labels.size(), ", classes] but got ",
                 detail::shape_str(scores.shape()));
    const std::size_t n = scores.shape()[0], c = scores.shape()[1];
    std::size_t correct = 0;
    for (std::size_t r = 0; r < n; ++r) {
        const T* s = scores.data() + r * c;
        std::size_t best = 0;
        for (std::size_t j = 1; j < c; ++j)
            if (s[j] > s[best] || (s[j] != s[j] && s[best] == s[best])) best = j;
        correct += (static_cast<std::int64_t>(best) == labels(r)) ? 1 : 0;
    }
    return correct;
}

/// Fraction of correct rows (0 for an empty batch).
template <class T>
double accuracy(const Tensor<T>& scores, const Labels& labels) {
    return labels.size() == 0 ? 0.0 : double(count_correct(scores, labels)) / double(labels.size());
}

}  // namespace dtrain

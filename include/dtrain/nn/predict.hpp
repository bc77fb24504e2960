#pragma once

/// @file
/// Inference with a trained model: its outputs, or the predicted classes, for a whole tensor of samples.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/model.hpp>

namespace dtrain {

/// The outputs of `model` for every sample of `x` (shape [N, input shape...]), computed by Model::infer()
/// in batches of `batch_size`: in eval mode (dropout off, BatchNorm's running statistics) whatever the
/// model's mode, which stays as it was. A tensor of shape [N, output shape...]. Local to this process (no
/// communication). Throws dtrain::Error when `x` does not hold samples of the model's input shape or
/// batch_size is 0.
template <class T>
Tensor<T> predict(Model<T>& model, const Tensor<T>& x, std::size_t batch_size = 256) {
    DTRAIN_CHECK(batch_size > 0, "predict: batch_size must be > 0");
    detail::check_batch_shape(x, model.input_shape(), "predict");
    const std::size_t n = x.shape()[0], in = shape_size(model.input_shape()),
                      out = shape_size(model.output_shape());
    Tensor<T> result = Tensor<T>::from_shape(batch_shape(n, model.output_shape()));
    Tensor<T> batch;
    for (std::size_t first = 0; first < n; first += batch_size) {
        const std::size_t rows = std::min(batch_size, n - first);
        if (batch.size() != rows * in) batch = Tensor<T>::from_shape(batch_shape(rows, model.input_shape()));
        std::copy(x.data() + first * in, x.data() + (first + rows) * in, batch.data());
        const Tensor<T>& y = model.infer(batch);
        std::copy(y.data(), y.data() + rows * out, result.data() + first * out);
    }
    return result;
}

/// The class (arg-max of the output, the first on ties) `model` predicts for every sample of `x`; see
/// predict(). Requires a model whose output is one score per class.
template <class T>
Labels predict_classes(Model<T>& model, const Tensor<T>& x, std::size_t batch_size = 256) {
    DTRAIN_CHECK(model.output_shape().size() == 1,
                 "predict_classes: the model's output must be a vector of class ", "scores, got shape ",
                 detail::shape_str(model.output_shape()));
    const Tensor<T> scores = predict(model, x, batch_size);
    const std::size_t n = scores.shape()[0], c = scores.shape()[1];
    Labels labels = Labels::from_shape({n});
    for (std::size_t r = 0; r < n; ++r) {
        const T* s = scores.data() + r * c;
        labels(r) = std::int32_t(std::max_element(s, s + c) - s);
    }
    return labels;
}

}  // namespace dtrain

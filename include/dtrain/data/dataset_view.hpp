#pragma once

/// @file
/// DatasetView: the non-owning view of features and their class labels or float targets that DataLoader
/// reads batches from.

#include <cstddef>
#include <cstdint>

#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/data/dataset.hpp>
#include <dtrain/data/detail/checked.hpp>

namespace dtrain {

/// A non-owning view of features and their class labels or float targets, held elsewhere (a Dataset or a
/// user's tensors). The viewed data must outlive the view and every DataLoader made from it; temporaries
/// are rejected at compile time.
struct DatasetView {
    /// First float of sample 0; samples are contiguous, sample_size() floats each.
    const float* features = nullptr;
    /// Label of every sample; null when the samples carry float targets.
    const std::int32_t* labels = nullptr;
    /// Float targets of every sample, target_columns each, row-major; null when the samples carry labels.
    const float* targets = nullptr;
    /// Float targets per sample (k); 0 with class labels.
    std::size_t target_columns = 0;
    /// Number of samples.
    std::size_t size = 0;
    /// Shape of one sample.
    Shape sample_shape;

    /// Views a data set: its labels, or its targets when it holds float targets.
    DatasetView(const Dataset& d);  // NOLINT: implicit on purpose, DataLoader(dataset, ...)
    /// Views batch-first `x` ({N, sample...}, rank >= 2) and labels `y` (N of them).
    DatasetView(const Tensor<float>& x, const Labels& y) : DatasetView(x, y.size(), "labels") {
        labels = y.data();
    }
    /// Views batch-first `x` ({N, sample...}, rank >= 2) and float targets `y`: {N} (one per sample) or
    /// {N, k} with k >= 1.
    DatasetView(const Tensor<float>& x, const Tensor<float>& y) : DatasetView(x, target_rows(y), "targets") {
        target_columns = y.dimension() == 2 ? y.shape()[1] : 1;
        DTRAIN_CHECK(target_columns > 0, "dtrain::DatasetView: targets of shape ",
                     detail::shape_str(y.shape()), " have no columns");
        targets = y.data();
    }
    DatasetView(Dataset&&) = delete;
    DatasetView(Tensor<float>&&, const Labels&) = delete;
    DatasetView(const Tensor<float>&, Labels&&) = delete;
    DatasetView(Tensor<float>&&, const Tensor<float>&) = delete;
    DatasetView(const Tensor<float>&, Tensor<float>&&) = delete;
    /// Number of floats per sample; throws dtrain::Error when the sample shape's product overflows.
    std::size_t sample_size() const {
        return detail::checked_shape_size(sample_shape, "dtrain::DatasetView");
    }

private:
    /// The features part: checks `x` against `n` labels or targets (`what`).
    DatasetView(const Tensor<float>& x, std::size_t n, const char* what);
    /// The number of rows of targets `y`, which must have shape {N} or {N, k}.
    static std::size_t target_rows(const Tensor<float>& y) {
        DTRAIN_CHECK(y.dimension() == 1 || y.dimension() == 2,
                     "dtrain::DatasetView: targets must have shape [N] or [N, k], got ",
                     detail::shape_str(y.shape()));
        return y.shape()[0];
    }
};

#if DTRAIN_HEADER_DEFINITIONS

DTRAIN_INLINE DatasetView::DatasetView(const Dataset& d)
    : DatasetView(d.has_targets() ? DatasetView(d.features, d.targets) : DatasetView(d.features, d.labels)) {
    DTRAIN_CHECK(d.labels.size() == 0 || !d.has_targets(), "dtrain::DatasetView: '", d.source,
                 "' holds both class labels and float targets; a data set must hold one kind");
}

DTRAIN_INLINE DatasetView::DatasetView(const Tensor<float>& x, std::size_t n, const char* what) {
    DTRAIN_CHECK(x.dimension() >= 2, "dtrain::DatasetView: features must be batch-first with rank >= 2, got ",
                 detail::shape_str(x.shape()));
    DTRAIN_CHECK(x.shape()[0] == n, "dtrain::DatasetView: features have ", x.shape()[0],
                 " samples but there are ", n, " ", what);
    detail::checked_trailing_size(x.shape(), 1, "dtrain::DatasetView: features");
    features = x.data();
    size = n;
    sample_shape.assign(x.shape().begin() + 1, x.shape().end());
}

#endif

}  // namespace dtrain

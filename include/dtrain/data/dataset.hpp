#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/data/detail/checked.hpp>

namespace dtrain {

/// Which part of a data set distributed as a train/test pair to load.
enum class Split { Train, Test };

/// A data set held in memory: batch-first features ([N, 4] for a table, [N, C, H, W] for images) and, for
/// every sample, either one int32 class label (classification: `labels`, with the class names when the
/// source knows them) or k >= 1 float targets (regression: `targets`, shape [N, k]), never both; or, read
/// for prediction (read_csv_features()), features only. Data sets know no models; DataLoader turns one
/// into batches.
struct Dataset {
    /// Features, batch first: shape {N, sample...}.
    Tensor<float> features;
    /// Class label of every sample, in [0, num_classes()); empty when the data set holds float targets.
    Labels labels;
    /// Float targets, one row of k >= 1 values per sample: shape {N, k}. Left default-constructed (rank 0)
    /// when the data set holds class labels; has_targets() tells which kind it holds.
    Tensor<float> targets;
    /// Name of class i at position i (empty when unknown, and always with float targets).
    std::vector<std::string> class_names;
    /// Where the data came from (file or directory), used in messages.
    std::string source;
    /// What the reader found suspicious but not wrong, one sentence each naming the file and line (read_csv:
    /// a class label that occurs once among many, most likely a typo). Print them, on rank 0 only.
    std::vector<std::string> warnings;

    /// True when the samples carry float targets (regression), false when they carry class labels.
    bool has_targets() const { return targets.dimension() != 0; }
    /// True when the samples carry class labels: false with float targets and with features only.
    bool has_labels() const { return labels.size() != 0; }
    /// Number of samples N (of the labels or targets, or of the features when there are neither).
    std::size_t size() const {
        return has_targets()          ? targets.shape()[0]
               : has_labels()         ? labels.size()
               : features.dimension() ? features.shape()[0]
                                      : 0;
    }
    /// Shape of one sample (features' shape without the batch dimension).
    Shape sample_shape() const {
        return features.dimension() == 0 ? Shape{}
                                         : Shape(features.shape().begin() + 1, features.shape().end());
    }
    /// Number of floats in one sample; throws dtrain::Error when the features' element count overflows.
    std::size_t sample_size() const {
        return detail::checked_trailing_size(features.shape(), 1, "dtrain::Dataset '", source, "'");
    }
    /// Throws dtrain::Error "<who>: '<source>' holds <kind held>, not <kind wanted>" unless the data set
    /// holds float targets (`want_targets`) or class labels (!`want_targets`).
    void require_kind(bool want_targets, const char* who) const {
        DTRAIN_CHECK(!want_targets || has_targets(), who, ": '", source,
                     "' holds class labels, not float targets (regression); read a regression file with "
                     "CsvOptions::target_columns, or build one with make_regression_dataset()");
        DTRAIN_CHECK(want_targets || !has_targets(), who, ": '", source, "' holds float targets (shape ",
                     detail::shape_str(targets.shape()), ", regression), not class labels");
    }
    /// Number of classes: class_names.size() when known, otherwise the largest label + 1. Throws
    /// dtrain::Error when the data set holds float targets.
    std::size_t num_classes() const {
        require_kind(false, "dtrain::Dataset::num_classes");
        if (!class_names.empty()) return class_names.size();
        std::int32_t m = -1;
        for (auto v : labels)
            m = std::max(m, v);
        return static_cast<std::size_t>(m + 1);
    }
    /// Number of float targets per sample (k of targets' shape {N, k}); throws dtrain::Error when the data
    /// set holds class labels.
    std::size_t num_targets() const {
        require_kind(true, "dtrain::Dataset::num_targets");
        return detail::checked_trailing_size(targets.shape(), 1, "dtrain::Dataset::num_targets");
    }
    /// `labels`, checked to be what the data set holds: throws dtrain::Error when it holds float targets.
    const Labels& class_labels() const {
        require_kind(false, "dtrain::Dataset::class_labels");
        return labels;
    }
    /// `targets`, checked to be what the data set holds: throws dtrain::Error when it holds class labels.
    const Tensor<float>& float_targets() const {
        require_kind(true, "dtrain::Dataset::float_targets");
        return targets;
    }
    /// Gives every sample the shape `shape`, keeping the values and their row-major order: {1, 8, 8} turns
    /// scikit-learn's 64-column digits into 1-channel 8x8 images for Conv2d. Returns *this. Throws
    /// dtrain::Error naming both shapes when `shape` is empty or does not hold exactly sample_size() values.
    Dataset& reshape_samples(const Shape& shape) {
        const char* who = "dtrain::Dataset::reshape_samples";
        DTRAIN_CHECK(features.dimension() >= 2, who, ": features of '", source,
                     "' must be batch-first with rank >= 2, got shape ", detail::shape_str(features.shape()));
        const std::size_t have = sample_size();
        const std::size_t want = detail::checked_shape_size(shape, who, ": the new sample shape");
        DTRAIN_CHECK(!shape.empty() && want == have, who, ": the samples of '", source, "' have shape ",
                     detail::shape_str(sample_shape()), " (", have, " values), which cannot become ",
                     detail::shape_str(shape), " (", shape.empty() ? 0 : want,
                     " values): the new shape must hold the same number of values");
        features.reshape(batch_shape(features.shape()[0], shape));
        return *this;
    }
};

namespace detail {

/// Checks the invariants of a data set: rank >= 2 features whose element count fits std::size_t, and
/// either one label per sample in range or targets of shape {N, k} with k >= 1 and no class names.
inline void validate_dataset(const Dataset& d, const char* who) {
    DTRAIN_CHECK(d.features.dimension() >= 2, who,
                 ": features must be batch-first with rank >= 2, got shape ", shape_str(d.features.shape()));
    checked_shape_size(d.features.shape(), who, ": features");
    const std::size_t n = d.features.shape()[0];
    if (d.has_targets()) {
        DTRAIN_CHECK(d.labels.size() == 0, who, ": the data set holds both ", d.labels.size(),
                     " class labels and float targets; it must hold one kind (leave `labels` empty for "
                     "regression)");
        DTRAIN_CHECK(d.class_names.empty(), who, ": class names are given for a data set of float targets");
        DTRAIN_CHECK(d.targets.dimension() == 2 && d.targets.shape()[1] > 0, who,
                     ": targets must have shape [N, k] with k >= 1, got ", shape_str(d.targets.shape()));
        checked_shape_size(d.targets.shape(), who, ": targets");
        DTRAIN_CHECK(d.targets.shape()[0] == n, who, ": features have ", n, " samples (shape ",
                     shape_str(d.features.shape()), ") but targets have ", d.targets.shape()[0],
                     " rows (shape ", shape_str(d.targets.shape()), ")");
    } else {
        DTRAIN_CHECK(n == d.labels.size(), who, ": features have ", n, " samples (shape ",
                     shape_str(d.features.shape()), ") but there are ", d.labels.size(), " labels");
    }
    DTRAIN_CHECK(d.size() > 0, who, ": the data set is empty");
    for (std::size_t i = 0; i < d.labels.size(); ++i) {
        const auto y = d.labels(i);
        DTRAIN_CHECK(y >= 0 && (d.class_names.empty() || static_cast<std::size_t>(y) < d.class_names.size()),
                     who, ": label ", y, " of sample ", i, " is outside [0, ",
                     d.class_names.empty() ? std::string("inf") : std::to_string(d.class_names.size()), ")");
    }
}

/// Throws dtrain::Error "<who>: <what> contain a non-finite value (v)" when `t` holds a NaN or infinity.
inline void check_finite(const Tensor<float>& t, const char* who, const char* what) {
    for (auto v : t)
        DTRAIN_CHECK(std::isfinite(v), who, ": ", what, " contain a non-finite value (", v, ")");
}

/// Copies `n` rows of shape `sample_shape` from `x` (row-major) into a new tensor {n, sample...}; throws
/// naming `who` when the shape is empty or has a zero dimension, or the size overflows. `x` must not be null.
inline Tensor<float> copy_rows(const float* x, std::size_t n, const Shape& sample_shape, const char* who) {
    const std::size_t m = checked_shape_size(sample_shape, who, ": sample");
    DTRAIN_CHECK(!sample_shape.empty() && m > 0, who,
                 ": sample shape must be non-empty with no zero dimension, got ", shape_str(sample_shape));
    const Shape shape = batch_shape(n, sample_shape);
    const std::size_t bytes = checked_mul(checked_shape_size(shape, who, ": ", n, " samples"), sizeof(float),
                                          who, ": bytes of shape ", shape_str(shape));
    Tensor<float> f = Tensor<float>::from_shape(shape);
    if (n > 0) std::memcpy(f.data(), x, bytes);
    return f;
}

}  // namespace detail

/// Builds a data set from a user's own arrays (taken by value; move them in to avoid a copy). Requires
/// `features` of shape {N, sample...} with rank >= 2 and finite values, N == labels.size() > 0, labels >= 0
/// and, when `class_names` is given, labels < class_names.size(). Throws dtrain::Error otherwise.
inline Dataset make_dataset(Tensor<float> features, Labels labels,
                            std::vector<std::string> class_names = {}) {
    Dataset d;
    d.features = std::move(features);
    d.labels = std::move(labels);
    d.class_names = std::move(class_names);
    d.source = "in-memory arrays";
    detail::validate_dataset(d, "dtrain::make_dataset");
    detail::check_finite(d.features, "dtrain::make_dataset", "features");
    return d;
}

/// Builds a regression data set from a user's own arrays (taken by value): `features` of shape {N,
/// sample...} with rank >= 2 and `targets` of shape {N} (one float target per sample, stored as {N, 1}) or
/// {N, k} with k >= 1, all finite, N > 0. Throws dtrain::Error naming the shapes or the value otherwise.
inline Dataset make_regression_dataset(Tensor<float> features, Tensor<float> targets) {
    const char* who = "dtrain::make_regression_dataset";
    DTRAIN_CHECK(targets.dimension() == 1 || targets.dimension() == 2, who,
                 ": targets must have shape [N] or [N, k], got ", detail::shape_str(targets.shape()));
    if (targets.dimension() == 1) targets.reshape(std::vector<std::size_t>{targets.shape()[0], 1});
    Dataset d;
    d.features = std::move(features);
    d.targets = std::move(targets);
    d.source = "in-memory arrays";
    detail::validate_dataset(d, who);
    detail::check_finite(d.features, who, "features");
    detail::check_finite(d.targets, who, "targets");
    return d;
}

/// Copies a user's raw arrays into a data set: `n` samples of shape `sample_shape` from `x` (row-major,
/// n * shape_size(sample_shape) floats) and `n` labels from `y`. Same requirements as make_dataset().
inline Dataset from_arrays(const float* x, const std::int32_t* y, std::size_t n, const Shape& sample_shape,
                           std::vector<std::string> class_names = {}) {
    const char* who = "dtrain::from_arrays";
    DTRAIN_CHECK(x != nullptr && y != nullptr, who, ": null feature or label pointer");
    Tensor<float> f = detail::copy_rows(x, n, sample_shape, who);
    Labels l = Labels::from_shape({n});
    if (n > 0) std::memcpy(l.data(), y, n * sizeof(std::int32_t));
    return make_dataset(std::move(f), std::move(l), std::move(class_names));
}

/// Copies a user's raw arrays into a regression data set: `n` samples of shape `sample_shape` from `x` and
/// n * `target_columns` float targets from `y` (row-major, target_columns per sample). Same requirements as
/// make_regression_dataset(); target_columns must be >= 1.
inline Dataset regression_from_arrays(const float* x, const float* y, std::size_t n,
                                      const Shape& sample_shape, std::size_t target_columns = 1) {
    const char* who = "dtrain::regression_from_arrays";
    DTRAIN_CHECK(x != nullptr && y != nullptr, who, ": null feature or target pointer");
    DTRAIN_CHECK(target_columns > 0, who, ": target_columns must be >= 1, got 0");
    Tensor<float> f = detail::copy_rows(x, n, sample_shape, who);
    Tensor<float> t = detail::copy_rows(y, n, {target_columns}, who);
    return make_regression_dataset(std::move(f), std::move(t));
}

/// The samples of `d` at `indices` (in that order, repeats allowed) as a new data set of the same kind.
/// Labels keep their values and the class names are copied whole: a subset that lacks a class keeps its
/// ids (no re-indexing), so num_classes() and every id mean what they meant in `d`. Float targets are
/// copied row by row. Throws when an index is out of range or `indices` is empty.
inline Dataset subset(const Dataset& d, const std::vector<std::size_t>& indices) {
    DTRAIN_CHECK(!indices.empty(), "dtrain::subset: empty index list for '", d.source, "'");
    detail::checked_shape_size(d.features.shape(), "dtrain::subset: features of '", d.source, "'");
    const std::size_t m = d.sample_size();
    const Shape shape = batch_shape(indices.size(), d.sample_shape());
    detail::checked_shape_size(shape, "dtrain::subset: ", indices.size(), " samples of '", d.source, "'");
    const bool targets = d.has_targets();
    const std::size_t k =
        targets ? detail::checked_trailing_size(d.targets.shape(), 1, "dtrain::subset: targets") : 0;
    Dataset out;
    out.features = Tensor<float>::from_shape(shape);
    if (targets)
        out.targets = Tensor<float>::from_shape(
            batch_shape(indices.size(), Shape(d.targets.shape().begin() + 1, d.targets.shape().end())));
    else
        out.labels = Labels::from_shape({indices.size()});
    for (std::size_t j = 0; j < indices.size(); ++j) {
        const std::size_t i = indices[j];
        DTRAIN_CHECK(i < d.size(), "dtrain::subset: index ", i, " out of range for a data set of ", d.size(),
                     " samples ('", d.source, "')");
        std::memcpy(out.features.data() + j * m, d.features.data() + i * m, m * sizeof(float));
        if (targets)
            std::memcpy(out.targets.data() + j * k, d.targets.data() + i * k, k * sizeof(float));
        else
            out.labels(j) = d.labels(i);
    }
    out.class_names = d.class_names;
    out.source = d.source;
    out.warnings = d.warnings;
    return out;
}

}  // namespace dtrain

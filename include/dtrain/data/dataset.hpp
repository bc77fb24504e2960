#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/core/rng.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/data/detail/checked.hpp>
#include <dtrain/data/detail/seed.hpp>

namespace dtrain {

/// Which part of a data set distributed as a train/test pair to load.
enum class Split { Train, Test };

/// A labelled data set held in memory: batch-first features ([N, 4] for a table, [N, C, H, W] for images),
/// one int32 class label per sample, and the class names when the source knows them. Data sets know no
/// models; DataLoader turns one into batches.
struct Dataset {
    /// Features, batch first: shape {N, sample...}.
    Tensor<float> features;
    /// Class label of every sample, in [0, num_classes()).
    Labels labels;
    /// Name of class i at position i (empty when unknown).
    std::vector<std::string> class_names;
    /// Where the data came from (file or directory), used in messages.
    std::string source;
    /// What the reader found suspicious but not wrong, one sentence each naming the file and line (read_csv:
    /// a class label that occurs once among many, most likely a typo). Print them, on rank 0 only.
    std::vector<std::string> warnings;

    /// Number of samples N.
    std::size_t size() const { return labels.size(); }
    /// Shape of one sample (features' shape without the batch dimension).
    Shape sample_shape() const {
        return features.dimension() == 0 ? Shape{}
                                         : Shape(features.shape().begin() + 1, features.shape().end());
    }
    /// Number of floats in one sample; throws dtrain::Error when the features' element count overflows.
    std::size_t sample_size() const {
        return detail::checked_trailing_size(features.shape(), 1, "dtrain::Dataset '", source, "'");
    }
    /// Number of classes: class_names.size() when known, otherwise the largest label + 1.
    std::size_t num_classes() const {
        if (!class_names.empty()) return class_names.size();
        std::int32_t m = -1;
        for (auto v : labels)
            m = std::max(m, v);
        return static_cast<std::size_t>(m + 1);
    }
};

namespace detail {

/// Checks the invariants of a data set: rank >= 2 features whose element count fits std::size_t, one label
/// per sample, labels in range.
inline void validate_dataset(const Dataset& d, const char* who) {
    DTRAIN_CHECK(d.features.dimension() >= 2, who,
                 ": features must be batch-first with rank >= 2, got shape ", shape_str(d.features.shape()));
    checked_shape_size(d.features.shape(), who, ": features");
    DTRAIN_CHECK(d.features.shape()[0] == d.labels.size(), who, ": features have ", d.features.shape()[0],
                 " samples (shape ", shape_str(d.features.shape()), ") but there are ", d.labels.size(),
                 " labels");
    DTRAIN_CHECK(d.size() > 0, who, ": the data set is empty");
    for (std::size_t i = 0; i < d.labels.size(); ++i) {
        const auto y = d.labels(i);
        DTRAIN_CHECK(y >= 0 && (d.class_names.empty() || static_cast<std::size_t>(y) < d.class_names.size()),
                     who, ": label ", y, " of sample ", i, " is outside [0, ",
                     d.class_names.empty() ? std::string("inf") : std::to_string(d.class_names.size()), ")");
    }
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
    for (auto v : d.features)
        DTRAIN_CHECK(std::isfinite(v), "dtrain::make_dataset: features contain a non-finite value (", v, ")");
    return d;
}

/// Copies a user's raw arrays into a data set: `n` samples of shape `sample_shape` from `x` (row-major,
/// n * shape_size(sample_shape) floats) and `n` labels from `y`. Same requirements as make_dataset().
inline Dataset from_arrays(const float* x, const std::int32_t* y, std::size_t n, const Shape& sample_shape,
                           std::vector<std::string> class_names = {}) {
    const char* who = "dtrain::from_arrays";
    DTRAIN_CHECK(x != nullptr && y != nullptr, who, ": null feature or label pointer");
    const std::size_t m = detail::checked_shape_size(sample_shape, who, ": sample");
    DTRAIN_CHECK(!sample_shape.empty() && m > 0, who,
                 ": sample shape must be non-empty with no zero dimension, got ",
                 detail::shape_str(sample_shape));
    const Shape shape = batch_shape(n, sample_shape);
    const std::size_t count =
        detail::checked_mul(detail::checked_shape_size(shape, who, ": ", n, " samples"), sizeof(float), who,
                            ": bytes of shape ", detail::shape_str(shape));
    Tensor<float> f = Tensor<float>::from_shape(shape);
    if (n > 0) std::memcpy(f.data(), x, count);
    Labels l = Labels::from_shape({n});
    if (n > 0) std::memcpy(l.data(), y, n * sizeof(std::int32_t));
    return make_dataset(std::move(f), std::move(l), std::move(class_names));
}

/// The samples of `d` at `indices` (in that order, repeats allowed) as a new data set with the same class
/// names. Throws when an index is out of range or `indices` is empty.
inline Dataset subset(const Dataset& d, const std::vector<std::size_t>& indices) {
    DTRAIN_CHECK(!indices.empty(), "dtrain::subset: empty index list for '", d.source, "'");
    detail::checked_shape_size(d.features.shape(), "dtrain::subset: features of '", d.source, "'");
    const std::size_t m = d.sample_size();
    const Shape shape = batch_shape(indices.size(), d.sample_shape());
    detail::checked_shape_size(shape, "dtrain::subset: ", indices.size(), " samples of '", d.source, "'");
    Dataset out;
    out.features = Tensor<float>::from_shape(shape);
    out.labels = Labels::from_shape({indices.size()});
    for (std::size_t k = 0; k < indices.size(); ++k) {
        const std::size_t i = indices[k];
        DTRAIN_CHECK(i < d.size(), "dtrain::subset: index ", i, " out of range for a data set of ", d.size(),
                     " samples ('", d.source, "')");
        std::memcpy(out.features.data() + k * m, d.features.data() + i * m, m * sizeof(float));
        out.labels(k) = d.labels(i);
    }
    out.class_names = d.class_names;
    out.source = d.source;
    out.warnings = d.warnings;
    return out;
}

/// Splits `d` into (train, test) with a fraction `test_fraction` in (0, 1) of every class going to test,
/// chosen by a generator seeded with `seed` (stratified, so class proportions are kept). Samples keep their
/// original relative order inside each part. Throws when either part would be empty.
inline std::pair<Dataset, Dataset> train_test_split(const Dataset& d, double test_fraction,
                                                    std::uint64_t seed) {
    DTRAIN_CHECK(test_fraction > 0.0 && test_fraction < 1.0,
                 "dtrain::train_test_split: test_fraction must be in (0, 1), got ", test_fraction);
    // The samples grouped by label, labels ascending and indices ascending within a label: sized by the
    // samples, not by the largest label (one label 999999999 must not allocate 10^9 lists).
    std::vector<std::size_t> order(d.size());
    std::iota(order.begin(), order.end(), std::size_t(0));
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return d.labels(a) < d.labels(b); });
    Rng rng(detail::epoch_seed(seed, 0, 0x5b117));
    std::vector<std::size_t> train, test;
    for (auto first = order.begin(); first != order.end();) {
        const auto y = d.labels(*first);
        const auto last = std::find_if(first, order.end(), [&](std::size_t i) { return d.labels(i) != y; });
        dtrain::shuffle(first, last, rng);
        const auto nt =
            static_cast<std::ptrdiff_t>(std::llround(test_fraction * static_cast<double>(last - first)));
        test.insert(test.end(), first, first + nt);
        train.insert(train.end(), first + nt, last);
        first = last;
    }
    DTRAIN_CHECK(!train.empty() && !test.empty(), "dtrain::train_test_split: a test fraction of ",
                 test_fraction, " of ", d.size(), " samples leaves one part empty");
    std::sort(train.begin(), train.end());
    std::sort(test.begin(), test.end());
    return {subset(d, train), subset(d, test)};
}

}  // namespace dtrain

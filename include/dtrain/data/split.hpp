#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/rng.hpp>
#include <dtrain/data/dataset.hpp>
#include <dtrain/data/detail/seed.hpp>

namespace dtrain {

/// How train_test_split() chooses the test samples.
enum class SplitMode {
    /// The test fraction of every class, so both parts keep the class proportions. Class labels only.
    Stratified,
    /// The test fraction of all samples, drawn by a seeded shuffle that ignores labels. Class labels or
    /// float targets (the split for regression).
    Shuffled,
};

namespace detail {

/// The stratified test and training indices of class-labelled `d` (unsorted).
inline void stratified_parts(const Dataset& d, double test_fraction, Rng& rng,
                             std::vector<std::size_t>& train, std::vector<std::size_t>& test) {
    // The samples grouped by label, labels ascending and indices ascending within a label: sized by the
    // samples, not by the largest label (one label 999999999 must not allocate 10^9 lists).
    std::vector<std::size_t> order(d.size());
    std::iota(order.begin(), order.end(), std::size_t(0));
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return d.labels(a) < d.labels(b); });
    std::size_t classes = 0;
    for (auto first = order.begin(); first != order.end(); ++classes) {
        const auto y = d.labels(*first);
        const auto last = std::find_if(first, order.end(), [&](std::size_t i) { return d.labels(i) != y; });
        dtrain::shuffle(first, last, rng);
        const auto nt =
            static_cast<std::ptrdiff_t>(std::llround(test_fraction * static_cast<double>(last - first)));
        test.insert(test.end(), first, first + nt);
        train.insert(train.end(), first + nt, last);
        first = last;
    }
    DTRAIN_CHECK(
        !train.empty() && !test.empty(),
        "dtrain::train_test_split: a stratified split "
        "(SplitMode::Stratified) with a test fraction of ",
        test_fraction, " of ", d.size(), " samples in ", classes, " classes leaves the ",
        test.empty() ? "test" : "training", " part empty: ", test_fraction, " of each class rounds to ",
        test.empty() ? "none" : "all",
        " of it. Pass SplitMode::Shuffled to take the fraction of all samples, or change the fraction");
}

}  // namespace detail

/// Splits `d` into (train, test) with a fraction `test_fraction` in (0, 1) going to test, chosen by a
/// generator seeded with `seed`. SplitMode::Stratified (the default, and the meaning of the three-argument
/// call) takes that fraction of every class (rounded per class), so class proportions are kept; it needs
/// class labels. SplitMode::Shuffled takes round(test_fraction * N) samples of a seeded shuffle of all of
/// them, for float targets or classes alike. Samples keep their original relative order inside each part;
/// labels keep their ids (see subset()). Throws dtrain::Error when the fraction is outside (0, 1), when
/// either part would be empty (naming stratification when it is the cause), or for a stratified split of
/// float targets.
DTRAIN_INLINE std::pair<Dataset, Dataset> train_test_split(const Dataset& d, double test_fraction,
                                                           std::uint64_t seed,
                                                           SplitMode mode = SplitMode::Stratified);

#if DTRAIN_HEADER_DEFINITIONS

DTRAIN_INLINE std::pair<Dataset, Dataset> train_test_split(const Dataset& d, double test_fraction,
                                                           std::uint64_t seed, SplitMode mode) {
    DTRAIN_CHECK(test_fraction > 0.0 && test_fraction < 1.0,
                 "dtrain::train_test_split: test_fraction must be in (0, 1), got ", test_fraction);
    DTRAIN_CHECK(
        mode == SplitMode::Shuffled || !d.has_targets(),
        "dtrain::train_test_split: a stratified split (SplitMode::Stratified, the default) keeps the "
        "proportions of class labels, but '",
        d.source, "' holds float targets (", detail::shape_str(d.targets.shape()),
        "): pass SplitMode::Shuffled");
    Rng rng(detail::epoch_seed(seed, 0, 0x5b117));
    std::vector<std::size_t> train, test;
    if (mode == SplitMode::Stratified) {
        detail::stratified_parts(d, test_fraction, rng, train, test);
    } else {
        std::vector<std::size_t> order(d.size());
        std::iota(order.begin(), order.end(), std::size_t(0));
        dtrain::shuffle(order.begin(), order.end(), rng);
        const auto nt = static_cast<std::size_t>(std::llround(test_fraction * static_cast<double>(d.size())));
        DTRAIN_CHECK(nt > 0 && nt < d.size(), "dtrain::train_test_split: a test fraction of ", test_fraction,
                     " of ", d.size(), " samples rounds to ", nt, " test samples, which leaves the ",
                     nt == 0 ? "test" : "training", " part empty");
        test.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(nt));
        train.assign(order.begin() + static_cast<std::ptrdiff_t>(nt), order.end());
    }
    std::sort(train.begin(), train.end());
    std::sort(test.begin(), test.end());
    return {subset(d, train), subset(d, test)};
}

#endif

}  // namespace dtrain

// include/dtrain/data/split.hpp: train_test_split, stratified (the default) or shuffled.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include <xtensor/xbuilder.hpp>

#include <dtrain/data/dataset.hpp>
#include <dtrain/data/split.hpp>
#include <support/test_utils.hpp>

using Catch::Contains;
using dtrain::Labels;
using dtrain::SplitMode;
using dtrain::Tensor;

namespace {

/// The sample ids of a part, read back from feature 0 (which holds the id).
std::vector<int> ids(const dtrain::Dataset& d) {
    std::vector<int> out;
    for (std::size_t i = 0; i < d.size(); ++i)
        out.push_back(int(d.features(i, 0)));
    return out;
}

/// n samples whose feature 0 is the id; labels id % 3, or float targets (id * 2, -id) with `targets`.
dtrain::Dataset numbered(std::size_t n, bool targets) {
    Tensor<float> x = Tensor<float>::from_shape({n, 1}), t = Tensor<float>::from_shape({n, 2});
    Labels y = Labels::from_shape({n});
    for (std::size_t i = 0; i < n; ++i) {
        x(i, 0) = float(i);
        t(i, 0) = float(i) * 2, t(i, 1) = -float(i);
        y(i) = std::int32_t(i % 3);
    }
    return targets ? dtrain::make_regression_dataset(x, t) : dtrain::make_dataset(x, y);
}

}  // namespace

TEST_CASE("The three-argument train_test_split is stratified, as it always was", "[data][split]") {
    const auto d = numbered(20, false);  // classes of 7, 7 and 6 samples
    const auto [train, test] = dtrain::train_test_split(d, 0.25, 42);
    // The split this call made before SplitMode existed (same generator, same order).
    CHECK(ids(test) == std::vector<int>{0, 1, 2, 5, 9, 19});
    CHECK(train.size() == 14);
    const auto [train2, test2] = dtrain::train_test_split(d, 0.25, 42, SplitMode::Stratified);
    CHECK(ids(test2) == ids(test));
    CHECK(ids(train2) == ids(train));
    // Stratified: round(0.25 * 7) = 2, 2 and round(0.25 * 6) = 2 of each class.
    std::vector<int> per_class(3, 0);
    for (auto y : test.labels)
        ++per_class.at(std::size_t(y));
    CHECK(per_class == std::vector<int>{2, 2, 2});
}

TEST_CASE("A shuffled split takes the fraction of all samples, with float targets or class labels",
          "[data][split][regression]") {
    const auto r = numbered(50, true);
    const auto [train, test] = dtrain::train_test_split(r, 0.2, 7, SplitMode::Shuffled);
    CHECK(test.size() == 10);
    CHECK(train.size() == 40);
    CHECK(train.has_targets());
    CHECK(test.has_targets());
    // Disjoint and covering, each part in the original order, targets travelling with their samples.
    auto all = ids(train);
    const auto t = ids(test);
    CHECK(std::is_sorted(all.begin(), all.end()));
    CHECK(std::is_sorted(t.begin(), t.end()));
    all.insert(all.end(), t.begin(), t.end());
    std::sort(all.begin(), all.end());
    for (int i = 0; i < 50; ++i)
        CHECK(all[std::size_t(i)] == i);
    for (std::size_t i = 0; i < test.size(); ++i) {
        CHECK(test.targets(i, 0) == test.features(i, 0) * 2);
        CHECK(test.targets(i, 1) == -test.features(i, 0));
    }
    // Reproducible from the seed; another seed draws another test part.
    CHECK(ids(dtrain::train_test_split(r, 0.2, 7, SplitMode::Shuffled).second) == t);
    CHECK(ids(dtrain::train_test_split(r, 0.2, 8, SplitMode::Shuffled).second) != t);
    // The test part is not simply the first or last samples.
    CHECK(t != std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    CHECK(t != std::vector<int>{40, 41, 42, 43, 44, 45, 46, 47, 48, 49});

    // Class labels: one sample per class, where stratifying leaves the test part empty.
    const auto c = dtrain::make_dataset(xt::zeros<float>({3, 2}), Labels{0, 1, 2});
    const auto [ctrain, ctest] = dtrain::train_test_split(c, 0.2, 1, SplitMode::Shuffled);
    CHECK(ctest.size() == 1);
    CHECK(ctrain.size() == 2);
    CHECK(ctest.class_names == c.class_names);
}

TEST_CASE("train_test_split errors name stratification when it is the cause", "[data][split][errors]") {
    // Float targets cannot be stratified: the default call says so and names the fix.
    CHECK_THROWS_WITH(dtrain::train_test_split(numbered(10, true), 0.2, 1),
                      Contains("dtrain::train_test_split: a stratified split (SplitMode::Stratified, the "
                               "default) keeps the proportions of class labels, but 'in-memory arrays' holds "
                               "float targets ([10, 2]): pass SplitMode::Shuffled"));

    // Three samples, one per class.
    const auto d = dtrain::make_dataset(xt::zeros<float>({3, 2}), Labels{0, 1, 2});
    const std::pair<double, const char*> bad[] = {
        {0.0, "got 0"}, {1.0, "got 1"}, {-0.5, "got -0.5"}, {1.5, "got 1.5"}, {std::nan(""), "got nan"}};
    for (const auto& [f, text] : bad) {
        INFO("fraction " << f);
        for (auto mode : {SplitMode::Stratified, SplitMode::Shuffled})
            CHECK_THROWS_WITH(
                dtrain::train_test_split(d, f, 1, mode),
                Contains("dtrain::train_test_split: test_fraction must be in (0, 1), ") && Contains(text));
    }
    // One sample per class: 20% of each class rounds to no test sample, 90% to no training sample.
    CHECK_THROWS_WITH(
        dtrain::train_test_split(d, 0.2, 1),
        Contains("dtrain::train_test_split: a stratified split (SplitMode::Stratified) with a "
                 "test fraction of 0.2 of 3 samples in 3 classes leaves the test part empty: 0.2 "
                 "of each class rounds to none of it. Pass SplitMode::Shuffled"));
    CHECK_THROWS_WITH(
        dtrain::train_test_split(d, 0.9, 1),
        Contains("a test fraction of 0.9 of 3 samples in 3 classes leaves the training part empty"));
    // Shuffled, a fraction that rounds to nothing is an error that does not blame stratification.
    const std::string shuffled =
        dtrain::test::error_message([&] { dtrain::train_test_split(d, 0.1, 1, SplitMode::Shuffled); });
    CHECK_THAT(shuffled, Contains("dtrain::train_test_split: a test fraction of 0.1 of 3 samples rounds to 0 "
                                  "test samples, which leaves the test part empty"));
    CHECK(shuffled.find("stratif") == std::string::npos);
    // Two per class: half of each class goes to test.
    const auto d2 = dtrain::make_dataset(xt::zeros<float>({6, 2}), Labels{0, 1, 2, 0, 1, 2});
    CHECK(dtrain::train_test_split(d2, 0.5, 1).second.size() == 3);
}

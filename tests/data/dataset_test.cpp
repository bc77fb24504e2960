// include/dtrain/data/dataset.hpp: construction (errors name the function and the offending value), class
// labels or float targets, subset, reshape_samples.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include <xtensor/xbuilder.hpp>

#include <dtrain/data/dataset.hpp>

using Catch::Contains;
using dtrain::Labels;
using dtrain::Tensor;

TEST_CASE("make_dataset and from_arrays reject malformed arrays, naming the shape",
          "[data][dataset][errors]") {
    CHECK_THROWS_WITH(
        dtrain::make_dataset(Tensor<float>::from_shape({3}), Labels{0, 1, 0}),
        Contains("dtrain::make_dataset: features must be batch-first with rank >= 2, got shape [3]"));
    CHECK_THROWS_WITH(dtrain::make_dataset(Tensor<float>::from_shape({0, 2}), Labels::from_shape({0})),
                      Contains("dtrain::make_dataset: the data set is empty"));

    const std::vector<float> x = {1, 2, 3, 4};
    const std::vector<std::int32_t> y = {0, 1};
    CHECK_THROWS_WITH(dtrain::from_arrays(nullptr, y.data(), 2, {2}),
                      Contains("dtrain::from_arrays: null feature or label pointer"));
    CHECK_THROWS_WITH(dtrain::from_arrays(x.data(), nullptr, 2, {2}),
                      Contains("dtrain::from_arrays: null feature or label pointer"));
    CHECK_THROWS_WITH(
        dtrain::from_arrays(x.data(), y.data(), 2, {}),
        Contains("dtrain::from_arrays: sample shape must be non-empty with no zero dimension, got []"));
    CHECK_THROWS_WITH(dtrain::from_arrays(x.data(), y.data(), 2, {2, 0}), Contains("got [2, 0]"));
    CHECK_NOTHROW(dtrain::from_arrays(x.data(), y.data(), 2, {2}));
}

TEST_CASE("subset rejects an empty index list and an index out of range", "[data][dataset][errors]") {
    const auto d = dtrain::make_dataset(xt::zeros<float>({3, 2}), Labels{0, 1, 2});
    CHECK_THROWS_WITH(dtrain::subset(d, {}),
                      Contains("dtrain::subset: empty index list for 'in-memory arrays'"));
    CHECK_THROWS_WITH(dtrain::subset(d, {1, 3}),
                      Contains("dtrain::subset: index 3 out of range for a data set of 3 samples"));
}

namespace {

/// n samples of 2 features (i, -i) with float targets (i / 2, i * 10) of `k` = 1 or 2 columns.
dtrain::Dataset regression_data(std::size_t n, std::size_t k) {
    Tensor<float> x = Tensor<float>::from_shape({n, 2}), t = Tensor<float>::from_shape({n, k});
    for (std::size_t i = 0; i < n; ++i) {
        x(i, 0) = float(i), x(i, 1) = -float(i);
        for (std::size_t j = 0; j < k; ++j)
            t(i, j) = j == 0 ? float(i) / 2 : float(i) * 10;
    }
    return dtrain::make_regression_dataset(std::move(x), std::move(t));
}

}  // namespace

TEST_CASE("A data set holds float targets [N, k] or class labels, and says which when asked for the other",
          "[data][dataset][regression]") {
    const auto r = regression_data(5, 2);
    CHECK(r.has_targets());
    CHECK(r.size() == 5);
    CHECK(r.num_targets() == 2);
    CHECK(r.labels.size() == 0);
    CHECK(r.float_targets()(3, 1) == 30.0f);
    CHECK_THROWS_WITH(r.num_classes(),
                      Contains("dtrain::Dataset::num_classes: 'in-memory arrays' holds float "
                               "targets (shape [5, 2], regression), not class labels"));
    CHECK_THROWS_WITH(r.class_labels(), Contains("dtrain::Dataset::class_labels: 'in-memory arrays' holds "
                                                 "float targets"));

    const auto c = dtrain::make_dataset(xt::zeros<float>({3, 2}), Labels{0, 1, 0});
    CHECK_FALSE(c.has_targets());
    CHECK(c.num_classes() == 2);
    CHECK(c.class_labels().size() == 3);
    CHECK_THROWS_WITH(c.num_targets(),
                      Contains("dtrain::Dataset::num_targets: 'in-memory arrays' holds class "
                               "labels, not float targets (regression)"));
    CHECK_THROWS_WITH(c.float_targets(),
                      Contains("dtrain::Dataset::float_targets") && Contains("CsvOptions::target_columns"));

    // One target per sample may come as [N]; it is stored as [N, 1].
    Tensor<float> y = Tensor<float>::from_shape({3});
    y(0) = 1.5f, y(1) = -2.0f, y(2) = 0.25f;
    const auto one = dtrain::make_regression_dataset(xt::zeros<float>({3, 4}), y);
    CHECK(one.targets.shape() == std::vector<std::size_t>{3, 1});
    CHECK(one.targets(2, 0) == 0.25f);
    CHECK(one.num_targets() == 1);
}

TEST_CASE("make_regression_dataset and regression_from_arrays name what is wrong",
          "[data][dataset][regression][errors]") {
    const char* who = "dtrain::make_regression_dataset: ";
    CHECK_THROWS_WITH(dtrain::make_regression_dataset(Tensor<float>::from_shape({3, 2}),
                                                      Tensor<float>::from_shape({3, 1, 1})),
                      Contains(who) && Contains("targets must have shape [N] or [N, k], got [3, 1, 1]"));
    CHECK_THROWS_WITH(
        dtrain::make_regression_dataset(Tensor<float>::from_shape({3, 2}), Tensor<float>::from_shape({4, 1})),
        Contains("features have 3 samples (shape [3, 2]) but targets have 4 rows (shape [4, 1])"));
    CHECK_THROWS_WITH(
        dtrain::make_regression_dataset(Tensor<float>::from_shape({3, 2}), Tensor<float>::from_shape({3, 0})),
        Contains("targets must have shape [N, k] with k >= 1, got [3, 0]"));
    Tensor<float> bad = xt::zeros<float>({3, 1});
    bad(1, 0) = std::nanf("");
    CHECK_THROWS_WITH(dtrain::make_regression_dataset(xt::zeros<float>({3, 2}), bad),
                      Contains("targets contain a non-finite value (nan)"));

    const std::vector<float> x = {1, 2, 3, 4, 5, 6}, t = {0.5f, 7, -1, 8, 2.5f, 9};
    const auto d = dtrain::regression_from_arrays(x.data(), t.data(), 3, {2}, 2);
    CHECK(d.features.shape() == std::vector<std::size_t>{3, 2});
    CHECK(d.targets.shape() == std::vector<std::size_t>{3, 2});
    CHECK(std::vector<float>(d.targets.begin(), d.targets.end()) == t);
    CHECK(dtrain::regression_from_arrays(x.data(), t.data(), 3, {2}).targets.shape() ==
          std::vector<std::size_t>{3, 1});
    CHECK_THROWS_WITH(dtrain::regression_from_arrays(x.data(), nullptr, 3, {2}),
                      Contains("dtrain::regression_from_arrays: null feature or target pointer"));
    CHECK_THROWS_WITH(dtrain::regression_from_arrays(x.data(), t.data(), 3, {2}, 0),
                      Contains("target_columns must be >= 1, got 0"));
}

TEST_CASE("subset keeps class ids and class names as they are, and carries float targets",
          "[data][dataset][regression]") {
    Tensor<float> x = Tensor<float>::from_shape({6, 1});
    for (std::size_t i = 0; i < 6; ++i)
        x(i, 0) = float(i);
    const auto d = dtrain::make_dataset(x, Labels{0, 1, 2, 0, 1, 2}, {"a", "b", "c"});
    // Without class 1: ids stay 0 and 2 (no re-indexing to 0 and 1), the names stay all three.
    const auto s = dtrain::subset(d, {5, 0, 3});
    CHECK(std::vector<int>(s.labels.begin(), s.labels.end()) == std::vector<int>{2, 0, 0});
    CHECK(s.class_names == d.class_names);
    CHECK(s.num_classes() == 3);
    CHECK(s.features(0, 0) == 5.0f);
    // The same without names: the largest id still counts.
    const auto u = dtrain::subset(dtrain::make_dataset(x, Labels{0, 1, 2, 0, 1, 2}), {2, 0});
    CHECK(std::vector<int>(u.labels.begin(), u.labels.end()) == std::vector<int>{2, 0});
    CHECK(u.num_classes() == 3);

    const auto r = regression_data(6, 2);
    const auto rs = dtrain::subset(r, {4, 1, 4});
    CHECK(rs.has_targets());
    CHECK(rs.labels.size() == 0);
    REQUIRE(rs.targets.shape() == std::vector<std::size_t>{3, 2});
    for (std::size_t j = 0; j < 3; ++j) {
        const float id = rs.features(j, 0);
        CHECK(rs.targets(j, 0) == id / 2);
        CHECK(rs.targets(j, 1) == id * 10);
    }
    CHECK(rs.features(1, 0) == 1.0f);
}

TEST_CASE("reshape_samples turns flat rows into images and names both shapes when it cannot",
          "[data][dataset]") {
    Tensor<float> x = Tensor<float>::from_shape({2, 64});
    for (std::size_t i = 0; i < x.size(); ++i)
        x.data()[i] = float(i);
    auto d = dtrain::make_dataset(x, Labels{3, 7});
    d.source = "digits.csv";
    CHECK(&d.reshape_samples({1, 8, 8}) == &d);
    CHECK(d.features.shape() == std::vector<std::size_t>{2, 1, 8, 8});
    CHECK(d.sample_shape() == dtrain::Shape{1, 8, 8});
    CHECK(d.features(1, 0, 2, 3) == float(64 + 2 * 8 + 3));  // row-major order kept
    CHECK(d.size() == 2);
    CHECK_THROWS_WITH(
        d.reshape_samples({1, 8, 9}),
        Contains("dtrain::Dataset::reshape_samples: the samples of 'digits.csv' have shape [1, 8, "
                 "8] (64 values), which cannot become [1, 8, 9] (72 values)"));
    CHECK_THROWS_WITH(d.reshape_samples({}), Contains("which cannot become [] (0 values)"));
    CHECK(d.features.shape() == std::vector<std::size_t>{2, 1, 8, 8});  // unchanged by the failures
    d.reshape_samples({64});
    CHECK(d.features.shape() == std::vector<std::size_t>{2, 64});
    CHECK(d.features(1, 19) == float(64 + 19));
}

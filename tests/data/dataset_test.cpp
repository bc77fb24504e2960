// Errors of include/dtrain/data/dataset.hpp: each names the function and the offending value.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

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

TEST_CASE("subset and train_test_split reject empty parts and bad fractions", "[data][dataset][errors]") {
    // Three samples, one per class.
    const auto d = dtrain::make_dataset(Tensor<float>::from_shape({3, 2}), Labels{0, 1, 2});
    CHECK_THROWS_WITH(dtrain::subset(d, {}),
                      Contains("dtrain::subset: empty index list for 'in-memory arrays'"));

    const std::pair<double, const char*> bad[] = {
        {0.0, "got 0"}, {1.0, "got 1"}, {-0.5, "got -0.5"}, {1.5, "got 1.5"}, {std::nan(""), "got nan"}};
    for (const auto& [f, text] : bad) {
        INFO("fraction " << f);
        CHECK_THROWS_WITH(
            dtrain::train_test_split(d, f, 1),
            Contains("dtrain::train_test_split: test_fraction must be in (0, 1), ") && Contains(text));
    }
    // One sample per class: 20% of each class rounds to no test sample, 90% to no training sample.
    CHECK_THROWS_WITH(
        dtrain::train_test_split(d, 0.2, 1),
        Contains("dtrain::train_test_split: a test fraction of 0.2 of 3 samples leaves one part empty"));
    CHECK_THROWS_WITH(dtrain::train_test_split(d, 0.9, 1), Contains("a test fraction of 0.9 of 3 samples"));
    // Two per class: half of each class goes to test.
    const auto d2 = dtrain::make_dataset(Tensor<float>::from_shape({6, 2}), Labels{0, 1, 2, 0, 1, 2});
    CHECK_NOTHROW(dtrain::train_test_split(d2, 0.5, 1));
}

// Errors of include/dtrain/data/transform.hpp: bad arguments, use before fit() and shape mismatches name the
// transform and the offending value or shape.
#include <catch2/catch.hpp>

#include <dtrain/data/transform.hpp>

using Catch::Contains;
using dtrain::Tensor;

TEST_CASE("Standardizer::fit needs batch-first features with samples", "[data][transform][errors]") {
    dtrain::Standardizer s;
    CHECK_THROWS_WITH(s.fit(Tensor<float>::from_shape({4})),
                      Contains("Standardizer::fit: need batch-first features with N > 0, got shape [4]"));
    CHECK_THROWS_WITH(s.fit(Tensor<float>::from_shape({0, 3})), Contains("got shape [0, 3]"));
    CHECK_NOTHROW(s.fit(Tensor<float>::from_shape({1, 3})));
}

TEST_CASE("MinMaxScaler: range, fit and apply errors", "[data][transform][errors]") {
    CHECK_THROWS_WITH(dtrain::MinMaxScaler(1.0f, 1.0f), Contains("MinMaxScaler: need lo < hi, got [1, 1]"));
    CHECK_THROWS_WITH(dtrain::MinMaxScaler(2.0f, -1.0f), Contains("got [2, -1]"));
    CHECK_NOTHROW(dtrain::MinMaxScaler(-1.0f, 1.0f));

    dtrain::MinMaxScaler m;
    Tensor<float> x = Tensor<float>::from_shape({3, 2});
    CHECK_THROWS_WITH(m.apply(x), Contains("MinMaxScaler::apply: call fit() on the training features first"));
    CHECK_THROWS_WITH(m.fit(Tensor<float>::from_shape({6})),
                      Contains("MinMaxScaler::fit: need batch-first features with N > 0, got shape [6]"));
    CHECK_THROWS_WITH(m.fit(Tensor<float>::from_shape({0, 2})), Contains("got shape [0, 2]"));
    x.fill(1.0f);
    m.fit(x);
    Tensor<float> wide = Tensor<float>::from_shape({3, 5});
    CHECK_THROWS_WITH(m.apply(wide), Contains("MinMaxScaler::apply: fitted on samples of 2 values but got "
                                              "features of shape [3, 5]"));
    Tensor<float> flat = Tensor<float>::from_shape({2});
    CHECK_THROWS_WITH(m.apply(flat), Contains("got features of shape [2]"));
    CHECK_NOTHROW(m.apply(x));
}

TEST_CASE("ChannelNormalizer: statistics, fit and apply errors", "[data][transform][errors]") {
    CHECK_THROWS_WITH(dtrain::ChannelNormalizer({}, {}),
                      Contains("ChannelNormalizer: got 0 means and 0 standard deviations"));
    CHECK_THROWS_WITH(dtrain::ChannelNormalizer({0.5f, 0.5f}, {1.0f}),
                      Contains("got 2 means and 1 standard"));

    dtrain::ChannelNormalizer c;
    Tensor<float> x = Tensor<float>::from_shape({2, 3, 2, 2});
    CHECK_THROWS_WITH(c.apply(x),
                      Contains("ChannelNormalizer::apply: no statistics (call fit() or pass them)"));
    CHECK_THROWS_WITH(c.fit(Tensor<float>::from_shape({4, 3})),
                      Contains("ChannelNormalizer::fit: need image features [N, C, ...], got shape [4, 3]"));
    CHECK_THROWS_WITH(c.fit(Tensor<float>::from_shape({0, 3, 2, 2})), Contains("got shape [0, 3, 2, 2]"));
    x.fill(0.5f);
    CHECK_NOTHROW(c.fit(x));
    CHECK_NOTHROW(c.apply(x));
}

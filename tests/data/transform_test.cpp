// include/dtrain/data/transform.hpp: state() round trips, and errors (bad arguments, use before fit() and
// shape mismatches name the transform and the offending value or shape).
#include <catch2/catch.hpp>

#include <xtensor/xbuilder.hpp>

#include <dtrain/data/transform.hpp>

using Catch::Contains;
using dtrain::MinMaxScaler;
using dtrain::Standardizer;
using dtrain::Tensor;

TEST_CASE("Standardizer::fit needs batch-first features with samples", "[data][transform][errors]") {
    dtrain::Standardizer s;
    CHECK_THROWS_WITH(s.fit(Tensor<float>::from_shape({4})),
                      Contains("Standardizer::fit: need batch-first features with N > 0, got shape [4]"));
    CHECK_THROWS_WITH(s.fit(Tensor<float>::from_shape({0, 3})), Contains("got shape [0, 3]"));
    CHECK_NOTHROW(s.fit(xt::zeros<float>({1, 3})));
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

TEST_CASE("Standardizer and MinMaxScaler: state() and from_state() restore the same transform",
          "[data][transform]") {
    Tensor<float> x = {{1.0f, 10.0f, 5.0f}, {3.0f, 30.0f, 5.0f}, {2.0f, -20.0f, 5.0f}};
    Standardizer z;
    z.fit(x);
    MinMaxScaler m(-1.0f, 1.0f);
    m.fit(x);
    const Tensor<float> sample = {{2.5f, 0.0f, 7.0f}};
    Tensor<float> a = sample, b = sample, c = sample, d = sample;
    z.apply(a);
    Standardizer::from_state(z.state()).apply(b);
    CHECK((a == b));
    m.apply(c);
    MinMaxScaler::from_state(m.state()).apply(d);
    CHECK((c == d));
    CHECK(z.state().size() == 6);
    CHECK(m.state().size() == 8);
    CHECK_THROWS_WITH(Standardizer::from_state({1.0, 2.0, 3.0}), Contains("an even number of values"));
    CHECK_THROWS_WITH(Standardizer::from_state({1.0, 0.0}),
                      Contains("feature 0 has mean 1 and standard deviation 0"));
    CHECK_THROWS_WITH(MinMaxScaler::from_state({1.0, 0.0}), Contains("need lo < hi"));
    CHECK_THROWS_WITH(MinMaxScaler::from_state({0.0, 1.0, 5.0, 4.0}),
                      Contains("feature 0 has minimum 5 above its maximum 4"));
    CHECK_THROWS_WITH(Standardizer().apply(a), Contains("call fit()"));
}

#include <catch2/catch.hpp>

#include <limits>

#include <dtrain/nn/metrics.hpp>

using dtrain::Labels;
using dtrain::Tensor;

TEST_CASE("metrics: count_correct and accuracy use the first arg-max", "[nn][metrics]") {
    const Tensor<float> s = {{0.1f, 0.9f, 0.0f}, {2.0f, 2.0f, 1.0f}, {0.0f, 0.0f, 5.0f}, {1.0f, 0.0f, 0.0f}};
    CHECK(dtrain::count_correct(s, Labels{1, 0, 2, 1}) == 3);
    CHECK(dtrain::count_correct(s, Labels{1, 1, 2, 0}) == 3);  // tie in row 1 goes to class 0
    CHECK(dtrain::accuracy(s, Labels{0, 1, 0, 1}) == 0.0);
    CHECK(dtrain::accuracy(s, Labels{1, 0, 2, 0}) == 1.0);
    CHECK_THROWS_AS(dtrain::count_correct(s, Labels{1, 0}), dtrain::Error);
}

TEST_CASE("metrics: a NaN score is the arg-max, as in torch.argmax", "[nn][metrics][nonfinite]") {
    // torch.argmax compares with GreaterOrNan: NaN beats every number and the first NaN beats later ones,
    // so (scores.argmax(1) == labels) counts a row as correct when its label is its first NaN's class.
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const Tensor<float> s = {{1.0f, nan, 3.0f}, {nan, 0.0f, nan}, {2.0f, nan, nan}, {-inf, inf, inf}};
    CHECK(dtrain::count_correct(s, Labels{1, 0, 1, 1}) == 4);
    CHECK(dtrain::count_correct(s, Labels{2, 2, 2, 2}) == 0);
    CHECK(dtrain::accuracy(s, Labels{1, 1, 1, 0}) == 0.5);
}

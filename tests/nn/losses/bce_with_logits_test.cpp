#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <limits>
#include <string>

#include <dtrain/nn/losses/bce_with_logits.hpp>

#include "nn/gradcheck.hpp"

using dtrain::BinaryCrossEntropyWithLogits;
using dtrain::Labels;
using dtrain::Rng;
using dtrain::Tensor;
using dtrain::test::contains;
using dtrain::test::error_message;
using dtrain::test::random_tensor;

namespace {

// A 1-D tensor of these values (a braced list of two values would also read as a shape).
template <class T>
Tensor<T> vec(std::initializer_list<T> values) {
    Tensor<T> t = Tensor<T>::from_shape({values.size()});
    std::copy(values.begin(), values.end(), t.begin());
    return t;
}

// A [n, 1] tensor of these values.
template <class T>
Tensor<T> column(std::initializer_list<T> values) {
    Tensor<T> t = Tensor<T>::from_shape({values.size(), std::size_t(1)});
    std::copy(values.begin(), values.end(), t.begin());
    return t;
}

// The textbook form -[y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))], for moderate x only.
double naive_bce(double x, double y) {
    const double s = 1.0 / (1.0 + std::exp(-x));
    return -(y * std::log(s) + (1 - y) * std::log(1 - s));
}

}  // namespace

TEST_CASE("BinaryCrossEntropyWithLogits: PyTorch's values and the textbook form, mean over elements",
          "[nn][loss][bce]") {
    BinaryCrossEntropyWithLogits<double> bce;
    Tensor<double> g;
    // BCEWithLogitsLoss as PyTorch defines it: log 2 for logit 0, target 1; 0.2200948 for ([2, -1], [1, 0]).
    CHECK(bce.compute(vec<double>({0.0}), vec<double>({1.0}), g) == Approx(std::log(2.0)).epsilon(1e-15));
    CHECK(g(0) == Approx(-0.5).epsilon(1e-15));
    CHECK(bce.compute(vec<double>({2.0, -1.0}), vec<double>({1.0, 0.0}), g) ==
          Approx((std::log1p(std::exp(-2.0)) + std::log1p(std::exp(-1.0))) / 2).epsilon(1e-14));
    CHECK(bce.compute(vec<double>({2.0, -1.0}), vec<double>({1.0, 0.0}), g) ==
          Approx(0.22009485).epsilon(1e-7));

    Rng rng(5);
    const Tensor<double> x = random_tensor<double>({6, 3}, rng, -4, 4);
    Tensor<double> y = random_tensor<double>({6, 3}, rng, 0, 1);
    const double l = bce.compute(x, y, g);
    double want = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        want += naive_bce(x.data()[i], y.data()[i]);
        const double s = 1.0 / (1.0 + std::exp(-x.data()[i]));
        CHECK(g.data()[i] == Approx((s - y.data()[i]) / 18).epsilon(1e-12));
    }
    CHECK(l == Approx(want / 18).epsilon(1e-12));
    // The gradient is the derivative of the returned loss (central differences).
    Tensor<double> g2;
    for (std::size_t i = 0; i < x.size(); ++i) {
        Tensor<double> xp = x, xm = x;
        xp.data()[i] += 1e-6;
        xm.data()[i] -= 1e-6;
        const double num = (bce.compute(xp, y, g2) - bce.compute(xm, y, g2)) / 2e-6;
        CHECK(num == Approx(g.data()[i]).margin(1e-9));
    }
}

TEST_CASE("BinaryCrossEntropyWithLogits: labels 0/1 per row equal targets; large logits stay finite",
          "[nn][loss][bce]") {
    BinaryCrossEntropyWithLogits<float> bce;
    const Tensor<float> x = column<float>({3.0f, -0.5f, 0.25f});
    Tensor<float> g1, g2;
    const float by_labels = bce.compute(x, Labels{1, 0, 1}, g1);
    const float by_targets = bce.compute(x, column<float>({1.0f, 0.0f, 1.0f}), g2);
    CHECK(by_labels == by_targets);
    CHECK(std::equal(g1.begin(), g1.end(), g2.begin(), g2.end()));
    CHECK(bce.compute(vec<float>({1.0f, 2.0f}), Labels{0, 1}, g1) > 0);  // [batch] logits too
    // exp(100) overflows float, the fused form does not: l = 100 for both, gradient +-1/2.
    const float big = bce.compute(vec<float>({100.0f, -100.0f}), vec<float>({0.0f, 1.0f}), g1);
    CHECK(big == Approx(100.0f));
    CHECK(g1(0) == Approx(0.5f));
    CHECK(g1(1) == Approx(-0.5f));
    // A NaN logit is a NaN loss and gradient, returned (the distributed optimizers' check stops on it).
    const float nan = bce.compute(vec<float>({std::numeric_limits<float>::quiet_NaN(), 1.0f}),
                                  vec<float>({1.0f, 0.0f}), g1);
    CHECK(std::isnan(nan));
    CHECK(std::isnan(g1(0)));
}

TEST_CASE("BinaryCrossEntropyWithLogits: bad shapes, targets and labels are errors naming them",
          "[nn][loss][bce]") {
    BinaryCrossEntropyWithLogits<float> bce;
    Tensor<float> g;
    CHECK(contains(error_message([&] {
                       bce.compute(vec<float>({1.0f, 2.0f}), vec<float>({1.0f}), g);
                   }),
                   "targets of shape [1] do not match logits of shape [2]"));
    CHECK(contains(error_message([&] {
                       bce.compute(vec<float>({1.0f, 2.0f}), vec<float>({1.0f, 1.5f}), g);
                   }),
                   "target 1.5 at element 1 is outside [0, 1]"));
    CHECK(contains(error_message([&] {
                       bce.compute(column<float>({1.0f, 2.0f}), Labels{1, 2}, g);
                   }),
                   "label 2 at row 1 is not 0 or 1"));
    CHECK(contains(error_message([&] {
                       bce.compute(Tensor<float>{{1.0f, 2.0f}}, Labels{1}, g);
                   }),
                   "give targets of the logits' shape"));
}

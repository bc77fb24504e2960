#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>

#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/losses/cross_entropy.hpp>
#include <dtrain/nn/model.hpp>

#include "nn/gradcheck.hpp"

using dtrain::Labels;
using dtrain::Model;
using dtrain::Rng;
using dtrain::SoftmaxCrossEntropy;
using dtrain::Tensor;
using dtrain::test::contains;
using dtrain::test::error_message;
using dtrain::test::random_tensor;

TEST_CASE("SoftmaxCrossEntropy: value against a direct formula; labels equal one-hot", "[nn][loss][ce]") {
    const Tensor<double> z = {{1.0, 2.0, 0.5}, {-1.0, 0.0, 3.0}};
    const Labels y = {1, 0};
    SoftmaxCrossEntropy<double> ce;
    Tensor<double> g1, g2;
    const double l1 = ce.compute(z, y, g1);
    const double r0 = -std::log(std::exp(2.0) / (std::exp(1.0) + std::exp(2.0) + std::exp(0.5)));
    const double r1 = -std::log(std::exp(-1.0) / (std::exp(-1.0) + std::exp(0.0) + std::exp(3.0)));
    CHECK(l1 == Approx((r0 + r1) / 2).epsilon(1e-12));
    CHECK(ce.value(z, y) == Approx(l1).epsilon(1e-12));
    const Tensor<double> onehot = {{0.0, 1.0, 0.0}, {1.0, 0.0, 0.0}};
    CHECK(ce.compute(z, onehot, g2) == Approx(l1).epsilon(1e-12));
    CHECK(dtrain::test::max_rel_diff(g1, g2) < 1e-15);
    // Gradient rows sum to zero (softmax minus a distribution).
    CHECK(std::abs(g1(0, 0) + g1(0, 1) + g1(0, 2)) < 1e-15);
    // Stable for huge logits.
    const Tensor<double> big = {{1000.0, 0.0, -1000.0}};
    CHECK(ce.compute(big, Labels{0}, g1) == Approx(0.0).margin(1e-12));
    CHECK(std::isfinite(ce.compute(big, Labels{2}, g1)));
}

TEST_CASE("SoftmaxCrossEntropy: gradients match finite differences (labels and one-hot)",
          "[nn][loss][ce][grad]") {
    Rng rng(1);
    SoftmaxCrossEntropy<double> ce;
    const Labels y = {2, 0, 1, 2};
    Tensor<double> t = Tensor<double>::from_shape({4, 3});
    t.fill(0.0);
    t(0, 1) = 0.3, t(0, 2) = 0.7, t(1, 0) = 1, t(2, 1) = 1, t(3, 2) = 1;  // soft target in row 0
    double mx = 0;
    const Tensor<double> z = random_tensor<double>({4, 3}, rng, -2, 2);
    CHECK(dtrain::test::check_loss_gradient(
              [&](const Tensor<double>& l, Tensor<double>& g) { return ce.compute(l, y, g); }, z, mx) < 1e-7);
    CHECK(mx > 1e-2);
    CHECK(dtrain::test::check_loss_gradient(
              [&](const Tensor<double>& l, Tensor<double>& g) { return ce.compute(l, t, g); }, z, mx) < 1e-7);
    CHECK(mx > 1e-2);

    // Through a model: parameter gradients of loss(model(x)).
    Model<double> m({3}, 2);
    m.add(dtrain::Dense<double>(3, 3));
    const Tensor<double> x = random_tensor<double>({4, 3}, rng);
    Tensor<double> g;
    m.zero_grad();
    ce.compute(m.forward(x), y, g);
    m.backward(g);
    auto p = m.parameters();
    double err = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
        const double v = p[i], h = 1e-6;
        p[i] = v + h;
        const double lp = ce.value(m.forward(x), y);
        p[i] = v - h;
        const double lm = ce.value(m.forward(x), y);
        p[i] = v;
        err = std::max(err, dtrain::test::grad_err(m.gradients()[i], (lp - lm) / (2 * h)));
    }
    CHECK(err < 1e-7);
}

TEST_CASE("SoftmaxCrossEntropy: errors", "[nn][loss][ce][errors]") {
    SoftmaxCrossEntropy<float> ce;
    Tensor<float> z = {{0.f, 1.f, 2.f}, {1.f, 1.f, 1.f}}, g;
    std::string msg = error_message([&] { ce.compute(z, Labels{0, 3}, g); });
    CHECK(contains(msg, "SoftmaxCrossEntropy"));
    CHECK(contains(msg, "label 3 at row 1"));
    CHECK(contains(msg, "[0, 3)"));
    msg = error_message([&] { ce.compute(z, Labels{-1, 0}, g); });
    CHECK(contains(msg, "label -1"));
    msg = error_message([&] { ce.value(z, Labels{0, 5}); });
    CHECK(contains(msg, "label 5"));
    msg = error_message([&] { ce.compute(z, Labels{0}, g); });
    CHECK(contains(msg, "2 logits rows but 1 labels"));
    msg = error_message([&] { ce.value(z, Labels{0, 1, 2}); });
    CHECK(contains(msg, "SoftmaxCrossEntropy: 2 logits rows but 3 labels"));
    msg = error_message([&] { ce.compute(Tensor<float>::from_shape({3}), Labels{0, 1, 2}, g); });
    CHECK(contains(msg, "SoftmaxCrossEntropy: expected logits of shape [batch, classes] but got [3]"));
    msg = error_message([&] { ce.value(Tensor<float>::from_shape({0, 3}), Labels::from_shape({0})); });
    CHECK(contains(msg, "expected logits of shape [batch, classes] but got [0, 3]"));
    msg = error_message([&] { ce.value(Tensor<float>::from_shape({2, 0}), Labels{0, 0}); });
    CHECK(contains(msg, "but got [2, 0]"));
    msg = error_message([&] { ce.compute(z, Tensor<float>({{1.f, 0.f}}), g); });
    CHECK(contains(msg, "[1, 2]"));
    CHECK(contains(msg, "[2, 3]"));
    Tensor<float> bad = z;
    // A NaN or +inf logit is no error: the loss is NaN, as in PyTorch, and so is the gradient's row
    // (tests/nn/nonfinite_test.cpp has the details).
    bad(1, 1) = std::numeric_limits<float>::quiet_NaN();
    CHECK(std::isnan(ce.compute(bad, Labels{0, 1}, g)));
    CHECK(std::isnan(g(1, 0)));
    bad(1, 1) = std::numeric_limits<float>::infinity();
    CHECK(std::isnan(ce.compute(bad, Labels{0, 1}, g)));
    CHECK(std::isnan(g(1, 0)));
}

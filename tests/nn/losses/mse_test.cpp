#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>

#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/losses/mse.hpp>
#include <dtrain/nn/model.hpp>

#include "nn/gradcheck.hpp"

using dtrain::Labels;
using dtrain::MeanSquaredError;
using dtrain::Model;
using dtrain::Rng;
using dtrain::Tensor;
using dtrain::test::contains;
using dtrain::test::error_message;
using dtrain::test::random_tensor;

TEST_CASE("MeanSquaredError: value is the mean over all elements; labels are one-hot targets",
          "[nn][loss][mse]") {
    const Tensor<double> out = {{0.5, 0.2}, {1.0, -1.0}};
    const Tensor<double> t = {{1.0, 0.0}, {0.0, 1.0}};
    MeanSquaredError<double> mse;
    Tensor<double> g1, g2;
    const double l = mse.compute(out, t, g1);
    CHECK(l == Approx((0.25 + 0.04 + 1.0 + 4.0) / 4).epsilon(1e-14));
    CHECK(mse.compute(out, Labels{0, 1}, g2) == Approx(l).epsilon(1e-14));
    CHECK(dtrain::test::max_rel_diff(g1, g2) == 0.0);
    CHECK(g1(1, 1) == Approx(2.0 * -2.0 / 4));
}

TEST_CASE("MeanSquaredError: gradients match finite differences (targets, labels, through a model)",
          "[nn][loss][mse][grad]") {
    Rng rng(3);
    MeanSquaredError<double> mse;
    const Tensor<double> z = random_tensor<double>({3, 4}, rng);
    const Tensor<double> t = random_tensor<double>({3, 4}, rng);
    const Labels y = {3, 0, 2};
    double mx = 0;
    CHECK(dtrain::test::check_loss_gradient(
              [&](const Tensor<double>& l, Tensor<double>& g) { return mse.compute(l, t, g); }, z, mx) <
          1e-7);
    CHECK(mx > 1e-2);
    CHECK(dtrain::test::check_loss_gradient(
              [&](const Tensor<double>& l, Tensor<double>& g) { return mse.compute(l, y, g); }, z, mx) <
          1e-7);
    CHECK(mx > 1e-2);

    Model<double> m({2}, 4);
    m.add(dtrain::Dense<double>(2, 4));
    const Tensor<double> x = random_tensor<double>({3, 2}, rng);
    Tensor<double> g, scratch;
    m.zero_grad();
    mse.compute(m.forward(x), y, g);
    m.backward(g);
    auto p = m.parameters();
    double err = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
        const double v = p[i], h = 1e-6;
        p[i] = v + h;
        const double lp = mse.compute(m.forward(x), y, scratch);
        p[i] = v - h;
        const double lm = mse.compute(m.forward(x), y, scratch);
        p[i] = v;
        err = std::max(err, dtrain::test::grad_err(m.gradients()[i], (lp - lm) / (2 * h)));
    }
    CHECK(err < 1e-7);
}

TEST_CASE("MeanSquaredError: errors", "[nn][loss][mse][errors]") {
    MeanSquaredError<float> mse;
    Tensor<float> out = {{0.f, 1.f}, {1.f, 1.f}}, g;
    std::string msg = error_message([&] { mse.compute(out, Labels{0, 2}, g); });
    CHECK(contains(msg, "MeanSquaredError"));
    CHECK(contains(msg, "label 2 at row 1"));
    CHECK(contains(msg, "[0, 2)"));
    msg = error_message([&] { mse.compute(out, Tensor<float>({{1.f, 2.f, 3.f}}), g); });
    CHECK(contains(msg, "[1, 3]"));
    CHECK(contains(msg, "[2, 2]"));
    msg = error_message([&] { mse.compute(out, Labels{0}, g); });
    CHECK(contains(msg, "MeanSquaredError: expected outputs [1, classes] for 1 labels but got [2, 2]"));
    msg = error_message([&] { mse.compute(Tensor<float>::from_shape({2, 1, 2}), Labels{0, 1}, g); });
    CHECK(contains(msg, "for 2 labels but got [2, 1, 2]"));
    const Tensor<float> none = Tensor<float>::from_shape({0, 2});
    msg = error_message([&] { mse.compute(none, none, g); });
    CHECK(contains(msg, "MeanSquaredError: empty output"));
    // A non-finite output is no error: the loss and that gradient element are non-finite, as in PyTorch.
    out(0, 0) = std::numeric_limits<float>::infinity();
    CHECK(std::isinf(mse.compute(out, Labels{0, 1}, g)));
    CHECK(std::isinf(g(0, 0)));
    out(0, 0) = std::numeric_limits<float>::quiet_NaN();
    CHECK(std::isnan(mse.compute(out, Labels{0, 1}, g)));
    CHECK(std::isnan(g(0, 0)));
}

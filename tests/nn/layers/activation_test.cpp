#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <limits>

#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/model.hpp>

#include "nn/gradcheck.hpp"

using dtrain::Dense;
using dtrain::Model;
using dtrain::Rng;
using dtrain::Tensor;
using dtrain::test::random_tensor;

namespace {

template <class Act>
dtrain::test::GradCheck check_act(std::uint64_t seed) {
    Rng rng(seed);
    Model<double> m({4}, seed);
    m.add(Dense<double>(4, 6)).add(Act()).add(Dense<double>(6, 2));
    for (auto& v : m.parameters())
        v = rng.uniform(-1, 1);
    return dtrain::test::check_model_gradients(m, random_tensor<double>({5, 4}, rng, -2, 2), rng);
}

}  // namespace

TEST_CASE("Activations: gradients match finite differences", "[nn][activation][grad]") {
    for (const auto& r : {check_act<dtrain::ReLU<double>>(1), check_act<dtrain::Sigmoid<double>>(2),
                          check_act<dtrain::Tanh<double>>(3)}) {
        CHECK(r.input_err < 1e-7);
        CHECK(r.param_err < 1e-7);
        CHECK(r.input_max > 1e-3);
        CHECK(r.param_max > 1e-3);
    }
}

TEST_CASE("Activations: values, names, and overflow-safe sigmoid", "[nn][activation]") {
    Tensor<double> x = {{-2.0, 0.0, 3.0, -800.0, 800.0}};
    Tensor<double> y, g, d;
    dtrain::ReLU<double> relu;
    relu.forward(x, y, true);
    CHECK(y(0, 0) == 0.0);
    CHECK(y(0, 2) == 3.0);
    CHECK(y(0, 4) == 800.0);
    g = Tensor<double>({{1.0, 1.0, 2.0, 1.0, 1.0}});
    relu.backward(x, y, g, d, true);
    CHECK(d(0, 0) == 0.0);
    CHECK(d(0, 2) == 2.0);

    dtrain::Sigmoid<double> sig;
    sig.forward(x, y, true);
    CHECK(y(0, 1) == 0.5);
    CHECK(y(0, 0) == Approx(1.0 / (1.0 + std::exp(2.0))));
    CHECK(std::isfinite(y(0, 3)));
    CHECK(y(0, 3) >= 0.0);
    CHECK(y(0, 4) == 1.0);

    dtrain::Tanh<double> th;
    th.forward(x, y, true);
    CHECK(y(0, 2) == Approx(std::tanh(3.0)));
    CHECK(relu.name() == "ReLU");
    CHECK(sig.name() == "Sigmoid");
    CHECK(th.name() == "Tanh");
    CHECK(relu.output_shape({3, 4, 5}) == dtrain::Shape{3, 4, 5});
}

TEST_CASE("Activations: NaN and +-inf propagate like PyTorch", "[nn][activation][nonfinite]") {
    const double nan = std::numeric_limits<double>::quiet_NaN(),
                 inf = std::numeric_limits<double>::infinity();
    const Tensor<double> x = {{nan, inf, -inf, -1.0, 2.0, -1.0, 2.0}};
    const Tensor<double> g = {{0.5, 0.25, 4.0, 1.0, 2.0, nan, nan}};
    Tensor<double> y, d;

    // torch.relu is clamp_min(x, 0) = std::max(x, 0) on the CPU: relu(nan) = nan, relu(inf) = inf,
    // relu(-inf) = 0. Its backward is threshold_backward(grad, result, 0) = result <= 0 ? 0 : grad, a
    // select: at a NaN input result <= 0 is false, so the gradient passes (0.5 here, not 0); where x <= 0
    // the gradient is 0 even when grad is NaN, and where x > 0 a NaN grad passes.
    dtrain::ReLU<double> relu;
    relu.forward(x, y, true);
    CHECK(std::isnan(y(0, 0)));
    CHECK(y(0, 1) == inf);
    CHECK(y(0, 2) == 0.0);
    CHECK(y(0, 3) == 0.0);
    CHECK(y(0, 4) == 2.0);
    relu.backward(x, y, g, d, true);
    CHECK(d(0, 0) == 0.5);
    CHECK(d(0, 1) == 0.25);
    CHECK(d(0, 2) == 0.0);
    CHECK(d(0, 3) == 0.0);
    CHECK(d(0, 4) == 2.0);
    CHECK(d(0, 5) == 0.0);
    CHECK(std::isnan(d(0, 6)));

    // torch.sigmoid: nan -> nan, inf -> 1, -inf -> 0; sigmoid_backward = grad * (1 - y) * y: 0 at +-inf,
    // nan at a NaN input.
    dtrain::Sigmoid<double> sig;
    sig.forward(x, y, true);
    CHECK(std::isnan(y(0, 0)));
    CHECK(y(0, 1) == 1.0);
    CHECK(y(0, 2) == 0.0);
    sig.backward(x, y, g, d, true);
    CHECK(std::isnan(d(0, 0)));
    CHECK(d(0, 1) == 0.0);
    CHECK(d(0, 2) == 0.0);

    // torch.tanh: nan -> nan, +-inf -> +-1; tanh_backward = grad * (1 - y * y): 0 at +-inf.
    dtrain::Tanh<double> th;
    th.forward(x, y, true);
    CHECK(std::isnan(y(0, 0)));
    CHECK(y(0, 1) == 1.0);
    CHECK(y(0, 2) == -1.0);
    th.backward(x, y, g, d, true);
    CHECK(std::isnan(d(0, 0)));
    CHECK(d(0, 1) == 0.0);
    CHECK(d(0, 2) == 0.0);

    // The same in float, over a length that exercises the vectorised loops and their remainder.
    Tensor<float> xf = Tensor<float>::from_shape({3, 13}), yf, gf, df;
    for (std::size_t i = 0; i < xf.size(); ++i)
        xf.data()[i] = i % 3 == 0 ? std::numeric_limits<float>::quiet_NaN() : float(i % 2 ? -1 : 1);
    gf = Tensor<float>::from_shape({3, 13});
    gf.fill(3.0f);
    dtrain::ReLU<float> reluf;
    reluf.forward(xf, yf, true);
    reluf.backward(xf, yf, gf, df, true);
    for (std::size_t i = 0; i < xf.size(); ++i) {
        INFO("element " << i);
        if (i % 3 == 0) {
            CHECK(std::isnan(yf.data()[i]));
            CHECK(df.data()[i] == 3.0f);
        } else {
            CHECK(yf.data()[i] == (i % 2 ? 0.0f : 1.0f));
            CHECK(df.data()[i] == (i % 2 ? 0.0f : 3.0f));
        }
    }
}

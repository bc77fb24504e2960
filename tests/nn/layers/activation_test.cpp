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

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/flatten.hpp>
#include <dtrain/nn/layers/layernorm.hpp>
#include <dtrain/nn/model.hpp>

#include "nn/gradcheck.hpp"

using dtrain::LayerNorm;
using dtrain::Model;
using dtrain::Rng;
using dtrain::Tensor;
using dtrain::test::contains;
using dtrain::test::error_message;
using dtrain::test::random_tensor;

TEST_CASE("LayerNorm: PyTorch's output, each vector normalised on its own, gamma and beta applied",
          "[nn][layernorm]") {
    // torch.nn.LayerNorm(4)(torch.tensor([[1., 2., 3., 4.]])) = [-1.3416, -0.4472, 0.4472, 1.3416].
    Model<float> m({4}, 1);
    m.add(LayerNorm<float>(4));
    const Tensor<float> x = {{1, 2, 3, 4}, {10, 10, 10, 10}, {-3, 0, 0, 3}};
    Tensor<float> y = m.forward(x);
    const double s = std::sqrt(1.25 + 1e-5);
    for (std::size_t i = 0; i < 4; ++i)
        CHECK(y(0, i) == Approx((double(i) + 1 - 2.5) / s).epsilon(1e-6));
    CHECK(y(0, 0) == Approx(-1.3416).margin(1e-4));
    for (std::size_t i = 0; i < 4; ++i)
        CHECK(y(1, i) == 0.0f);  // a constant vector: variance 0, output beta
    // gamma and beta: y = xhat * gamma + beta per feature.
    auto& ln = dynamic_cast<LayerNorm<float>&>(m.layer(0));
    for (std::size_t i = 0; i < 4; ++i) {
        ln.weight()(i) = float(i + 1);
        ln.bias()(i) = 0.5f;
    }
    const Tensor<float> y2 = m.forward(x);
    for (std::size_t i = 0; i < 4; ++i)
        CHECK(y2(2, i) == Approx(y(2, i) * float(i + 1) + 0.5f).epsilon(1e-6));
    // A sample's output does not depend on the rest of its batch.
    const Tensor<float> one = {{-3, 0, 0, 3}};
    const Tensor<float> y3 = m.forward(one);
    for (std::size_t i = 0; i < 4; ++i)
        CHECK(y3(0, i) == y2(2, i));
}

TEST_CASE("LayerNorm: gradients match finite differences, on [batch, features] and [batch, tokens, features]",
          "[nn][layernorm][grad]") {
    Rng rng(3);
    Model<double> m({5}, 1);
    m.add(dtrain::Dense<double>(5, 6)).add(LayerNorm<double>(6)).add(dtrain::Dense<double>(6, 3));
    for (auto& v : m.parameters())
        v = rng.uniform(-1, 1);  // gamma and beta away from 1 and 0
    auto r = dtrain::test::check_model_gradients(m, random_tensor<double>({4, 5}, rng, -2, 2), rng);
    CHECK(r.input_err < 1e-6);
    CHECK(r.param_err < 1e-6);
    CHECK(r.input_max > 1e-3);

    Model<double> t({3, 4}, 2);  // three tokens of four features each
    t.add(LayerNorm<double>(4)).add(dtrain::Flatten<double>()).add(dtrain::Dense<double>(12, 2));
    for (auto& v : t.parameters())
        v = rng.uniform(-1, 1);
    r = dtrain::test::check_model_gradients(t, random_tensor<double>({2, 3, 4}, rng, -2, 2), rng);
    CHECK(r.input_err < 1e-6);
    CHECK(r.param_err < 1e-6);
    CHECK(t.layer_output_shape(0) == dtrain::Shape{3, 4});
}

TEST_CASE("LayerNorm: a wrong last axis and bad arguments are errors that say what was expected",
          "[nn][layernorm]") {
    Model<float> m({3, 5}, 1);
    CHECK(contains(error_message([&] { m.add(LayerNorm<float>(3)); }),
                   "LayerNorm(3): expected input whose last axis has 3 values, [batch, ..., 3], but got "
                   "[batch, 3, 5]"));
    CHECK(contains(error_message([] { LayerNorm<float>(0); }), "LayerNorm: features must be positive"));
    CHECK(contains(error_message([] { LayerNorm<float>(4, 0.0); }), "LayerNorm: eps must be positive"));
    CHECK(LayerNorm<float>(4).name() == "LayerNorm(4)");
    CHECK(LayerNorm<float>(4).num_params() == 8);
}

#include <catch2/catch.hpp>

#include <cstddef>
#include <string>

#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/model.hpp>

#include "nn/gradcheck.hpp"

using dtrain::Dense;
using dtrain::Model;
using dtrain::Rng;
using dtrain::Tensor;
using dtrain::test::contains;
using dtrain::test::error_message;
using dtrain::test::random_tensor;

TEST_CASE("Dense: forward is x * W^T + b with PyTorch's [out, in] layout", "[nn][dense]") {
    Rng rng(3);
    Model<double> m({5}, 1);
    m.add(Dense<double>(5, 4));
    for (auto& v : m.parameters())
        v = rng.uniform(-1, 1);
    const Tensor<double> x = random_tensor<double>({3, 5}, rng);
    const Tensor<double>& y = m.forward(x);
    REQUIRE(y.shape() == std::vector<std::size_t>{3, 4});
    const auto p = m.parameters();
    for (std::size_t r = 0; r < 3; ++r)
        for (std::size_t o = 0; o < 4; ++o) {
            double acc = p[20 + o];
            for (std::size_t i = 0; i < 5; ++i)
                acc += p[o * 5 + i] * x(r, i);
            CHECK(y(r, o) == Approx(acc).epsilon(1e-12));
        }
    auto& d = dynamic_cast<Dense<double>&>(m.layer(0));
    CHECK(&d.weight()(3, 4) == &p[19]);
    CHECK(&d.bias()(0) == &p[20]);
}

TEST_CASE("Dense: gradients match finite differences", "[nn][dense][grad]") {
    Rng rng(4);
    Model<double> m({5}, 2);
    m.add(Dense<double>(5, 4)).add(Dense<double>(4, 3));
    for (auto& v : m.parameters())
        v = rng.uniform(-1, 1);
    const auto r = dtrain::test::check_model_gradients(m, random_tensor<double>({3, 5}, rng), rng);
    CHECK(r.input_err < 1e-7);
    CHECK(r.param_err < 1e-7);
    CHECK(r.input_max > 1e-2);
    CHECK(r.param_max > 1e-2);
}

TEST_CASE("Dense: wrong input width names the layer and the shapes", "[nn][dense][errors]") {
    CHECK_THROWS_AS(Dense<float>(0, 3), dtrain::Error);
    std::string msg = error_message([] {
        Model<float> m({5});
        m.add(Dense<float>(4, 3));
    });
    CHECK(contains(msg, "Dense(4, 3)"));
    CHECK(contains(msg, "[batch, 4]"));
    CHECK(contains(msg, "[batch, 5]"));
    // Direct forward with a mismatching batch.
    msg = error_message([] {
        Dense<float> d(4, 3);
        Tensor<float> x = Tensor<float>::from_shape({2, 6}), y;
        d.forward(x, y, true);
    });
    CHECK(contains(msg, "Dense(4, 3)"));
    CHECK(contains(msg, "[2, 6]"));
    // Images need Flatten first.
    msg = error_message([] {
        Model<float> m({1, 2, 2});
        m.add(Dense<float>(4, 3));
    });
    CHECK(contains(msg, "add Flatten before Dense"));
}

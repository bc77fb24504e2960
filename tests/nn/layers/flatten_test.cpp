#include <catch2/catch.hpp>

#include <cstddef>

#include <dtrain/nn/layers/conv2d.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/flatten.hpp>
#include <dtrain/nn/model.hpp>

#include "nn/gradcheck.hpp"

using dtrain::Flatten;
using dtrain::Model;
using dtrain::Rng;
using dtrain::Tensor;
using dtrain::test::random_tensor;

TEST_CASE("Flatten: row-major [N, C, H, W] -> [N, C*H*W] and back", "[nn][flatten]") {
    Rng rng(1);
    const Tensor<double> x = random_tensor<double>({2, 3, 2, 4}, rng);
    Flatten<double> f;
    CHECK(f.output_shape({3, 2, 4}) == dtrain::Shape{24});
    CHECK(f.name() == "Flatten");
    Tensor<double> y, d;
    f.forward(x, y, true);
    REQUIRE(y.shape() == std::vector<std::size_t>{2, 24});
    CHECK(y(1, 2 * 8 + 1 * 4 + 3) == x(1, 2, 1, 3));
    const Tensor<double> g = random_tensor<double>({2, 24}, rng);
    f.backward(x, y, g, d, true);
    REQUIRE(d.shape() == x.shape());
    CHECK(d(0, 1, 0, 2) == g(0, 1 * 8 + 2));
    CHECK_THROWS_AS(f.output_shape({}), dtrain::Error);
    const Tensor<double> flat = Tensor<double>::from_shape({3});
    CHECK_THROWS_WITH(f.forward(flat, y, true),
                      Catch::Contains("Flatten: expected input of shape [batch, ...] but got [3]"));
}

TEST_CASE("Flatten: gradients through Conv2d -> Flatten -> Dense", "[nn][flatten][grad]") {
    Rng rng(2);
    Model<double> m({2, 4, 4}, 5);
    m.add(dtrain::Conv2d<double>(2, 3, 3)).add(Flatten<double>()).add(dtrain::Dense<double>(12, 2));
    for (auto& v : m.parameters())
        v = rng.uniform(-1, 1);
    const auto r = dtrain::test::check_model_gradients(m, random_tensor<double>({3, 2, 4, 4}, rng), rng);
    CHECK(r.input_err < 1e-7);
    CHECK(r.param_err < 1e-7);
    CHECK(r.input_max > 1e-3);
}

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/leaky_relu.hpp>
#include <dtrain/nn/model.hpp>

#include "nn/gradcheck.hpp"

using dtrain::Dense;
using dtrain::LeakyReLU;
using dtrain::Model;
using dtrain::Rng;
using dtrain::Tensor;
using dtrain::test::contains;
using dtrain::test::error_message;
using dtrain::test::random_tensor;

namespace {

// torch.nn.functional.leaky_relu and its backward on the CPU (aten's leaky_relu kernels), in double:
// x > 0 ? x : x * slope and x > 0 ? g : g * slope, so NaN takes the slope's side.
double torch_leaky_relu(double x, double slope) {
    return x > 0.0 ? x : x * slope;
}
double torch_leaky_relu_backward(double x, double g, double slope) {
    return x > 0.0 ? g : g * slope;
}

}  // namespace

TEST_CASE("LeakyReLU: gradients match finite differences", "[nn][leaky_relu][grad]") {
    for (const double slope : {0.01, 0.2, -0.5}) {
        INFO("negative_slope " << slope);
        Rng rng(7);
        Model<double> m({4}, 7);
        m.add(Dense<double>(4, 6)).add(LeakyReLU<double>(slope)).add(Dense<double>(6, 2));
        for (auto& v : m.parameters())
            v = rng.uniform(-1, 1);
        const auto r = dtrain::test::check_model_gradients(m, random_tensor<double>({5, 4}, rng, -2, 2), rng);
        CHECK(r.input_err < 1e-7);
        CHECK(r.param_err < 1e-7);
        CHECK(r.input_max > 1e-3);
        CHECK(r.param_max > 1e-3);
    }
}

TEST_CASE("LeakyReLU: values and gradients are PyTorch's, NaN and +-inf included",
          "[nn][leaky_relu][nonfinite]") {
    const double nan = std::numeric_limits<double>::quiet_NaN(),
                 inf = std::numeric_limits<double>::infinity();
    const Tensor<double> x = {{-2.0, -0.0, 0.0, 3.0, nan, inf, -inf, -1.0, 2.0}};
    const Tensor<double> g = {{1.0, 2.0, 4.0, 0.5, 0.25, 8.0, 16.0, nan, nan}};
    for (const double slope : {0.01, 0.2}) {
        INFO("negative_slope " << slope);
        LeakyReLU<double> l(slope);
        Tensor<double> y, d;
        l.forward(x, y, true);
        l.backward(x, y, g, d, true);
        REQUIRE(y.shape() == x.shape());
        for (std::size_t i = 0; i < x.size(); ++i) {
            INFO("x = " << x.data()[i]);
            const double ye = torch_leaky_relu(x.data()[i], slope);
            const double de = torch_leaky_relu_backward(x.data()[i], g.data()[i], slope);
            CHECK((std::isnan(ye) ? std::isnan(y.data()[i]) : y.data()[i] == ye));
            CHECK(std::signbit(y.data()[i]) == std::signbit(ye));
            CHECK((std::isnan(de) ? std::isnan(d.data()[i]) : d.data()[i] == de));
        }
        CHECK(y(0, 0) == -2.0 * slope);
        CHECK(std::isnan(y(0, 4)));
        CHECK(y(0, 5) == inf);
        CHECK(y(0, 6) == -inf);
        CHECK(d(0, 4) == 0.25 * slope);  // a NaN input takes the slope (torch; ReLU passes the gradient)
    }

    // float, over a length that runs the vectorised loops and their remainder, against the double formula.
    Tensor<float> xf = Tensor<float>::from_shape({3, 13}), yf, gf = Tensor<float>::from_shape({3, 13}), df;
    const float values[] = {-1.5f, 0.0f, 2.5f, std::numeric_limits<float>::quiet_NaN(), -0.0f, -3.0f};
    for (std::size_t i = 0; i < xf.size(); ++i) {
        xf.data()[i] = values[i % 6];
        gf.data()[i] = float(i % 5) - 2.0f;
    }
    LeakyReLU<float> lf;
    lf.forward(xf, yf, true);
    lf.backward(xf, yf, gf, df, true);
    for (std::size_t i = 0; i < xf.size(); ++i) {
        INFO("element " << i);
        const float ye = xf.data()[i] > 0.0f ? xf.data()[i] : xf.data()[i] * 0.01f;
        const float de = xf.data()[i] > 0.0f ? gf.data()[i] : gf.data()[i] * 0.01f;
        CHECK((std::isnan(ye) ? std::isnan(yf.data()[i]) : yf.data()[i] == ye));
        CHECK(df.data()[i] == de);
    }
}

TEST_CASE("LeakyReLU: name, shape, clone, and a slope that is not finite", "[nn][leaky_relu]") {
    const LeakyReLU<float> def;
    CHECK(def.negative_slope() == 0.01);
    CHECK(def.name() == "LeakyReLU(negative_slope=0.01)");
    CHECK(LeakyReLU<float>(0.2).name() == "LeakyReLU(negative_slope=0.2)");
    CHECK(def.output_shape({3, 4, 5}) == dtrain::Shape{3, 4, 5});
    CHECK(def.num_params() == 0);
    const auto c = LeakyReLU<double>(0.3).clone();
    CHECK(c->name() == "LeakyReLU(negative_slope=0.3)");
    const std::string msg = error_message([] { LeakyReLU<float>(std::nan("")); });
    CHECK(contains(msg, "LeakyReLU"));
    CHECK(contains(msg, "negative_slope"));
    CHECK_THROWS_AS(LeakyReLU<float>(std::numeric_limits<double>::infinity()), dtrain::Error);

    // In a model: named in the summary, without a kernels line (it has one way to compute).
    Model<float> m({4});
    m.add(Dense<float>(4, 3)).add(LeakyReLU<float>(0.1));
    CHECK(contains(m.summary(), "LeakyReLU(negative_slope=0.1)"));
    CHECK(!contains(m.summary(), "Kernels of LeakyReLU"));
}

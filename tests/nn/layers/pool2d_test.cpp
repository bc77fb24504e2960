#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <string>

#include <dtrain/nn/layers/conv2d.hpp>
#include <dtrain/nn/layers/pool2d.hpp>
#include <dtrain/nn/model.hpp>

#include "nn/gradcheck.hpp"

using dtrain::AvgPool2d;
using dtrain::MaxPool2d;
using dtrain::Model;
using dtrain::Rng;
using dtrain::Tensor;
using dtrain::test::contains;
using dtrain::test::error_message;
using dtrain::test::random_tensor;

namespace {

// Naive pooling: max (or mean) over each k x k window moved by s.
Tensor<double> naive_pool(const Tensor<double>& x, std::size_t k, std::size_t s, bool max) {
    const auto& sh = x.shape();
    const std::size_t oh = (sh[2] - k) / s + 1, ow = (sh[3] - k) / s + 1;
    Tensor<double> y = Tensor<double>::from_shape({sh[0], sh[1], oh, ow});
    for (std::size_t n = 0; n < sh[0]; ++n)
        for (std::size_t c = 0; c < sh[1]; ++c)
            for (std::size_t i = 0; i < oh; ++i)
                for (std::size_t j = 0; j < ow; ++j) {
                    double acc = max ? x(n, c, i * s, j * s) : 0.0;
                    for (std::size_t a = 0; a < k; ++a)
                        for (std::size_t b = 0; b < k; ++b) {
                            const double v = x(n, c, i * s + a, j * s + b);
                            acc = max ? std::max(acc, v) : acc + v;
                        }
                    y(n, c, i, j) = max ? acc : acc / double(k * k);
                }
    return y;
}

}  // namespace

TEST_CASE("Pool2d: forward equals naive pooling (overlapping and odd sizes)", "[nn][pool2d]") {
    Rng rng(8);
    for (auto [k, s] : {std::pair<std::size_t, std::size_t>{2, 2}, {3, 2}, {3, 3}, {2, 1}}) {
        const Tensor<double> x = random_tensor<double>({2, 3, 7, 8}, rng);
        MaxPool2d<double> mp(k, s);
        AvgPool2d<double> ap(k, s);
        Tensor<double> y;
        mp.forward(x, y, true);
        CHECK(dtrain::test::max_rel_diff(y, naive_pool(x, k, s, true)) == 0.0);
        ap.forward(x, y, true);
        CHECK(dtrain::test::max_rel_diff(y, naive_pool(x, k, s, false)) < 1e-14);
    }
}

TEST_CASE("Pool2d: gradients match finite differences", "[nn][pool2d][grad]") {
    Rng rng(9);
    for (auto [k, s] : {std::pair<std::size_t, std::size_t>{2, 2}, {3, 2}}) {
        for (bool max : {true, false}) {
            Model<double> m({2, 7, 6}, 3);
            m.add(dtrain::Conv2d<double>(2, 2, 2));
            if (max)
                m.add(MaxPool2d<double>(k, s));
            else
                m.add(AvgPool2d<double>(k, s));
            for (auto& v : m.parameters())
                v = rng.uniform(-1, 1);
            const auto r =
                dtrain::test::check_model_gradients(m, random_tensor<double>({2, 2, 7, 6}, rng), rng);
            INFO((max ? "max" : "avg") << " kernel " << k << " stride " << s);
            CHECK(r.input_err < 1e-7);
            CHECK(r.param_err < 1e-7);
            CHECK(r.input_max > 1e-3);
            CHECK(r.param_max > 1e-3);
        }
    }
}

TEST_CASE("MaxPool2d: gradient goes to the arg-max only, the first one on ties", "[nn][pool2d]") {
    // Two 2x2 windows; the second has a tie between (1, 2) and (1, 3). Checked for the 2x2 fast path and
    // for the general path (kernel 2, stride 1 over the same rows gives three windows).
    Tensor<double> x = Tensor<double>::from_shape({1, 1, 2, 4});
    x(0, 0, 0, 0) = 1, x(0, 0, 0, 1) = 5, x(0, 0, 1, 0) = 2, x(0, 0, 1, 1) = 3;
    x(0, 0, 0, 2) = -1, x(0, 0, 0, 3) = -4, x(0, 0, 1, 2) = -0.5, x(0, 0, 1, 3) = -0.5;
    MaxPool2d<double> mp(2);
    Tensor<double> y, d, g = Tensor<double>::from_shape({1, 1, 1, 2});
    mp.forward(x, y, true);
    CHECK(y(0, 0, 0, 0) == 5.0);
    CHECK(y(0, 0, 0, 1) == -0.5);
    g(0, 0, 0, 0) = 10, g(0, 0, 0, 1) = 20;
    mp.backward(x, y, g, d, true);
    double sum = 0;
    for (auto v : d)
        sum += v;
    CHECK(sum == 30.0);
    CHECK(d(0, 0, 0, 1) == 10.0);
    CHECK(d(0, 0, 1, 2) == 20.0);
    CHECK(d(0, 0, 1, 3) == 0.0);

    MaxPool2d<double> overlap(2, 1);
    Tensor<double> g3 = Tensor<double>::from_shape({1, 1, 1, 3});
    g3.fill(1.0);
    overlap.forward(x, y, true);
    CHECK(y(0, 0, 0, 1) == 5.0);
    CHECK(y(0, 0, 0, 2) == -0.5);
    overlap.backward(x, y, g3, d, true);
    CHECK(d(0, 0, 0, 1) == 2.0);  // the maximum of two overlapping windows
    CHECK(d(0, 0, 1, 2) == 1.0);
    CHECK(d(0, 0, 1, 3) == 0.0);
}

TEST_CASE("Pool2d: names, shapes and errors", "[nn][pool2d][errors]") {
    CHECK(MaxPool2d<float>(2).name() == "MaxPool2d(kernel=2, stride=2)");
    CHECK(AvgPool2d<float>(3, 1).name() == "AvgPool2d(kernel=3, stride=1)");
    CHECK(MaxPool2d<float>(2).output_shape({20, 24, 24}) == dtrain::Shape{20, 12, 12});
    CHECK(MaxPool2d<float>(2).output_shape({50, 9, 9}) == dtrain::Shape{50, 4, 4});
    CHECK_THROWS_AS(MaxPool2d<float>(0), dtrain::Error);
    std::string msg = error_message([] {
        Model<float> m({3, 2, 5});
        m.add(MaxPool2d<float>(3));
    });
    CHECK(contains(msg, "MaxPool2d(kernel=3, stride=3)"));
    CHECK(contains(msg, "[batch, 3, 2, 5]"));
    msg = error_message([] {
        Model<float> m({10});
        m.add(AvgPool2d<float>(2));
    });
    CHECK(contains(msg, "AvgPool2d(kernel=2, stride=2)"));
    CHECK(contains(msg, "[batch, 10]"));
    msg = error_message([] {
        MaxPool2d<float> p(2);
        Tensor<float> x = Tensor<float>::from_shape({2, 4, 4}), y;
        p.forward(x, y, true);
    });
    CHECK(contains(msg, "MaxPool2d(kernel=2, stride=2)"));
    CHECK(contains(msg, "[2, 4, 4]"));
}

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

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

// PyTorch's CPU max_pool2d (MaxPoolKernel.cpp): the running maximum starts at -inf with the window's first
// index and takes a value when `val > maxval || isnan(val)`, scanning the window row by row. Returns the
// outputs and the plane index of every window's arg-max.
std::pair<Tensor<double>, std::vector<std::size_t>> torch_max_pool(const Tensor<double>& x, std::size_t k,
                                                                   std::size_t s) {
    const auto& sh = x.shape();
    const std::size_t oh = (sh[2] - k) / s + 1, ow = (sh[3] - k) / s + 1;
    Tensor<double> y = Tensor<double>::from_shape({sh[0], sh[1], oh, ow});
    std::vector<std::size_t> idx;
    for (std::size_t n = 0; n < sh[0]; ++n)
        for (std::size_t c = 0; c < sh[1]; ++c)
            for (std::size_t i = 0; i < oh; ++i)
                for (std::size_t j = 0; j < ow; ++j) {
                    double m = -std::numeric_limits<double>::infinity();
                    std::size_t best = i * s * sh[3] + j * s;
                    for (std::size_t a = 0; a < k; ++a)
                        for (std::size_t b = 0; b < k; ++b) {
                            const double v = x(n, c, i * s + a, j * s + b);
                            if (v > m || std::isnan(v)) {
                                m = v;
                                best = (i * s + a) * sh[3] + j * s + b;
                            }
                        }
                    y(n, c, i, j) = m;
                    idx.push_back(best);
                }
    return {y, idx};
}

bool same(double a, double b) {
    return a == b || (std::isnan(a) && std::isnan(b));
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

TEST_CASE("MaxPool2d: a NaN anywhere in the window is the maximum and gets the gradient (PyTorch)",
          "[nn][pool2d][nonfinite]") {
    // torch.nn.functional.max_pool2d treats NaN as larger than everything (`val > max || isnan(val)`), so a
    // window holding a NaN outputs NaN wherever the NaN is, and max_pool2d_with_indices_backward adds the
    // window's gradient at the NaN; with several NaNs the last one in row-major scan order is the index.
    const double nan = std::numeric_limits<double>::quiet_NaN(),
                 inf = std::numeric_limits<double>::infinity();
    const Tensor<double> x = {{{{1, nan, inf, 2, nan, 0}, {5, 3, 0, nan, nan, 1}}}};

    // 2x2 fast path: windows [1 nan; 5 3] (NaN second), [inf 2; 0 nan] (NaN last, after an inf) and
    // [nan 0; nan 1] (two NaNs: the index is the second, at (1, 4)).
    MaxPool2d<double> mp(2);
    Tensor<double> y, d, g = Tensor<double>::from_shape({1, 1, 1, 3});
    mp.forward(x, y, true);
    for (std::size_t j = 0; j < 3; ++j)
        CHECK(std::isnan(y(0, 0, 0, j)));
    g(0, 0, 0, 0) = 10, g(0, 0, 0, 1) = 20, g(0, 0, 0, 2) = 30;
    mp.backward(x, y, g, d, true);
    double sum = 0;
    for (auto v : d)
        sum += v;
    CHECK(sum == 60.0);
    CHECK(d(0, 0, 0, 1) == 10.0);
    CHECK(d(0, 0, 1, 3) == 20.0);
    CHECK(d(0, 0, 1, 4) == 30.0);

    // General path (kernel 2, stride 1): five overlapping windows; their arg-maxes are (0, 1) twice,
    // (1, 3), then (1, 4) twice (the last NaN of [2 nan; nan nan] and of [nan 0; nan 1]).
    MaxPool2d<double> overlap(2, 1);
    Tensor<double> g5 = Tensor<double>::from_shape({1, 1, 1, 5});
    g5.fill(1.0);
    overlap.forward(x, y, true);
    for (std::size_t j = 0; j < 5; ++j)
        CHECK(std::isnan(y(0, 0, 0, j)));
    overlap.backward(x, y, g5, d, true);
    CHECK(d(0, 0, 0, 1) == 2.0);
    CHECK(d(0, 0, 1, 3) == 1.0);
    CHECK(d(0, 0, 1, 4) == 2.0);
    CHECK(d(0, 0, 0, 2) == 0.0);

    // Infinities are ordinary values: an all -inf window outputs -inf (gradient to its first element), a
    // +inf in the last position wins.
    const Tensor<double> xi = {{{{-inf, -inf, 1, 2}, {-inf, -inf, 3, inf}}}};
    Tensor<double> g2 = Tensor<double>::from_shape({1, 1, 1, 2});
    g2(0, 0, 0, 0) = 1, g2(0, 0, 0, 1) = 2;
    mp.forward(xi, y, true);
    CHECK(y(0, 0, 0, 0) == -inf);
    CHECK(y(0, 0, 0, 1) == inf);
    mp.backward(xi, y, g2, d, true);
    CHECK(d(0, 0, 0, 0) == 1.0);
    CHECK(d(0, 0, 1, 3) == 2.0);
}

TEMPLATE_TEST_CASE("MaxPool2d: random NaN and inf inputs match PyTorch's rule (outputs and arg-max)",
                   "[nn][pool2d][nonfinite]", float, double) {
    // Wide rows so that the vectorised 2x2 loop runs several iterations plus its remainder.
    Rng rng(12);
    const double nan = std::numeric_limits<double>::quiet_NaN(),
                 inf = std::numeric_limits<double>::infinity();
    for (auto [k, s] : {std::pair<std::size_t, std::size_t>{2, 2}, {3, 2}, {2, 1}, {3, 3}}) {
        Tensor<double> x = random_tensor<double>({2, 3, 8, 22}, rng);
        for (auto& v : x) {
            const double u = rng.uniform();
            v = u < 0.15 ? nan : u < 0.2 ? inf : u < 0.25 ? -inf : double(TestType(v));
        }
        const auto [ref, idx] = torch_max_pool(x, k, s);
        const Tensor<TestType> xt = x;
        MaxPool2d<TestType> mp(k, s);
        Tensor<TestType> y, d;
        mp.forward(xt, y, true);
        REQUIRE(y.shape() == ref.shape());
        std::size_t mismatches = 0;
        for (std::size_t i = 0; i < y.size(); ++i)
            mismatches += same(double(y.data()[i]), ref.data()[i]) ? 0 : 1;
        INFO("kernel " << k << " stride " << s);
        CHECK(mismatches == 0);
        // Distinct integer gradients, scattered to the reference arg-maxes, must be what backward gives.
        Tensor<TestType> g = Tensor<TestType>::from_shape(y.shape());
        Tensor<double> expect = Tensor<double>::from_shape(x.shape());
        expect.fill(0.0);
        const std::size_t plane = x.shape()[2] * x.shape()[3], per = y.shape()[2] * y.shape()[3];
        for (std::size_t i = 0; i < g.size(); ++i) {
            g.data()[i] = TestType(i + 1);
            expect.data()[(i / per) * plane + idx[i]] += double(i + 1);
        }
        mp.backward(xt, y, g, d, true);
        CHECK(dtrain::test::max_rel_diff(d, expect) == 0.0);
    }
}

TEST_CASE("AvgPool2d: NaN and inf propagate through the window mean (PyTorch)", "[nn][pool2d][nonfinite]") {
    // avg_pool2d sums the window: a NaN makes the mean NaN, an inf makes it inf, inf + -inf is NaN; its
    // backward spreads grad / k^2 without looking at the input.
    const double nan = std::numeric_limits<double>::quiet_NaN(),
                 inf = std::numeric_limits<double>::infinity();
    const Tensor<double> x = {{{{1, 2, inf, 1, inf, 0}, {3, nan, 2, 3, 0, -inf}}}};
    AvgPool2d<double> ap(2);
    Tensor<double> y, d, g = Tensor<double>::from_shape({1, 1, 1, 3});
    ap.forward(x, y, true);
    CHECK(std::isnan(y(0, 0, 0, 0)));
    CHECK(y(0, 0, 0, 1) == inf);
    CHECK(std::isnan(y(0, 0, 0, 2)));
    g.fill(4.0);
    ap.backward(x, y, g, d, true);
    for (auto v : d)
        CHECK(v == 1.0);
}

TEST_CASE(
    "MaxPool2d: the AVX-512 2x2 windows give bitwise the scalar loop's outputs and arg-maxes, with and "
    "without ReLU first",
    "[nn][pool2d][kernels]") {
    using dtrain::detail::KernelSet;
    const KernelSet saved = dtrain::detail::kernel_set();
    Rng rng(41);
    // Output rows of 1, 11, 16, 17 and 33 windows (one partial vector, a full one, a full one and a lane,
    // three vectors); odd heights and widths leave a row or column no window reads.
    for (auto [h, w] : {std::pair<std::size_t, std::size_t>{2, 2}, {5, 23}, {8, 32}, {7, 35}, {4, 67}}) {
        Tensor<float> x = random_tensor<float>({3, 2, h, w}, rng);
        for (auto& v : x) {  // ties, signed zeros, NaN and infinities among ordinary values
            const double u = rng.uniform();
            v = u < 0.05   ? std::numeric_limits<float>::quiet_NaN()
                : u < 0.1  ? std::numeric_limits<float>::infinity()
                : u < 0.15 ? -std::numeric_limits<float>::infinity()
                : u < 0.25 ? -0.0f
                : u < 0.35 ? 0.0f
                : u < 0.45 ? 0.5f
                           : v;
        }
        Tensor<float> relu_x = x;
        for (auto& v : relu_x)
            v = v < 0.0f ? 0.0f : v;
        // [set][0]: outputs, [set][1]: gradients routed to the arg-maxes, [set][2]: forward_after_relu(x)
        std::vector<std::vector<Tensor<float>>> got;
        for (const KernelSet set : {KernelSet::native, KernelSet::reference}) {
            dtrain::detail::kernel_set() = set;
            MaxPool2d<float> mp(2);
            Tensor<float> y, d, yr, expect_r;
            mp.forward(x, y, true);
            Tensor<float> g = Tensor<float>::from_shape(y.shape());
            for (std::size_t i = 0; i < g.size(); ++i)  // distinct, with -0.0 (0 + -0.0 is +0.0) and NaN
                g.data()[i] = i % 7 == 3    ? -0.0f
                              : i % 11 == 5 ? std::numeric_limits<float>::quiet_NaN()
                                            : float(i + 1);
            d = Tensor<float>::from_shape(x.shape());
            d.fill(-1.5f);  // what backward() must overwrite everywhere, the inputs no window covers included
            mp.backward(x, y, g, d, true);
            CHECK(std::count(d.begin(), d.end(), -1.5f) == 0);
            mp.forward_after_relu(x, yr);
            MaxPool2d<float>(2).forward(relu_x, expect_r, false);
            INFO("kernels " << dtrain::detail::kernel_set_name(set) << ", plane " << h << " x " << w);
            CHECK(std::memcmp(yr.data(), expect_r.data(), sizeof(float) * yr.size()) == 0);
            got.push_back({y, d, yr});
        }
        INFO("plane " << h << " x " << w);
        for (std::size_t k = 0; k < 3; ++k) {
            REQUIRE(got[0][k].shape() == got[1][k].shape());
            CHECK(std::memcmp(got[0][k].data(), got[1][k].data(), sizeof(float) * got[0][k].size()) == 0);
        }
    }
    dtrain::detail::kernel_set() = saved;
}

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include <dtrain/nn/layers/batchnorm.hpp>
#include <dtrain/nn/layers/conv2d.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/model.hpp>

#include "nn/gradcheck.hpp"

using dtrain::BatchNorm1d;
using dtrain::BatchNorm2d;
using dtrain::Model;
using dtrain::Rng;
using dtrain::Tensor;
using dtrain::test::contains;
using dtrain::test::error_message;
using dtrain::test::random_tensor;

namespace {

void randomize_affine(Model<double>& m, Rng& rng) {
    for (auto& v : m.parameters())
        v = rng.uniform(0.5, 1.5);
}

}  // namespace

TEST_CASE("BatchNorm: gradients match finite differences in train and eval mode", "[nn][batchnorm][grad]") {
    Rng rng(1);
    for (bool training : {true, false}) {
        Model<double> m1({3}, 1);
        m1.add(BatchNorm1d<double>(3)).add(dtrain::Dense<double>(3, 2));
        randomize_affine(m1, rng);
        for (auto& v : m1.state())
            v = rng.uniform(0.2, 1.2);
        if (!training) m1.eval();
        auto r = dtrain::test::check_model_gradients(m1, random_tensor<double>({5, 3}, rng, -2, 3), rng);
        INFO("BatchNorm1d training=" << training);
        CHECK(r.input_err < 1e-6);
        CHECK(r.param_err < 1e-6);
        CHECK(r.input_max > 1e-3);

        Model<double> m2({2, 3, 4}, 2);
        m2.add(BatchNorm2d<double>(2)).add(dtrain::Conv2d<double>(2, 2, 2));
        randomize_affine(m2, rng);
        for (auto& v : m2.state())
            v = rng.uniform(0.2, 1.2);
        if (!training) m2.eval();
        r = dtrain::test::check_model_gradients(m2, random_tensor<double>({3, 2, 3, 4}, rng, -2, 3), rng);
        INFO("BatchNorm2d training=" << training);
        CHECK(r.input_err < 1e-6);
        CHECK(r.param_err < 1e-6);
        CHECK(r.input_max > 1e-3);
    }
}

TEST_CASE("BatchNorm2d: train uses batch statistics and updates running stats (PyTorch semantics)",
          "[nn][batchnorm]") {
    Rng rng(2);
    Model<double> m({2, 3, 3}, 1);
    m.add(BatchNorm2d<double>(2, 0.1, 1e-5));
    REQUIRE(m.num_parameters() == 4);
    REQUIRE(m.state().size() == 4);
    // Initial state: running mean 0, running var 1; gamma 1, beta 0.
    CHECK(m.state()[0] == 0.0);
    CHECK(m.state()[2] == 1.0);
    CHECK(m.parameters()[0] == 1.0);
    CHECK(m.parameters()[2] == 0.0);
    m.parameters()[0] = 2.0;  // gamma of channel 0
    m.parameters()[3] = 0.5;  // beta of channel 1

    const Tensor<double> x = random_tensor<double>({4, 2, 3, 3}, rng, 1, 5);
    const Tensor<double> y = m.forward(x);
    for (std::size_t c = 0; c < 2; ++c) {
        double mean = 0, var = 0;
        for (std::size_t n = 0; n < 4; ++n)
            for (std::size_t i = 0; i < 9; ++i)
                mean += x.data()[(n * 2 + c) * 9 + i];
        mean /= 36;
        for (std::size_t n = 0; n < 4; ++n)
            for (std::size_t i = 0; i < 9; ++i)
                var += std::pow(x.data()[(n * 2 + c) * 9 + i] - mean, 2);
        const double gamma = c == 0 ? 2.0 : 1.0, beta = c == 0 ? 0.0 : 0.5;
        for (std::size_t n = 0; n < 4; ++n)
            for (std::size_t i = 0; i < 9; ++i) {
                const std::size_t k = (n * 2 + c) * 9 + i;
                CHECK(y.data()[k] ==
                      Approx(gamma * (x.data()[k] - mean) / std::sqrt(var / 36 + 1e-5) + beta));
            }
        CHECK(m.state()[c] == Approx(0.1 * mean));
        CHECK(m.state()[2 + c] == Approx(0.9 + 0.1 * var / 35));  // unbiased
    }

    // Eval: running stats are used and not updated.
    const std::vector<double> state(m.state().begin(), m.state().end());
    m.eval();
    const Tensor<double> ye = m.forward(x);
    CHECK(std::vector<double>(m.state().begin(), m.state().end()) == state);
    const double k0 = 2.0 / std::sqrt(state[2] + 1e-5);
    CHECK(ye.data()[5] == Approx((x.data()[5] - state[0]) * k0));
    CHECK(dtrain::test::max_rel_diff(ye, y) > 1e-3);
    // Changing the state buffer changes eval output: the statistics really live in model.state().
    m.state()[0] += 1.0;
    CHECK(m.forward(x).data()[5] == Approx((x.data()[5] - state[0] - 1.0) * k0));

    // Back in training mode the statistics move again.
    m.train();
    m.forward(x);
    CHECK(m.state()[1] != state[1]);
}

TEST_CASE(
    "BatchNorm2d<float>: an input whose mean is 500 times its spread normalises near the float64 result",
    "[nn][batchnorm]") {
    // The same inputs, gamma, beta and running statistics (all float values) through BatchNorm2d<float> and
    // BatchNorm2d<double>, in training and in eval mode. Scaling before centring (x * a + (beta - mean * a))
    // leaves errors of about half a float ulp of 500, 3e-5 of an output of spread 1.
    const std::size_t n = 8, c = 4, hw = 16, count = n * c * hw;
    Rng rng(7);
    std::vector<float> pf(2 * c), gf(2 * c), sf(2 * c);
    std::vector<double> pd(2 * c), gd(2 * c), sd(2 * c);
    for (std::size_t i = 0; i < c; ++i) {
        pf[i] = float(rng.uniform(0.5, 1.5));           // gamma
        pf[c + i] = float(rng.uniform(-0.5, 0.5));      // beta
        sf[i] = float(500.0 + rng.uniform(-1.0, 1.0));  // running mean
        sf[c + i] = float(rng.uniform(0.8, 1.2));       // running variance
        pd[i] = pf[i], pd[c + i] = pf[c + i], sd[i] = sf[i], sd[c + i] = sf[c + i];
    }
    Tensor<float> xf = random_tensor<float>({n, c, 4, 4}, rng, -2, 2), yf, dxf;
    for (std::size_t i = 0; i < count; ++i)
        xf.data()[i] += 500.0f;
    const Tensor<double> xd = xf;
    for (const bool training : {true, false}) {
        BatchNorm2d<float> bf(c);
        BatchNorm2d<double> bd(c);
        std::vector<float> sf1 = sf;  // training updates the running statistics: start from the same
        std::vector<double> sd1 = sd;
        bf.bind(pf.data(), gf.data(), sf1.data());
        bd.bind(pd.data(), gd.data(), sd1.data());
        Tensor<double> yd;
        bf.forward(xf, yf, training);
        bd.forward(xd, yd, training);
        double num = 0, den = 0;
        for (std::size_t i = 0; i < count; ++i) {
            num += std::pow(double(yf.data()[i]) - yd.data()[i], 2);
            den += std::pow(yd.data()[i], 2);
        }
        INFO("training " << training << ": relative RMS error " << std::sqrt(num / den));
        CHECK(std::sqrt(num / den) < 1e-6);
    }
}

TEST_CASE("BatchNorm1d: names, ranges and errors", "[nn][batchnorm][errors]") {
    Model<float> m({4}, 1);
    m.add(dtrain::Dense<float>(4, 3)).add(BatchNorm1d<float>(3));
    CHECK(m.layer(1).name() == "BatchNorm1d(3)");
    CHECK(m.state_ranges()[1].offset == 0);
    CHECK(m.state_ranges()[1].size == 6);
    CHECK(m.parameter_ranges()[1].offset == 15);
    auto& bn = dynamic_cast<BatchNorm1d<float>&>(m.layer(1));
    CHECK(&bn.running_var()(0) == m.state().data() + 3);
    CHECK(&bn.gamma()(0) == m.parameters().data() + 15);

    std::string msg = error_message([] {
        Model<float> mm({4});
        mm.add(BatchNorm1d<float>(3));
    });
    CHECK(contains(msg, "BatchNorm1d(3)"));
    CHECK(contains(msg, "[batch, 4]"));
    msg = error_message([] {
        Model<float> mm({4, 2, 2});
        mm.add(BatchNorm2d<float>(3));
    });
    CHECK(contains(msg, "BatchNorm2d(3)"));
    CHECK(contains(msg, "[batch, 4, 2, 2]"));
    // One value per channel cannot be normalised in training.
    msg = error_message([&] {
        Tensor<float> x = Tensor<float>::from_shape({1, 4});
        m.forward(x);
    });
    CHECK(contains(msg, "BatchNorm1d(3)"));
    CHECK(contains(msg, "more than one value"));
    CHECK(contains(msg, "drop_last = true"));  // the usual cause: a last batch of one sample
    m.eval();
    Tensor<float> x1 = Tensor<float>::from_shape({1, 4});
    CHECK_NOTHROW(m.forward(x1));
    CHECK_THROWS_AS(BatchNorm1d<float>(0), dtrain::Error);
    CHECK_THROWS_AS(BatchNorm1d<float>(3, 1.5), dtrain::Error);

    // Called directly (the Model checks shapes first), the layers check the batch themselves.
    Tensor<float> y;
    msg = error_message([&] { bn.forward(Tensor<float>::from_shape({2, 5}), y, false); });
    CHECK(contains(msg, "BatchNorm1d(3): expected input of shape [batch, 3] but got [2, 5]"));
    msg = error_message([&] { bn.forward(Tensor<float>::from_shape({2, 3, 1}), y, false); });
    CHECK(contains(msg, "but got [2, 3, 1]"));
    Model<float> m2({3, 2, 2}, 1);
    m2.add(BatchNorm2d<float>(3));
    msg = error_message([&] { m2.layer(0).forward(Tensor<float>::from_shape({2, 3, 4}), y, false); });
    CHECK(contains(msg, "BatchNorm2d(3): expected input of shape [batch, 3, H, W] but got [2, 3, 4]"));
    msg = error_message([&] { m2.layer(0).forward(Tensor<float>::from_shape({2, 4, 2, 2}), y, false); });
    CHECK(contains(msg, "but got [2, 4, 2, 2]"));
}

namespace {

// BatchNorm2d<float> (BatchNorm1d when `shape` has 2 axes) against the formulas in double, in training and
// eval mode: y, dx, dgamma and dbeta within float rounding, and a second identical step bitwise the same.
void check_against_double(const dtrain::Shape& shape, Rng& rng) {
    const std::size_t n = shape[0], c = shape[1], inner = shape.size() == 4 ? shape[2] * shape[3] : 1;
    for (bool training : {true, false}) {
        Model<float> m(dtrain::Shape(shape.begin() + 1, shape.end()), 1);
        if (shape.size() == 4)
            m.add(BatchNorm2d<float>(c));
        else
            m.add(BatchNorm1d<float>(c));
        for (auto& v : m.parameters())
            v = float(rng.uniform(0.5, 1.5));
        for (std::size_t k = 0; k < c; ++k)
            m.state()[k] = float(rng.uniform(-1, 1)), m.state()[c + k] = float(rng.uniform(0.5, 2));
        const std::vector<float> state0(m.state().begin(), m.state().end());
        if (!training) m.eval();
        const Tensor<float> x = random_tensor<float>(shape, rng, -1, 3), g = random_tensor<float>(shape, rng);
        m.zero_grad();
        const Tensor<float> y = m.forward(x), dx = m.backward(g, true);
        const std::vector<float> grads(m.gradients().begin(), m.gradients().end());
        double err = 0;
        const auto at = [&](std::size_t s, std::size_t k, std::size_t j) { return (s * c + k) * inner + j; };
        for (std::size_t k = 0; k < c; ++k) {
            const double gamma = m.parameters()[k], beta = m.parameters()[c + k];
            double mean = 0, var = 0, sg = 0, sgx = 0;
            for (std::size_t s = 0; s < n; ++s)
                for (std::size_t j = 0; j < inner; ++j)
                    mean += x.data()[at(s, k, j)] / double(n * inner);
            for (std::size_t s = 0; s < n; ++s)
                for (std::size_t j = 0; j < inner; ++j)
                    var += std::pow(x.data()[at(s, k, j)] - mean, 2) / double(n * inner);
            if (!training) mean = state0[k], var = state0[c + k];
            const double invstd = 1 / std::sqrt(var + 1e-5);
            for (std::size_t s = 0; s < n; ++s)
                for (std::size_t j = 0; j < inner; ++j) {
                    const std::size_t i = at(s, k, j);
                    sg += g.data()[i];
                    sgx += g.data()[i] * (x.data()[i] - mean) * invstd;
                    err =
                        std::max(err, std::abs(y.data()[i] - (gamma * (x.data()[i] - mean) * invstd + beta)));
                }
            for (std::size_t s = 0; s < n; ++s)
                for (std::size_t j = 0; j < inner; ++j) {
                    const std::size_t i = at(s, k, j);
                    const double xhat = (x.data()[i] - mean) * invstd, m_count = double(n * inner);
                    const double want =
                        training ? gamma * invstd * (g.data()[i] - sg / m_count - xhat * sgx / m_count)
                                 : gamma * invstd * g.data()[i];
                    err = std::max(err, std::abs(dx.data()[i] - want));
                }
            err = std::max({err, std::abs(grads[k] - sgx) / (1 + std::abs(sgx)),
                            std::abs(grads[c + k] - sg) / (1 + std::abs(sg))});
        }
        INFO("shape " << dtrain::detail::shape_str(shape) << " training=" << training);
        CHECK(err < 2e-4);
        // The same step again: bitwise the same output and gradients (a fixed summation order).
        std::copy(state0.begin(), state0.end(), m.state().begin());
        m.zero_grad();
        const Tensor<float> y2 = m.forward(x), dx2 = m.backward(g, true);
        CHECK(std::equal(y.begin(), y.end(), y2.begin()));
        CHECK(std::equal(dx.begin(), dx.end(), dx2.begin()));
        CHECK(std::equal(grads.begin(), grads.end(), m.gradients().begin()));
    }
}

}  // namespace

TEST_CASE(
    "BatchNorm<float> agrees with the formulas in double at every map size, summed blockwise or by rows",
    "[nn][batchnorm]") {
    Rng rng(7);
    // Blockwise (C * H * W <= 512, or rows shorter than 8): ResNet9's 4x4 to 1x1 maps, a block of 512, odd
    // sizes, rows of 1-7 values, and a BatchNorm1d of many features. By rows: ResNet9's 8x8 map and larger
    // ones, with and without a tail of < 8.
    for (const dtrain::Shape& shape : std::vector<dtrain::Shape>{{3, 8, 8, 8},
                                                                 {5, 16, 8, 8},
                                                                 {4, 32, 4, 4},
                                                                 {6, 64, 2, 2},
                                                                 {7, 128, 1, 1},
                                                                 {3, 5, 3, 5},
                                                                 {4, 3, 2, 3},
                                                                 {3, 700, 1, 7},
                                                                 {9, 5000},
                                                                 {2, 8, 24, 24},
                                                                 {2, 5, 31, 29}})
        check_against_double(shape, rng);
}

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include <xtensor/xview.hpp>

#include <dtrain/nn/kernels/conv_algorithms.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/conv2d.hpp>
#include <dtrain/nn/model.hpp>

#include "nn/gradcheck.hpp"
#include "nn/kernels/float_bound.hpp"
#include "nn/layers/conv_reference.hpp"

using dtrain::Conv2d;
using dtrain::Model;
using dtrain::Rng;
using dtrain::Tensor;
using dtrain::detail::KernelSet;
using dtrain::test::contains;
using dtrain::test::ConvCase;
using dtrain::test::error_message;
using dtrain::test::naive_conv;
using dtrain::test::naive_conv_grads;
using dtrain::test::random_tensor;
using dtrain::test::without_avx512;

namespace {

// The algorithm Conv2d<float> runs geometry g on (a batch of 8 into 4 channels: no algorithm chooses by
// either), for this CPU and DTRAIN_KERNELS.
std::string chosen_algorithm(const dtrain::detail::ConvGeometry& g) {
    return dtrain::choose_conv_algorithm<float>({g, 8, 4}).name;
}

// Runs Conv2d<float> of case `cc` on 3 random samples and checks its forward pass, weight, bias and input
// gradients and their accumulation against a double reference:
// dW[o][t] = sum gY[s][o][i][j] x[s][tap t at (i, j)], db[o] = sum gY[s][o], dX[s][c][tap t at (i, j)] +=
// gY[s][o][i][j] w[o][t], taps at (i * sh + a - ph, j * sw + b - pw) that fall on padding left out.
void check_float_conv(const ConvCase& cc, Rng& rng) {
    // Elementwise, relative to max(1, |reference|): 1e-5, or where it is more, 16 times the normwise float
    // bound of sums as long as the output's (the input gradient's). The summation order is the algorithm's
    // (oneDNN's blocked kernels reach 1.3e-5 at fan-in 500); a wrong tap is off by far more.
    const double y_tol = std::max(1e-5, 16 * dtrain::test::float_sum_bound(cc.c * cc.k[0] * cc.k[1])),
                 dx_tol = std::max(1e-5, 16 * dtrain::test::float_sum_bound(cc.o * cc.k[0] * cc.k[1]));
    Model<float> m({cc.c, cc.h, cc.w}, 3);
    m.add(Conv2d<float>(cc.c, cc.o, cc.k, cc.s, cc.p));
    for (auto& v : m.parameters())
        v = float(rng.uniform(-1, 1));
    const std::size_t n = 3, fan = cc.c * cc.k[0] * cc.k[1];
    const dtrain::Shape out = m.output_shape();
    const std::size_t oh = out[1], ow = out[2];
    const Tensor<float> x = random_tensor<float>({n, cc.c, cc.h, cc.w}, rng);
    const Tensor<float> gy = random_tensor<float>({n, cc.o, oh, ow}, rng);
    const Tensor<double> xd = x;
    const std::vector<double> p(m.parameters().begin(), m.parameters().end());
    const Tensor<double> y_ref = naive_conv(xd, p.data(), p.data() + cc.o * fan, cc);
    CHECK(dtrain::test::max_rel_diff(m.forward(x), y_ref) < y_tol);

    std::vector<double> dw;
    Tensor<double> dx;
    naive_conv_grads(xd, p.data(), Tensor<double>(gy), cc, dw, dx);
    m.zero_grad();
    m.forward(x);
    const Tensor<float>& gx = m.backward(gy, true);
    CHECK(dtrain::test::max_rel_diff(m.gradients(), dw) < 1e-4);
    CHECK(dtrain::test::max_rel_diff(gx, dx) < dx_tol);
    // Gradients accumulate: a second backward adds the same again.
    m.backward(gy, false);
    std::vector<double> dw2(dw);
    for (auto& v : dw2)
        v *= 2;
    CHECK(dtrain::test::max_rel_diff(m.gradients(), dw2) < 1e-4);
    // A forward of another input of the same shape in between: backward on x must not use what that
    // forward left (columns, padded input).
    auto& conv = m.layer(0);
    const Tensor<float> other = random_tensor<float>({n, cc.c, cc.h, cc.w}, rng);
    Tensor<float> y, gi;
    conv.forward(other, y, true);
    CHECK(dtrain::test::max_rel_diff(
              y, naive_conv(Tensor<double>(other), p.data(), p.data() + cc.o * fan, cc)) < y_tol);
    m.zero_grad();
    conv.backward(x, y, gy, gi, true);
    CHECK(dtrain::test::max_rel_diff(m.gradients(), dw) < 1e-4);
    CHECK(dtrain::test::max_rel_diff(gi, dx) < dx_tol);
    // The same tensor rewritten in place between two forwards (an inference loop over batches): the second
    // forward sees the new values.
    Tensor<float> z = x;
    conv.forward(z, y, false);
    std::copy(other.begin(), other.end(), z.begin());
    conv.forward(z, y, false);
    CHECK(dtrain::test::max_rel_diff(
              y, naive_conv(Tensor<double>(other), p.data(), p.data() + cc.o * fan, cc)) < y_tol);
}

}  // namespace

TEST_CASE("Conv2d: forward equals a direct convolution for several kernels, strides and paddings",
          "[nn][conv2d]") {
    const std::vector<ConvCase> cases = {
        {1, 2, 6, 6, {3, 3}, {1, 1}, {0, 0}},
        {2, 3, 7, 6, {3, 3}, {2, 2}, {1, 1}},
        {3, 2, 8, 8, {5, 5}, {1, 1}, {2, 2}},
        {2, 4, 5, 9, {2, 3}, {1, 2}, {1, 0}},
        {1, 3, 9, 7, {1, 1}, {3, 2}, {0, 1}},
        {2, 2, 4, 4, {4, 4}, {3, 3}, {3, 3}},
        {2, 5, 10, 11, {3, 4}, {3, 2}, {2, 1}},
        {1, 2, 4, 4, {2, 2}, {1, 1}, {3, 3}},
        {1, 1, 1, 1, {4, 4}, {1, 1}, {2, 2}},
        // more than 32 output channels (the untransposed forward GEMM), rows of 16+ values (copied whole)
        {2, 40, 5, 20, {3, 3}, {1, 1}, {1, 1}},
        {3, 33, 6, 18, {3, 3}, {2, 1}, {1, 2}},
        {4, 36, 1, 1, {3, 3}, {2, 2}, {1, 1}},
        // taps that see only padding (left out of the columns): some of them, and all of them (output = bias)
        {2, 3, 2, 3, {5, 5}, {2, 3}, {2, 2}},
        {1, 2, 1, 1, {1, 1}, {3, 3}, {2, 2}},
    };
    Rng rng(11);
    for (const auto& cc : cases) {
        Model<double> m({cc.c, cc.h, cc.w}, 3);
        m.add(Conv2d<double>(cc.c, cc.o, cc.k, cc.s, cc.p));
        auto p = m.parameters();
        for (auto& v : p)
            v = rng.uniform(-1, 1);  // non-zero biases too
        const Tensor<double> x = random_tensor<double>({3, cc.c, cc.h, cc.w}, rng);
        const Tensor<double>& y = m.forward(x);
        const Tensor<double> ref = naive_conv(x, p.data(), p.data() + cc.o * cc.c * cc.k[0] * cc.k[1], cc);
        INFO("case c=" << cc.c << " o=" << cc.o << " k=" << cc.k[0] << "x" << cc.k[1] << " s=" << cc.s[0]
                       << "," << cc.s[1] << " p=" << cc.p[0] << "," << cc.p[1]);
        REQUIRE(y.shape() == ref.shape());
        CHECK(dtrain::test::max_rel_diff(y, ref) < 1e-12);
        CHECK(m.output_shape() == dtrain::Shape(ref.shape().begin() + 1, ref.shape().end()));
    }
}

TEST_CASE("Conv2d: gradients match finite differences (stride, padding, non-square)", "[nn][conv2d][grad]") {
    const std::vector<ConvCase> cases = {
        {2, 3, 7, 6, {3, 3}, {2, 2}, {1, 1}},
        {2, 2, 5, 6, {2, 3}, {1, 2}, {1, 0}},
        {1, 2, 4, 5, {3, 3}, {1, 1}, {0, 0}},
        // both forward GEMM forms (<= 32 and > 32 output channels), a 1x1 map with padding (one value per
        // row and sample), runs of 16+ values
        {3, 33, 2, 2, {3, 3}, {2, 2}, {1, 1}},
        {2, 34, 3, 17, {3, 3}, {1, 1}, {1, 1}},
        {4, 8, 1, 1, {3, 3}, {1, 1}, {1, 1}},  // only the centre tap sees the input
    };
    Rng rng(5);
    for (const auto& cc : cases) {
        Model<double> m({cc.c, cc.h, cc.w}, 7);
        m.add(Conv2d<double>(cc.c, cc.o, cc.k, cc.s, cc.p)).add(dtrain::Tanh<double>());
        for (auto& v : m.parameters())
            v = rng.uniform(-0.5, 0.5);
        const auto r =
            dtrain::test::check_model_gradients(m, random_tensor<double>({2, cc.c, cc.h, cc.w}, rng), rng);
        INFO("kernel " << cc.k[0] << "x" << cc.k[1] << " stride " << cc.s[0] << "," << cc.s[1]);
        CHECK(r.input_err < 1e-6);
        CHECK(r.param_err < 1e-6);
        CHECK(r.input_max > 1e-3);
        CHECK(r.param_max > 1e-3);
    }
}

TEST_CASE("Conv2d: batch size changes and backward on an earlier input", "[nn][conv2d]") {
    Rng rng(2);
    Model<double> m({2, 6, 6}, 1);
    m.add(Conv2d<double>(2, 3, 3, 1, 1));
    auto& conv = m.layer(0);
    const Tensor<double> x4 = random_tensor<double>({4, 2, 6, 6}, rng);
    Tensor<double> y4, y2, gi, gi_ref;
    conv.forward(x4, y4, true);
    // A smaller batch made of the first two samples gives the same first two outputs.
    Tensor<double> x2 = Tensor<double>::from_shape({2, 2, 6, 6});
    std::copy(x4.data(), x4.data() + x2.size(), x2.data());
    conv.forward(x2, y2, true);
    CHECK(dtrain::test::max_rel_diff(y2, xt::view(y4, xt::range(0, 2))) < 1e-14);

    // Reference gradients for x2 (backward right after its forward).
    const Tensor<double> g = random_tensor<double>({2, 3, 6, 6}, rng);
    m.zero_grad();
    conv.backward(x2, y2, g, gi_ref, true);
    const std::vector<double> dw_ref(m.gradients().begin(), m.gradients().end());
    // Now forward another input, then backward for x2: the layer must not reuse the stale columns.
    conv.forward(x4, y4, true);
    m.zero_grad();
    conv.backward(x2, y2, g, gi, true);
    CHECK(dtrain::test::max_rel_diff(gi, gi_ref) < 1e-14);
    CHECK(dtrain::test::max_rel_diff(m.gradients(), dw_ref) < 1e-14);
}

TEST_CASE(
    "Conv2d<float>: stride-1 unpadded convolutions (the direct kernels on AVX2) match a double reference",
    "[nn][conv2d]") {
    // Stride 1, no padding: direct forward where the CPU has AVX2 and FMA, and a direct weight gradient
    // for a fan-in of at most 32. The shapes cover full rows of 24 (the SINGA CNN's first layer), masked
    // row ends (ow 3, 9, 11, 18, 28, 37), rows of 8 and of 7 taken three at a time (its second layer, oh 8),
    // channel tails (out % 4 = 1, 2, 3), several input channels, 1x1 kernels and fan-ins 32, 36 and more.
    // At fan-in 500 the weight gradient is a GEMM over columns unfolded a chunk of samples at a time: one
    // chunk of all 3 samples (12x12), chunks of 2 + 1 (14x14) and of 1 (20x20). The input gradient is direct
    // too, in tap blocks of 4: fan-ins with 1, 2 and 3 taps left over (25, 6, 27), one output channel.
    // Where the CPU has AVX-512F, the fan-ins above 32 run detail::GemmConv, and again with it switched off.
    const std::vector<ConvCase> cases = {
        {1, 20, 28, 28, {5, 5}, {1, 1}, {0, 0}},  {1, 5, 11, 13, {3, 3}, {1, 1}, {0, 0}},
        {2, 7, 9, 30, {2, 3}, {1, 1}, {0, 0}},    {3, 2, 6, 5, {3, 3}, {1, 1}, {0, 0}},
        {1, 3, 5, 20, {1, 1}, {1, 1}, {0, 0}},    {2, 6, 8, 40, {4, 4}, {1, 1}, {0, 0}},
        {20, 50, 12, 12, {5, 5}, {1, 1}, {0, 0}}, {3, 6, 10, 10, {4, 4}, {1, 1}, {0, 0}},
        {4, 5, 7, 20, {3, 3}, {1, 1}, {0, 0}},    {3, 9, 13, 19, {3, 11}, {1, 1}, {0, 0}},
        {20, 6, 14, 14, {5, 5}, {1, 1}, {0, 0}},  {20, 5, 20, 20, {5, 5}, {1, 1}, {0, 0}},
        {2, 1, 9, 12, {1, 3}, {1, 1}, {0, 0}},    {3, 4, 12, 31, {2, 5}, {1, 1}, {0, 0}},
    };
    Rng rng(19);
    for (const auto& cc : cases) {
        const dtrain::detail::ConvGeometry g =
            Conv2d<float>(cc.c, cc.o, cc.k, cc.s, cc.p).geometry(cc.h, cc.w);
        const bool thin = cc.c * cc.k[0] * cc.k[1] <= dtrain::detail::direct_conv_max_fan_in;
        const std::string algo = chosen_algorithm(g);
        const bool avx2 = dtrain::detail::direct_conv_available();
        INFO("case c=" << cc.c << " o=" << cc.o << " " << cc.h << "x" << cc.w << " k=" << cc.k[0] << "x"
                       << cc.k[1] << " algorithm " << algo);
        CHECK((algo == dtrain::DirectConv::label) == (thin && avx2));
        // without the native kernels: oneDNN where linked and allowed, else the reference
        const std::string fallback =
            dtrain::kernel_cpu().onednn ? "oneDNN" : dtrain::Im2colConv<float>::label;
        CHECK((algo == fallback) == !avx2);
        CHECK(algo.find("implicit") == std::string::npos);
        // With AVX-512F the fan-ins above 32 run detail::GemmConv; switched off, the direct kernels above.
        const Rng start = rng;                                // both paths on the same data
        const KernelSet set0 = dtrain::detail::kernel_set();  // from DTRAIN_KERNELS
        for (const KernelSet set : {set0, without_avx512(set0)}) {
            dtrain::detail::kernel_set() = set;
            rng = start;
            INFO("kernel set " << dtrain::detail::kernel_set_name(set));
            CHECK((chosen_algorithm(g) == dtrain::GemmAvx512Conv::label) ==
                  (!thin && set == KernelSet::native && dtrain::detail::cpu_has_avx512f() &&
                   dtrain::detail::direct_conv_available()));
            check_float_conv(cc, rng);
        }
        dtrain::detail::kernel_set() = set0;
    }
}

TEST_CASE(
    "Conv2d<float>: strided and padded convolutions (the implicit-GEMM kernels) match a double "
    "reference",
    "[nn][conv2d]") {
    // Every other geometry runs the implicit-GEMM kernels where the CPU has AVX2 and FMA. The shapes cover
    // the Needle ResNet9's layers (7x7 stride 4 padding 3 on 32x32; 3x3 padding 1 on 4x4, stride 2 to 2x2
    // and 1x1; 1x1 maps where only the centre tap is used), a strided unpadded one, padding on one axis
    // only, trailing input rows no tap reaches, taps that see only padding, output positions all of whose
    // taps fall on padding (a 1x1 kernel, stride 3, padding 2: their output is the bias), output channels
    // not a multiple of 16 (1, 5, 17, 20, 33), tap counts not a multiple of 6 or 16, and position classes
    // (corners, edges, interior) that leave partial tiles of 1-5 rows. With stride 1 the input gradient is a
    // convolution with padding k - 1 - p: padding on one axis (2, 1), none (k - 1 = p), and padding as large
    // as the kernel (a 1x1 kernel, padding 1) or a 1x1 output (40 -> 33), where it is added tap by tap.
    const std::vector<ConvCase> cases = {
        {3, 16, 32, 32, {7, 7}, {4, 4}, {3, 3}}, {16, 32, 8, 8, {3, 3}, {2, 2}, {1, 1}},
        {32, 32, 4, 4, {3, 3}, {1, 1}, {1, 1}},  {32, 64, 4, 4, {3, 3}, {2, 2}, {1, 1}},
        {64, 17, 2, 2, {3, 3}, {2, 2}, {1, 1}},  {40, 33, 1, 1, {3, 3}, {1, 1}, {1, 1}},
        {2, 5, 9, 11, {3, 3}, {2, 2}, {0, 0}},   {3, 1, 7, 6, {3, 2}, {1, 2}, {0, 1}},
        {2, 6, 10, 11, {3, 4}, {3, 2}, {2, 1}},  {1, 3, 13, 13, {5, 5}, {1, 1}, {2, 2}},
        {2, 18, 2, 3, {5, 5}, {2, 3}, {2, 2}},   {5, 7, 6, 18, {3, 3}, {2, 1}, {1, 2}},
        {2, 5, 4, 4, {1, 1}, {3, 3}, {2, 2}},    {3, 20, 8, 8, {3, 3}, {2, 2}, {0, 1}},
        {2, 6, 5, 7, {3, 3}, {1, 1}, {0, 1}},    {4, 20, 5, 5, {5, 3}, {1, 1}, {4, 2}},
        {3, 4, 6, 6, {1, 1}, {1, 1}, {1, 1}},
    };
    Rng rng(23);
    for (const auto& cc : cases) {
        const dtrain::detail::ConvGeometry g =
            Conv2d<float>(cc.c, cc.o, cc.k, cc.s, cc.p).geometry(cc.h, cc.w);
        INFO("case c=" << cc.c << " o=" << cc.o << " " << cc.h << "x" << cc.w << " k=" << cc.k[0] << "x"
                       << cc.k[1] << " s=" << cc.s[0] << "," << cc.s[1] << " p=" << cc.p[0] << ","
                       << cc.p[1]);
        const std::string algo = chosen_algorithm(g);
        CHECK(algo.find("direct") == std::string::npos);
        CHECK((algo.rfind("implicit GEMM", 0) == 0) == dtrain::detail::direct_conv_available());
        // With AVX-512F on the AVX-512 tiles (implicit_conv_test: bitwise the AVX2 ones), and switched off.
        const Rng start = rng;
        const KernelSet set0 = dtrain::detail::kernel_set();  // from DTRAIN_KERNELS
        for (const KernelSet set : {set0, without_avx512(set0)}) {
            dtrain::detail::kernel_set() = set;
            rng = start;
            INFO("kernel set " << dtrain::detail::kernel_set_name(set));
            check_float_conv(cc, rng);
        }
        dtrain::detail::kernel_set() = set0;
    }
}

TEST_CASE("Conv2d: name, shapes and parameter layout", "[nn][conv2d]") {
    Conv2d<float> a(1, 20, 5);
    CHECK(a.name() == "Conv2d(1, 20, kernel=5)");
    CHECK(a.num_params() == 20 * 25 + 20);
    CHECK(a.output_shape({1, 28, 28}) == dtrain::Shape{20, 24, 24});
    Conv2d<float> b(3, 8, {3, 5}, {2, 1}, {1, 2});
    CHECK(b.name() == "Conv2d(3, 8, kernel=(3, 5), stride=(2, 1), padding=(1, 2))");
    CHECK(b.output_shape({3, 9, 10}) == dtrain::Shape{8, 5, 10});

    // Weight view is [out, in, kh, kw] followed by the bias, and biases start at zero.
    Model<float> m({3, 9, 10}, 4);
    m.add(Conv2d<float>(3, 8, {3, 5}, {2, 1}, {1, 2}));
    auto& conv = dynamic_cast<Conv2d<float>&>(m.layer(0));
    CHECK(conv.weight().shape()[1] == 3);
    CHECK(&conv.weight()(7, 2, 2, 4) + 1 == &conv.bias()(0));
    CHECK(&conv.weight()(0, 0, 0, 0) == m.parameters().data());
    for (std::size_t i = 0; i < 8; ++i)
        CHECK(conv.bias()(i) == 0.0f);
    // He-uniform bound sqrt(6 / fan_in), fan_in = 3 * 3 * 5.
    const float bound = std::sqrt(6.0f / 45.0f);
    float mx = 0;
    for (std::size_t i = 0; i < 8 * 45; ++i)
        mx = std::max(mx, std::abs(m.parameters()[i]));
    CHECK(mx <= bound);
    CHECK(mx > 0.8f * bound);
}

TEST_CASE("Conv2d: errors name the layer and the shapes", "[nn][conv2d][errors]") {
    using dtrain::Error;
    CHECK_THROWS_AS(Conv2d<float>(0, 4, 3), Error);
    CHECK_THROWS_AS(Conv2d<float>(1, 0, 3), Error);
    CHECK_THROWS_AS(Conv2d<float>(1, 4, 0), Error);
    CHECK_THROWS_AS(Conv2d<float>(1, 4, 3, 0), Error);

    // Wrong rank.
    std::string msg = error_message([] {
        Model<float> m({28, 28});
        m.add(Conv2d<float>(1, 20, 5));
    });
    CHECK(contains(msg, "Conv2d(1, 20, kernel=5)"));
    CHECK(contains(msg, "[batch, 28, 28]"));
    CHECK(contains(msg, "[batch, 1, H, W]"));

    // Wrong channel count, at add() and at forward().
    msg = error_message([] {
        Model<float> m({3, 28, 28});
        m.add(Conv2d<float>(1, 20, 5));
    });
    CHECK(contains(msg, "Conv2d(1, 20, kernel=5)"));
    CHECK(contains(msg, "[batch, 3, 28, 28]"));
    msg = error_message([] {
        Conv2d<float> c(1, 2, 3);
        Tensor<float> x = Tensor<float>::from_shape({2, 3, 8, 8}), y;
        c.forward(x, y, true);
    });
    CHECK(contains(msg, "Conv2d(1, 2, kernel=3)"));
    CHECK(contains(msg, "[2, 3, 8, 8]"));

    // Kernel larger than the padded input.
    msg = error_message([] {
        Model<float> m({1, 3, 4});
        m.add(Conv2d<float>(1, 2, 5, 1, 0));
    });
    CHECK(contains(msg, "Conv2d(1, 2, kernel=5)"));
    CHECK(contains(msg, "larger than the padded input [3, 4]"));
    // ... but padding can make it fit.
    Model<float> ok({1, 3, 4});
    CHECK_NOTHROW(ok.add(Conv2d<float>(1, 2, 5, 1, 1)));
    CHECK(ok.output_shape() == dtrain::Shape{2, 1, 2});

    // An empty image.
    msg = error_message([] { Conv2d<float>(1, 2, 3).output_shape({1, 0, 4}); });
    CHECK(contains(msg,
                   "Conv2d(1, 2, kernel=3): input height and width must be positive, got [batch, 1, 0, 4]"));
    msg = error_message([] {
        Conv2d<float> c(1, 2, 3);
        Tensor<float> x = Tensor<float>::from_shape({2, 1, 5, 0}), y;
        c.forward(x, y, true);
    });
    CHECK(contains(msg, "got [batch, 1, 5, 0]"));

    // backward() called directly with a gradient that does not fit the output ([2, 2, 2, 2], 16 values).
    Model<float> m({1, 4, 4});
    m.add(Conv2d<float>(1, 2, 3));
    Tensor<float> x = Tensor<float>::from_shape({2, 1, 4, 4}), gin;
    x.fill(1.0f);
    const Tensor<float>& y = m.forward(x);
    REQUIRE(y.size() == 16);
    msg = error_message([&] {
        m.layer(0).backward(x, y, Tensor<float>::from_shape({2, 2, 2, 1}), gin, true);
    });
    CHECK(contains(
        msg, "Conv2d(1, 2, kernel=3): grad_out has 8 elements but the output of input [2, 1, 4, 4] has 16"));
}

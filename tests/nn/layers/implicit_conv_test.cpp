#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

#include <dtrain/core/rng.hpp>
#include <dtrain/nn/layers/detail/implicit_conv.hpp>

#include "support/test_utils.hpp"

#ifdef DTRAIN_DIRECT_CONV

using dtrain::Rng;
using dtrain::detail::ConvGeometry;
using dtrain::test::random_floats;

namespace {

struct ImplicitCase {
    std::size_t c, out, h, w, kh, kw, sh, sw, ph, pw, n;
};

// One pass of ImplicitConv: the forward output, the three gradients.
struct ImplicitResult {
    std::vector<float> y, dw, db, dx;
};

ImplicitResult run_implicit(const ImplicitCase& cs, bool avx512, Rng rng) {
    ConvGeometry g{cs.c, cs.h, cs.w, cs.kh, cs.kw, cs.sh, cs.sw, cs.ph, cs.pw};
    g.finish();
    const std::size_t fan = cs.c * cs.kh * cs.kw, in = cs.n * cs.c * cs.h * cs.w;
    const auto x = random_floats(in, rng), w = random_floats(cs.out * fan, rng);
    const auto bias = random_floats(cs.out, rng), dy = random_floats(cs.n * cs.out * g.positions(), rng);
    ImplicitResult r{std::vector<float>(dy.size(), 9.0f), random_floats(cs.out * fan, rng),
                     random_floats(cs.out, rng), std::vector<float>(in, 9.0f)};
    const dtrain::detail::KernelSet start = dtrain::detail::kernel_set();
    dtrain::detail::kernel_set() =
        avx512 ? dtrain::detail::KernelSet::native : dtrain::detail::KernelSet::avx2;
    dtrain::detail::ImplicitConv conv;
    conv.prepare(g, cs.n, cs.out);
    dtrain::detail::kernel_set() = start;
    conv.forward(x.data(), w.data(), bias.data(), r.y.data());
    conv.backward(x.data(), dy.data(), w.data(), r.dw.data(), r.db.data(), r.dx.data());
    return r;
}

std::size_t count_different(const std::vector<float>& a, const std::vector<float>& b) {
    std::size_t n = a.size() == b.size() ? 0 : 1 + a.size() + b.size();
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
        n += a[i] != b[i];
    return n;
}

}  // namespace

TEST_CASE("ImplicitConv: the AVX-512 tiles give bitwise the AVX2 tiles' output and gradients",
          "[nn][conv2d][avx512]") {
    if (!dtrain::detail::cpu_has_avx512f() || !dtrain::detail::direct_conv_available()) {
        WARN("this CPU has no AVX-512F: the AVX-512 implicit-GEMM kernels not run");
        return;
    }
    // The Needle ResNet9's layers (out 16: only the one-block tail tile; 32-128: pairs of blocks), output
    // channels that leave an odd block or a partial one (17, 40, 50), tap counts that leave 1-31 taps of a
    // 32-tap input-gradient tile, classes whose positions leave partial tiles of 1-7 rows, positions whose
    // taps all fall on padding (1x1 kernel, stride 3, padding 2), and classes with a subset of the taps.
    // The input gradient is a convolution per phase of the input (stride 1: one, padding k - 1 - p: 1, 0 and
    // 2 here; stride 2 by 2: four; 2 by 1: two), except where a phase would need negative padding or no tap
    // reaches it (stride 3 with padding 2, 1x1 kernels with padding or stride 3), added tap by tap. The last
    // two sum over several chains and partial sums (fan-in 1,440 and 1,170; 80 and 70 channels).
    const std::vector<ImplicitCase> cases = {
        {3, 16, 32, 32, 7, 7, 4, 4, 3, 3, 3}, {16, 32, 8, 8, 3, 3, 2, 2, 1, 1, 5},
        {32, 32, 4, 4, 3, 3, 1, 1, 1, 1, 7},  {64, 128, 2, 2, 3, 3, 2, 2, 1, 1, 3},
        {128, 48, 1, 1, 3, 3, 1, 1, 1, 1, 9}, {5, 17, 9, 11, 3, 3, 2, 2, 0, 0, 2},
        {2, 40, 10, 11, 3, 4, 3, 2, 2, 1, 3}, {7, 50, 6, 18, 3, 3, 2, 1, 1, 2, 2},
        {2, 33, 4, 4, 1, 1, 3, 3, 2, 2, 3},   {3, 64, 13, 13, 5, 5, 1, 1, 2, 2, 1},
        {4, 20, 5, 5, 5, 3, 1, 1, 4, 2, 2},   {3, 40, 6, 6, 1, 1, 1, 1, 1, 1, 2},
        {160, 80, 4, 4, 3, 3, 1, 1, 1, 1, 3}, {130, 70, 3, 3, 3, 3, 2, 2, 1, 1, 3},
    };
    Rng rng(61);
    for (const auto& cs : cases) {
        INFO("c=" << cs.c << " out=" << cs.out << " " << cs.h << "x" << cs.w << " k=" << cs.kh << "x" << cs.kw
                  << " s=" << cs.sh << "," << cs.sw << " p=" << cs.ph << "," << cs.pw << " n=" << cs.n);
        const ImplicitResult avx2 = run_implicit(cs, false, rng), avx512 = run_implicit(cs, true, rng);
        rng();  // the next case on other data
        CHECK(count_different(avx2.y, avx512.y) == 0);
        CHECK(count_different(avx2.dw, avx512.dw) == 0);
        CHECK(count_different(avx2.db, avx512.db) == 0);
        CHECK(count_different(avx2.dx, avx512.dx) == 0);
        // and the comparison saw sums, not only zeros
        std::size_t nonzero = 0;
        for (const float v : avx512.dx)
            nonzero += v != 0.0f;
        CHECK(nonzero > 0);
    }
}

TEST_CASE(
    "ImplicitConv: a sample's output and input gradient are bitwise the same alone and in a batch of 65",
    "[nn][conv2d]") {
    if (!dtrain::detail::direct_conv_available()) {
        WARN("this CPU has no AVX2 and FMA: the implicit-GEMM kernels not run");
        return;
    }
    // fan-in 1,440 (a partial sum of 1,024 products and one of 416); the input gradient's convolution sums
    // over 40 * 9 = 360 products in 3 chains
    ConvGeometry g{160, 5, 5, 3, 3, 1, 1, 1, 1};
    g.finish();
    const std::size_t n = 65, out = 40, fan = 160 * 9, in = 160 * 25, pos = g.positions();
    Rng rng(62);
    const auto x = random_floats(n * in, rng), w = random_floats(out * fan, rng);
    const auto bias = random_floats(out, rng), dy = random_floats(n * out * pos, rng);
    std::vector<float> y(n * out * pos), dx(n * in), dw(out * fan), db(out), y1(out * pos), dx1(in);
    dtrain::detail::ImplicitConv batch, one;
    batch.prepare(g, n, out);
    batch.forward(x.data(), w.data(), bias.data(), y.data());
    batch.backward(x.data(), dy.data(), w.data(), dw.data(), db.data(), dx.data());
    one.prepare(g, 1, out);
    for (const std::size_t s : {std::size_t(0), std::size_t(31), std::size_t(64)}) {
        one.forward(x.data() + s * in, w.data(), bias.data(), y1.data());
        one.backward(x.data() + s * in, dy.data() + s * out * pos, w.data(), dw.data(), db.data(),
                     dx1.data());
        INFO("sample " << s);
        CHECK(count_different(
                  y1, std::vector<float>(y.begin() + s * out * pos, y.begin() + (s + 1) * out * pos)) == 0);
        CHECK(count_different(dx1, std::vector<float>(dx.begin() + s * in, dx.begin() + (s + 1) * in)) == 0);
    }
}

#endif  // DTRAIN_DIRECT_CONV

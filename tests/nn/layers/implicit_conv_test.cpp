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
    // Stride 1 computes the input gradient as a convolution (padding k - 1 - p: 1, 0 and 2 here), except
    // with padding as large as the kernel (the last case) or a 1x1 output (128 -> 48), added tap by tap.
    const std::vector<ImplicitCase> cases = {
        {3, 16, 32, 32, 7, 7, 4, 4, 3, 3, 3}, {16, 32, 8, 8, 3, 3, 2, 2, 1, 1, 5},
        {32, 32, 4, 4, 3, 3, 1, 1, 1, 1, 7},  {64, 128, 2, 2, 3, 3, 2, 2, 1, 1, 3},
        {128, 48, 1, 1, 3, 3, 1, 1, 1, 1, 9}, {5, 17, 9, 11, 3, 3, 2, 2, 0, 0, 2},
        {2, 40, 10, 11, 3, 4, 3, 2, 2, 1, 3}, {7, 50, 6, 18, 3, 3, 2, 1, 1, 2, 2},
        {2, 33, 4, 4, 1, 1, 3, 3, 2, 2, 3},   {3, 64, 13, 13, 5, 5, 1, 1, 2, 2, 1},
        {4, 20, 5, 5, 5, 3, 1, 1, 4, 2, 2},   {3, 40, 6, 6, 1, 1, 1, 1, 1, 1, 2},
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

#endif  // DTRAIN_DIRECT_CONV

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include <dtrain/core/rng.hpp>
#include <dtrain/nn/kernels/conv_gemm_avx512.hpp>
#include <dtrain/nn/layers/detail/conv_gemm.hpp>

#include "nn/layers/blocked_sum.hpp"
#include "support/test_utils.hpp"

#ifdef DTRAIN_X86_DISPATCH

using dtrain::Rng;
using dtrain::detail::ConvGeometry;
using dtrain::test::random_floats;

namespace {

struct GemmCase {
    std::size_t c, out, h, w, kh, kw, n;
};

ConvGeometry geometry_of(const GemmCase& cs) {
    ConvGeometry g{cs.c, cs.h, cs.w, cs.kh, cs.kw, 1, 1, 0, 0};
    g.finish();
    return g;
}

// Stride 1, no padding, fan-ins above 32: the SINGA CNN's second layer (rows of 8, 4 samples per chunk)
// at batches that end inside a chunk, rows of 3, 13, 16 and 37 (masked vector ends), one output channel
// and output channel counts that leave 1-5 rows of a 6-row tile or a masked column vector (dW^T's columns
// are the channels), chunks of 1 sample (20x20).
const std::vector<GemmCase> gemm_cases = {
    {20, 50, 12, 12, 5, 5, 7}, {20, 50, 12, 12, 5, 5, 4}, {3, 7, 7, 5, 3, 5, 3},    {4, 1, 15, 17, 3, 3, 2},
    {2, 17, 20, 23, 5, 7, 2},  {9, 33, 6, 40, 2, 2, 3},   {20, 5, 20, 20, 5, 5, 3}, {6, 16, 18, 18, 3, 3, 2},
};

}  // namespace

TEST_CASE("GemmConv: forward is bitwise the direct kernel's (the bias, then the taps' blocked sums)",
          "[nn][conv2d][avx512]") {
    if (!dtrain::detail::gemm_avx512_available() || !dtrain::detail::direct_conv_available()) {
        WARN("GemmConv not run: this CPU has no AVX-512F, or DTRAIN_KERNELS is not native");
        return;
    }
    Rng rng(43);
    for (const auto& cs : gemm_cases) {
        const ConvGeometry g = geometry_of(cs);
        const std::size_t fan = cs.c * cs.kh * cs.kw, pos = g.positions();
        INFO("c=" << cs.c << " out=" << cs.out << " " << cs.h << "x" << cs.w << " k=" << cs.kh << "x" << cs.kw
                  << " n=" << cs.n);
        REQUIRE(dtrain::GemmAvx512Conv::applies({g, cs.n, cs.out}, dtrain::kernel_cpu()));
        const auto x = random_floats(cs.n * cs.c * cs.h * cs.w, rng), w = random_floats(cs.out * fan, rng);
        const auto bias = random_floats(cs.out, rng);
        std::vector<float> y(cs.n * cs.out * pos, 7.0f), y_direct(y.size()), packed(cs.out * fan);
        std::vector<std::size_t> off(fan);
        dtrain::detail::GemmConv conv;
        conv.prepare(g, cs.n, cs.out);
        conv.forward(x.data(), w.data(), bias.data(), y.data());
        dtrain::detail::tap_offsets(g, off.data());
        dtrain::detail::pack_direct_weights(w.data(), cs.out, fan, fan, 1, packed.data());
        dtrain::detail::direct_conv_forward(x.data(), cs.n, g, packed.data(), cs.out, bias.data(), off.data(),
                                            y_direct.data());
        std::size_t differ = 0;
        for (std::size_t i = 0; i < y.size(); ++i)
            differ += y[i] != y_direct[i];
        CHECK(differ == 0);
    }
}

TEST_CASE(
    "GemmConv: dW is the blocked sum over each chunk's positions, dX the column fold of blocked sums over "
    "the channels, db the sums of dY",
    "[nn][conv2d][avx512]") {
    if (!dtrain::detail::cpu_has_avx512f()) {
        WARN("this CPU has no AVX-512F: GemmConv not run (Conv2d<float> uses the direct kernels here)");
        return;
    }
    Rng rng(47);
    for (const auto& cs : gemm_cases) {
        const ConvGeometry g = geometry_of(cs);
        const std::size_t fan = cs.c * cs.kh * cs.kw, pos = g.positions(), plane = cs.h * cs.w;
        INFO("c=" << cs.c << " out=" << cs.out << " " << cs.h << "x" << cs.w << " k=" << cs.kh << "x" << cs.kw
                  << " n=" << cs.n);
        const auto x = random_floats(cs.n * cs.c * plane, rng), w = random_floats(cs.out * fan, rng);
        const auto dy = random_floats(cs.n * cs.out * pos, rng);
        std::vector<float> dw(cs.out * fan, 0.0f), db(cs.out, 0.0f), dx(cs.n * cs.c * plane, 5.0f);
        dtrain::detail::GemmConv conv;
        conv.prepare(g, cs.n, cs.out);
        conv.backward(x.data(), dy.data(), w.data(), dw.data(), db.data(), dx.data());

        // The input under tap t = (ci, ki, kj) at output position q of sample s.
        const auto at = [&](std::size_t s, std::size_t t, std::size_t q) {
            const std::size_t ci = t / (cs.kh * cs.kw), ki = t / cs.kw % cs.kh, kj = t % cs.kw;
            return (s * cs.c + ci) * plane + (q / g.ow + ki) * cs.w + q % g.ow + kj;
        };
        // dW: each chunk of samples (as GemmConv unfolds them) one blocked sum over its positions, added in
        // order
        const std::size_t chunk = dtrain::detail::col_chunk_samples(cs.n, sizeof(float) * fan * pos);
        std::size_t dw_wrong = 0, dx_wrong = 0;
        for (std::size_t o = 0; o < cs.out; ++o)
            for (std::size_t t = 0; t < fan; ++t) {
                float r = 0.0f;
                for (std::size_t s0 = 0; s0 < cs.n; s0 += chunk)
                    r = dtrain::test::blocked_fma_sum(
                        r, s0 > 0, std::min(chunk, cs.n - s0) * pos, [&](std::size_t p, int q) {
                            const std::size_t s = s0 + p / pos;
                            return q == 0 ? x[at(s, t, p % pos)] : dy[(s * cs.out + o) * pos + p % pos];
                        });
                dw_wrong += dw[o * fan + t] != r;
            }
        // Each input sums its taps in tap order (col2im), by kernel column first where the output rows are a
        // multiple of 8 wide (fold_rows8).
        std::vector<std::size_t> taps(fan);
        for (std::size_t t = 0; t < fan; ++t)
            taps[t] = t;
        if (g.ow % 8 == 0)
            std::stable_sort(taps.begin(), taps.end(), [&](std::size_t a, std::size_t b) {
                return a / (cs.kh * cs.kw) != b / (cs.kh * cs.kw) ? a < b : a % cs.kw < b % cs.kw;
            });
        std::vector<float> dx_ref(dx.size(), 0.0f);
        for (std::size_t s = 0; s < cs.n; ++s)
            for (const std::size_t t : taps)
                for (std::size_t q = 0; q < pos; ++q) {
                    dx_ref[at(s, t, q)] +=
                        dtrain::test::blocked_fma_sum(0.0f, false, cs.out, [&](std::size_t o, int k) {
                            return k == 0 ? w[o * fan + t] : dy[(s * cs.out + o) * pos + q];
                        });
                }
        for (std::size_t i = 0; i < dx.size(); ++i)
            dx_wrong += dx[i] != dx_ref[i];
        CHECK(dw_wrong == 0);
        CHECK(dx_wrong == 0);
        for (std::size_t o = 0; o < cs.out; ++o) {
            double sum = 0;
            for (std::size_t s = 0; s < cs.n; ++s)
                for (std::size_t q = 0; q < pos; ++q)
                    sum += dy[(s * cs.out + o) * pos + q];
            CHECK(std::abs(db[o] - sum) <= 1e-5 * (1 + std::abs(sum)));
        }
        // Without dx only the parameter gradients accumulate (a second call adds them again).
        std::vector<float> dw2 = dw;
        conv.backward(x.data(), dy.data(), w.data(), dw2.data(), db.data(), nullptr);
        std::size_t not_doubled = 0;
        for (std::size_t i = 0; i < dw.size(); ++i)
            not_doubled += std::abs(dw2[i] - 2 * dw[i]) > 1e-6f * (1 + std::abs(dw[i]));
        CHECK(not_doubled == 0);
    }
}

#endif  // DTRAIN_X86_DISPATCH

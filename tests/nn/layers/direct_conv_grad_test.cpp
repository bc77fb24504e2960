// The direct weight gradient (nn/layers/detail/direct_conv_grad.hpp) against a scalar model of its order,
// bitwise: per weight, 8 lanes (output column j in lane j % 8) each summing the batch's output rows in
// chains of SumBlocks, the lanes added in lanes_total()'s fixed order, then added to dw.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include <dtrain/core/rng.hpp>
#include <dtrain/nn/layers/detail/direct_conv_grad.hpp>

#include "support/test_utils.hpp"

#ifdef DTRAIN_DIRECT_CONV

using dtrain::detail::ConvGeometry;
using dtrain::detail::sum_block;
using dtrain::detail::sum_super_block;
using dtrain::detail::SumBlocks;

namespace {

struct DwCase {
    std::size_t c, out, h, w, kh, kw, n;
};

// dw[o * fan + t] + the gradient of weight (o, t), summed as direct_conv_weight_grad() sums it.
float modelled_dw(const DwCase& cs, const ConvGeometry& g, const std::vector<float>& x,
                  const std::vector<float>& dy, const std::vector<std::size_t>& off, std::size_t o,
                  std::size_t t, float dw) {
    const std::size_t pos = g.positions(), in_sample = g.c * g.h * g.w, vectors = (g.ow + 7) / 8;
    const std::size_t chain = std::max<std::size_t>(1, sum_block / vectors);
    float part[8] = {}, tot[8] = {};
    for (SumBlocks b(cs.n * g.oh, chain, chain * (sum_super_block / sum_block)); b.next();) {
        float acc[8] = {};
        for (std::size_t r = b.begin; r < b.end; ++r) {
            const std::size_t s = r / g.oh, i = r % g.oh;
            for (std::size_t j = 0; j < g.ow; ++j)
                acc[j % 8] = std::fma(dy[(s * cs.out + o) * pos + i * g.ow + j],
                                      x[s * in_sample + i * g.w + off[t] + j], acc[j % 8]);
        }
        for (int l = 0; l < 8; ++l) {
            part[l] = b.first_in_part() ? acc[l] : part[l] + acc[l];
            if (b.part_done()) tot[l] = b.first_part() ? part[l] : tot[l] + part[l];
        }
    }
    float h[4];
    for (int l = 0; l < 4; ++l)
        h[l] = tot[l] + tot[l + 4];
    return dw + ((h[0] + h[2]) + (h[1] + h[3]));
}

}  // namespace

TEST_CASE("direct_conv_weight_grad: bitwise the lanes' blocked sums over the batch's output rows",
          "[nn][conv2d]") {
    if (!dtrain::detail::direct_conv_available()) {
        WARN(
            "direct kernels not run: this CPU has no AVX2 and FMA, or DTRAIN_KERNELS is reference or onednn");
        return;
    }
    // The SINGA CNN's first layer (rows of 24: chains of 42 rows, several partial sums), rows of 9 and 3
    // (a masked vector at the end of each row; chains of 64 and 128 rows, 1,140 rows: more than one partial
    // sum), 1-4 output channels per block, and a single row per sample.
    const std::vector<DwCase> cases = {
        {1, 20, 28, 28, 5, 5, 64},
        {2, 7, 13, 11, 3, 3, 5},
        {1, 3, 40, 5, 3, 3, 30},
        {3, 6, 3, 12, 3, 2, 9},
    };
    dtrain::Rng rng(17);
    for (const auto& cs : cases) {
        ConvGeometry g{cs.c, cs.h, cs.w, cs.kh, cs.kw, 1, 1, 0, 0};
        g.finish();
        const std::size_t fan = cs.c * cs.kh * cs.kw;
        INFO("c=" << cs.c << " out=" << cs.out << " " << cs.h << "x" << cs.w << " k=" << cs.kh << "x" << cs.kw
                  << " n=" << cs.n);
        REQUIRE(fan <= dtrain::detail::direct_conv_max_fan_in);
        const auto x = dtrain::test::random_floats(cs.n * cs.c * cs.h * cs.w, rng);
        const auto dy = dtrain::test::random_floats(cs.n * cs.out * g.positions(), rng);
        const auto dw0 = dtrain::test::random_floats(cs.out * fan, rng);
        std::vector<std::size_t> off(fan);
        dtrain::detail::tap_offsets(g, off.data());
        std::vector<float> dw = dw0;
        dtrain::detail::direct_conv_weight_grad(x.data(), cs.n, g, dy.data(), cs.out, off.data(), dw.data());
        std::size_t differ = 0;
        for (std::size_t o = 0; o < cs.out; ++o)
            for (std::size_t t = 0; t < fan; ++t)
                differ += dw[o * fan + t] != modelled_dw(cs, g, x, dy, off, o, t, dw0[o * fan + t]);
        CHECK(differ == 0);
    }
}

#endif  // DTRAIN_DIRECT_CONV

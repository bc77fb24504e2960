#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <vector>

#include <dtrain/core/rng.hpp>
#include <dtrain/nn/layers/detail/dense_gemm.hpp>
#include <dtrain/nn/layers/detail/direct_conv.hpp>

#include "support/test_utils.hpp"

#ifdef DTRAIN_X86_DISPATCH

using dtrain::Rng;
using dtrain::test::random_floats;

namespace {}  // namespace

TEST_CASE("gemm_avx512: every element is the in-order FMA chain over k, in both layouts of A",
          "[nn][dense][avx512]") {
    if (!dtrain::detail::cpu_has_avx512f()) {
        WARN("this CPU has no AVX-512F: gemm_avx512 not run (Dense<float> uses BLAS here)");
        return;
    }
    // Row tiles of 6 with 1-5 rows left, strips of 64 columns with 1-4 vectors and masked ends, k = 0
    // (C = 0 or C unchanged) and the MLP's shapes at batch 64. Strides wider than the rows.
    struct Case {
        std::size_t m, n, k;
    };
    const std::vector<Case> cases = {{1, 1, 1},  {6, 64, 5},  {7, 65, 3},    {13, 100, 17}, {11, 15, 40},
                                     {2, 33, 9}, {5, 48, 0},  {64, 784, 64}, {512, 64, 37}, {64, 200, 300},
                                     {4, 16, 1}, {3, 129, 2}, {12, 31, 8}};
    Rng rng(41);
    for (const auto& cs : cases) {
        for (const bool at : {false, true})
            for (const bool acc : {false, true}) {
                const std::size_t m = cs.m, n = cs.n, k = cs.k, ldb = n + 3, ldc = n + 5;
                const std::size_t ars = at ? 1 : k, aks = at ? m : 1;
                const auto a = random_floats(m * k + 1, rng), b = random_floats(k * ldb + 1, rng);
                const auto c0 = random_floats(m * ldc, rng);
                std::vector<float> c = c0;
                dtrain::detail::gemm_avx512(acc, m, n, k, a.data(), ars, aks, b.data(), ldb, c.data(), ldc);
                INFO("m=" << m << " n=" << n << " k=" << k << " A transposed=" << at
                          << " accumulate=" << acc);
                std::size_t wrong = 0, touched = 0;
                for (std::size_t i = 0; i < m; ++i) {
                    for (std::size_t j = 0; j < n; ++j) {
                        float r = acc ? c0[i * ldc + j] : 0.0f;
                        for (std::size_t p = 0; p < k; ++p)
                            r = std::fma(a[i * ars + p * aks], b[p * ldb + j], r);
                        wrong += c[i * ldc + j] != r;
                    }
                    for (std::size_t j = n; j < ldc; ++j)
                        touched += c[i * ldc + j] != c0[i * ldc + j];
                }
                CHECK(wrong == 0);
                CHECK(touched == 0);
            }
    }
}

TEST_CASE("transpose_avx512: exact transpose, with and without a bias per source row, in both loop orders",
          "[nn][dense][avx512]") {
    if (!dtrain::detail::cpu_has_avx512f()) {
        WARN("this CPU has no AVX-512F: transpose_avx512 not run (Dense<float> uses BLAS here)");
        return;
    }
    Rng rng(42);
    const std::size_t shapes[][2] = {{1, 1},  {8, 8},  {64, 784}, {13, 21}, {9, 7},
                                     {16, 3}, {3, 16}, {512, 64}, {24, 40}, {40, 17}};
    // ldx a multiple of 1 KiB takes the other loop order (rows in panels of 16)
    for (const auto& sh : shapes)
        for (const bool kib_rows : {false, true})
            for (const bool with_bias : {false, true}) {
                const std::size_t rows = sh[0], cols = sh[1], ldy = rows + 3,
                                  ldx = kib_rows ? (cols + 255) / 256 * 256 : cols + 2;
                const auto x = random_floats(rows * ldx, rng), bias = random_floats(rows, rng);
                const auto y0 = random_floats(cols * ldy, rng);
                std::vector<float> y = y0;
                dtrain::detail::transpose_avx512(rows, cols, x.data(), ldx, y.data(), ldy,
                                                 with_bias ? bias.data() : nullptr);
                INFO(rows << " x " << cols << " ldx=" << ldx << " bias=" << with_bias);
                std::size_t wrong = 0, touched = 0;
                for (std::size_t j = 0; j < cols; ++j) {
                    for (std::size_t i = 0; i < rows; ++i)
                        wrong += y[j * ldy + i] != (with_bias ? x[i * ldx + j] + bias[i] : x[i * ldx + j]);
                    for (std::size_t i = rows; i < ldy; ++i)
                        touched += y[j * ldy + i] != y0[j * ldy + i];
                }
                CHECK(wrong == 0);
                CHECK(touched == 0);
            }
}

#endif  // DTRAIN_X86_DISPATCH

TEST_CASE("gemm_avx512_available follows the CPU and the kernel set", "[nn][dense]") {
    using dtrain::detail::KernelSet;
    const KernelSet start = dtrain::detail::kernel_set();
    for (const KernelSet set : {KernelSet::native, KernelSet::avx2, KernelSet::reference}) {
        dtrain::detail::kernel_set() = set;
        INFO("kernel set " << dtrain::detail::kernel_set_name(set));
        CHECK(dtrain::detail::gemm_avx512_available() ==
              (set == KernelSet::native && dtrain::detail::cpu_has_avx512f()));
        CHECK(dtrain::detail::direct_conv_available() ==
              (set != KernelSet::reference && dtrain::detail::cpu_has_avx2_fma()));
    }
    dtrain::detail::kernel_set() = start;
}

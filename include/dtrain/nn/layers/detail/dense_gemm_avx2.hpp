#pragma once

/// @file
/// gemm_avx2(): the products of Dense<float> on CPUs with AVX2 and FMA but no AVX-512 (AMD Zen 2 and 3,
/// Intel before Skylake-SP): register tiles of 6 rows x 16 columns (12 ymm accumulators, 2 vectors of B and
/// a broadcast of A: 15 of the 16 registers). Every element of C is summed in the blocks and the order of
/// gemm_avx512() (summation.hpp), so that the two give bitwise the same results: a model trains to the same
/// bits on a node with AVX-512 and on one without.

#include <cstddef>
#include <stdexcept>

#include <dtrain/core/cpu.hpp>
#include <dtrain/nn/layers/detail/dense_gemm.hpp>
#include <dtrain/nn/layers/detail/summation.hpp>

#ifdef DTRAIN_X86_DISPATCH
#include <immintrin.h>
#endif

namespace dtrain::detail {

#ifdef DTRAIN_X86_DISPATCH

// Columns of one strip of the AVX2 tiles (2 vectors of 8).
constexpr std::size_t dense_strip_avx2 = 16;

// The mask of the first `live` (1-8) lanes of a vector of 8 floats, for maskload and maskstore.
DTRAIN_AVX2_FMA inline __m256i dense_lanes_avx2(std::size_t live) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(live)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// dense_gemm_store() on rows [0, MR) x NV vectors of 8 columns, the last one masked by m when Masked.
template <int MR, int NV, bool Acc, bool Masked>
[[gnu::always_inline]] DTRAIN_AVX2_FMA inline void dense_gemm_store_avx2(const __m256 (&r)[MR][NV], float* c,
                                                                         std::size_t ldc, __m256i m,
                                                                         GemmEpilogue e) {
    const __m256 zero = _mm256_setzero_ps();
    DTRAIN_UNROLL
    for (int i = 0; i < MR; ++i) {
        DTRAIN_UNROLL
        for (int v = 0; v < NV; ++v) {
            float* ci = c + i * ldc + 8 * v;
            __m256 x = r[i][v];
            const bool masked = Masked && v + 1 == NV;
            if (Acc) x = _mm256_add_ps(masked ? _mm256_maskload_ps(ci, m) : _mm256_loadu_ps(ci), x);
            if (e.bias != nullptr) x = _mm256_add_ps(x, _mm256_set1_ps(e.bias[i]));
            if (e.relu) x = _mm256_blendv_ps(x, zero, _mm256_cmp_ps(x, zero, _CMP_LT_OQ));
            if (masked)
                _mm256_maskstore_ps(ci, m, x);
            else
                _mm256_storeu_ps(ci, x);
        }
    }
}

// dense_gemm_tile() on AVX2: rows [0, MR) x NV vectors of 8 columns (the last masked by m when Masked: a
// masked load costs more than a load even with every lane set), the same chains, partial sum and order.
template <int MR, int NV, bool Acc, bool One, bool Masked>
DTRAIN_AVX2_FMA inline void dense_gemm_tile_avx2(std::size_t k, const float* a, std::size_t ars,
                                                 std::size_t aks, const float* b, std::size_t ldb, float* c,
                                                 std::size_t ldc, __m256i m, GemmEpilogue e) {
    __m256 part[MR][NV] = {};
    std::size_t p = 0;
    do {
        const std::size_t end = k - p < sum_block ? k : p + sum_block;
        const bool first = p == 0;
        __m256 acc[MR][NV];
        DTRAIN_UNROLL
        for (int i = 0; i < MR; ++i) {
            DTRAIN_UNROLL
            for (int v = 0; v < NV; ++v)
                acc[i][v] = _mm256_setzero_ps();
        }
        do {
            __m256 bv[NV];
            DTRAIN_UNROLL
            for (int v = 0; v < NV; ++v) {
                const float* bp = b + p * ldb + 8 * v;
                bv[v] = Masked && v + 1 == NV ? _mm256_maskload_ps(bp, m) : _mm256_loadu_ps(bp);
            }
            DTRAIN_UNROLL
            for (int i = 0; i < MR; ++i) {
                const __m256 av = _mm256_broadcast_ss(a + i * ars + p * aks);
                DTRAIN_UNROLL
                for (int v = 0; v < NV; ++v)
                    acc[i][v] = _mm256_fmadd_ps(av, bv[v], acc[i][v]);
            }
        } while (++p < end);
        if constexpr (One) return dense_gemm_store_avx2<MR, NV, Acc, Masked>(acc, c, ldc, m, e);
        DTRAIN_UNROLL
        for (int i = 0; i < MR; ++i) {
            DTRAIN_UNROLL
            for (int v = 0; v < NV; ++v)
                part[i][v] = first ? acc[i][v] : _mm256_add_ps(part[i][v], acc[i][v]);
        }
    } while (p < k);
    dense_gemm_store_avx2<MR, NV, Acc, Masked>(part, c, ldc, m, e);
}

// All rows of one strip of NV vectors: tiles of 6 rows, then one of the 1-5 rows left.
template <int NV, bool Acc, bool One, bool Masked>
DTRAIN_AVX2_FMA inline void dense_gemm_strip_avx2(std::size_t m, std::size_t k, const float* a,
                                                  std::size_t ars, std::size_t aks, const float* b,
                                                  std::size_t ldb, float* c, std::size_t ldc, __m256i mask,
                                                  GemmEpilogue e) {
    std::size_t i = 0;
    for (; i + dense_tile_rows <= m; i += dense_tile_rows)
        dense_gemm_tile_avx2<6, NV, Acc, One, Masked>(k, a + i * ars, ars, aks, b, ldb, c + i * ldc, ldc,
                                                      mask, dense_rows_from(e, i));
    const float* ai = a + i * ars;
    float* ci = c + i * ldc;
    const GemmEpilogue ei = dense_rows_from(e, i);
    switch (m - i) {
        case 5:
            return dense_gemm_tile_avx2<5, NV, Acc, One, Masked>(k, ai, ars, aks, b, ldb, ci, ldc, mask, ei);
        case 4:
            return dense_gemm_tile_avx2<4, NV, Acc, One, Masked>(k, ai, ars, aks, b, ldb, ci, ldc, mask, ei);
        case 3:
            return dense_gemm_tile_avx2<3, NV, Acc, One, Masked>(k, ai, ars, aks, b, ldb, ci, ldc, mask, ei);
        case 2:
            return dense_gemm_tile_avx2<2, NV, Acc, One, Masked>(k, ai, ars, aks, b, ldb, ci, ldc, mask, ei);
        case 1:
            return dense_gemm_tile_avx2<1, NV, Acc, One, Masked>(k, ai, ars, aks, b, ldb, ci, ldc, mask, ei);
        default:
            return;
    }
}

// Rows [0, m) of the strip of up to 16 columns from column j.
template <bool Acc, bool One>
DTRAIN_AVX2_FMA inline void dense_gemm_columns_avx2(std::size_t m, std::size_t n, std::size_t j,
                                                    std::size_t k, const float* a, std::size_t ars,
                                                    std::size_t aks, const float* b, std::size_t ldb,
                                                    float* c, std::size_t ldc, GemmEpilogue e) {
    const std::size_t w = n - j < dense_strip_avx2 ? n - j : dense_strip_avx2, nv = (w + 7) / 8;
    const __m256i mask = dense_lanes_avx2(w - 8 * (nv - 1));
    if (w == dense_strip_avx2)
        dense_gemm_strip_avx2<2, Acc, One, false>(m, k, a, ars, aks, b + j, ldb, c + j, ldc, mask, e);
    else if (nv == 2)
        dense_gemm_strip_avx2<2, Acc, One, true>(m, k, a, ars, aks, b + j, ldb, c + j, ldc, mask, e);
    else
        dense_gemm_strip_avx2<1, Acc, One, true>(m, k, a, ars, aks, b + j, ldb, c + j, ldc, mask, e);
}

// C's tiles in the order that reads the larger operand once: with more rows than columns (Dense's forward
// pass, A the weights) each band of 6 rows across all strips, its rows of A staying in cache; else (the
// input gradient, B the weights) each strip down all rows. A tile's sums do not depend on the order.
template <bool Acc, bool One>
DTRAIN_AVX2_FMA inline void dense_gemm_strips_avx2(std::size_t m, std::size_t n, std::size_t k,
                                                   const float* a, std::size_t ars, std::size_t aks,
                                                   const float* b, std::size_t ldb, float* c, std::size_t ldc,
                                                   GemmEpilogue e) {
    if (m > n) {
        for (std::size_t i = 0; i < m; i += dense_tile_rows)
            for (std::size_t j = 0; j < n; j += dense_strip_avx2)
                dense_gemm_columns_avx2<Acc, One>(m - i < dense_tile_rows ? m - i : dense_tile_rows, n, j, k,
                                                  a + i * ars, ars, aks, b, ldb, c + i * ldc, ldc,
                                                  dense_rows_from(e, i));
    } else {
        for (std::size_t j = 0; j < n; j += dense_strip_avx2)
            dense_gemm_columns_avx2<Acc, One>(m, n, j, k, a, ars, aks, b, ldb, c, ldc, e);
    }
}

/// gemm_avx512() on AVX2 and FMA: the same arguments, the same result bit for bit (each element summed in
/// the blocks of summation.hpp, whatever its place in C; the epilogue on the final value). Requires
/// cpu_has_avx2_fma().
DTRAIN_AVX2_KERNEL inline void gemm_avx2(bool accumulate, std::size_t m, std::size_t n, std::size_t k,
                                         const float* a, std::size_t ars, std::size_t aks, const float* b,
                                         std::size_t ldb, float* c, std::size_t ldc, GemmEpilogue e = {}) {
    dense_gemm_blocks(
        accumulate, m, n, k, a, aks, b, ldb, c, ldc, e,
        [&](auto acc, auto one, std::size_t kb, const float* ap, const float* bp, GemmEpilogue ep) {
            dense_gemm_strips_avx2<decltype(acc)::value, decltype(one)::value>(m, n, kb, ap, ars, aks, bp,
                                                                               ldb, c, ldc, ep);
        });
}

#else  // no kernels on this target: cpu_has_avx2_fma() is false, and this is never called

inline void gemm_avx2(bool, std::size_t, std::size_t, std::size_t, const float*, std::size_t, std::size_t,
                      const float*, std::size_t, float*, std::size_t, GemmEpilogue = {}) {
    throw std::logic_error("gemm_avx2: not compiled for this target (check cpu_has_avx2_fma())");
}

#endif  // DTRAIN_X86_DISPATCH

/// Dense<float>'s forward pass on AVX2: dense_forward_avx512() with gemm_avx2() and transpose_avx2(), bitwise
/// its result. Requires cpu_has_avx2_fma().
inline void dense_forward_avx2(std::size_t n, std::size_t fi, std::size_t fo, const float* x, const float* w,
                               const float* bias, float* xt, float* ot, float* out) {
    transpose_avx2(n, fi, x, fi, xt, n, nullptr);
    gemm_avx2(false, fo, n, fi, w, fi, 1, xt, n, ot, n);
    transpose_avx2(fo, n, ot, n, out, fo, bias);
}

}  // namespace dtrain::detail

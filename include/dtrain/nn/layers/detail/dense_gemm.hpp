#pragma once

/// @file
/// The products of Dense<float> on CPUs with AVX-512F: one GEMM kernel with register tiles of 6 rows x 64
/// columns (24 zmm accumulators), and an 8 x 8 transpose. Batch-sized products (64 rows) are where BLAS
/// sgemm loses most to the core's FMA peak; these take the operands where they lie (no packing but the
/// forward pass's transposed input) and sum every output in one fixed order of blocks (summation.hpp).

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <dtrain/core/cpu.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/nn/layers/detail/kernel_set.hpp>
#include <dtrain/nn/layers/detail/summation.hpp>

#ifdef DTRAIN_X86_DISPATCH
#include <immintrin.h>
#endif

namespace dtrain::detail {

/// True when Dense<float> (and Conv2d<float>, conv_gemm.hpp) compute their products with gemm_avx512() and
/// transpose_avx512() instead of BLAS sgemm, and Conv2d<float>'s implicit GEMMs run on AVX-512 tiles
/// (implicit_conv_kernels.hpp): x86-64 with AVX-512F, AVX2 and FMA, and kernel_set() native.
inline bool gemm_avx512_available() {
    return kernel_set() == KernelSet::native && cpu_has_avx512f();
}

/// What gemm_avx512() applies to each element of C as it stores its final value: + bias[row] when bias is not
/// null, then, when relu, x < 0 ? 0 : x (ReLU's ReluFn: NaN and -0.0 pass through). Dense's bias add and
/// the ReLU after it, on a product kept as [out, batch] (nn/inference_plan.hpp), in the same operations as
/// a separate pass would make.
struct GemmEpilogue {
    /// One value per row of C, or null.
    const float* bias = nullptr;
    /// Apply ReLU after the bias.
    bool relu = false;
};

#ifdef DTRAIN_X86_DISPATCH

// Rows per register tile and the columns of one strip (4 vectors of 16).
constexpr std::size_t dense_tile_rows = 6;
constexpr std::size_t dense_strip = 64;

// C = (Acc ? C : 0) + r for rows [0, MR) x NV vectors of 16 columns (the last one masked by m when Masked),
// then the epilogue e (rows from row 0 of the tile).
template <int MR, int NV, bool Acc, bool Masked>
[[gnu::always_inline]] DTRAIN_AVX512 inline void dense_gemm_store(const __m512 (&r)[MR][NV], float* c,
                                                                  std::size_t ldc, __mmask16 m,
                                                                  GemmEpilogue e) {
    const __m512 zero = _mm512_setzero_ps();
    DTRAIN_UNROLL
    for (int i = 0; i < MR; ++i) {
        DTRAIN_UNROLL
        for (int v = 0; v < NV; ++v) {
            float* ci = c + i * ldc + 16 * v;
            __m512 x = r[i][v];
            const bool masked = Masked && v + 1 == NV;
            if (Acc) x = _mm512_add_ps(masked ? _mm512_maskz_loadu_ps(m, ci) : _mm512_loadu_ps(ci), x);
            if (e.bias != nullptr) x = _mm512_add_ps(x, _mm512_set1_ps(e.bias[i]));
            if (e.relu) x = _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ), zero);
            if (masked)
                _mm512_mask_storeu_ps(ci, m, x);
            else
                _mm512_storeu_ps(ci, x);
        }
    }
}

// One tile: rows [0, MR) x NV vectors of 16 columns of C (the last vector masked by m when Masked: on Intel
// cores a masked load takes an FMA port's cycle even with every lane set), C = (Acc ? C : 0) +
// the sum over p of A(i, p) * B(p, :), 1 <= k <= sum_super_block: chains of sum_block steps from zero in
// the 24 accumulators (4 loads of B and 6 broadcasts of A per p), added in order into a partial sum, which
// is added to C (summation.hpp's order). One: k <= sum_block, the chain straight into C (a separate
// instance, so that the partial sum costs nothing where there is one chain).
template <int MR, int NV, bool Acc, bool One, bool Masked>
DTRAIN_AVX512 inline void dense_gemm_tile(std::size_t k, const float* a, std::size_t ars, std::size_t aks,
                                          const float* b, std::size_t ldb, float* c, std::size_t ldc,
                                          __mmask16 m, GemmEpilogue e) {
    __m512 part[MR][NV] = {};
    std::size_t p = 0;
    do {  // k >= 1; with a loop that may run 0 times, g++ -O3 keeps the accumulators in memory
        const std::size_t end = k - p < sum_block ? k : p + sum_block;
        const bool first = p == 0;
        __m512 acc[MR][NV];
        DTRAIN_UNROLL
        for (int i = 0; i < MR; ++i) {
            DTRAIN_UNROLL
            for (int v = 0; v < NV; ++v)
                acc[i][v] = _mm512_setzero_ps();
        }
        do {
            __m512 bv[NV];
            DTRAIN_UNROLL
            for (int v = 0; v < NV; ++v) {
                const float* bp = b + p * ldb + 16 * v;
                bv[v] = Masked && v + 1 == NV ? _mm512_maskz_loadu_ps(m, bp) : _mm512_loadu_ps(bp);
            }
            DTRAIN_UNROLL
            for (int i = 0; i < MR; ++i) {
                const __m512 av = _mm512_set1_ps(a[i * ars + p * aks]);
                DTRAIN_UNROLL
                for (int v = 0; v < NV; ++v) {
                    acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
                }
            }
        } while (++p < end);
        if constexpr (One) return dense_gemm_store<MR, NV, Acc, Masked>(acc, c, ldc, m, e);
        DTRAIN_UNROLL
        for (int i = 0; i < MR; ++i) {
            DTRAIN_UNROLL
            for (int v = 0; v < NV; ++v)
                part[i][v] = first ? acc[i][v] : _mm512_add_ps(part[i][v], acc[i][v]);
        }
    } while (p < k);
    dense_gemm_store<MR, NV, Acc, Masked>(part, c, ldc, m, e);
}

// The epilogue e for the tile from row i.
inline GemmEpilogue dense_rows_from(GemmEpilogue e, std::size_t i) {
    if (e.bias != nullptr) e.bias += i;
    return e;
}

// All rows of one strip of NV vectors: tiles of 6 rows, then one of the 1-5 rows left.
template <int NV, bool Acc, bool One, bool Masked>
DTRAIN_AVX512 inline void dense_gemm_strip(std::size_t m, std::size_t k, const float* a, std::size_t ars,
                                           std::size_t aks, const float* b, std::size_t ldb, float* c,
                                           std::size_t ldc, __mmask16 mask, GemmEpilogue e) {
    std::size_t i = 0;
    for (; i + dense_tile_rows <= m; i += dense_tile_rows)
        dense_gemm_tile<6, NV, Acc, One, Masked>(k, a + i * ars, ars, aks, b, ldb, c + i * ldc, ldc, mask,
                                                 dense_rows_from(e, i));
    const float* ai = a + i * ars;
    float* ci = c + i * ldc;
    const GemmEpilogue ei = dense_rows_from(e, i);
    switch (m - i) {
        case 5:
            return dense_gemm_tile<5, NV, Acc, One, Masked>(k, ai, ars, aks, b, ldb, ci, ldc, mask, ei);
        case 4:
            return dense_gemm_tile<4, NV, Acc, One, Masked>(k, ai, ars, aks, b, ldb, ci, ldc, mask, ei);
        case 3:
            return dense_gemm_tile<3, NV, Acc, One, Masked>(k, ai, ars, aks, b, ldb, ci, ldc, mask, ei);
        case 2:
            return dense_gemm_tile<2, NV, Acc, One, Masked>(k, ai, ars, aks, b, ldb, ci, ldc, mask, ei);
        case 1:
            return dense_gemm_tile<1, NV, Acc, One, Masked>(k, ai, ars, aks, b, ldb, ci, ldc, mask, ei);
        default:
            return;
    }
}

template <bool Acc, bool One>
DTRAIN_AVX512 inline void dense_gemm_strips(std::size_t m, std::size_t n, std::size_t k, const float* a,
                                            std::size_t ars, std::size_t aks, const float* b, std::size_t ldb,
                                            float* c, std::size_t ldc, GemmEpilogue e) {
    for (std::size_t j = 0; j < n; j += dense_strip) {
        const std::size_t w = n - j < dense_strip ? n - j : dense_strip, nv = (w + 15) / 16,
                          last = w - 16 * (nv - 1);
        const __mmask16 mask = last == 16 ? __mmask16(0xffff) : __mmask16((1u << last) - 1);
        if (w == dense_strip)  // as dense_gemm_columns_avx2(): unmasked loads where the strip is full
            dense_gemm_strip<4, Acc, One, false>(m, k, a, ars, aks, b + j, ldb, c + j, ldc, mask, e);
        else if (nv == 4)
            dense_gemm_strip<4, Acc, One, true>(m, k, a, ars, aks, b + j, ldb, c + j, ldc, mask, e);
        else if (nv == 3)
            dense_gemm_strip<3, Acc, One, true>(m, k, a, ars, aks, b + j, ldb, c + j, ldc, mask, e);
        else if (nv == 2)
            dense_gemm_strip<2, Acc, One, true>(m, k, a, ars, aks, b + j, ldb, c + j, ldc, mask, e);
        else
            dense_gemm_strip<1, Acc, One, true>(m, k, a, ars, aks, b + j, ldb, c + j, ldc, mask, e);
    }
}

// The body of gemm_avx512() and gemm_avx2() around their strips: C = (accumulate ? C : 0) for k == 0, one
// chain for k <= sum_block, else the partial sums of sum_super_block steps added into C in order, the
// epilogue on the last one. strips(acc, one, kb, a, b, e) computes all of C over the kb steps from a and b
// as the tiles' Acc and One say (std::bool_constant).
template <class Strips>
[[gnu::always_inline]] inline void dense_gemm_blocks(bool accumulate, std::size_t m, std::size_t n,
                                                     std::size_t k, const float* a, std::size_t aks,
                                                     const float* b, std::size_t ldb, float* c,
                                                     std::size_t ldc, GemmEpilogue e, Strips strips) {
    if (k == 0) {
        for (std::size_t i = 0; i < m; ++i)
            for (std::size_t j = 0; j < n; ++j) {
                float x = accumulate ? c[i * ldc + j] : 0.0f;
                if (e.bias != nullptr) x += e.bias[i];
                c[i * ldc + j] = e.relu && x < 0.0f ? 0.0f : x;
            }
        return;
    }
    const std::true_type yes;
    const std::false_type no;
    if (k <= sum_block) return accumulate ? strips(yes, yes, k, a, b, e) : strips(no, yes, k, a, b, e);
    for (std::size_t p = 0; p < k; p += sum_super_block) {
        const std::size_t kb = k - p < sum_super_block ? k - p : sum_super_block;
        const GemmEpilogue ep = p + kb == k ? e : GemmEpilogue{};  // on the last partial sum's store only
        if (accumulate || p > 0)
            strips(yes, no, kb, a + p * aks, b + p * ldb, ep);
        else
            strips(no, no, kb, a + p * aks, b + p * ldb, ep);
    }
}

/// C [m, n] (row stride ldc) = (accumulate ? C : 0) + A * B, with A(i, p) = a[i * ars + p * aks] (so either
/// layout of A, transposed or not) and B row-major [k, n] with row stride ldb. Every element of C is summed
/// over p in the fixed blocks of summation.hpp (super-blocks of sum_super_block added into C in order, each
/// the in-order sum of its blocks' chains), whatever its place in C: deterministic, the error of a float
/// sum grows with the square root of the block lengths rather than of k, and a row of C does not depend on
/// the other rows (nor a column on the other columns). The epilogue `e` (none by default) applies to each
/// element's final value as it is stored. Requires cpu_has_avx512f().
DTRAIN_AVX512_KERNEL inline void gemm_avx512(bool accumulate, std::size_t m, std::size_t n, std::size_t k,
                                             const float* a, std::size_t ars, std::size_t aks, const float* b,
                                             std::size_t ldb, float* c, std::size_t ldc,
                                             GemmEpilogue e = {}) {
    dense_gemm_blocks(
        accumulate, m, n, k, a, aks, b, ldb, c, ldc, e,
        [&](auto acc, auto one, std::size_t kb, const float* ap, const float* bp, GemmEpilogue ep) {
            dense_gemm_strips<decltype(acc)::value, decltype(one)::value>(m, n, kb, ap, ars, aks, bp, ldb, c,
                                                                          ldc, ep);
        });
}

// y[j][i] = x[i][j] + bias[i] for the 8 x 8 block at x (row stride ldx) and y (row stride ldy); bias may be
// null (nothing added). AVX only, so that both transposes below inline it.
DTRAIN_AVX2_FMA inline void dense_transpose8(const float* x, std::size_t ldx, float* y, std::size_t ldy,
                                             const float* bias) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; ++i)
        r[i] = _mm256_loadu_ps(x + i * ldx);
    for (int i = 0; i < 4; ++i) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int h = 0; h < 2; ++h) {  // rows 0-3 of each 128-bit half from t[0..3], rows 4-7 from t[4..7]
        r[4 * h + 0] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
        r[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
        r[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
        r[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
    }
    const __m256 bv = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
    for (int j = 0; j < 4; ++j) {
        const __m256 lo = _mm256_permute2f128_ps(r[j], r[4 + j], 0x20),
                     hi = _mm256_permute2f128_ps(r[j], r[4 + j], 0x31);
        _mm256_storeu_ps(y + j * ldy, bias ? _mm256_add_ps(lo, bv) : lo);
        _mm256_storeu_ps(y + (4 + j) * ldy, bias ? _mm256_add_ps(hi, bv) : hi);
    }
}

// The body of transpose_avx512() and transpose_avx2().
[[gnu::always_inline]] DTRAIN_AVX2_FMA inline void dense_transpose(std::size_t rows, std::size_t cols,
                                                                   const float* x, std::size_t ldx, float* y,
                                                                   std::size_t ldy, const float* bias) {
    const std::size_t r8 = rows - rows % 8, c8 = cols - cols % 8;
    auto block = [&](std::size_t i, std::size_t j) {
        dense_transpose8(x + i * ldx + j, ldx, y + j * ldy + i, ldy, bias ? bias + i : nullptr);
    };
    // Order by measurement (Zen 5, Dense's shapes): y is written row by row, so that each of its cache lines
    // is filled at once, unless x's rows lie a multiple of 1 KiB apart: walking down x's columns then maps
    // its rows to a few L1 sets (4 times slower). Then x is read in panels of 16 rows, each y line again
    // filled by two blocks in a row. (Walking down y's columns when y's rows are 2 KiB apart was 5x slower.)
    if ((ldx * sizeof(float)) % 1024 != 0) {
        for (std::size_t j = 0; j < c8; j += 8)
            for (std::size_t i = 0; i < r8; i += 8)
                block(i, j);
    } else {
        const std::size_t r16 = rows - rows % 16;
        for (std::size_t i = 0; i < r16; i += 16)
            for (std::size_t j = 0; j < c8; j += 8) {
                block(i, j);
                block(i + 8, j);
            }
        for (std::size_t i = r16; i < r8; i += 8)
            for (std::size_t j = 0; j < c8; j += 8)
                block(i, j);
    }
    for (std::size_t j = 0; j < cols; ++j)
        for (std::size_t i = j < c8 ? r8 : 0; i < rows; ++i)
            y[j * ldy + i] = bias ? x[i * ldx + j] + bias[i] : x[i * ldx + j];
}

/// y [cols, rows] (row stride ldy) = the transpose of x [rows, cols] (row stride ldx), plus bias[i] on
/// column i of y when bias is not null: y[j][i] = x[i][j] (+ bias[i]). Blocks of 8 x 8 in registers, the
/// edges element by element. Requires cpu_has_avx512f().
DTRAIN_AVX512_KERNEL inline void transpose_avx512(std::size_t rows, std::size_t cols, const float* x,
                                                  std::size_t ldx, float* y, std::size_t ldy,
                                                  const float* bias) {
    dense_transpose(rows, cols, x, ldx, y, ldy, bias);
}

/// transpose_avx512() compiled for AVX2 and FMA: the same result. Requires cpu_has_avx2_fma().
DTRAIN_AVX2_KERNEL inline void transpose_avx2(std::size_t rows, std::size_t cols, const float* x,
                                              std::size_t ldx, float* y, std::size_t ldy, const float* bias) {
    dense_transpose(rows, cols, x, ldx, y, ldy, bias);
}

#else  // no kernels on this target: gemm_avx512_available() is false, and these are never called

inline void gemm_avx512(bool, std::size_t, std::size_t, std::size_t, const float*, std::size_t, std::size_t,
                        const float*, std::size_t, float*, std::size_t, GemmEpilogue = {}) {
    throw std::logic_error("gemm_avx512: not compiled for this target (check gemm_avx512_available())");
}

inline void transpose_avx512(std::size_t, std::size_t, const float*, std::size_t, float*, std::size_t,
                             const float*) {
    throw std::logic_error("transpose_avx512: not compiled for this target (check gemm_avx512_available())");
}

inline void transpose_avx2(std::size_t, std::size_t, const float*, std::size_t, float*, std::size_t,
                           const float*) {
    throw std::logic_error("transpose_avx2: not compiled for this target (check cpu_has_avx2_fma())");
}

#endif  // DTRAIN_X86_DISPATCH

/// Dense<float>'s forward pass on AVX-512: out [n, fo] = x [n, fi] * W^T + bias for W [fo, fi], computed as
/// out^T = W * x^T with the batch as the vector dimension; xt [fi, n] and ot [fo, n] are the caller's
/// scratch. Requires gemm_avx512_available().
inline void dense_forward_avx512(std::size_t n, std::size_t fi, std::size_t fo, const float* x,
                                 const float* w, const float* bias, float* xt, float* ot, float* out) {
    transpose_avx512(n, fi, x, fi, xt, n, nullptr);
    gemm_avx512(false, fo, n, fi, w, fi, 1, xt, n, ot, n);
    transpose_avx512(fo, n, ot, n, out, fo, bias);
}

}  // namespace dtrain::detail

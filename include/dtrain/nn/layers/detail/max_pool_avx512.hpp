#pragma once

/// @file
/// MaxPool2d<float>'s 2 x 2 windows of stride 2 on AVX-512: 16 windows of an output row per vector, the
/// even and odd columns of the two input rows split by permutes, the same compares and selects as the
/// scalar loop (max_takes(): the first maximum of each window, NaN taken), so bitwise its outputs and
/// arg-max indices. The forward pass optionally takes ReLU of every input first, which is how Model::infer()
/// runs a ReLU followed by this pooling without writing ReLU's output (nn/inference_plan.hpp). The gradient
/// is written in one pass, the windows' columns interleaved back, instead of zeroed and scattered into.

#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include <dtrain/core/cpu.hpp>
#include <dtrain/nn/layers/detail/kernel_set.hpp>

#ifdef DTRAIN_X86_DISPATCH
#include <immintrin.h>
#endif

namespace dtrain::detail {

/// True when MaxPool2d<float> pools its 2 x 2 windows of stride 2 with max_pool2x2_avx512(): AVX-512F and
/// kernel_set() native.
inline bool max_pool_avx512_available() {
    return kernel_set() == KernelSet::native && cpu_has_avx512f();
}

#ifdef DTRAIN_X86_DISPATCH

// One column of 16 windows (ix: the even or the odd columns) from row r, the first 2 x 16 values of which
// lie in the lanes of lo and hi; ReLU applied if asked.
[[gnu::always_inline]] DTRAIN_AVX512 inline __m512 max_pool_column(const float* r, __m512i ix, __mmask16 lo,
                                                                   __mmask16 hi, bool relu) {
    const __m512 v =
        _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(lo, r), ix, _mm512_maskz_loadu_ps(hi, r + 16));
    const __m512 zero = _mm512_setzero_ps();
    return relu ? _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), zero) : v;
}

// The lanes of the windows [j, j + 16) of an output row of ow windows: out (one per window), and lo and hi
// (their input columns, the first 16 and the next 16).
struct MaxPoolLanes {
    __mmask16 out, lo, hi;
};

inline MaxPoolLanes max_pool_lanes(std::size_t ow, std::size_t j) {
    const std::size_t n = ow - j < 16 ? ow - j : 16, cols = 2 * n;
    return {n == 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1),
            cols >= 16 ? __mmask16(0xffff) : __mmask16((1u << cols) - 1),
            cols <= 16 ? __mmask16(0) : __mmask16((1u << (cols - 16)) - 1)};
}

// max_takes(v, m) for 16 lanes: v > m, or v is NaN.
[[gnu::always_inline]] DTRAIN_AVX512 inline __mmask16 max_pool_takes(__m512 v, __m512 m) {
    return __mmask16(_mm512_cmp_ps_mask(v, m, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q));
}

/// y [planes, oh, ow] = the maximum of each 2 x 2 window of stride 2 of x [planes, h, w] (oh <= h / 2,
/// ow <= w / 2), scanned row by row: a later element replaces the maximum when greater or NaN. am, unless
/// null, gets each maximum's index within its input plane. relu: every input is taken as ReLU's
/// x < 0 ? 0 : x first (NaN and -0.0 pass through). Requires cpu_has_avx512f().
DTRAIN_AVX512_KERNEL inline void max_pool2x2_avx512(std::size_t planes, std::size_t h, std::size_t w,
                                                    std::size_t oh, std::size_t ow, const float* x, float* y,
                                                    std::uint32_t* am, bool relu) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i one = _mm512_set1_epi32(1), odd = _mm512_add_epi32(even, one);
    const __m512i below = _mm512_set1_epi32(int(w));
    for (std::size_t pl = 0; pl < planes; ++pl) {
        const float* xp = x + pl * h * w;
        for (std::size_t i = 0; i < oh; ++i, y += ow) {
            const float* r0 = xp + 2 * i * w;
            const float* r1 = r0 + w;
            for (std::size_t j = 0; j < ow; j += 16) {
                const auto [out, lo, hi] = max_pool_lanes(ow, j);
                const __m512 a = max_pool_column(r0 + 2 * j, even, lo, hi, relu),
                             b = max_pool_column(r0 + 2 * j, odd, lo, hi, relu),
                             c = max_pool_column(r1 + 2 * j, even, lo, hi, relu),
                             d = max_pool_column(r1 + 2 * j, odd, lo, hi, relu);
                const __m512i col = _mm512_add_epi32(_mm512_set1_epi32(int(2 * i * w + 2 * j)), even);
                const __mmask16 tb = max_pool_takes(b, a);
                __m512 m = _mm512_mask_blend_ps(tb, a, b);
                __m512i idx = _mm512_mask_blend_epi32(tb, col, _mm512_add_epi32(col, one));
                const __mmask16 tc = max_pool_takes(c, m);
                m = _mm512_mask_blend_ps(tc, m, c);
                idx = _mm512_mask_blend_epi32(tc, idx, _mm512_add_epi32(col, below));
                const __mmask16 td = max_pool_takes(d, m);
                m = _mm512_mask_blend_ps(td, m, d);
                _mm512_mask_storeu_ps(y + j, out, m);
                if (am != nullptr) {
                    idx =
                        _mm512_mask_blend_epi32(td, idx, _mm512_add_epi32(col, _mm512_add_epi32(below, one)));
                    _mm512_mask_storeu_epi32(am + j, out, idx);
                }
            }
            if (am != nullptr) am += ow;
        }
    }
}

/// dx [planes, h, w] = the gradient of max_pool2x2_avx512() for dy [planes, oh, ow] and its arg-max indices
/// am: 0 + dy at each window's arg-max, 0 everywhere else (the rows and columns no window covers too),
/// written once instead of zeroed and then scattered into: bitwise what adding into zeros gives (-0.0 made
/// +0.0). Requires cpu_has_avx512f().
DTRAIN_AVX512_KERNEL inline void max_pool2x2_backward_avx512(std::size_t planes, std::size_t h, std::size_t w,
                                                             std::size_t oh, std::size_t ow, const float* dy,
                                                             const std::uint32_t* am, float* dx) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    // lanes 0-7 and 8-15 of two vectors interleaved: a0 b0 a1 b1 ... and a8 b8 a9 b9 ...
    const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const __m512i one = _mm512_set1_epi32(1), below = _mm512_set1_epi32(int(w));
    const __m512 zero = _mm512_setzero_ps();
    for (std::size_t pl = 0; pl < planes; ++pl) {
        float* dp = dx + pl * h * w;
        for (std::size_t i = 0; i < oh; ++i, dy += ow, am += ow) {
            float* r0 = dp + 2 * i * w;
            float* r1 = r0 + w;
            for (std::size_t j = 0; j < ow; j += 16) {
                const auto [out, lo, hi] = max_pool_lanes(ow, j);
                const __m512 g = _mm512_add_ps(zero, _mm512_maskz_loadu_ps(out, dy + j));
                const __m512i idx = _mm512_maskz_loadu_epi32(out, am + j);
                const __m512i col = _mm512_add_epi32(_mm512_set1_epi32(int(2 * i * w + 2 * j)), even);
                const __m512i col_below = _mm512_add_epi32(col, below);
                const __m512 ga = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(idx, col), g),
                             gb = _mm512_maskz_mov_ps(
                                 _mm512_cmpeq_epi32_mask(idx, _mm512_add_epi32(col, one)), g),
                             gc = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(idx, col_below), g),
                             gd = _mm512_maskz_mov_ps(
                                 _mm512_cmpeq_epi32_mask(idx, _mm512_add_epi32(col_below, one)), g);
                _mm512_mask_storeu_ps(r0 + 2 * j, lo, _mm512_permutex2var_ps(ga, first, gb));
                _mm512_mask_storeu_ps(r0 + 2 * j + 16, hi, _mm512_permutex2var_ps(ga, second, gb));
                _mm512_mask_storeu_ps(r1 + 2 * j, lo, _mm512_permutex2var_ps(gc, first, gd));
                _mm512_mask_storeu_ps(r1 + 2 * j + 16, hi, _mm512_permutex2var_ps(gc, second, gd));
            }
            for (std::size_t c = 2 * ow; c < w; ++c)  // the column no window covers
                r0[c] = r1[c] = 0.0f;
        }
        for (std::size_t r = 2 * oh; r < h; ++r)  // the row no window covers
            for (std::size_t c = 0; c < w; ++c)
                dp[r * w + c] = 0.0f;
    }
}

#else  // no kernels on this target: max_pool_avx512_available() is false, and this is never called

inline void max_pool2x2_avx512(std::size_t, std::size_t, std::size_t, std::size_t, std::size_t, const float*,
                               float*, std::uint32_t*, bool) {
    throw std::logic_error(
        "max_pool2x2_avx512: not compiled for this target (check max_pool_avx512_available())");
}

inline void max_pool2x2_backward_avx512(std::size_t, std::size_t, std::size_t, std::size_t, std::size_t,
                                        const float*, const std::uint32_t*, float*) {
    throw std::logic_error(
        "max_pool2x2_backward_avx512: not compiled for this target (check max_pool_avx512_available())");
}

#endif  // DTRAIN_X86_DISPATCH

}  // namespace dtrain::detail

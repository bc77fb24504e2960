#pragma once

#include <algorithm>
#include <cstddef>

#include <dtrain/core/cpu.hpp>
#include <dtrain/nn/layers/detail/dense_gemm.hpp>
#include <dtrain/nn/layers/detail/direct_conv.hpp>
#include <dtrain/nn/layers/detail/im2col.hpp>
#include <dtrain/nn/layers/detail/implicit_conv_tiles.hpp>

// The kernels of Conv2d<float>'s implicit-GEMM path (nn/layers/detail/implicit_conv.hpp): one class of
// output positions at a time, computed as a GEMM whose one operand is read from the input at each valid
// tap's offset instead of from unfolded columns, vectorised over output channels (forward, weight gradient)
// or taps (input gradient). Each loop body is written once, for a register tile given as a type
// (implicit_conv_tiles.hpp): AVX2 + FMA tiles, and AVX-512F tiles that give bitwise the same results (the
// input gradient is added in an order no tile changes).

namespace dtrain::detail {

/// n rounded up to a multiple of implicit_nr.
constexpr std::size_t implicit_round(std::size_t n) {
    return (n + implicit_nr - 1) / implicit_nr * implicit_nr;
}

/// Bytes of input and gradient rows per chunk of samples of the weight gradient: 256 KiB made the Needle
/// ResNet9's first layer's backward 0.50 ms instead of 0.58 with the whole batch at once
/// (benchmarks/train/README.md); smaller chunks cost more in tile overhead.
constexpr std::size_t implicit_dw_chunk_bytes = std::size_t(256) << 10;

/// Least number of positions in a chunk of implicit_conv_weight_grad: a class with few positions per sample
/// (a corner) takes more samples at a time, so that its tiles still sum over a long run.
constexpr std::size_t implicit_dw_min_positions = 512;

/// One class of output positions (ImplicitConv): `positions` of them, position m at input offset m_off[m]
/// (that of its tap (0, 0, 0), which may fall on padding), at NCHW offset y_off[m] (sample * out * pos +
/// position) and at gradient row first_row + m (the rows are in class order); and `taps` taps that meet the
/// input at every one of them, tap t at offset tap_off[t] (m_off[m] + tap_off[t] is always an input value)
/// and used tap tap_u[t].
struct ImplicitClass {
    /// Input offset of each position.
    const std::ptrdiff_t* m_off;
    /// Offset of each position's channel 0 in the NCHW output.
    const std::size_t* y_off;
    /// Number of positions.
    std::size_t positions;
    /// Gradient row of position 0.
    std::size_t first_row;
    /// Input offset of each tap.
    const std::size_t* tap_off;
    /// Each tap's index among the layer's used taps.
    const std::size_t* tap_u;
    /// Number of taps (0 when every tap of these positions falls on padding).
    std::size_t taps;
    /// True when tap_u[t] == t for every tap (the class has all the used taps, in order).
    bool taps_in_order;
    /// Each position's row of the forward pass's output rows (sample * pos + position), when it writes rows.
    const std::size_t* y_row = nullptr;
};

#ifdef DTRAIN_DIRECT_CONV

// The initial accumulators of the gradient tiles.
alignas(64) inline constexpr float implicit_zeros[2 * implicit_nr] = {};

// The `mr` (<= MR) positions of class `c` from m0 and their input offsets (unused rows repeat the first:
// computed, never stored).
template <std::size_t MR>
struct ImplicitRows {
    std::size_t m[MR], mr;
    std::ptrdiff_t in[MR];
    ImplicitRows(const ImplicitClass& c, std::size_t m0) : mr(std::min(MR, c.positions - m0)) {
        for (std::size_t i = 0; i < MR; ++i) {
            m[i] = m0 + (i < mr ? i : 0);
            in[i] = c.m_off[m[i]];
        }
    }
};

// Calls block(o0, tile) for each block of columns [o0, o0 + 16 * Tile::nb) of [0, n), with Tile where a
// whole one fits in implicit_round(n) and Tail (one block) for the rest.
template <class Tile, class Tail, class F>
[[gnu::always_inline]] inline void implicit_column_blocks(std::size_t n, F block) {
    std::size_t o0 = 0;
    for (; o0 + Tile::nb * implicit_nr <= implicit_round(n); o0 += Tile::nb * implicit_nr)
        block(o0, Tile{});
    for (; o0 < n; o0 += Tail::nb * implicit_nr)
        block(o0, Tail{});
}

// implicit_conv_forward with the tiles Tile (and Tail, one block of 16 channels, for the last block).
template <class Tile, class Tail>
[[gnu::always_inline]] inline void implicit_forward_body(const float* x, const ImplicitClass& c,
                                                         const float* w_packed, std::size_t rows,
                                                         std::size_t out, std::size_t pos, const float* bias,
                                                         float* y, float* y_rows = nullptr) {
    implicit_column_blocks<Tile, Tail>(out, [&](std::size_t o0, auto tile) {
        using T = decltype(tile);
        constexpr std::size_t nr = T::nb * implicit_nr;
        const std::size_t cb = std::min(nr, out - o0);
        alignas(64) float init[nr] = {}, buf[T::mr * nr];
        if (bias != nullptr) std::copy(bias + o0, bias + o0 + cb, init);
        const float* wb = w_packed + o0 * rows;  // block j of step (used tap) u at wb + (j * rows + u) * 16
        for (std::size_t m0 = 0; m0 < c.positions; m0 += T::mr) {
            const ImplicitRows<T::mr> r(c, m0);
            // one pointer per row, so that each broadcast is one base + index * 4 address
            const float* xr[T::mr];
            for (std::size_t i = 0; i < T::mr; ++i)
                xr[i] = x + r.in[i];
            const auto a = [&](std::size_t i, std::size_t t) { return xr[i] + c.tap_off[t]; };
            if (c.taps == 0) {  // every tap on padding: the bias
                for (std::size_t i = 0; i < T::mr; ++i)
                    std::copy(init, init + nr, buf + i * nr);
            } else if (c.taps_in_order) {
                T::run(
                    c.taps, a,
                    [&](std::size_t t, std::size_t j) { return wb + (j * rows + t) * implicit_nr; }, init,
                    buf, nr);
            } else {
                T::run(
                    c.taps, a,
                    [&](std::size_t t, std::size_t j) { return wb + (j * rows + c.tap_u[t]) * implicit_nr; },
                    init, buf, nr);
            }
            if (y_rows != nullptr) {  // whole rows of implicit_round(out) values, transposed later
                for (std::size_t i = 0; i < r.mr; ++i)
                    std::copy(buf + i * nr, buf + i * nr + nr,
                              y_rows + c.y_row[r.m[i]] * implicit_round(out) + o0);
            } else {
                for (std::size_t i = 0; i < r.mr; ++i) {
                    float* yi = y + c.y_off[r.m[i]] + o0 * pos;
                    for (std::size_t ch = 0; ch < cb; ++ch)
                        yi[ch * pos] = buf[i * nr + ch];
                }
            }
        }
    });
}

/// Forward pass of one class of a convolution: y [n, out, pos] (NCHW) at the class's positions = bias (none
/// when null) + the class's taps' weights times the input x, 6 positions x 16 channels per register tile.
/// `w_packed` holds the `rows` used taps' weights as pack_implicit_weights() left them. Requires
/// direct_conv_available(). Deterministic (a fixed summation order per output), within float rounding of
/// im2col + GEMM.
DTRAIN_AVX2_KERNEL inline void implicit_conv_forward(const float* x, const ImplicitClass& c,
                                                     const float* w_packed, std::size_t rows, std::size_t out,
                                                     std::size_t pos, const float* bias, float* y) {
    implicit_forward_body<ImplicitTileAvx2, ImplicitTileAvx2>(x, c, w_packed, rows, out, pos, bias, y);
}

/// implicit_conv_forward on AVX-512 tiles (8 positions x 32 channels): bitwise the same result. Requires
/// cpu_has_avx512f().
DTRAIN_AVX512_KERNEL inline void implicit_conv_forward_avx512(const float* x, const ImplicitClass& c,
                                                              const float* w_packed, std::size_t rows,
                                                              std::size_t out, std::size_t pos,
                                                              const float* bias, float* y) {
    implicit_forward_body<ImplicitTile512, ImplicitTile512Tail>(x, c, w_packed, rows, out, pos, bias, y);
}

/// implicit_conv_forward_avx512 into rows: y_rows [n * pos, implicit_round(out)] at row c.y_row[m] for
/// position m, all implicit_round(out) columns written (the padding columns hold the padded weights' zeros
/// plus the bias' zeros), the same values. Requires cpu_has_avx512f().
DTRAIN_AVX512_KERNEL inline void implicit_conv_forward_rows_avx512(const float* x, const ImplicitClass& c,
                                                                   const float* w_packed, std::size_t rows,
                                                                   std::size_t out, const float* bias,
                                                                   float* y_rows) {
    implicit_forward_body<ImplicitTile512, ImplicitTile512Tail>(x, c, w_packed, rows, out, 0, bias, nullptr,
                                                                y_rows);
}

/// dyt [rows, outp] (outp = implicit_round(out), the extra channels 0): row m = the output gradient dy
/// (NCHW, positions of `pos` values per channel) of the position at NCHW offset y_off[m], in the order the
/// classes list their positions; and db[c] += the sum of channel c, in blocks of 64 rows, each block's sum
/// from zero in row order. Each row's 8 channels are one gather. Requires direct_conv_available().
DTRAIN_AVX2_KERNEL inline void implicit_rows_from_nchw(const float* dy, const std::size_t* y_off,
                                                       std::size_t rows, std::size_t pos, std::size_t out,
                                                       float* dyt, float* db) {
    constexpr std::size_t block = 64, lanes = 8;
    const std::size_t outp = implicit_round(out);
    const __m256i idx =
        _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(int(pos)));
    for (std::size_t m0 = 0; m0 < rows; m0 += block)
        for (std::size_t c0 = 0; c0 < outp; c0 += lanes) {
            const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(out - std::min(out, c0))),
                                                    _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            __m256 sum = _mm256_setzero_ps();
            for (std::size_t m = m0; m < std::min(rows, m0 + block); ++m) {
                const __m256 v = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), dy + y_off[m] + c0 * pos, idx,
                                                          _mm256_castsi256_ps(live), 4);
                _mm256_storeu_ps(dyt + m * outp + c0, v);
                sum = _mm256_add_ps(sum, v);
            }
            alignas(32) float s[lanes];
            _mm256_store_ps(s, sum);
            for (std::size_t c = c0; c < std::min(out, c0 + lanes); ++c)
                db[c] += s[c - c0];
        }
}

/// implicit_rows_from_nchw on AVX-512: bitwise the same rows and sums. With `nhwc` (scratch [n * pos, outp],
/// y_row[m] = sample * pos + position of row m) each sample's dy is first transposed into it block by block,
/// its channels from `out` on set to 0, and the rows copied from there; without, each row's 16 channels
/// are one gather (slower, but needs no scratch). Requires cpu_has_avx512f().
DTRAIN_AVX512_KERNEL inline void implicit_rows_from_nchw_avx512(const float* dy, const std::size_t* y_off,
                                                                std::size_t rows, std::size_t pos,
                                                                std::size_t out, float* dyt, float* db,
                                                                std::size_t n, float* nhwc,
                                                                const std::size_t* y_row) {
    constexpr std::size_t block = 64;
    const std::size_t outp = implicit_round(out);
    if (nhwc != nullptr)
        for (std::size_t s = 0; s < n; ++s)
            transpose_avx512(out, pos, dy + s * out * pos, pos, nhwc + s * pos * outp, outp, nullptr);
    if (nhwc != nullptr && outp != out)
        for (std::size_t r = 0; r < n * pos; ++r)
            std::fill(nhwc + r * outp + out, nhwc + (r + 1) * outp, 0.0f);
    const __m512i idx = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(int(pos)));
    for (std::size_t m0 = 0; m0 < rows; m0 += block)
        for (std::size_t c0 = 0; c0 < outp; c0 += implicit_nr) {
            const std::size_t live = std::min(out - c0, implicit_nr);
            const __mmask16 mask = __mmask16((1u << live) - 1);
            __m512 sum = _mm512_setzero_ps();
            for (std::size_t m = m0; m < std::min(rows, m0 + block); ++m) {
                const __m512 v = nhwc != nullptr ? _mm512_loadu_ps(nhwc + y_row[m] * outp + c0)
                                                 : _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mask, idx,
                                                                            dy + y_off[m] + c0 * pos, 4);
                _mm512_storeu_ps(dyt + m * outp + c0, v);
                sum = _mm512_add_ps(sum, v);
            }
            alignas(64) float s[implicit_nr];
            _mm512_store_ps(s, sum);
            for (std::size_t c = 0; c < live; ++c)
                db[c0 + c] += s[c];
        }
}

// implicit_conv_weight_grad with the tiles Tile and Tail.
template <class Tile, class Tail>
[[gnu::always_inline]] inline void implicit_weight_grad_body(const float* x, const ImplicitClass& c,
                                                             const float* dyt, std::size_t out, float* dwt) {
    const std::size_t outp = implicit_round(out);
    implicit_column_blocks<Tile, Tail>(out, [&](std::size_t o0, auto tile) {
        using T = decltype(tile);
        constexpr std::size_t nr = T::nb * implicit_nr;
        static_assert(nr <= 2 * implicit_nr);
        alignas(64) float buf[T::mr * nr];
        const float* d = dyt + c.first_row * outp + o0;
        for (std::size_t t0 = 0; t0 < c.taps; t0 += T::mr) {
            const std::size_t tr = std::min(T::mr, c.taps - t0);
            const float* xt[T::mr];  // one pointer per tap, as in the forward pass
            for (std::size_t i = 0; i < T::mr; ++i)
                xt[i] = x + c.tap_off[t0 + (i < tr ? i : 0)];
            T::run(
                c.positions, [&](std::size_t i, std::size_t m) { return xt[i] + c.m_off[m]; },
                [&](std::size_t m, std::size_t j) { return d + m * outp + j * implicit_nr; }, implicit_zeros,
                buf, nr);
            for (std::size_t i = 0; i < tr; ++i)
                for (std::size_t ch = 0; ch < nr; ++ch)
                    dwt[c.tap_u[t0 + i] * outp + o0 + ch] += buf[i * nr + ch];
        }
    });
}

/// Weight gradient of one class (or of its positions in a chunk of samples): ADDS to dwt [used taps, outp]
/// (outp = implicit_round(out)), at each of the class's taps, the sum over its positions of the input at
/// that tap times their gradient rows of dyt (implicit_rows_from_nchw); 6 taps x 16 channels per register
/// tile. Requires direct_conv_available(); deterministic.
DTRAIN_AVX2_KERNEL inline void implicit_conv_weight_grad(const float* x, const ImplicitClass& c,
                                                         const float* dyt, std::size_t out, float* dwt) {
    if (c.positions > 0) implicit_weight_grad_body<ImplicitTileAvx2, ImplicitTileAvx2>(x, c, dyt, out, dwt);
}

/// implicit_conv_weight_grad on AVX-512 tiles (8 taps x 32 channels): bitwise the same result. Requires
/// cpu_has_avx512f().
DTRAIN_AVX512_KERNEL inline void implicit_conv_weight_grad_avx512(const float* x, const ImplicitClass& c,
                                                                  const float* dyt, std::size_t out,
                                                                  float* dwt) {
    if (c.positions > 0) implicit_weight_grad_body<ImplicitTile512, ImplicitTile512Tail>(x, c, dyt, out, dwt);
}

// implicit_conv_input_grad with the tiles Tile and Tail (the same number of rows).
template <class Tile, class Tail>
[[gnu::always_inline]] inline void implicit_input_grad_body(const float* dyt, const ImplicitClass& c,
                                                            const float* wt, std::size_t out, float* dx,
                                                            float* scratch) {
    static_assert(Tile::mr == Tail::mr && Tile::mr <= implicit_mr_max);
    const std::size_t outp = implicit_round(out), tp = implicit_round(c.taps);
    for (std::size_t m0 = 0; m0 < c.positions; m0 += Tile::mr) {
        const ImplicitRows<Tile::mr> r(c, m0);
        const float* d[Tile::mr];
        for (std::size_t i = 0; i < Tile::mr; ++i)
            d[i] = dyt + (c.first_row + r.m[i]) * outp;
        implicit_column_blocks<Tile, Tail>(c.taps, [&](std::size_t t0, auto tile) {
            using T = decltype(tile);
            T::run(
                out, [&](std::size_t i, std::size_t o) { return d[i] + o; },
                [&](std::size_t o, std::size_t j) { return wt + o * tp + t0 + j * implicit_nr; },
                implicit_zeros, scratch + t0, tp);
        });
        for (std::size_t i = 0; i < r.mr; ++i)  // position by position, taps in order: the same for any tile
            for (std::size_t t = 0; t < c.taps; ++t)
                dx[r.in[i] + std::ptrdiff_t(c.tap_off[t])] += scratch[i * tp + t];
    }
}

/// Input gradient of one class: for each of its positions m and taps t, dx[input of (m, t)] += sum over
/// channels o of dyt[row of m][o] * w[o][t], with `wt` the class's taps' weights [out, implicit_round(taps)]
/// (pack_implicit_input_grad_weights); 6 positions x 16 taps per register tile, into `scratch`
/// [implicit_mr_max, implicit_round(taps)], then added into dx position by position, taps in order.
/// Requires direct_conv_available() and c.taps > 0; deterministic.
DTRAIN_AVX2_KERNEL inline void implicit_conv_input_grad(const float* dyt, const ImplicitClass& c,
                                                        const float* wt, std::size_t out, float* dx,
                                                        float* scratch) {
    implicit_input_grad_body<ImplicitTileAvx2, ImplicitTileAvx2>(dyt, c, wt, out, dx, scratch);
}

/// implicit_conv_input_grad on AVX-512 tiles (8 positions x 32 taps): bitwise the same result. Requires
/// cpu_has_avx512f().
DTRAIN_AVX512_KERNEL inline void implicit_conv_input_grad_avx512(const float* dyt, const ImplicitClass& c,
                                                                 const float* wt, std::size_t out, float* dx,
                                                                 float* scratch) {
    implicit_input_grad_body<ImplicitTile512, ImplicitTile512Tail>(dyt, c, wt, out, dx, scratch);
}

#endif  // DTRAIN_DIRECT_CONV

}  // namespace dtrain::detail

#pragma once

#include <algorithm>
#include <cstddef>

#include <dtrain/core/cpu.hpp>
#include <dtrain/nn/layers/detail/direct_conv.hpp>
#include <dtrain/nn/layers/detail/im2col.hpp>

// The AVX2/FMA kernels of Conv2d<float>'s implicit-GEMM path (nn/layers/detail/implicit_conv.hpp): one
// class of output positions at a time, computed as a GEMM whose one operand is read from the input at each
// valid tap's offset instead of from unfolded columns, vectorised over output channels (forward, weight
// gradient) or taps (input gradient).

namespace dtrain::detail {

/// Output channels per block of the implicit-GEMM kernels (two AVX2 vectors).
constexpr std::size_t implicit_nr = 16;
/// Output positions per forward and input-gradient tile, and taps per weight-gradient tile.
constexpr std::size_t implicit_mr = 6;

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
};

#ifdef DTRAIN_DIRECT_CONV

// buf[i][0..16) = acc, where acc[i] = sum over the k steps of a[i](step) * b(step), two vectors wide:
// the register tile of all three kernels. `A` gives the broadcast value of row i at step t, `B` the
// 16 values of step t. 12 accumulators, 2 B vectors and 1 broadcast fit AVX2's 16 registers.
template <class A, class B>
DTRAIN_AVX2_FMA inline void implicit_tile(std::size_t k, A a, B b, __m256 init0, __m256 init1, float* buf) {
    constexpr int MR = int(implicit_mr);
    __m256 acc[MR][2];
    for (int i = 0; i < MR; ++i) {
        acc[i][0] = init0;
        acc[i][1] = init1;
    }
    std::size_t t = 0;
    do {  // k >= 1; with a loop that may run 0 times, g++ -O3 keeps the accumulators in memory
        const float* bt = b(t);
        const __m256 b0 = _mm256_loadu_ps(bt), b1 = _mm256_loadu_ps(bt + 8);
        for (int i = 0; i < MR; ++i) {
            const __m256 av = _mm256_broadcast_ss(a(i, t));
            acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
        }
    } while (++t < k);
    for (int i = 0; i < MR; ++i) {
        _mm256_storeu_ps(buf + i * implicit_nr, acc[i][0]);
        _mm256_storeu_ps(buf + i * implicit_nr + 8, acc[i][1]);
    }
}

// The `mr` (<= implicit_mr) positions of class `c` from m0 and their input offsets (unused rows repeat the
// first: computed, never stored).
struct ImplicitRows {
    std::size_t m[implicit_mr], mr;
    std::ptrdiff_t in[implicit_mr];
    ImplicitRows(const ImplicitClass& c, std::size_t m0) : mr(std::min(implicit_mr, c.positions - m0)) {
        for (std::size_t i = 0; i < implicit_mr; ++i) {
            m[i] = m0 + (i < mr ? i : 0);
            in[i] = c.m_off[m[i]];
        }
    }
};

/// Forward pass of one class of a convolution: y [n, out, pos] (NCHW) at the class's positions = bias + the
/// class's taps' weights times the input x, 6 positions x 16 channels per register tile. `w_packed` holds
/// the `rows` used taps' weights as pack_implicit_weights() left them. Requires direct_conv_available().
/// Deterministic (a fixed summation order per output), within float rounding of im2col + GEMM.
DTRAIN_AVX2_KERNEL inline void implicit_conv_forward(const float* x, const ImplicitClass& c,
                                                     const float* w_packed, std::size_t rows, std::size_t out,
                                                     std::size_t pos, const float* bias, float* y) {
    alignas(32) float buf[implicit_mr * implicit_nr];
    for (std::size_t o0 = 0; o0 < out; o0 += implicit_nr) {
        const std::size_t cb = std::min(implicit_nr, out - o0);
        alignas(32) float b16[implicit_nr] = {};
        std::copy(bias + o0, bias + o0 + cb, b16);
        const __m256 b0 = _mm256_load_ps(b16), b1 = _mm256_load_ps(b16 + 8);
        const float* wb = w_packed + o0 * rows;
        for (std::size_t m0 = 0; m0 < c.positions; m0 += implicit_mr) {
            const ImplicitRows r(c, m0);
            const auto a = [&](int i, std::size_t t) { return x + (r.in[i] + std::ptrdiff_t(c.tap_off[t])); };
            if (c.taps == 0) {  // every tap on padding: the bias
                for (std::size_t i = 0; i < implicit_mr; ++i)
                    std::copy(b16, b16 + implicit_nr, buf + i * implicit_nr);
            } else if (c.taps_in_order) {
                implicit_tile(
                    c.taps, a, [&](std::size_t t) { return wb + t * implicit_nr; }, b0, b1, buf);
            } else {
                implicit_tile(
                    c.taps, a, [&](std::size_t t) { return wb + c.tap_u[t] * implicit_nr; }, b0, b1, buf);
            }
            for (std::size_t i = 0; i < r.mr; ++i) {
                float* yi = y + c.y_off[r.m[i]] + o0 * pos;
                for (std::size_t ch = 0; ch < cb; ++ch)
                    yi[ch * pos] = buf[i * implicit_nr + ch];
            }
        }
    }
}

/// dyt [rows, outp] (outp = implicit_round(out), the extra channels 0): row m = the output gradient dy
/// (NCHW, positions of `pos` values per channel) of the position at NCHW offset y_off[m], in the order the
/// classes list their positions; and db[c] += the sum of channel c, in blocks of 64 rows, vectorised over the
/// channels.
DTRAIN_OUT_OF_LINE inline void implicit_rows_from_nchw(const float* dy, const std::size_t* y_off,
                                                       std::size_t rows, std::size_t pos, std::size_t out,
                                                       float* dyt, float* db) {
    const std::size_t outp = implicit_round(out);
    for (std::size_t m = 0; m < rows; ++m) {
        float* d = dyt + m * outp;
        for (std::size_t c = 0; c < out; ++c)
            d[c] = dy[y_off[m] + c * pos];
        std::fill(d + out, d + outp, 0.0f);
    }
    constexpr std::size_t block = 64;
    float sum[implicit_nr];
    for (std::size_t m0 = 0; m0 < rows; m0 += block)
        for (std::size_t c0 = 0; c0 < out; c0 += implicit_nr) {
            std::fill(sum, sum + implicit_nr, 0.0f);
            for (std::size_t m = m0; m < std::min(rows, m0 + block); ++m)
                for (std::size_t c = 0; c < implicit_nr; ++c)
                    sum[c] += dyt[m * outp + c0 + c];
            for (std::size_t c = c0; c < std::min(out, c0 + implicit_nr); ++c)
                db[c] += sum[c - c0];
        }
}

/// Weight gradient of one class (or of its positions in a chunk of samples): ADDS to dwt [used taps, outp]
/// (outp = implicit_round(out)), at each of the class's taps, the sum over its positions of the input at
/// that tap times their gradient rows of dyt (implicit_rows_from_nchw); 6 taps x 16 channels per register
/// tile. Requires direct_conv_available(); deterministic.
DTRAIN_AVX2_KERNEL inline void implicit_conv_weight_grad(const float* x, const ImplicitClass& c,
                                                         const float* dyt, std::size_t out, float* dwt) {
    if (c.positions == 0) return;
    const std::size_t outp = implicit_round(out);
    alignas(32) float buf[implicit_mr * implicit_nr];
    for (std::size_t o0 = 0; o0 < out; o0 += implicit_nr) {
        const float* d = dyt + c.first_row * outp + o0;
        for (std::size_t t0 = 0; t0 < c.taps; t0 += implicit_mr) {
            const std::size_t tr = std::min(implicit_mr, c.taps - t0);
            std::ptrdiff_t off[implicit_mr];
            for (std::size_t i = 0; i < implicit_mr; ++i)
                off[i] = std::ptrdiff_t(c.tap_off[t0 + (i < tr ? i : 0)]);
            implicit_tile(
                c.positions, [&](int i, std::size_t m) { return x + (c.m_off[m] + off[i]); },
                [&](std::size_t m) { return d + m * outp; }, _mm256_setzero_ps(), _mm256_setzero_ps(), buf);
            for (std::size_t i = 0; i < tr; ++i)
                for (std::size_t ch = 0; ch < implicit_nr; ++ch)
                    dwt[c.tap_u[t0 + i] * outp + o0 + ch] += buf[i * implicit_nr + ch];
        }
    }
}

/// Input gradient of one class: for each of its positions m and taps t, dx[input of (m, t)] += sum over
/// channels o of dyt[row of m][o] * w[o][t], with `wt` the class's taps' weights [out, implicit_round(taps)]
/// (pack_implicit_input_grad_weights); 6 positions x 16 taps per register tile, then added into dx in a
/// fixed order. Requires direct_conv_available() and c.taps > 0; deterministic.
DTRAIN_AVX2_KERNEL inline void implicit_conv_input_grad(const float* dyt, const ImplicitClass& c,
                                                        const float* wt, std::size_t out, float* dx) {
    const std::size_t outp = implicit_round(out), tp = implicit_round(c.taps);
    alignas(32) float buf[implicit_mr * implicit_nr];
    for (std::size_t m0 = 0; m0 < c.positions; m0 += implicit_mr) {
        const ImplicitRows r(c, m0);
        const float* d[implicit_mr];
        for (std::size_t i = 0; i < implicit_mr; ++i)
            d[i] = dyt + (c.first_row + r.m[i]) * outp;
        for (std::size_t t0 = 0; t0 < c.taps; t0 += implicit_nr) {
            implicit_tile(
                out, [&](int i, std::size_t o) { return d[i] + o; },
                [&](std::size_t o) { return wt + o * tp + t0; }, _mm256_setzero_ps(), _mm256_setzero_ps(),
                buf);
            const std::size_t tb = std::min(implicit_nr, c.taps - t0);
            for (std::size_t i = 0; i < r.mr; ++i)
                for (std::size_t k = 0; k < tb; ++k)
                    dx[r.in[i] + std::ptrdiff_t(c.tap_off[t0 + k])] += buf[i * implicit_nr + k];
        }
    }
}

#endif  // DTRAIN_DIRECT_CONV

}  // namespace dtrain::detail

#pragma once

#include <algorithm>
#include <cstddef>

#include <dtrain/core/cpu.hpp>
#include <dtrain/nn/layers/detail/direct_conv.hpp>
#include <dtrain/nn/layers/detail/im2col.hpp>

// The AVX2/FMA kernels of Conv2d<float>'s implicit-GEMM path (nn/layers/detail/implicit_conv.hpp): a
// convolution computed as a GEMM whose one operand is read from the zero-padded input at each tap's
// offset instead of from unfolded columns, vectorised over output channels (forward, weight gradient) or
// taps (input gradient).

namespace dtrain::detail {

/// Output channels per block of the implicit-GEMM kernels (two AVX2 vectors).
constexpr std::size_t implicit_nr = 16;
/// Output positions per forward and input-gradient tile, and taps per weight-gradient tile.
constexpr std::size_t implicit_mr = 6;

/// n rounded up to a multiple of implicit_nr.
constexpr std::size_t implicit_round(std::size_t n) {
    return (n + implicit_nr - 1) / implicit_nr * implicit_nr;
}

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

// The `mr` (<= implicit_mr) output rows starting at m0: their offsets in the padded batch (m_off) and in
// an NCHW tensor of `out` channels (sample * out * pos + position); unused rows repeat the first (computed,
// never stored).
struct ImplicitRows {
    std::size_t in[implicit_mr], nchw[implicit_mr], mr;
    ImplicitRows(std::size_t m0, std::size_t np, std::size_t pos, std::size_t out, const std::size_t* m_off) {
        mr = std::min(implicit_mr, np - m0);
        for (std::size_t i = 0; i < implicit_mr; ++i) {
            const std::size_t m = m0 + (i < mr ? i : 0);
            in[i] = m_off[m];
            nchw[i] = m / pos * out * pos + m % pos;
        }
    }
};

/// Forward pass of any convolution of geometry `g` (rows = g.col_rows() >= 1) as an implicit GEMM over
/// the padded input xp (tables of implicit_tables): y [n, out, oh, ow] (NCHW) = bias + the
/// used taps' weights times the input, 6 positions x 16 channels per register tile. `w_packed` holds the
/// weights as pack_implicit_weights() left them. Requires direct_conv_available(). Deterministic (a fixed
/// summation order per output), within float rounding of im2col + GEMM.
DTRAIN_AVX2_KERNEL inline void implicit_conv_forward(const float* xp, std::size_t n, const ConvGeometry& g,
                                                     const std::size_t* tap_off, const std::size_t* m_off,
                                                     const float* w_packed, std::size_t out,
                                                     const float* bias, float* y) {
    const std::size_t pos = g.positions(), rows = g.col_rows(), np = n * pos;
    alignas(32) float buf[implicit_mr * implicit_nr];
    for (std::size_t o0 = 0; o0 < out; o0 += implicit_nr) {
        const std::size_t cb = std::min(implicit_nr, out - o0);
        alignas(32) float b16[implicit_nr] = {};
        std::copy(bias + o0, bias + o0 + cb, b16);
        const float* wb = w_packed + o0 * rows;
        for (std::size_t m0 = 0; m0 < np; m0 += implicit_mr) {
            const ImplicitRows r(m0, np, pos, out, m_off);
            implicit_tile(
                rows, [&](int i, std::size_t t) { return xp + r.in[i] + tap_off[t]; },
                [&](std::size_t t) { return wb + t * implicit_nr; }, _mm256_load_ps(b16),
                _mm256_load_ps(b16 + 8), buf);
            for (std::size_t i = 0; i < r.mr; ++i)
                for (std::size_t c = 0; c < cb; ++c)
                    y[r.nchw[i] + (o0 + c) * pos] = buf[i * implicit_nr + c];
        }
    }
}

/// dyt [n * pos, outp] (outp = implicit_round(out), the extra channels 0) = dy [n, out, pos] transposed:
/// the gradient as the weight-gradient and input-gradient kernels read it; and db[c] += the sum of channel
/// c (summed per sample, then over the samples in order), vectorised over the channels.
DTRAIN_OUT_OF_LINE inline void implicit_rows_from_nchw(const float* dy, std::size_t n, std::size_t pos,
                                                       std::size_t out, float* dyt, float* db) {
    const std::size_t outp = implicit_round(out);
    for (std::size_t s = 0; s < n; ++s) {
        for (std::size_t p = 0; p < pos; ++p) {
            float* d = dyt + (s * pos + p) * outp;
            for (std::size_t c = 0; c < out; ++c)
                d[c] = dy[(s * out + c) * pos + p];
            std::fill(d + out, d + outp, 0.0f);
        }
        float sum[implicit_nr];
        for (std::size_t c0 = 0; c0 < out; c0 += implicit_nr) {
            std::fill(sum, sum + implicit_nr, 0.0f);
            for (std::size_t p = 0; p < pos; ++p)
                for (std::size_t c = 0; c < implicit_nr; ++c)
                    sum[c] += dyt[(s * pos + p) * outp + c0 + c];
            for (std::size_t c = c0; c < std::min(out, c0 + implicit_nr); ++c)
                db[c] += sum[c - c0];
        }
    }
}

/// Bytes of padded input and gradient rows per chunk of samples in implicit_conv_weight_grad: 256 KiB made
/// the Needle ResNet9's first layer's backward 0.50 ms instead of 0.58 with the whole batch at once
/// (benchmarks/train/README.md); smaller chunks cost more in tile overhead.
constexpr std::size_t implicit_dw_chunk_bytes = std::size_t(256) << 10;

/// Weight gradient: ADDS to dw [out, c, kh, kw], at each used tap (tap_w), the sum over the batch of the
/// padded input xp (`sample` values per sample) at that tap times dyt (implicit_rows_from_nchw); tables of
/// implicit_tables. A chunk of samples at a time (about implicit_dw_chunk_bytes, so they stay in cache),
/// 6 taps x 16 channels per register tile, summed into dwt [rows, outp] (scratch), which is added to dw at
/// the end. Requires direct_conv_available(); deterministic.
DTRAIN_AVX2_KERNEL inline void implicit_conv_weight_grad(const float* xp, std::size_t n, std::size_t sample,
                                                         const ConvGeometry& g, const std::size_t* tap_off,
                                                         const std::size_t* tap_w, const std::size_t* m_off,
                                                         const float* dyt, std::size_t out, float* dwt,
                                                         float* dw) {
    const std::size_t rows = g.col_rows(), pos = g.positions(), outp = implicit_round(out),
                      fan_in = g.c * g.kh * g.kw;
    const std::size_t chunk =
        std::max<std::size_t>(1, implicit_dw_chunk_bytes / (sizeof(float) * (sample + pos * outp)));
    std::fill(dwt, dwt + rows * outp, 0.0f);
    alignas(32) float buf[implicit_mr * implicit_nr];
    for (std::size_t s0 = 0; s0 < n; s0 += chunk) {
        const std::size_t m0 = s0 * pos, mk = (std::min(n, s0 + chunk) - s0) * pos;
        const std::size_t* mo = m_off + m0;
        const float* dy = dyt + m0 * outp;
        for (std::size_t o0 = 0; o0 < out; o0 += implicit_nr)
            for (std::size_t t0 = 0; t0 < rows; t0 += implicit_mr) {
                const std::size_t tr = std::min(implicit_mr, rows - t0);
                std::size_t off[implicit_mr];
                for (std::size_t i = 0; i < implicit_mr; ++i)
                    off[i] = tap_off[t0 + (i < tr ? i : 0)];
                implicit_tile(
                    mk, [&](int i, std::size_t m) { return xp + mo[m] + off[i]; },
                    [&](std::size_t m) { return dy + m * outp + o0; }, _mm256_setzero_ps(),
                    _mm256_setzero_ps(), buf);
                for (std::size_t i = 0; i < tr; ++i)
                    for (std::size_t c = 0; c < implicit_nr; ++c)
                        dwt[(t0 + i) * outp + o0 + c] += buf[i * implicit_nr + c];
            }
    }
    for (std::size_t o = 0; o < out; ++o)
        for (std::size_t t = 0; t < rows; ++t)
            dw[o * fan_in + tap_w[t]] += dwt[t * outp + o];
}

/// Input gradient: for every output position m and used tap t, dxp[input of (m, t)] += sum over channels o
/// of dyt[m][o] * w[o][t], with `wt` the used taps' weights [out, rowsp] (rowsp = implicit_round(rows), the
/// extra taps 0), 6 positions x 16 taps per register tile, then added into the padded gradient dxp
/// (tables of implicit_tables; the caller zeroes it first and unpads it after). Requires direct_conv_available();
/// deterministic (a fixed order of the additions).
DTRAIN_AVX2_KERNEL inline void implicit_conv_input_grad(const float* dyt, std::size_t n,
                                                        const ConvGeometry& g, const std::size_t* tap_off,
                                                        const std::size_t* m_off, const float* wt,
                                                        std::size_t out, float* dxp) {
    const std::size_t pos = g.positions(), rows = g.col_rows(), np = n * pos, outp = implicit_round(out),
                      rowsp = implicit_round(rows);
    alignas(32) float buf[implicit_mr * implicit_nr];
    for (std::size_t m0 = 0; m0 < np; m0 += implicit_mr) {
        const ImplicitRows r(m0, np, pos, out, m_off);
        const float* d[implicit_mr];
        for (std::size_t i = 0; i < implicit_mr; ++i)
            d[i] = dyt + (m0 + (i < r.mr ? i : 0)) * outp;
        for (std::size_t t0 = 0; t0 < rows; t0 += implicit_nr) {
            implicit_tile(
                out, [&](int i, std::size_t o) { return d[i] + o; },
                [&](std::size_t o) { return wt + o * rowsp + t0; }, _mm256_setzero_ps(), _mm256_setzero_ps(),
                buf);
            const std::size_t tb = std::min(implicit_nr, rows - t0);
            for (std::size_t i = 0; i < r.mr; ++i) {
                float* dx = dxp + r.in[i];
                for (std::size_t c = 0; c < tb; ++c)
                    dx[tap_off[t0 + c]] += buf[i * implicit_nr + c];
            }
        }
    }
}

#endif  // DTRAIN_DIRECT_CONV

}  // namespace dtrain::detail

#pragma once

/// @file
/// The gradient kernels of stride-1, unpadded convolutions after a direct forward (direct_conv.hpp): the
/// weight gradient of thin layers and the input gradient, each computed from dY without columns.

#include <algorithm>
#include <cstddef>

#include <dtrain/nn/layers/detail/direct_conv.hpp>

namespace dtrain::detail {

/// Largest fan-in (in_channels * kh * kw) for which Conv2d<float> also computes the weight gradient with
/// direct_conv_weight_grad(): at such a small GEMM depth OpenBLAS reaches about half its rate and the
/// columns cost more than the products. For Conv2d(20, 50, 5) (fan-in 500) the direct weight gradient
/// measured slower than im2col + GEMM (benchmarks/train/README.md).
constexpr std::size_t direct_conv_max_fan_in = 32;

#ifdef DTRAIN_DIRECT_CONV

// Sum of the 8 lanes of v, in a fixed order.
DTRAIN_AVX2_FMA inline float lanes_total(__m256 v) {
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps(q, q, 1)));
}

// acc[c][t] += d(c) * x(t) for the 8 positions at `j` of one output row; with `Full` false only the
// lanes of `m` (the others load 0). The inputs are held and each dY vector is loaded once, so a 4 x 3 tile
// uses 12 accumulators, 3 inputs and one dY register.
template <int CB, int TB, bool Full>
DTRAIN_AVX2_FMA inline void direct_dw_step(__m256 (&acc)[CB][TB], const float* xr, const std::size_t* off,
                                           const float* dr, std::size_t pos, std::size_t j, __m256i m) {
    __m256 xv[TB];
    for (int t = 0; t < TB; ++t)
        xv[t] = Full ? _mm256_loadu_ps(xr + off[t] + j) : _mm256_maskload_ps(xr + off[t] + j, m);
    for (int c = 0; c < CB; ++c) {
        const __m256 d = Full ? _mm256_loadu_ps(dr + c * pos + j) : _mm256_maskload_ps(dr + c * pos + j, m);
        for (int t = 0; t < TB; ++t)
            acc[c][t] = _mm256_fmadd_ps(d, xv[t], acc[c][t]);
    }
}

// Weight gradient of CB channels x TB taps over the whole batch: dw[c * fan_in + t] += sum over s, i, j
// of dy[s][c][i][j] * x[s][..tap t..]. `off` holds each tap's offset in an input sample. The output rows of
// all samples, in order, are the steps of SumBlocks (summation.hpp): chains of as many rows as make about
// sum_block vectors each.
template <int CB, int TB>
DTRAIN_AVX2_FMA inline void direct_dw_tile(const float* x, std::size_t n, const ConvGeometry& g,
                                           const float* dy, std::size_t out, const std::size_t* off,
                                           float* dw, std::size_t fan_in) {
    __m256 acc[CB][TB], part[CB][TB] = {}, tot[CB][TB] = {};
    const std::size_t pos = g.positions(), in_sample = g.c * g.h * g.w, full = g.ow / 8 * 8;
    const __m256i m = lane_mask(g.ow - full);
    const std::size_t chain = std::max<std::size_t>(1, sum_block / ((g.ow + 7) / 8));
    for (SumBlocks b(n * g.oh, chain, chain * (sum_super_block / sum_block)); b.next();) {
        for (int c = 0; c < CB; ++c)
            for (int t = 0; t < TB; ++t)
                acc[c][t] = _mm256_setzero_ps();
        // row r of the batch is row i of sample s; walked by counters, not divided per row
        std::size_t s = b.begin / g.oh, i = b.begin - s * g.oh;
        const float *xs = x + s * in_sample, *ds = dy + s * out * pos;
        for (std::size_t r = b.begin; r < b.end; ++r) {
            const float* xr = xs + i * g.w;
            const float* dr = ds + i * g.ow;
            for (std::size_t j = 0; j < full; j += 8)
                direct_dw_step<CB, TB, true>(acc, xr, off, dr, pos, j, m);
            if (full < g.ow) direct_dw_step<CB, TB, false>(acc, xr, off, dr, pos, full, m);
            if (++i == g.oh) {
                i = 0;
                xs += in_sample;
                ds += out * pos;
            }
        }
        direct_chain_end(b, acc, part, tot, nullptr);
    }
    for (int c = 0; c < CB; ++c)
        for (int t = 0; t < TB; ++t)
            dw[c * fan_in + t] += lanes_total(tot[c][t]);
}

template <int CB>
DTRAIN_AVX2_FMA inline void direct_dw_channels(const float* x, std::size_t n, const ConvGeometry& g,
                                               const float* dy, std::size_t out, const std::size_t* off,
                                               float* dw) {
    const std::size_t fan_in = g.c * g.kh * g.kw;
    std::size_t t = 0;
    for (; t + 3 <= fan_in; t += 3)
        direct_dw_tile<CB, 3>(x, n, g, dy, out, off + t, dw + t, fan_in);
    if (fan_in - t == 2) direct_dw_tile<CB, 2>(x, n, g, dy, out, off + t, dw + t, fan_in);
    if (fan_in - t == 1) direct_dw_tile<CB, 1>(x, n, g, dy, out, off + t, dw + t, fan_in);
}

/// Weight gradient of a stride-1, unpadded convolution of geometry `g`: ADDS to dw [out, c, kh, kw] the
/// sum over the batch of dy[s][o][i][j] * x[s][ci][i + ki][j + kj], for x [n, c, h, w] and dy NCHW
/// [n, out, oh, ow]. `off` holds the taps as tap_offsets() left them. Requires direct_conv_available().
/// Deterministic (a fixed summation order).
DTRAIN_AVX2_KERNEL inline void direct_conv_weight_grad(const float* x, std::size_t n, const ConvGeometry& g,
                                                       const float* dy, std::size_t out,
                                                       const std::size_t* off, float* dw) {
    const std::size_t fan_in = g.c * g.kh * g.kw, pos = g.positions();
    // the channel blocks of direct_conv_forward
    for_each_direct_block(out, [&](auto cb, std::size_t o) {
        direct_dw_channels<decltype(cb)::value>(x, n, g, dy + o * pos, out, off, dw + o * fan_in);
    });
}

// The input-gradient tile of a block of TB taps (offsets `off`, packed weights wb) for one sample (dY dy,
// dX dx): TB taps x NV vectors of output positions, the sum over channels o of wb[o][t] * (vector v of dY
// channel o) in SumBlocks' order, the forward tile with the roles of taps and channels swapped, then added
// into dX where tap t of vector v reads the input.
template <int TB>
struct DirectDxTile {
    const float* dy;
    std::size_t pos;
    std::size_t channels;
    const float* wb;
    float* dx;
    const std::size_t* off;

    template <int NV, bool MaskAll, bool MaskLast>
    DTRAIN_AVX2_FMA void run(std::size_t in, std::size_t vin, std::size_t outp, std::size_t vout,
                             __m256i m) const {
        if (channels <= sum_block)
            one_chain<NV, MaskAll, MaskLast>(in, vin, outp, vout, m);
        else
            blocked<NV, MaskAll, MaskLast>(in, vin, outp, vout, m);
    }

    // run() for channels <= sum_block: one chain from zero. The same sum as blocked(), as one straight loop,
    // so that the accumulators stay in registers (see DirectFwdTile::one_chain).
    template <int NV, bool MaskAll, bool MaskLast>
    DTRAIN_AVX2_FMA void one_chain(std::size_t in, std::size_t vin, std::size_t outp, std::size_t vout,
                                   __m256i m) const {
        __m256 acc[TB][NV];
        direct_chain<TB, NV, MaskAll, MaskLast>(acc, 0, channels, channel(outp), vout, wb,
                                                m);  // channels >= 1
        add_to_dx<NV, MaskAll, MaskLast>(acc, in, vin, m);
    }

    // run() for channels > sum_block: the chains, partial sums and total of SumBlocks.
    template <int NV, bool MaskAll, bool MaskLast>
    DTRAIN_AVX2_FMA void blocked(std::size_t in, std::size_t vin, std::size_t outp, std::size_t vout,
                                 __m256i m) const {
        __m256 acc[TB][NV], part[TB][NV] = {}, tot[TB][NV] = {};
        for (SumBlocks b(channels); b.next();) {
            direct_chain<TB, NV, MaskAll, MaskLast>(acc, b.begin, b.end, channel(outp), vout, wb, m);
            direct_chain_end(b, acc, part, tot, nullptr);
        }
        add_to_dx<NV, MaskAll, MaskLast>(tot, in, vin, m);
    }

    // Step o's vectors: channel o of dY's vectors at offset `outp`.
    auto channel(std::size_t outp) const {
        return [d0 = dy + outp, stride = pos](std::size_t o) { return d0 + o * stride; };
    }

    // Adds the tile's sums r to dX, in order: taps ki and ki + 1 of a column meet at vectors v + 1 and v.
    template <int NV, bool MaskAll, bool MaskLast>
    DTRAIN_AVX2_FMA void add_to_dx(const __m256 (&r)[TB][NV], std::size_t in, std::size_t vin,
                                   __m256i m) const {
        for (int t = 0; t < TB; ++t)
            for (int v = 0; v < NV; ++v) {
                float* d = dx + in + off[t] + v * vin;
                if (MaskAll || (MaskLast && v + 1 == NV))
                    _mm256_maskstore_ps(d, m, _mm256_add_ps(_mm256_maskload_ps(d, m), r[t][v]));
                else
                    _mm256_storeu_ps(d, _mm256_add_ps(_mm256_loadu_ps(d), r[t][v]));
            }
    }
};

/// Packs w [out, fan_in] for direct_conv_input_grad(): the taps ordered by kernel column kj, then (ci, ki),
/// in kw groups of c * kh taps, each group laid out in blocks of 4 taps as pack_direct_weights() lays out
/// rows. The 4 taps of a block then meet dX at the same column, where the vectors of taps of neighbouring
/// columns would overlap by 1-7 lanes and each load of dX would wait for the store before it.
inline void pack_direct_dx_weights(const float* w, const ConvGeometry& g, std::size_t out, float* w_packed) {
    const std::size_t group = g.c * g.kh, fan_in = group * g.kw;
    for (std::size_t kj = 0; kj < g.kw; ++kj)
        pack_direct_weights(w + kj, group, out, g.kw, fan_in, w_packed + kj * group * out);
}

/// Input gradient of a stride-1, unpadded convolution of geometry `g`: WRITES dx [n, c, h, w] = the sum
/// over output channels o and positions (i, j) of dy[s][o][i][j] * w[o][ci][ki][kj] at x's element
/// [s][ci][i + ki][j + kj], for dy NCHW [n, out, oh, ow]. `w_packed` holds the weights as
/// pack_direct_dx_weights() left them, and `off` the taps as tap_offsets() left them. Requires
/// direct_conv_available(). Deterministic: a fixed order of sums, within float rounding of W^T * dY +
/// col2im.
DTRAIN_AVX2_KERNEL inline void direct_conv_input_grad(const float* dy, std::size_t n, const ConvGeometry& g,
                                                      const float* w_packed, std::size_t out,
                                                      const std::size_t* off, float* dx) {
    const std::size_t pos = g.positions(), in_sample = g.c * g.h * g.w, group = g.c * g.kh;
    for (std::size_t s = 0; s < n; ++s) {  // a sample's dY and dX stay in L1 across its tap blocks
        const float* dys = dy + s * out * pos;
        float* dxs = dx + s * in_sample;
        std::fill(dxs, dxs + in_sample, 0.0f);
        for (std::size_t kj = 0; kj < g.kw; ++kj)
            for_each_direct_block(group, [&](auto tb, std::size_t q) {
                constexpr int TB = decltype(tb)::value;
                std::size_t block_off[TB];  // taps q.. of column kj: standard index (ci * kh + ki) * kw + kj
                for (int i = 0; i < TB; ++i)
                    block_off[i] = off[(q + i) * g.kw + kj];
                direct_sample_tiles(
                    g, DirectDxTile<TB>{dys, pos, out, w_packed + (kj * group + q) * out, dxs, block_off});
            });
    }
}

#endif  // DTRAIN_DIRECT_CONV

}  // namespace dtrain::detail

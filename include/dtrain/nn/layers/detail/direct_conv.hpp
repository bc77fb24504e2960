#pragma once

#include <cstddef>
#include <type_traits>

#include <dtrain/core/cpu.hpp>
#include <dtrain/nn/layers/detail/im2col.hpp>
#include <dtrain/nn/layers/detail/kernel_set.hpp>
#include <dtrain/nn/layers/detail/summation.hpp>

#ifdef DTRAIN_X86_DISPATCH
#include <immintrin.h>
/// Defined where the convolution kernels are compiled (core/cpu.hpp's DTRAIN_X86_DISPATCH).
#define DTRAIN_DIRECT_CONV 1
#endif

namespace dtrain::detail {

/// True when Conv2d<float> may choose the direct and implicit-GEMM convolution kernels: x86-64 with AVX2 and
/// FMA, and kernel_set() native or avx2.
inline bool direct_conv_available() {
    return (kernel_set() == KernelSet::native || kernel_set() == KernelSet::avx2) && cpu_has_avx2_fma();
}

/// Stride 1 and no padding: the geometries the direct kernels (and GemmConv) take.
inline bool direct_conv_geometry(const ConvGeometry& g) noexcept {
    return g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0;
}

/// Writes off[t] = the offset of tap t = (ci, ki, kj) in an input sample [c, h, w] of geometry `g`, for
/// the c * kh * kw taps: the tap table the direct kernels take (it depends on the geometry only).
inline void tap_offsets(const ConvGeometry& g, std::size_t* off) {
    for (std::size_t ci = 0, t = 0; ci < g.c; ++ci)
        for (std::size_t ki = 0; ki < g.kh; ++ki)
            for (std::size_t kj = 0; kj < g.kw; ++kj, ++t)
                off[t] = (ci * g.h + ki) * g.w + kj;
}

#ifdef DTRAIN_DIRECT_CONV

// The mask of lanes [0, n), n in [0, 8]: the valid outputs of a vector at the end of an output row.
DTRAIN_AVX2_FMA inline __m256i lane_mask(std::size_t n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), idx);
}

// Output channels per forward tile: the weights are packed in blocks of this many (the last block may be
// narrower) by pack_direct_weights().
constexpr std::size_t direct_block = 4;

// Calls f(std::integral_constant<int, B>{}, i) for each block [i, i + B) of [0, total): blocks of
// direct_block, the last one narrower (B = min(direct_block, total - i)). The one place where a block's
// size becomes a template argument: the channel blocks of the forward pass and of the weight gradient, and
// the tap blocks of the input gradient.
template <class F>
inline void for_each_direct_block(std::size_t total, F&& f) {
    static_assert(direct_block == 4, "for_each_direct_block dispatches blocks of 1 to 4");
    for (std::size_t i = 0; i < total; i += direct_block) {
        const std::size_t b = total - i < direct_block ? total - i : direct_block;
        if (b == 4)
            f(std::integral_constant<int, 4>{}, i);
        else if (b == 3)
            f(std::integral_constant<int, 3>{}, i);
        else if (b == 2)
            f(std::integral_constant<int, 2>{}, i);
        else
            f(std::integral_constant<int, 1>{}, i);
    }
}

/// Packs the [rows, cols] matrix whose element (r, k) is w[r * rs + k * cs] in blocks of 4 rows: block b
/// (rows [4b, 4b + rb), rb = min(4, rows - 4b)) holds, at w_packed + 4b * cols, its values column by
/// column: [cols][rb]. Weights w [out, fan_in] for direct_conv_forward: (w, out, fan_in, fan_in, 1); for
/// direct_conv_input_grad, pack_direct_dx_weights() packs their transpose, column group by column group.
inline void pack_direct_weights(const float* w, std::size_t rows, std::size_t cols, std::size_t rs,
                                std::size_t cs, float* w_packed) {
    for (std::size_t r0 = 0; r0 < rows; r0 += direct_block) {
        const std::size_t rb = rows - r0 < direct_block ? rows - r0 : direct_block;
        for (std::size_t k = 0; k < cols; ++k)
            for (std::size_t r = 0; r < rb; ++r)
                w_packed[r0 * cols + k * rb + r] = w[(r0 + r) * rs + k * cs];
    }
}

// acc[c][v] += wb[c] * (vector v of 8 inputs at r + v * vin). Vector v is masked by `m` when `MaskAll`,
// or when `MaskLast` and it is the last one.
template <int CB, int NV, bool MaskAll, bool MaskLast>
DTRAIN_AVX2_FMA inline void direct_fwd_step(__m256 (&acc)[CB][NV], const float* r, std::size_t vin,
                                            const float* wb, __m256i m) {
    __m256 in[NV];
    for (int v = 0; v < NV; ++v)
        in[v] = MaskAll || (MaskLast && v + 1 == NV) ? _mm256_maskload_ps(r + v * vin, m)
                                                     : _mm256_loadu_ps(r + v * vin);
    for (int c = 0; c < CB; ++c) {
        const __m256 wv = _mm256_broadcast_ss(wb + c);
        for (int v = 0; v < NV; ++v)
            acc[c][v] = _mm256_fmadd_ps(wv, in[v], acc[c][v]);
    }
}

// acc = one chain of direct_fwd_step()s from zero over steps [begin, end), end > begin: step t reads its
// vectors at src(t) and its R weights at wb + t * R. `src` only computes a pointer (the forward tile's tap,
// the input-gradient tile's channel), so it needs no target attribute of its own.
template <int R, int NV, bool MaskAll, bool MaskLast, class Src>
[[gnu::always_inline]] DTRAIN_AVX2_FMA inline void direct_chain(__m256 (&acc)[R][NV], std::size_t begin,
                                                                std::size_t end, Src src, std::size_t vin,
                                                                const float* wb, __m256i m) {
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < NV; ++v)
            acc[r][v] = _mm256_setzero_ps();
    std::size_t t = begin;
    do  // with a loop that may run 0 times, g++ -O3 keeps the accumulators in memory
        direct_fwd_step<R, NV, MaskAll, MaskLast>(acc, src(t), vin, wb + t * R, m);
    while (++t < end);
}

// Calls tile.template run<NV, MaskAll, MaskLast>(in, vin, out, vout, m) with NV = nv (1..3).
template <bool MaskAll, bool MaskLast, class Tile>
DTRAIN_AVX2_FMA inline void direct_tile_nv(const Tile& tile, std::size_t nv, std::size_t in, std::size_t vin,
                                           std::size_t out, std::size_t vout, __m256i m) {
    if (nv == 3)
        tile.template run<3, MaskAll, MaskLast>(in, vin, out, vout, m);
    else if (nv == 2)
        tile.template run<2, MaskAll, MaskLast>(in, vin, out, vout, m);
    else
        tile.template run<1, MaskAll, MaskLast>(in, vin, out, vout, m);
}

// The tiling of the direct kernels: covers the output positions of one sample of geometry `g` with tiles of
// up to 3 vectors of 8, vector v at output offset out + v * vout meeting the input at in + v * vin (offsets
// within the sample): three output rows of at most 8 (one vector each, all masked when ow < 8; vin = input
// width, vout = output width) or pieces of 24 of a row (vin = vout = 8; the last vector masked when the row
// ends inside it). `tile` is the kernel's tile: DirectFwdTile here, DirectDxTile in direct_conv_grad.hpp.
template <class Tile>
DTRAIN_AVX2_FMA inline void direct_sample_tiles(const ConvGeometry& g, const Tile& tile) {
    if (g.ow <= 8) {
        const __m256i m = lane_mask(g.ow);
        for (std::size_t i = 0; i < g.oh; i += 3) {
            const std::size_t nv = g.oh - i < 3 ? g.oh - i : 3;
            if (g.ow == 8)
                direct_tile_nv<false, false>(tile, nv, i * g.w, g.w, i * g.ow, g.ow, m);
            else
                direct_tile_nv<true, false>(tile, nv, i * g.w, g.w, i * g.ow, g.ow, m);
        }
        return;
    }
    for (std::size_t i = 0; i < g.oh; ++i)
        for (std::size_t j = 0; j < g.ow; j += 24) {
            const std::size_t rem = g.ow - j < 24 ? g.ow - j : 24, nv = (rem + 7) / 8;
            if (rem % 8 == 0)
                direct_tile_nv<false, false>(tile, nv, i * g.w + j, 8, i * g.ow + j, 8, lane_mask(8));
            else
                direct_tile_nv<false, true>(tile, nv, i * g.w + j, 8, i * g.ow + j, 8, lane_mask(rem % 8));
        }
}

// The end of chain b of a direct tile's blocked sum (summation.hpp), for R rows x NV vectors: the partial sum
// part = acc (the first chain of a part) or part + acc; when the part is done, tot = init[r] + part (the
// first part; with init null, part) or tot + part. One of a few straight paths, chosen once per chain.
template <int R, int NV>
[[gnu::always_inline]] DTRAIN_AVX2_FMA inline void direct_chain_end(const SumBlocks& b,
                                                                    const __m256 (&acc)[R][NV],
                                                                    __m256 (&part)[R][NV],
                                                                    __m256 (&tot)[R][NV], const float* init) {
    if (b.first_in_part())
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < NV; ++v)
                part[r][v] = acc[r][v];
    else
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < NV; ++v)
                part[r][v] = _mm256_add_ps(part[r][v], acc[r][v]);
    if (!b.part_done()) return;
    if (!b.first_part())
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < NV; ++v)
                tot[r][v] = _mm256_add_ps(tot[r][v], part[r][v]);
    else if (init != nullptr)
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < NV; ++v)
                tot[r][v] = _mm256_add_ps(_mm256_broadcast_ss(init + r), part[r][v]);
    else
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < NV; ++v)
                tot[r][v] = part[r][v];
}

// The forward tile of a channel block of CB for one sample (input x, output y, the block's packed weights
// wb and biases): CB channels x NV vectors, bias[c] + the sum over taps t of wb[t][c] * (vector v of the
// input at off[t]) in SumBlocks' order (summation.hpp), stored to channel c's vector v. Without masks the
// 4 x 3 tile's 12 accumulators, 3 inputs and broadcast weight fit AVX2's 16 registers.
template <int CB>
struct DirectFwdTile {
    const float* x;
    const std::size_t* off;
    std::size_t fan_in;
    const float* wb;
    const float* bias;
    float* y;
    std::size_t pos;

    template <int NV, bool MaskAll, bool MaskLast>
    DTRAIN_AVX2_FMA void run(std::size_t in, std::size_t vin, std::size_t out, std::size_t vout,
                             __m256i m) const {
        if (fan_in <= sum_block)
            one_chain<NV, MaskAll, MaskLast>(in, vin, out, vout, m);
        else
            blocked<NV, MaskAll, MaskLast>(in, vin, out, vout, m);
    }

    // run() for fan_in <= sum_block: one chain from zero, added to the bias. The same sum as blocked(), as
    // one straight loop, so that the accumulators stay in registers.
    template <int NV, bool MaskAll, bool MaskLast>
    DTRAIN_AVX2_FMA void one_chain(std::size_t in, std::size_t vin, std::size_t out, std::size_t vout,
                                   __m256i m) const {
        __m256 acc[CB][NV];
        direct_chain<CB, NV, MaskAll, MaskLast>(acc, 0, fan_in, tap(in), vin, wb, m);  // fan_in >= 1
        for (int c = 0; c < CB; ++c)
            for (int v = 0; v < NV; ++v)
                acc[c][v] = _mm256_add_ps(_mm256_broadcast_ss(bias + c), acc[c][v]);
        store<NV, MaskAll, MaskLast>(acc, out, vout, m);
    }

    // run() for fan_in > sum_block: the chains, partial sums and total of SumBlocks.
    template <int NV, bool MaskAll, bool MaskLast>
    DTRAIN_AVX2_FMA void blocked(std::size_t in, std::size_t vin, std::size_t out, std::size_t vout,
                                 __m256i m) const {
        __m256 acc[CB][NV], part[CB][NV] = {}, tot[CB][NV] = {};
        for (SumBlocks b(fan_in); b.next();) {
            direct_chain<CB, NV, MaskAll, MaskLast>(acc, b.begin, b.end, tap(in), vin, wb, m);
            direct_chain_end(b, acc, part, tot, bias);
        }
        store<NV, MaskAll, MaskLast>(tot, out, vout, m);
    }

    // Step t's vectors: tap t of the input vectors at offset `in`.
    auto tap(std::size_t in) const {
        return [xi = x + in, o = off](std::size_t t) { return xi + o[t]; };
    }

    // Stores the tile's sums r to the outputs of channel c, vector v.
    template <int NV, bool MaskAll, bool MaskLast>
    DTRAIN_AVX2_FMA void store(const __m256 (&r)[CB][NV], std::size_t out, std::size_t vout,
                               __m256i m) const {
        for (int c = 0; c < CB; ++c)
            for (int v = 0; v < NV; ++v) {
                float* d = y + out + c * pos + v * vout;
                if (MaskAll || (MaskLast && v + 1 == NV))
                    _mm256_maskstore_ps(d, m, r[c][v]);
                else
                    _mm256_storeu_ps(d, r[c][v]);
            }
    }
};

template <int CB>
DTRAIN_AVX2_FMA inline void direct_fwd_channels(const float* x, std::size_t n, const ConvGeometry& g,
                                                const std::size_t* off, const float* wb, std::size_t out,
                                                const float* bias, float* y) {
    const std::size_t pos = g.positions(), in_sample = g.c * g.h * g.w, fan_in = g.c * g.kh * g.kw;
    for (std::size_t s = 0; s < n; ++s)
        direct_sample_tiles(
            g, DirectFwdTile<CB>{x + s * in_sample, off, fan_in, wb, bias, y + s * out * pos, pos});
}

/// Forward pass of a stride-1, unpadded convolution of geometry `g` on `n` samples x [n, c, h, w]:
/// y[s][o][i][j] = bias[o] + sum over taps t = (ci, ki, kj) of w[o][t] * x[s][ci][i + ki][j + kj], y in
/// NCHW [n, out, oh, ow]. `w_packed` holds the weights as pack_direct_weights() left them and `off` the
/// taps as tap_offsets() left them. Requires direct_conv_available(). Each output sums its taps in the fixed
/// blocks of summation.hpp: deterministic, and within float rounding of im2col + GEMM.
DTRAIN_AVX2_KERNEL inline void direct_conv_forward(const float* x, std::size_t n, const ConvGeometry& g,
                                                   const float* w_packed, std::size_t out, const float* bias,
                                                   const std::size_t* off, float* y) {
    const std::size_t pos = g.positions(), fan_in = g.c * g.kh * g.kw;
    for_each_direct_block(out, [&](auto cb, std::size_t o) {
        direct_fwd_channels<decltype(cb)::value>(x, n, g, off, w_packed + o * fan_in, out, bias + o,
                                                 y + o * pos);
    });
}

#endif  // DTRAIN_DIRECT_CONV

}  // namespace dtrain::detail

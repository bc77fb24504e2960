#pragma once

#include <cstddef>

#include <dtrain/nn/layers/detail/im2col.hpp>

namespace dtrain::detail {

/// y[s][c][p] = t[s * pos + p][c] + bias[c]: NCHW output [n, out, pos] from the transposed GEMM product
/// t [n * pos, out] (Conv2d's forward with few output channels).
template <class T>
void nchw_from_rows(const T* t, std::size_t n, std::size_t pos, std::size_t out, const T* bias, T* y) {
    for (std::size_t s = 0; s < n; ++s) {
        const T* src = t + s * pos * out;
        T* dst = y + s * out * pos;
        for (std::size_t c = 0; c < out; ++c) {
            const T b = bias[c];
            for (std::size_t p = 0; p < pos; ++p)
                dst[c * pos + p] = src[p * out + c] + b;
        }
    }
}

/// y[s][c][p] = t[c][s * pos + p] + bias[c]: NCHW output [n, out, pos] from the GEMM product
/// t [out, n * pos].
template <class T>
void nchw_from_cols(const T* t, std::size_t n, std::size_t pos, std::size_t out, const T* bias, T* y) {
    const std::size_t np = n * pos;
    for (std::size_t s = 0; s < n; ++s)
        for (std::size_t c = 0; c < out; ++c) {
            const T b = bias[c];
            const T* src = t + c * np + s * pos;
            T* dst = y + (s * out + c) * pos;
            for (std::size_t p = 0; p < pos; ++p)
                dst[p] = src[p] + b;
        }
}

/// t[c][s * pos + p] = y[s][c][p]: the NCHW gradient [n, out, pos] as the GEMMs' [out, n * pos] matrix.
template <class T>
void cols_from_nchw(const T* y, std::size_t n, std::size_t pos, std::size_t out, T* t) {
    const std::size_t np = n * pos;
    for (std::size_t c = 0; c < out; ++c)
        for (std::size_t s = 0; s < n; ++s) {
            const T* src = y + (s * out + c) * pos;
            for (std::size_t p = 0; p < pos; ++p)
                t[c * np + s * pos + p] = src[p];
        }
}

/// db[c] += the sum of dy [n, out, pos] (NCHW) over the samples and positions of channel c, sample by
/// sample (lane_sum): the bias gradient of the direct and AVX-512 GEMM paths.
template <class T>
void add_bias_grad(const T* dy, std::size_t n, std::size_t out, std::size_t pos, T* db) {
    for (std::size_t c = 0; c < out; ++c)
        for (std::size_t s = 0; s < n; ++s)
            db[c] += lane_sum(dy + (s * out + c) * pos, pos);
}

/// dw [out, c, kh, kw] += dwt^T, where dwt [col_rows, out] is the weight gradient of the used taps of
/// geometry `g` (ConvGeometry::k0h etc.); the other taps' gradient is 0.
template <class T>
void add_used_taps_transposed(const T* dwt, const ConvGeometry& g, std::size_t out, T* dw) {
    const std::size_t nkh = g.k1h - g.k0h, nkw = g.k1w - g.k0w, fan_in = g.c * g.kh * g.kw;
    for (std::size_t o = 0; o < out; ++o)
        for (std::size_t ci = 0, r = 0; ci < g.c; ++ci)
            for (std::size_t ki = 0; ki < nkh; ++ki) {
                T* d = dw + o * fan_in + (ci * g.kh + g.k0h + ki) * g.kw + g.k0w;
                for (std::size_t kj = 0; kj < nkw; ++kj, ++r)
                    d[kj] += dwt[r * out + o];
            }
}

}  // namespace dtrain::detail

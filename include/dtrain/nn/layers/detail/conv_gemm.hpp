#pragma once

/// @file
/// Conv2d<float>'s stride-1 unpadded convolutions whose fan-in is too large for the direct weight gradient,
/// on CPUs with AVX-512F: the three products run on dense_gemm.hpp's register-tile kernel over columns
/// unfolded a chunk of samples at a time (so they stay in cache). The direct AVX2 kernels stay the path
/// without AVX-512F; on a core with full-width AVX-512 units this one runs at up to twice their rate.

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <vector>

#include <dtrain/core/aligned_allocator.hpp>
#include <dtrain/core/cpu.hpp>
#include <dtrain/nn/layers/detail/conv_layout.hpp>
#include <dtrain/nn/layers/detail/dense_gemm.hpp>
#include <dtrain/nn/layers/detail/direct_conv.hpp>
#include <dtrain/nn/layers/detail/direct_conv_grad.hpp>
#include <dtrain/nn/layers/detail/im2col.hpp>

namespace dtrain::detail {

#ifdef DTRAIN_X86_DISPATCH

/// im2col() of a stride-1, unpadded geometry `g` whose output rows are a multiple of 8 wide (the SINGA
/// CNN's second layer: rows of 8): col [fan_in, n * pos] from x [n, c, h, w], 8 floats per load and store.
/// 1.7x im2col()'s speed there, whose row loop does not know the width. Requires cpu_has_avx512f().
DTRAIN_AVX512_KERNEL inline void unfold_rows8(const float* x, std::size_t n, const ConvGeometry& g,
                                              float* col) {
    const std::size_t pos = g.positions(), ld = n * pos, plane = g.h * g.w;
    for (std::size_t s = 0; s < n; ++s)
        for (std::size_t ci = 0, r = 0; ci < g.c; ++ci)
            for (std::size_t ki = 0; ki < g.kh; ++ki)
                for (std::size_t kj = 0; kj < g.kw; ++kj, ++r) {
                    const float* src = x + (s * g.c + ci) * plane + ki * g.w + kj;
                    float* dst = col + r * ld + s * pos;
                    if (g.ow == 8) {  // one vector per row (the SINGA CNN), the row loop unrolled
                        DTRAIN_UNROLL
                        for (std::size_t oy = 0; oy < g.oh; ++oy)
                            _mm256_storeu_ps(dst + oy * 8, _mm256_loadu_ps(src + oy * g.w));
                        continue;
                    }
                    for (std::size_t oy = 0; oy < g.oh; ++oy, src += g.w)
                        for (std::size_t j = 0; j < g.ow; j += 8, dst += 8)
                            _mm256_storeu_ps(dst, _mm256_loadu_ps(src + j));
                }
}

/// col2im() of the geometries of unfold_rows8(): dx [n, c, h, w] = col [fan_in, n * pos] folded back, as
/// read-add-writes of 8 floats ordered by kernel column, then row, then output row, so that two adds that
/// overlap in part are far apart (no stalled store forwarding): each input sums its taps in that order.
/// 1.7x col2im()'s speed on the SINGA CNN. Requires cpu_has_avx512f().
DTRAIN_AVX512_KERNEL inline void fold_rows8(const float* col, std::size_t n, const ConvGeometry& g,
                                            float* dx) {
    const std::size_t pos = g.positions(), ld = n * pos, plane = g.h * g.w;
    for (std::size_t s = 0; s < n; ++s)
        for (std::size_t ci = 0; ci < g.c; ++ci) {
            float* d = dx + (s * g.c + ci) * plane;
            std::fill(d, d + plane, 0.0f);
            for (std::size_t kj = 0; kj < g.kw; ++kj)
                for (std::size_t ki = 0; ki < g.kh; ++ki) {
                    const float* src = col + ((ci * g.kh + ki) * g.kw + kj) * ld + s * pos;
                    float* dst = d + ki * g.w + kj;
                    for (std::size_t oy = 0; oy < g.oh; ++oy, dst += g.w)
                        for (std::size_t j = 0; j < g.ow; j += 8, src += 8)
                            _mm256_storeu_ps(dst + j,
                                             _mm256_add_ps(_mm256_loadu_ps(dst + j), _mm256_loadu_ps(src)));
                }
        }
}

#else  // never called: GemmAvx512Conv does not apply without the AVX-512 kernels

inline void fold_rows8(const float*, std::size_t, const ConvGeometry&, float*) {
    throw std::logic_error("fold_rows8: not compiled for this target (check GemmAvx512Conv::applies())");
}

inline void unfold_rows8(const float*, std::size_t, const ConvGeometry&, float*) {
    throw std::logic_error("unfold_rows8: not compiled for this target (check GemmAvx512Conv::applies())");
}

#endif  // DTRAIN_X86_DISPATCH

/// The GEMM path of one Conv2d<float> layer (GemmAvx512Conv in nn/kernels/). Per chunk of samples the
/// input is unfolded into columns cols [fan_in, chunk * positions] (unfold_rows8 where the output rows are a
/// multiple of 8 wide, else im2col), then
/// - forward:  y_s [out, pos] = bias + W [out, fan_in] * cols_s, the bias starting every sum and the taps
///   added in order: bitwise the result of direct_conv_forward();
/// - dW^T [fan_in, out] (+)= cols * dY^T, with dY transposed per sample; every weight's gradient is one
///   chain over the batch's positions in order, so it does not depend on the chunk size;
/// - dX: dcols_s [fan_in, pos] = W^T * dY_s, written over the columns, folded into dX (fold_rows8 where the
///   output rows are a multiple of 8 wide, else col2im).
/// Scratch: the columns of a chunk (col_chunk_samples), dY^T of a chunk and dW^T; nothing is allocated after
/// prepare().
class GemmConv {
public:
    /// Sizes the scratch for `n` samples of geometry `g` into `out` channels; requires
    /// direct_conv_geometry(g) and cpu_has_avx512f().
    void prepare(const ConvGeometry& g, std::size_t n, std::size_t out) {
        g_ = g;
        n_ = n;
        out_ = out;
        const std::size_t rows = g.c * g.kh * g.kw, pos = g.positions();
        chunk_ = col_chunk_samples(n, sizeof(float) * rows * pos);
        cols_.resize(rows * chunk_ * pos);
        gt_.resize(chunk_ * pos * out);
        dwt_.resize(rows * out);
    }

    /// y [n, out, oh, ow] = the convolution of x [n, c, h, w] with weights w [out, fan_in] and `bias`.
    void forward(const float* x, const float* w, const float* bias, float* y) {
        const std::size_t rows = fan_in(), pos = g_.positions(), in_sample = g_.c * g_.h * g_.w;
        for (std::size_t s0 = 0; s0 < n_; s0 += chunk_) {
            const std::size_t m = std::min(chunk_, n_ - s0), cp = m * pos;
            unfold(x + s0 * in_sample, m);
            for (std::size_t s = 0; s < m; ++s) {
                float* ys = y + (s0 + s) * out_ * pos;
                for (std::size_t c = 0; c < out_; ++c)
                    std::fill(ys + c * pos, ys + (c + 1) * pos, bias[c]);
                gemm_avx512(true, out_, pos, rows, w, rows, 1, cols_.data() + s * pos, cp, ys, pos);
            }
        }
    }

    /// db += the sums of dy over samples and positions, dw += the weight gradient, and dx = the input
    /// gradient unless dx is null; x is the forward pass's input, dy [n, out, oh, ow] its output's gradient.
    void backward(const float* x, const float* dy, const float* w, float* dw, float* db, float* dx) {
        backward_weights(x, dy, dw, db);
        if (dx != nullptr) backward_data(dy, w, dx);
    }

    /// The bias and weight gradients of backward(), added to db and dw.
    void backward_weights(const float* x, const float* dy, float* dw, float* db) {
        const std::size_t rows = fan_in(), pos = g_.positions(), in_sample = g_.c * g_.h * g_.w;
        add_bias_grad(dy, n_, out_, pos, db);
        for (std::size_t s0 = 0; s0 < n_; s0 += chunk_) {
            const std::size_t m = std::min(chunk_, n_ - s0), cp = m * pos;
            unfold(x + s0 * in_sample, m);
            for (std::size_t s = 0; s < m; ++s)
                transpose_avx512(out_, pos, dy + (s0 + s) * out_ * pos, pos, gt_.data() + s * pos * out_,
                                 out_, nullptr);
            gemm_avx512(s0 > 0, rows, out_, cp, cols_.data(), cp, 1, gt_.data(), out_, dwt_.data(), out_);
        }
        add_used_taps_transposed(dwt_.data(), g_, out_, dw);
    }

    /// The input gradient of backward(), written to dx: dcols_s = W^T * dY_s a chunk at a time, folded.
    void backward_data(const float* dy, const float* w, float* dx) {
        const std::size_t rows = fan_in(), pos = g_.positions(), in_sample = g_.c * g_.h * g_.w;
        for (std::size_t s0 = 0; s0 < n_; s0 += chunk_) {
            const std::size_t m = std::min(chunk_, n_ - s0), cp = m * pos;
            for (std::size_t s = 0; s < m; ++s)
                gemm_avx512(false, rows, pos, out_, w, 1, rows, dy + (s0 + s) * out_ * pos, pos,
                            cols_.data() + s * pos, cp);
            if (g_.ow % 8 == 0)
                fold_rows8(cols_.data(), m, g_, dx + s0 * in_sample);
            else
                col2im(cols_.data(), m, g_, dx + s0 * in_sample);
        }
    }

private:
    std::size_t fan_in() const { return g_.c * g_.kh * g_.kw; }

    // The columns of `m` samples from x into cols_.
    void unfold(const float* x, std::size_t m) {
        if (g_.ow % 8 == 0)
            unfold_rows8(x, m, g_, cols_.data());
        else
            im2col(x, m, g_, cols_.data());
    }

    ConvGeometry g_;
    std::size_t n_ = 0, out_ = 0, chunk_ = 1;
    AlignedVector<float> cols_;  // the columns of one chunk [fan_in, chunk * pos], or their gradient
    AlignedVector<float> gt_;    // dY of one chunk transposed: [chunk * pos, out]
    AlignedVector<float> dwt_;   // dW^T [fan_in, out] of one backward
};

}  // namespace dtrain::detail

#pragma once

/// @file
/// The reference convolution: im2col + BLAS, for every element type and CPU.

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include <dtrain/core/aligned_allocator.hpp>
#include <dtrain/core/blas.hpp>
#include <dtrain/core/cpu.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/nn/kernels/conv_algorithm.hpp>
#include <dtrain/nn/layers/detail/conv_layout.hpp>
#include <dtrain/nn/layers/detail/im2col.hpp>

namespace dtrain {

/// The batch unfolded (im2col) into one column matrix [rows, batch * positions] (rows: the used taps,
/// ConvGeometry::col_rows()) times the weights in ONE GEMM (transposed with at most 32 output channels,
/// which OpenBLAS runs faster), reordered into NCHW with the bias. backward_weights computes
/// dW^T = cols * dY^T (with the longer side, rows, as the GEMM's M), reusing the columns of a forward of the
/// same input (same pointer) that no backward has consumed yet; backward_data computes dcols = W^T * dY and
/// folds it into dX (col2im). Always applies: what every CPU without AVX2 runs, and DTRAIN_KERNELS=reference.
template <class T>
class Im2colConv final : public ConvAlgorithm<T> {
public:
    /// Every problem on every CPU.
    static bool applies(const ConvProblem&, const KernelCpu&) noexcept { return true; }
    /// "im2col + BLAS".
    static constexpr const char* label = "im2col + BLAS";
    /// BLAS may sum a sample's products differently with another batch size: not split.
    static constexpr bool splits_batch = false;

    std::string name() const override { return label; }

    void prepare(const ConvProblem& p) override {
        p_ = p;
        const std::size_t np = p.batch * p.g.positions(), rows = p.g.col_rows();
        cols_.resize(rows * np);
        tmp_.resize(p.out * np);
        dwt_.resize(p.out * rows);
        wused_.resize(p.g.full_kernel() ? 0 : p.out * rows);
        cols_src_ = nullptr;
    }

    void forward(const T* x, const T* w, const T* bias, T* y) override {
        detail::with_avx2([&] {
            const std::size_t n = p_.batch, out = p_.out, pos = p_.g.positions(), np = n * pos;
            const std::size_t rows = p_.g.col_rows();
            detail::im2col(x, n, p_.g, cols_.data());
            cols_src_ = x;
            const T* wu = used_weights_ = used_weights(w);
            if (rows == 0) std::fill(tmp_.begin(), tmp_.end(), T(0));  // every tap sees only padding
            if (rows > 0 && out <= narrow_out) {
                // tmp [n*pos, out] = cols^T [n*pos, rows] * W^T [rows, out], then
                // y[s][c][p] = tmp[s*pos + p][c] + bias[c]
                detail::gemm(true, true, np, out, rows, T(1), cols_.data(), np, wu, rows, T(0), tmp_.data(),
                             out);
                detail::nchw_from_rows(tmp_.data(), n, pos, out, bias, y);
                return;
            }
            // tmp [out, n*pos] = W [out, rows] * cols [rows, n*pos], then
            // y[s][c][p] = tmp[c][s*pos + p] + bias[c]
            if (rows > 0)
                detail::gemm(false, false, out, np, rows, T(1), wu, rows, cols_.data(), np, T(0), tmp_.data(),
                             np);
            detail::nchw_from_cols(tmp_.data(), n, pos, out, bias, y);
        });
    }

    void backward_weights(const T* x, const T* dy, T* dw, T* db) override {
        detail::with_avx2([&] {
            const std::size_t out = p_.out, np = p_.batch * p_.g.positions(), rows = p_.g.col_rows();
            detail::cols_from_nchw(dy, p_.batch, p_.g.positions(), out, tmp_.data());
            for (std::size_t c = 0; c < out; ++c)
                db[c] += detail::lane_sum(tmp_.data() + c * np, np);
            after_forward_ = cols_src_ == x;  // then cols_ and used_weights_ are that forward's
            if (!after_forward_) detail::im2col(x, p_.batch, p_.g, cols_.data());
            // dW^T [rows, out] = cols [rows, n*pos] * dY^T, then dW [out, rows] += its transpose. Taps that
            // see only padding are not in the columns; their weight gradient is 0.
            if (rows > 0)
                detail::gemm(false, true, rows, out, np, T(1), cols_.data(), np, tmp_.data(), np, T(0),
                             dwt_.data(), out);
            detail::add_used_taps_transposed(dwt_.data(), p_.g, out, dw);
            cols_src_ = nullptr;
        });
    }

    void backward_data(const T* dy, const T* w, T* dx) override {
        (void)dy;  // backward_weights left it in tmp_ as [out, n*pos]
        detail::with_avx2([&] {
            const T* wu = after_forward_ ? used_weights_ : used_weights(w);
            const std::size_t np = p_.batch * p_.g.positions(), rows = p_.g.col_rows();
            // dcols [rows, n*pos] = W^T * dY, written over the columns, then folded back into dX
            if (rows > 0)
                detail::gemm(true, false, rows, np, p_.out, T(1), wu, rows, tmp_.data(), np, T(0),
                             cols_.data(), np);
            detail::col2im(cols_.data(), p_.batch, p_.g, dx);
        });
    }

private:
    // Output channels up to which forward computes the transposed product.
    static constexpr std::size_t narrow_out = 32;

    // The weights of the used taps as a [out, col_rows()] matrix: w itself when every tap is used, else a
    // copy of the used [k0h, k1h) x [k0w, k1w) window of each kernel.
    const T* used_weights(const T* w) {
        const detail::ConvGeometry& g = p_.g;
        if (g.full_kernel()) return w;
        const std::size_t nkh = g.k1h - g.k0h, nkw = g.k1w - g.k0w, fan_in = p_.fan_in();
        T* d = wused_.data();
        for (std::size_t c = 0; c < p_.out; ++c)
            for (std::size_t ci = 0; ci < g.c; ++ci)
                for (std::size_t ki = 0; ki < nkh; ++ki, d += nkw) {
                    const T* src = w + c * fan_in + (ci * g.kh + g.k0h + ki) * g.kw + g.k0w;
                    std::copy(src, src + nkw, d);
                }
        return wused_.data();
    }

    ConvProblem p_;
    detail::AlignedVector<T> cols_;  // column matrix [col_rows, n*OH*OW] of the last forward, or its gradient
    // the forward's GEMM output ([out, n*OH*OW] or [n*OH*OW, out]); dY as [out, n*OH*OW]
    detail::AlignedVector<T> tmp_;
    detail::AlignedVector<T> dwt_;  // the weight gradient of one backward, transposed: [col_rows, out]
    // the used taps' weights [out, col_rows] when some taps see only padding
    detail::AlignedVector<T> wused_;
    const T* cols_src_ = nullptr;      // input whose columns cols_ holds (nullptr: none)
    const T* used_weights_ = nullptr;  // used_weights() of the last forward (valid while cols_src_ is set)
    bool after_forward_ = false;       // backward_weights found the columns of its input's forward
};

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class Im2colConv<float>)
DTRAIN_PRECOMPILED_INSTANCE(class Im2colConv<double>)

}  // namespace dtrain

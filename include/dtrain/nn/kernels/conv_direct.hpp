#pragma once

/// @file
/// The direct convolutions of stride 1 without padding (AVX2 and FMA): no columns in the forward pass and
/// the input gradient; the weight gradient direct for small fan-ins, else im2col + BLAS a chunk at a time.

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include <dtrain/core/aligned_allocator.hpp>
#include <dtrain/core/blas.hpp>
#include <dtrain/core/cpu.hpp>
#include <dtrain/nn/kernels/conv_algorithm.hpp>
#include <dtrain/nn/layers/detail/conv_layout.hpp>
#include <dtrain/nn/layers/detail/direct_conv.hpp>
#include <dtrain/nn/layers/detail/direct_conv_grad.hpp>
#include <dtrain/nn/layers/detail/im2col.hpp>

namespace dtrain {

namespace detail {

/// What both direct algorithms share: the forward pass and the input gradient by the direct kernels of
/// direct_conv.hpp and direct_conv_grad.hpp (the bias added to the first partial sum), from weights packed
/// per call.
class DirectConvBase : public ConvAlgorithm<float> {
public:
    void prepare(const ConvProblem& p) override {
        p_ = p;
        wt_.resize(p.out * p.fan_in());
        offsets_.resize(p.fan_in());
        tap_offsets(p.g, offsets_.data());
    }

    void forward([[maybe_unused]] const float* x, [[maybe_unused]] const float* w,
                 [[maybe_unused]] const float* bias, [[maybe_unused]] float* y) override {
#ifdef DTRAIN_DIRECT_CONV
        with_avx2([&] {
            pack_direct_weights(w, p_.out, p_.fan_in(), p_.fan_in(), 1, wt_.data());
            direct_conv_forward(x, p_.batch, p_.g, wt_.data(), p_.out, bias, offsets_.data(), y);
        });
#endif
    }

    void backward_data([[maybe_unused]] const float* dy, [[maybe_unused]] const float* w,
                       [[maybe_unused]] float* dx) override {
#ifdef DTRAIN_DIRECT_CONV
        with_avx2([&] {
            pack_direct_dx_weights(w, p_.g, p_.out, wt_.data());
            direct_conv_input_grad(dy, p_.batch, p_.g, wt_.data(), p_.out, offsets_.data(), dx);
        });
#endif
    }

protected:
    ConvProblem p_;
    detail::AlignedVector<float> wt_;   // the weights packed by pack_direct_weights (or per tap block)
    std::vector<std::size_t> offsets_;  // each tap's offset in an input sample (tap_offsets)
};

}  // namespace detail

/// Direct forward, weight gradient and input gradient, for stride 1, no padding and a fan-in of at most
/// detail::direct_conv_max_fan_in (the SINGA CNN's first layer), with AVX2 and FMA.
class DirectConv final : public detail::DirectConvBase {
public:
    /// Stride 1, no padding, fan-in <= detail::direct_conv_max_fan_in, and AVX2 with FMA.
    static bool applies(const ConvProblem& p, const KernelCpu& cpu) noexcept {
        return cpu.avx2_fma && detail::direct_conv_geometry(p.g) &&
               p.fan_in() <= detail::direct_conv_max_fan_in;
    }
    /// "direct (AVX2)".
    static constexpr const char* label = "direct (AVX2)";
    /// A sample's forward and input gradient do not depend on the rest of its batch.
    static constexpr bool splits_batch = true;

    std::string name() const override { return label; }

    void backward_weights([[maybe_unused]] const float* x, const float* dy, float* dw, float* db) override {
        detail::with_avx2([&] {
            detail::add_bias_grad(dy, p_.batch, p_.out, p_.g.positions(), db);
#ifdef DTRAIN_DIRECT_CONV
            detail::direct_conv_weight_grad(x, p_.batch, p_.g, dy, p_.out, offsets_.data(), dw);
#endif
        });
    }
};

/// Direct forward and input gradient; the weight gradient dW^T += cols * dY^T by BLAS over columns unfolded
/// a chunk of samples at a time (detail::col_chunk_samples, so they stay in cache). Stride 1, no padding,
/// with AVX2 and FMA.
class DirectConvBlasWeights final : public detail::DirectConvBase {
public:
    /// Stride 1, no padding, and AVX2 with FMA.
    static bool applies(const ConvProblem& p, const KernelCpu& cpu) noexcept {
        return cpu.avx2_fma && detail::direct_conv_geometry(p.g);
    }
    /// "direct (AVX2), weight gradient im2col + BLAS".
    static constexpr const char* label = "direct (AVX2), weight gradient im2col + BLAS";
    /// A sample's forward and input gradient do not depend on the rest of its batch.
    static constexpr bool splits_batch = true;

    std::string name() const override { return label; }

    void prepare(const ConvProblem& p) override {
        DirectConvBase::prepare(p);
        const std::size_t rows = p.g.col_rows(), pos = p.g.positions();
        chunk_ = detail::col_chunk_samples(p.batch, sizeof(float) * rows * pos);
        cols_.resize(rows * chunk_ * pos);
        tmp_.resize(p.out * p.batch * pos);
        dwt_.resize(p.out * rows);
    }

    void backward_weights(const float* x, const float* dy, float* dw, float* db) override {
        detail::with_avx2([&] {
            const std::size_t out = p_.out, n = p_.batch, pos = p_.g.positions(), np = n * pos;
            const std::size_t rows = p_.g.col_rows(), in_sample = p_.g.c * p_.g.h * p_.g.w;
            detail::cols_from_nchw(dy, n, pos, out, tmp_.data());
            for (std::size_t c = 0; c < out; ++c)
                db[c] += detail::lane_sum(tmp_.data() + c * np, np);
            for (std::size_t s0 = 0; s0 < n; s0 += chunk_) {
                const std::size_t m = std::min(chunk_, n - s0), cp = m * pos;
                detail::im2col(x + s0 * in_sample, m, p_.g, cols_.data());
                detail::gemm(false, true, rows, out, cp, 1.0f, cols_.data(), cp, tmp_.data() + s0 * pos, np,
                             s0 == 0 ? 0.0f : 1.0f, dwt_.data(), out);
            }
            detail::add_used_taps_transposed(dwt_.data(), p_.g, out, dw);
        });
    }

private:
    std::size_t chunk_ = 1;              // samples per column chunk
    detail::AlignedVector<float> cols_;  // the columns of one chunk [rows, chunk * pos]
    detail::AlignedVector<float> tmp_;   // dY as [out, n * pos]
    detail::AlignedVector<float> dwt_;   // dW^T [rows, out] of one backward
};

}  // namespace dtrain

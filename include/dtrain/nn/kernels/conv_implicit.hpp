#pragma once

/// @file
/// The implicit-GEMM convolutions (strided or padded), on AVX-512 or AVX2 register tiles.

#include <string>

#include <dtrain/core/cpu.hpp>
#include <dtrain/nn/kernels/conv_algorithm.hpp>
#include <dtrain/nn/kernels/conv_direct.hpp>
#include <dtrain/nn/layers/detail/implicit_conv.hpp>

namespace dtrain {

/// detail::ImplicitConv: implicit GEMMs per class of output positions with the same taps, the input read
/// in place, on the AVX-512 tiles (Avx512 true) or the AVX2 ones; the two give bitwise the same results.
/// Applies to the convolutions the direct kernels do not take (strided or padded) with at least one tap
/// that meets the input.
template <bool Avx512>
class ImplicitGemmConv final : public detail::ForwardingConv<detail::ImplicitConv> {
public:
    /// Strided or padded, a used tap, and AVX-512F (Avx512) or AVX2 with FMA.
    static bool applies(const ConvProblem& p, const KernelCpu& cpu) noexcept {
        return (Avx512 ? cpu.avx512f : cpu.avx2_fma) && p.g.col_rows() > 0 &&
               !detail::direct_conv_geometry(p.g);
    }
    /// "implicit GEMM (AVX-512)" or "implicit GEMM (AVX2)".
    static constexpr const char* label = Avx512 ? "implicit GEMM (AVX-512)" : "implicit GEMM (AVX2)";
    /// A sample's forward and input gradient do not depend on the rest of its batch; split, each part's
    /// input gradient makes its own rows of dy instead of reusing those of the weight gradient.
    static constexpr bool splits_batch = true;

    std::string name() const override { return label; }

    void prepare(const ConvProblem& p) override { conv_.prepare(p.g, p.batch, p.out, false, Avx512); }
};

}  // namespace dtrain

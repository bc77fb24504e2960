#pragma once

/// @file
/// The stride-1 unpadded convolutions with a large fan-in on the AVX-512 GEMM kernel.

#include <string>

#include <dtrain/core/cpu.hpp>
#include <dtrain/nn/kernels/conv_algorithm.hpp>
#include <dtrain/nn/kernels/conv_direct.hpp>
#include <dtrain/nn/layers/detail/conv_gemm.hpp>

namespace dtrain {

/// detail::GemmConv: the three products on the AVX-512 register-tile GEMM over columns unfolded a chunk of
/// samples at a time; forward bitwise the direct kernel's. Applies to stride 1, no padding and a fan-in
/// above detail::direct_conv_max_fan_in (the SINGA CNN's second layer), with AVX-512F.
class GemmAvx512Conv final : public detail::ForwardingConv<detail::GemmConv> {
public:
    /// Stride 1, no padding, fan-in > detail::direct_conv_max_fan_in, and AVX-512F.
    static bool applies(const ConvProblem& p, const KernelCpu& cpu) noexcept {
        return cpu.avx512f && detail::direct_conv_geometry(p.g) &&
               p.fan_in() > detail::direct_conv_max_fan_in;
    }
    /// "GEMM (AVX-512)".
    static constexpr const char* label = "GEMM (AVX-512)";
    /// A sample's forward and input gradient do not depend on the rest of its batch.
    static constexpr bool splits_batch = true;

    std::string name() const override { return label; }

    void prepare(const ConvProblem& p) override { conv_.prepare(p.g, p.batch, p.out); }
};

}  // namespace dtrain

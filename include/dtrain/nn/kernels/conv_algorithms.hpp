#pragma once

/// @file
/// The ordered list of convolution algorithms Conv2d chooses from.

#include <memory>
#include <type_traits>
#include <vector>

#include <dtrain/nn/kernels/conv_algorithm.hpp>
#include <dtrain/nn/kernels/conv_direct.hpp>
#include <dtrain/nn/kernels/conv_gemm_avx512.hpp>
#include <dtrain/nn/kernels/conv_im2col.hpp>
#include <dtrain/nn/kernels/conv_implicit.hpp>

namespace dtrain {

/// A registered convolution algorithm: its name, its applies() and a factory.
template <class T>
struct ConvAlgorithmEntry {
    const char* name;                                                ///< the algorithm's label
    bool (*applies)(const ConvProblem&, const KernelCpu&) noexcept;  ///< the algorithm's applies()
    std::unique_ptr<ConvAlgorithm<T>> (*make)();                     ///< a new, unprepared instance
    bool splits_batch = false;  ///< the algorithm's splits_batch (ConvAlgorithm): Conv2d may split a batch
};

namespace detail {

template <class A, class T>
ConvAlgorithmEntry<T> conv_entry() {
    return {A::label, &A::applies,
            []() -> std::unique_ptr<ConvAlgorithm<T>> { return std::make_unique<A>(); }, A::splits_batch};
}

/// Algorithms registered by compiled sources that a program links (src/onednn.cpp), placed after the
/// native kernels and before the reference.
inline std::vector<ConvAlgorithmEntry<float>>& extra_conv_algorithms() {
    static std::vector<ConvAlgorithmEntry<float>> extra;
    return extra;
}

}  // namespace detail

/// The convolution algorithms for element type T, fastest first where several apply: for float the AVX-512
/// GEMM, the direct kernels (fan-in <= 32 first), the implicit GEMMs (AVX-512, then AVX2), the linked
/// extras (oneDNN: nn/kernels/onednn.hpp; under DTRAIN_KERNELS=onednn the native kernels are off), then the
/// reference im2col + BLAS, which applies to everything and is the only one for other types.
template <class T>
const std::vector<ConvAlgorithmEntry<T>>& conv_algorithms() {
    static const std::vector<ConvAlgorithmEntry<T>> list = [] {
        std::vector<ConvAlgorithmEntry<T>> l;
        if constexpr (std::is_same_v<T, float>) {
            l.push_back(detail::conv_entry<GemmAvx512Conv, T>());
            l.push_back(detail::conv_entry<DirectConv, T>());
            l.push_back(detail::conv_entry<DirectConvBlasWeights, T>());
            l.push_back(detail::conv_entry<ImplicitGemmConv<true>, T>());
            l.push_back(detail::conv_entry<ImplicitGemmConv<false>, T>());
            const auto& extra = detail::extra_conv_algorithms();
            l.insert(l.end(), extra.begin(), extra.end());
        }
        l.push_back(detail::conv_entry<Im2colConv<T>, T>());
        return l;
    }();
    return list;
}

/// The first of conv_algorithms<T>() that applies to `problem` on `cpu` (by default this process's
/// kernel_cpu(), which follows DTRAIN_KERNELS); the reference when no other does.
template <class T>
const ConvAlgorithmEntry<T>& choose_conv_algorithm(const ConvProblem& problem,
                                                   const KernelCpu& cpu = kernel_cpu()) {
    const auto& list = conv_algorithms<T>();
    for (const auto& e : list)
        if (e.applies(problem, cpu)) return e;
    return list.back();
}

}  // namespace dtrain

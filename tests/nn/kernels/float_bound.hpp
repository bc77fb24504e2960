#pragma once

// The normwise error bound the kernel algorithm tests hold every algorithm to, against float64:
// ||r - r64|| / ||r64|| <= 2 u sqrt(m) + 4 u with u = 2^-24 and m the length of the result's sums (the
// fan-in for the output, output channels x taps for the input gradient, batch x positions for the
// parameter gradients): float rounding, with room for any summation order a BLAS or a kernel may take,
// while a wrong tap, lane, tail or padding is off by orders of magnitude more. The finer accuracy of the
// native kernels' fixed blocks is checked in dense_gemm_test.cpp and implicit_conv_test.cpp.

#include <cmath>
#include <cstddef>
#include <vector>

#include <dtrain/core/cpu.hpp>
#include <dtrain/nn/kernels/conv_algorithm.hpp>
#include <dtrain/nn/kernels/onednn.hpp>

namespace dtrain::test {

/// ||a - b|| / ||b|| over all elements (||a - b|| when b is 0).
template <class A, class B>
double relative_error(const A& a, const B& b) {
    double num = 0.0, den = 0.0;
    auto ib = b.begin();
    for (auto ia = a.begin(); ia != a.end(); ++ia, ++ib) {
        const double d = double(*ia) - double(*ib);
        num += d * d;
        den += double(*ib) * double(*ib);
    }
    return den == 0.0 ? std::sqrt(num) : std::sqrt(num / den);
}

/// The bound above for sums of length m.
inline double float_sum_bound(std::size_t m) {
    const double u = std::ldexp(1.0, -24);
    return 2.0 * u * std::sqrt(double(m)) + 4.0 * u;
}

/// Everything this CPU runs, whatever DTRAIN_KERNELS says: the algorithm tests run every algorithm the
/// machine can.
inline KernelCpu full_cpu() {
    KernelCpu cpu;
    cpu.avx2_fma = detail::cpu_has_avx2_fma();
    cpu.avx512f = cpu.avx2_fma && detail::cpu_has_avx512f();
    cpu.onednn = onednn_linked();
    return cpu;
}

/// Every kernel set this program can run: onednn only when linked.
inline std::vector<detail::KernelSet> kernel_sets_here() {
    std::vector<detail::KernelSet> sets{detail::KernelSet::native, detail::KernelSet::avx2,
                                        detail::KernelSet::reference};
    if (onednn_linked()) sets.push_back(detail::KernelSet::onednn);
    return sets;
}

}  // namespace dtrain::test

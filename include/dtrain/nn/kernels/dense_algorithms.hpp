#pragma once

/// @file
/// The matrix-product algorithms of Dense and the ordered list Dense chooses from (the first that applies).

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <dtrain/core/aligned_allocator.hpp>
#include <dtrain/core/blas.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/nn/kernels/dense_algorithm.hpp>
#include <dtrain/nn/layers/detail/dense_gemm.hpp>
#include <dtrain/nn/layers/detail/dense_gemm_avx2.hpp>

namespace dtrain {

/// The reference: BLAS gemm for all three products, every element type and CPU.
template <class T>
class BlasDense final : public DenseAlgorithm<T> {
public:
    /// Every problem on every CPU.
    static bool applies(const DenseProblem&, const KernelCpu&) noexcept { return true; }
    /// "BLAS".
    static constexpr const char* label = "BLAS";
    /// BLAS may sum a sample's products differently with another batch size: not split.
    static constexpr bool splits_batch = false;

    std::string name() const override { return label; }
    void prepare(const DenseProblem& p) override { p_ = p; }

    void forward(const T* x, const T* w, const T* bias, T* y) override {
        for (std::size_t r = 0; r < p_.batch; ++r)
            std::copy(bias, bias + p_.out, y + r * p_.out);
        detail::gemm(false, true, p_.batch, p_.out, p_.in, T(1), x, p_.in, w, p_.in, T(1), y, p_.out);
    }

    void backward_weights(const T* x, const T* dy, std::size_t lo, std::size_t hi, bool add, T* dw) override {
        detail::gemm(true, false, hi - lo, p_.in, p_.batch, T(1), dy + lo, p_.out, x, p_.in,
                     add ? T(1) : T(0), dw + lo * p_.in, p_.in);
    }

    void backward_data(const T* dy, const T* w, T* dx) override {
        detail::gemm(false, false, p_.batch, p_.in, p_.out, T(1), dy, p_.out, w, p_.in, T(0), dx, p_.in);
    }

private:
    DenseProblem p_;
};

/// The register-tile GEMM of detail/dense_gemm.hpp (Avx512: AVX-512F) or detail/dense_gemm_avx2.hpp (AVX2 and
/// FMA): every output summed in one fixed order of blocks, the same in both, so that the two give bitwise
/// the same results; the forward pass on the transposed input.
template <bool Avx512>
class GemmDense final : public DenseAlgorithm<float> {
public:
    /// AVX-512F, or AVX2 and FMA.
    static bool applies(const DenseProblem&, const KernelCpu& cpu) noexcept {
        return Avx512 ? cpu.avx512f : cpu.avx2_fma;
    }
    /// "GEMM (AVX-512)" or "GEMM (AVX2)".
    static constexpr const char* label = Avx512 ? "GEMM (AVX-512)" : "GEMM (AVX2)";
    /// A sample's forward and input gradient do not depend on the rest of its batch.
    static constexpr bool splits_batch = true;

    std::string name() const override { return label; }

    void prepare(const DenseProblem& p) override {
        p_ = p;
        xt_.resize(p.in * p.batch);
        ot_.resize(p.out * p.batch);
    }

    void forward(const float* x, const float* w, const float* bias, float* y) override {
        (Avx512 ? detail::dense_forward_avx512 : detail::dense_forward_avx2)(p_.batch, p_.in, p_.out, x, w,
                                                                             bias, xt_.data(), ot_.data(), y);
    }

    void backward_weights(const float* x, const float* dy, std::size_t lo, std::size_t hi, bool add,
                          float* dw) override {
        gemm(add, hi - lo, p_.in, p_.batch, dy + lo, 1, p_.out, x, p_.in, dw + lo * p_.in, p_.in);
    }

    void backward_data(const float* dy, const float* w, float* dx) override {
        gemm(false, p_.batch, p_.in, p_.out, dy, p_.out, 1, w, p_.in, dx, p_.in);
    }

private:
    static void gemm(bool add, std::size_t m, std::size_t n, std::size_t k, const float* a, std::size_t ars,
                     std::size_t aks, const float* b, std::size_t ldb, float* c, std::size_t ldc) {
        (Avx512 ? detail::gemm_avx512 : detail::gemm_avx2)(add, m, n, k, a, ars, aks, b, ldb, c, ldc, {});
    }

    DenseProblem p_;
    detail::AlignedVector<float> xt_, ot_;  // the input and output transposed, [in, batch] and [out, batch]
};

/// The AVX-512 GEMM.
using GemmAvx512Dense = GemmDense<true>;
/// The AVX2 GEMM (CPUs without AVX-512).
using GemmAvx2Dense = GemmDense<false>;

/// A registered Dense algorithm: its name, its applies() and a factory.
template <class T>
struct DenseAlgorithmEntry {
    const char* name;                                                 ///< the algorithm's label
    bool (*applies)(const DenseProblem&, const KernelCpu&) noexcept;  ///< the algorithm's applies()
    std::unique_ptr<DenseAlgorithm<T>> (*make)();                     ///< a new, unprepared instance
    bool splits_batch = false;  ///< the algorithm's splits_batch: Dense may split a batch over threads
};

namespace detail {

/// Algorithms registered by compiled sources that a program links (src/onednn.cpp), placed after the
/// native kernels and before the reference.
inline std::vector<DenseAlgorithmEntry<float>>& extra_dense_algorithms() {
    static std::vector<DenseAlgorithmEntry<float>> extra;
    return extra;
}

}  // namespace detail

/// The Dense algorithms for element type T, fastest first: for float the AVX-512 GEMM, the AVX2 GEMM, the
/// linked extras (oneDNN: nn/kernels/onednn.hpp), then the reference BLAS, which applies to everything and
/// is the only one for other types.
template <class T>
const std::vector<DenseAlgorithmEntry<T>>& dense_algorithms() {
    static const std::vector<DenseAlgorithmEntry<T>> list = [] {
        std::vector<DenseAlgorithmEntry<T>> l;
        if constexpr (std::is_same_v<T, float>) {
            l.push_back(
                {GemmAvx512Dense::label, &GemmAvx512Dense::applies,
                 []() -> std::unique_ptr<DenseAlgorithm<T>> { return std::make_unique<GemmAvx512Dense>(); },
                 GemmAvx512Dense::splits_batch});
            l.push_back(
                {GemmAvx2Dense::label, &GemmAvx2Dense::applies,
                 []() -> std::unique_ptr<DenseAlgorithm<T>> { return std::make_unique<GemmAvx2Dense>(); },
                 GemmAvx2Dense::splits_batch});
            const auto& extra = detail::extra_dense_algorithms();
            l.insert(l.end(), extra.begin(), extra.end());
        }
        l.push_back({BlasDense<T>::label, &BlasDense<T>::applies, []() -> std::unique_ptr<DenseAlgorithm<T>> {
                         return std::make_unique<BlasDense<T>>();
                     }});
        return l;
    }();
    return list;
}

/// The first of dense_algorithms<T>() that applies to `problem` on `cpu` (by default kernel_cpu()).
template <class T>
const DenseAlgorithmEntry<T>& choose_dense_algorithm(const DenseProblem& problem,
                                                     const KernelCpu& cpu = kernel_cpu()) {
    const auto& list = dense_algorithms<T>();
    for (const auto& e : list)
        if (e.applies(problem, cpu)) return e;
    return list.back();
}

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class BlasDense<float>)
DTRAIN_PRECOMPILED_INSTANCE(class BlasDense<double>)

}  // namespace dtrain

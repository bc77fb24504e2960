#pragma once

/// @file
/// The compute-backend seam of Conv2d: a convolution algorithm is a type with a name, a static
/// applies(problem, cpu) and the three products (forward, backward_weights, backward_data); Conv2d keeps
/// the parameters, shapes and errors and runs the first algorithm of conv_algorithms() that applies.

#include <cstddef>
#include <string>

#include <dtrain/core/cpu.hpp>
#include <dtrain/nn/layers/detail/im2col.hpp>
#include <dtrain/nn/layers/detail/kernel_set.hpp>

namespace dtrain {

/// What the algorithms may use in this process: the CPU's instructions and the oneDNN backend, less what
/// DTRAIN_KERNELS turns off (detail::kernel_set(): avx2 turns off AVX-512F; onednn the native kernels, so
/// that oneDNN computes what it can; reference all but the reference algorithms).
struct KernelCpu {
    bool avx2_fma = false;  ///< AVX2 and FMA (x86-64, compiled with GCC or Clang)
    bool avx512f = false;   ///< AVX-512F besides AVX2 and FMA
    bool onednn = false;    ///< the oneDNN algorithms (linked: nn/kernels/onednn.hpp)
};

/// This process's KernelCpu: the CPU's features and the oneDNN backend (when linked) masked by
/// detail::kernel_set() as it is now.
inline KernelCpu kernel_cpu() {
    const detail::KernelSet set = detail::kernel_set();
    KernelCpu cpu;
    const bool native = set == detail::KernelSet::native || set == detail::KernelSet::avx2;
    cpu.avx2_fma = native && detail::cpu_has_avx2_fma();
    cpu.avx512f = set == detail::KernelSet::native && cpu.avx2_fma && detail::cpu_has_avx512f();
    cpu.onednn = set != detail::KernelSet::reference && detail::onednn_linked();
    return cpu;
}

/// One convolution to compute: the geometry of a sample (channels, size, kernel, stride, padding and the
/// taps that meet the input), the batch size and the output channels.
struct ConvProblem {
    detail::ConvGeometry g;  ///< per-sample geometry (finished: ConvGeometry::finish() was called)
    std::size_t batch = 0;   ///< samples per call
    std::size_t out = 0;     ///< output channels

    /// Weights per output channel: in_channels * kernel height * kernel width.
    std::size_t fan_in() const noexcept { return g.c * g.kh * g.kw; }
};

/// The interface of a convolution algorithm for element type T. Pointers are NCHW: x [batch, c, h, w],
/// y and dy [batch, out, oh, ow]; w [out, fan_in] (PyTorch's layout) and bias [out]. prepare() sizes the
/// scratch for a problem (the algorithm's applies() holds for it); the products then allocate nothing.
/// backward_weights() ADDS to dw and db; backward_data() WRITES dx and follows backward_weights() of the
/// same x and dy on the same instance (it may reuse what that computed, such as dy reordered), except for
/// the algorithms whose `splits_batch` is true: their forward and input gradient of a sample do not depend
/// on the rest of the batch, so Conv2d may split a batch over threads, one instance per part, and their
/// backward_data() also runs without a backward_weights() before it. All are deterministic.
template <class T>
class ConvAlgorithm {
public:
    virtual ~ConvAlgorithm() = default;

    /// The name Model::summary() lists, e.g. "implicit GEMM (AVX-512)".
    virtual std::string name() const = 0;

    /// Sizes the scratch for `problem`.
    virtual void prepare(const ConvProblem& problem) = 0;

    /// y = the convolution of x with w, plus bias.
    virtual void forward(const T* x, const T* w, const T* bias, T* y) = 0;

    /// dw += the weight gradient and db += the bias gradient of dy, the gradient of forward(x).
    virtual void backward_weights(const T* x, const T* dy, T* dw, T* db) = 0;

    /// dx = the input gradient of dy with weights w (after backward_weights(x, dy, ...)).
    virtual void backward_data(const T* dy, const T* w, T* dx) = 0;
};

namespace detail {

/// A float ConvAlgorithm whose three products are those of `Conv` (ImplicitConv, GemmConv: the same
/// member functions), run through with_avx2 for the passes besides the kernels.
template <class Conv>
class ForwardingConv : public ConvAlgorithm<float> {
public:
    void forward(const float* x, const float* w, const float* bias, float* y) override {
        with_avx2([&] { conv_.forward(x, w, bias, y); });
    }

    void backward_weights(const float* x, const float* dy, float* dw, float* db) override {
        with_avx2([&] { conv_.backward_weights(x, dy, dw, db); });
    }

    void backward_data(const float* dy, const float* w, float* dx) override {
        with_avx2([&] { conv_.backward_data(dy, w, dx); });
    }

protected:
    Conv conv_;  // the implementation, prepared by the derived class
};

}  // namespace detail

}  // namespace dtrain

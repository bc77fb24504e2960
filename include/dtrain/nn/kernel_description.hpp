#pragma once

#include <string>

#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/layer.hpp>

namespace dtrain {

/// The opt-in interface of the layers that have several ways to compute (Dense, Conv2d) or children that
/// have (Residual): it names the kernels a layer runs, for Model::summary(). A layer opts in by deriving
/// from it besides Layer<T>; a layer that does not has one way to compute and is not listed.
class DescribesKernels {
public:
    virtual ~DescribesKernels() = default;

    /// The kernels this layer computes with on samples of shape `input` (a valid input shape), as
    /// Model::summary() lists them: e.g. "direct (AVX2)" or "im2col + BLAS" (they follow the CPU and
    /// DTRAIN_KERNELS). Empty when there is nothing to list (a Residual block without such children).
    virtual std::string kernels(const Shape& input) const = 0;
};

/// `layer`'s kernels on samples of shape `input` when it describes them (DescribesKernels), else empty.
template <class T>
std::string kernels_of(const Layer<T>& layer, const Shape& input) {
    const auto* d = dynamic_cast<const DescribesKernels*>(&layer);
    return d != nullptr ? d->kernels(input) : std::string();
}

}  // namespace dtrain

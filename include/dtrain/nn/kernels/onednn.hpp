#pragma once

/// @file
/// The oneDNN backend of the kernel seam: algorithms named "oneDNN" for Conv2d<float> and Dense<float>
/// (oneDNN's convolution primitives in the layouts oneDNN chooses, with reorders from and to dtrain's, and
/// its inner-product primitives on dtrain's layouts), compiled in src/onednn.cpp
/// into the programs that link the CMake target dtrain::onednn (oneDNN 2.x: Debian libdnnl-dev, and
/// OpenMP). Linked, they join conv_algorithms<float>() and dense_algorithms<float>() after the native
/// kernels and before the reference, and DTRAIN_KERNELS=onednn chooses them wherever they apply. They
/// compute on compute_threads() OpenMP threads.

#include <dtrain/nn/kernels/compute_threads.hpp>
#include <dtrain/nn/layers/detail/kernel_set.hpp>

namespace dtrain {

/// True when the oneDNN algorithms are linked into this program (dtrain::onednn).
inline bool onednn_linked() noexcept {
    return detail::onednn_linked();
}

}  // namespace dtrain

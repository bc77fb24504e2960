#pragma once

/// @file
/// The oneDNN backend of the kernel seam: algorithms named "oneDNN" for Conv2d<float> and Dense<float>
/// (oneDNN's convolution and inner-product primitives on dtrain's layouts), compiled in src/onednn.cpp
/// into the programs that link the CMake target dtrain::onednn (oneDNN 2.x: Debian libdnnl-dev, and
/// OpenMP). Linked, they join conv_algorithms<float>() and dense_algorithms<float>() after the native
/// kernels and before the reference, and DTRAIN_KERNELS=onednn chooses them wherever they apply.

#include <cstdlib>

#include <dtrain/core/error.hpp>
#include <dtrain/nn/layers/detail/kernel_set.hpp>

namespace dtrain {

/// True when the oneDNN algorithms are linked into this program (dtrain::onednn).
inline bool onednn_linked() noexcept {
    return detail::onednn_linked();
}

/// The threads the oneDNN algorithms compute with: DTRAIN_THREADS (a positive whole number; unset: 1,
/// one thread per rank as the native kernels). Read once. Results are deterministic for a thread count;
/// oneDNN's weight gradients may be summed per thread, so they can differ between thread counts. Throws
/// dtrain::Error naming the variable for another value.
inline int compute_threads() {
    static const int threads = [] {
        const char* env = std::getenv("DTRAIN_THREADS");
        if (env == nullptr || *env == '\0') return 1;
        char* end = nullptr;
        const long v = std::strtol(env, &end, 10);
        DTRAIN_CHECK(*end == '\0' && v >= 1 && v <= 4096,
                     "DTRAIN_THREADS must be a whole number from 1 to 4096, got '", env, "'");
        return int(v);
    }();
    return threads;
}

}  // namespace dtrain

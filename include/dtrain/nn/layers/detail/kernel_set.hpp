#pragma once

#include <cstdlib>
#include <string>

#include <dtrain/core/error.hpp>

namespace dtrain::detail {

/// The kernels Conv2d<float> and Dense<float> may choose from, per process (environment variable
/// DTRAIN_KERNELS, read at first use):
/// - native (the default): dtrain's own kernels where the CPU has their instructions (AVX-512F; AVX2 and
///   FMA), the reference elsewhere;
/// - avx2: the same without the AVX-512 kernels, what a CPU with AVX2 and FMA but without AVX-512F runs;
/// - onednn: the oneDNN algorithms wherever they apply (requires them linked: CMake target
///   dtrain::onednn), the reference elsewhere; what a CPU without AVX2 runs with oneDNN;
/// - reference: im2col + BLAS for Conv2d and BLAS for Dense, what every CPU without AVX2 runs without
///   oneDNN (ARM, older x86-64, compilers other than GCC and Clang), so that this path is tested anywhere.
/// Every set computes the same functions within float rounding; each is deterministic on its own. With the
/// oneDNN algorithms linked, native and avx2 also use them where no native kernel applies.
enum class KernelSet { native, avx2, onednn, reference };

/// True once the oneDNN algorithms are linked into the program: src/onednn.cpp (dtrain::onednn) sets it
/// when it registers them, before main().
inline bool& onednn_linked() noexcept {
    static bool linked = false;
    return linked;
}

/// The name DTRAIN_KERNELS gives `set`.
inline const char* kernel_set_name(KernelSet set) noexcept {
    switch (set) {
        case KernelSet::avx2:
            return "avx2";
        case KernelSet::onednn:
            return "onednn";
        case KernelSet::reference:
            return "reference";
        default:
            return "native";
    }
}

/// The set DTRAIN_KERNELS names (unset or empty: native). Throws dtrain::Error naming the variable and the
/// value for any other value, and for DTRAIN_AVX512, the switch DTRAIN_KERNELS replaced.
inline KernelSet kernel_set_from_environment() {
    const char* old = std::getenv("DTRAIN_AVX512");
    DTRAIN_CHECK(old == nullptr, "DTRAIN_AVX512 (set to '", old == nullptr ? "" : old,
                 "') is no longer read: unset it, and set DTRAIN_KERNELS=avx2 for what DTRAIN_AVX512=0 did");
    const char* env = std::getenv("DTRAIN_KERNELS");
    const std::string value = env != nullptr ? env : "";
    DTRAIN_CHECK(value != "onednn" || onednn_linked(),
                 "DTRAIN_KERNELS=onednn: this program was built without dtrain's oneDNN "
                 "backend; link the CMake target dtrain::onednn (oneDNN: Debian libdnnl-dev)");
    for (KernelSet set : {KernelSet::native, KernelSet::avx2, KernelSet::onednn, KernelSet::reference})
        if (value == kernel_set_name(set)) return set;
    DTRAIN_CHECK(value.empty(), "DTRAIN_KERNELS must be native, avx2, onednn or reference, got '", value,
                 "'");
    return KernelSet::native;
}

/// The kernel set of this process: kernel_set_from_environment() at first use, then whatever a test or a
/// benchmark assigns (to compare the sets in one process). Conv2d reads it when it sizes its scratch for a
/// new input shape, Dense at every call.
inline KernelSet& kernel_set() {
    static KernelSet set = kernel_set_from_environment();
    return set;
}

}  // namespace dtrain::detail

#pragma once

/// @file
/// What this CPU runs, asked once, and the run-time dispatch of dtrain's own float loops to AVX2 + FMA code
/// (and of the dense layer's products to AVX-512, nn/layers/detail/dense_gemm.hpp).
/// dtrain is compiled for the baseline of its target (SSE2 on x86-64, so that one binary runs everywhere);
/// its convolution kernels (nn/layers/detail/direct_conv*.hpp, implicit_conv_kernels.hpp) are written for
/// AVX2 + FMA and the element-wise passes of layers and optimizers run through with_avx2(), both chosen at
/// run time. with_avx2() changes speed, never results: its code has no FMA, so every value is rounded as in
/// the baseline code and replicas on CPUs with and without AVX2 stay bitwise identical (the optimizer step
/// runs through it).

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/// Defined where dtrain can compile functions for AVX2 + FMA and choose them at run time (x86-64, GCC or
/// Clang).
#define DTRAIN_X86_DISPATCH 1
/// Compiles a function for AVX2 and FMA; call it only when detail::cpu_has_avx2_fma(). Out of line, it starts
/// on 64 bytes, as do the kernels below: its loops then lie the same way, and run at the same speed, whatever
/// code the linker puts before it (benchmarks/train/README.md).
#define DTRAIN_AVX2_FMA __attribute__((target("avx2,fma"), aligned(64)))
/// A kernel entry point compiled for AVX2 and FMA and kept out of line, so that with_avx2() does not fold
/// it into its caller: inlined into a large flattened function, the direct convolution kernel's register
/// tile ran at half its speed.
#define DTRAIN_AVX2_KERNEL __attribute__((target("avx2,fma"), noinline, aligned(64)))
/// Compiles a function for AVX-512F (with AVX2 and FMA); call it only when detail::cpu_has_avx512f().
#define DTRAIN_AVX512 __attribute__((target("avx512f,avx2,fma"), aligned(64)))
/// DTRAIN_AVX512 kept out of line: a kernel entry point (the dense layer's GEMM and transposes).
#define DTRAIN_AVX512_KERNEL __attribute__((target("avx512f,avx2,fma"), noinline, aligned(64)))
#endif

#if defined(__GNUC__) || defined(__clang__)
/// Keeps a function out of with_avx2()'s flattening, as baseline code: for loops over short rows (a few
/// positions or a channel block), whose AVX2 forms cost more in vector prologues and tails than they save
/// (the implicit convolutions' weight packing and gradient transpose: ResNet9's backward 2-4% faster).
#define DTRAIN_OUT_OF_LINE __attribute__((noinline))
#else
#define DTRAIN_OUT_OF_LINE
#endif

namespace dtrain::detail {

/// True when this CPU runs AVX2 and FMA instructions (asked once).
inline bool cpu_has_avx2_fma() noexcept {
#ifdef DTRAIN_X86_DISPATCH
    static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return ok;
#else
    return false;
#endif
}

#ifdef DTRAIN_X86_DISPATCH
// f() with f and everything it calls inlined (flatten) into this AVX2 function, so its loops are vectorised
// 8 floats wide. Not FMA: a * b + c contracted into one rounding would change results from CPU to CPU.
template <class F>
__attribute__((target("avx2"), flatten)) inline void call_avx2(F& f) {
    f();
}
#endif

/// True when this CPU runs AVX-512F instructions as well as AVX2 and FMA (asked once).
inline bool cpu_has_avx512f() noexcept {
#ifdef DTRAIN_X86_DISPATCH
    static const bool ok = cpu_has_avx2_fma() && __builtin_cpu_supports("avx512f");
    return ok;
#else
    return false;
#endif
}

/// Whether with_avx2() may choose its AVX2 code (true unless set false): a test's switch to compare the two.
inline bool& avx2_dispatch_enabled() noexcept {
    static bool on = true;
    return on;
}

/// Runs f() compiled for AVX2 (f and everything it calls inlined into one such function, except
/// DTRAIN_AVX2_KERNEL functions) where the CPU has AVX2 and FMA, else f() as compiled. For the element-wise
/// loops of layers and optimizers: the results are bitwise those of the baseline code (the same operations
/// in the same order, wider, no FMA contraction and no reassociation), on every CPU.
template <class F>
void with_avx2(F&& f) {
#ifdef DTRAIN_X86_DISPATCH
    if (avx2_dispatch_enabled() && cpu_has_avx2_fma()) return call_avx2(f);
#endif
    f();
}

}  // namespace dtrain::detail

// The single-core FP32 FMA peak of this CPU: 12 independent chains of FMAs (enough to cover the FMA
// latency on two pipes), no memory traffic, on 8-wide AVX2 vectors and, where the CPU has AVX-512F, on
// 16-wide ones. A ceiling no GEMM can pass, next to which bench_train_throughput's sgemm rates and the
// MLP's bound are read (benchmarks/train/README.md). Cores that split a 512-bit FMA in two halves (Zen 4)
// show the same rate for both widths; full-width ones (Zen 5, Intel server cores) twice the AVX2 rate.
//
// Usage: bench_fma_peak [--reps R]
// Output: fma_peak_avx2 <GFLOP/s>, fma_peak_avx512 <GFLOP/s> (where the CPU has AVX-512F) and fma_peak
// <GFLOP/s> (the larger: the core's peak), each the best of R runs of 0.6 G FMAs; or a line saying the
// CPU lacks AVX2/FMA.
#include <dtrain/core/cpu.hpp>

#include <chrono>
#include <cstdio>
#include <string>

#ifdef DTRAIN_X86_DISPATCH
#include <immintrin.h>

namespace {

#define DTRAIN_BENCH_FMA(F, r) r = F(r, x, y)
// iters x 12 FMAs of vector type V (FMADD its fused multiply-add) into `result`; the empty asm keeps the
// 12 chains in registers and the loop from folding.
#define DTRAIN_BENCH_CHAINS(V, FMADD, SET1, result)                                                      \
    {                                                                                                    \
        const V x = SET1(0.999999f), y = SET1(1e-7f);                                                    \
        V a0 = SET1(1), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0, a9 = a0, \
          a10 = a0, a11 = a0;                                                                            \
        for (long k = 0; k < iters; ++k) {                                                               \
            DTRAIN_BENCH_FMA(FMADD, a0), DTRAIN_BENCH_FMA(FMADD, a1), DTRAIN_BENCH_FMA(FMADD, a2),       \
                DTRAIN_BENCH_FMA(FMADD, a3);                                                             \
            DTRAIN_BENCH_FMA(FMADD, a4), DTRAIN_BENCH_FMA(FMADD, a5), DTRAIN_BENCH_FMA(FMADD, a6),       \
                DTRAIN_BENCH_FMA(FMADD, a7);                                                             \
            DTRAIN_BENCH_FMA(FMADD, a8), DTRAIN_BENCH_FMA(FMADD, a9), DTRAIN_BENCH_FMA(FMADD, a10),      \
                DTRAIN_BENCH_FMA(FMADD, a11);                                                            \
            __asm__ volatile(""                                                                          \
                             : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6),     \
                               "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));                      \
        }                                                                                                \
        result = FMADD(FMADD(FMADD(a0, a1, a2), FMADD(a3, a4, a5), a6),                                  \
                       FMADD(FMADD(a7, a8, a9), FMADD(a10, a11, x), y), x);                              \
    }

DTRAIN_AVX2_KERNEL float avx2_chains(long iters) {
    __m256 r;
    DTRAIN_BENCH_CHAINS(__m256, _mm256_fmadd_ps, _mm256_set1_ps, r)
    return _mm256_cvtss_f32(r);
}

DTRAIN_AVX512_KERNEL float avx512_chains(long iters) {
    __m512 r;
    DTRAIN_BENCH_CHAINS(__m512, _mm512_fmadd_ps, _mm512_set1_ps, r)
    return _mm512_cvtss_f32(r);
}

// The best GFLOP/s of `reps` runs of chains(iters) with `lanes` floats per vector.
template <class Chains>
double best_rate(Chains chains, int lanes, int reps) {
    const long iters = 50'000'000;
    double best = 0;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        volatile float sink = chains(iters);
        (void)sink;
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double gflops = double(iters) * 12 * lanes * 2 / s / 1e9;
        best = gflops > best ? gflops : best;
    }
    return best;
}

}  // namespace
#endif

int main(int argc, char** argv) {
    int reps = 5;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--reps" && i + 1 < argc) {
            reps = std::stoi(argv[++i]);
        } else {
            std::fprintf(stderr, "usage: bench_fma_peak [--reps R] (unknown or incomplete argument '%s')\n",
                         a.c_str());
            return 2;
        }
    }
#ifdef DTRAIN_X86_DISPATCH
    if (dtrain::detail::cpu_has_avx2_fma()) {
        const double avx2 = best_rate(avx2_chains, 8, reps);
        std::printf("fma_peak_avx2 %.1f\n", avx2);
        double peak = avx2;
        if (dtrain::detail::cpu_has_avx512f()) {
            const double avx512 = best_rate(avx512_chains, 16, reps);
            std::printf("fma_peak_avx512 %.1f\n", avx512);
            peak = avx512 > peak ? avx512 : peak;
        }
        std::printf("fma_peak %.1f\n", peak);
        return 0;
    }
#endif
    std::printf("fma_peak: this CPU (or build) has no AVX2 + FMA path\n");
    return 0;
}

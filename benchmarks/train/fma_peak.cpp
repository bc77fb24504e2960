// The single-core FP32 FMA peak of this CPU: 12 independent chains of 8-wide AVX2 FMAs (enough to cover
// the FMA latency on two pipes), no memory traffic. A ceiling no GEMM can pass, next to which
// bench_train_throughput's sgemm rates and the MLP's bound are read (benchmarks/train/README.md).
//
// Usage: bench_fma_peak [--reps R]
// Output: fma_peak <GFLOP/s> (the best of R runs of 0.6 G FMAs), or a line saying the CPU lacks AVX2/FMA.
#include <dtrain/core/cpu.hpp>

#include <chrono>
#include <cstdio>
#include <string>

#ifdef DTRAIN_X86_DISPATCH
#include <immintrin.h>

namespace {

#define DTRAIN_BENCH_FMA(r) r = _mm256_fmadd_ps(r, x, y)

// iters x 12 FMAs of 8 lanes; the empty asm keeps the 12 chains in registers and the loop from folding.
DTRAIN_AVX2_KERNEL float fma_chains(long iters) {
    const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
    __m256 a0 = _mm256_set1_ps(1), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0,
           a9 = a0, a10 = a0, a11 = a0;
    for (long k = 0; k < iters; ++k) {
        DTRAIN_BENCH_FMA(a0), DTRAIN_BENCH_FMA(a1), DTRAIN_BENCH_FMA(a2), DTRAIN_BENCH_FMA(a3);
        DTRAIN_BENCH_FMA(a4), DTRAIN_BENCH_FMA(a5), DTRAIN_BENCH_FMA(a6), DTRAIN_BENCH_FMA(a7);
        DTRAIN_BENCH_FMA(a8), DTRAIN_BENCH_FMA(a9), DTRAIN_BENCH_FMA(a10), DTRAIN_BENCH_FMA(a11);
        __asm__ volatile(""
                         : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7),
                           "+x"(a8), "+x"(a9), "+x"(a10), "+x"(a11));
    }
    const __m256 s =
        _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                      _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)),
                                    _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11))));
    return _mm256_cvtss_f32(s);
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
        const long iters = 50'000'000;
        double best = 0;
        for (int r = 0; r < reps; ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            volatile float sink = fma_chains(iters);
            (void)sink;
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            const double gflops = double(iters) * 12 * 8 * 2 / s / 1e9;
            best = gflops > best ? gflops : best;
        }
        std::printf("fma_peak %.1f\n", best);
        return 0;
    }
#endif
    std::printf("fma_peak: this CPU (or build) has no AVX2 + FMA path\n");
    return 0;
}

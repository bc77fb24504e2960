#pragma once

#include <cstddef>

#include <dtrain/core/cpu.hpp>
#include <dtrain/nn/layers/detail/dense_gemm.hpp>
#include <dtrain/nn/layers/detail/direct_conv.hpp>
#include <dtrain/nn/layers/detail/summation.hpp>

// The register tiles of the implicit-GEMM kernels (implicit_conv_kernels.hpp): rows x blocks of 16 columns,
// each output init + a sum over k steps in summation.hpp's blocks. AVX2 + FMA tiles, and AVX-512F tiles
// that give bitwise the same results (per lane the same operations in the same order).

namespace dtrain::detail {

/// Output channels per block of the implicit-GEMM kernels (two AVX2 vectors, one AVX-512 vector).
constexpr std::size_t implicit_nr = 16;
/// Output positions per forward and input-gradient AVX2 tile, and taps per weight-gradient AVX2 tile.
constexpr std::size_t implicit_mr = 6;

/// Rows of the AVX-512 register tiles (ImplicitTileAvx512), the most of any tile: the input gradient's
/// scratch holds this many rows.
constexpr std::size_t implicit_mr_max = 8;

#ifdef DTRAIN_DIRECT_CONV

/// The AVX2 register tile of the three kernels: buf[i * ldbuf + 0..16) = init + the sum over the k steps of
/// a(i, t) * b(t, 0) in SumBlocks' order, for 6 rows of 16 columns (two vectors). `a` gives a pointer to the
/// broadcast value of row i at step t, `b` the 16 values of step t. 12 accumulators, 2 B vectors and 1
/// broadcast fit AVX2's 16 registers; the partial sums stay in memory.
struct ImplicitTileAvx2 {
    /// Rows and 16-column blocks per tile.
    static constexpr std::size_t mr = implicit_mr, nb = 1;
    /// Computes one tile; requires k >= 1.
    template <class A, class B>
    DTRAIN_AVX2_FMA static void run(std::size_t k, A a, B b, const float* init, float* buf,
                                    std::size_t ldbuf) {
        if (k <= sum_block)
            one_chain(k, a, b, init, buf, ldbuf);
        else
            blocked(k, a, b, init, buf, ldbuf);
    }

private:
    // The chain of steps [t, end) from zero in acc.
    template <class A, class B>
    [[gnu::always_inline]] DTRAIN_AVX2_FMA static void chain(std::size_t t, std::size_t end, A a, B b,
                                                             __m256 (&acc)[mr][2]) {
        DTRAIN_UNROLL
        for (std::size_t i = 0; i < mr; ++i) {
            acc[i][0] = _mm256_setzero_ps();
            acc[i][1] = _mm256_setzero_ps();
        }
        do {  // a chain is never empty; with a loop that may run 0 times, g++ -O3 keeps the accumulators in
              // memory
            const float* bt = b(t, 0);
            const __m256 b0 = _mm256_loadu_ps(bt), b1 = _mm256_loadu_ps(bt + 8);
            DTRAIN_UNROLL
            for (std::size_t i = 0; i < mr; ++i) {
                const __m256 av = _mm256_broadcast_ss(a(i, t));
                acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
                acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
            }
        } while (++t < end);
    }

    // buf = from + r, row by row (from: init, the same for every row, or buf itself).
    [[gnu::always_inline]] DTRAIN_AVX2_FMA static void add_store(const __m256 (&r)[mr][2], const float* init,
                                                                 bool from_init, float* buf,
                                                                 std::size_t ldbuf) {
        DTRAIN_UNROLL
        for (std::size_t i = 0; i < mr; ++i) {
            DTRAIN_UNROLL
            for (std::size_t h = 0; h < 2; ++h) {
                float* d = buf + i * ldbuf + 8 * h;
                _mm256_storeu_ps(d, _mm256_add_ps(_mm256_loadu_ps(from_init ? init + 8 * h : d), r[i][h]));
            }
        }
    }

    // run() for k <= sum_block: one chain from zero, added to init. The same sum as blocked(), as one
    // straight loop.
    template <class A, class B>
    DTRAIN_AVX2_FMA static void one_chain(std::size_t k, A a, B b, const float* init, float* buf,
                                          std::size_t ldbuf) {
        __m256 acc[mr][2];
        chain(0, k, a, b, acc);
        add_store(acc, init, true, buf, ldbuf);
    }

    // run() for k > sum_block: SumBlocks' chains, partial sums and total. Each chain's end takes one of a
    // few straight paths, chosen once per chain.
    template <class A, class B>
    DTRAIN_AVX2_FMA static void blocked(std::size_t k, A a, B b, const float* init, float* buf,
                                        std::size_t ldbuf) {
        __m256 acc[mr][2], part[mr][2] = {};  // = {}: g++ cannot see that the first chain sets it
        for (SumBlocks s(k); s.next();) {
            chain(s.begin, s.end, a, b, acc);
            if (s.first_in_part()) {
                DTRAIN_UNROLL
                for (std::size_t i = 0; i < mr; ++i) {
                    part[i][0] = acc[i][0];
                    part[i][1] = acc[i][1];
                }
            } else {
                DTRAIN_UNROLL
                for (std::size_t i = 0; i < mr; ++i) {
                    part[i][0] = _mm256_add_ps(part[i][0], acc[i][0]);
                    part[i][1] = _mm256_add_ps(part[i][1], acc[i][1]);
                }
            }
            if (s.part_done()) add_store(part, init, s.first_part(), buf, ldbuf);
        }
    }
};

/// The AVX-512 register tile: MR rows of NB blocks of 16 columns (one vector each, block j's 16 values of
/// step t at b(t, j)), MR * NB accumulators. Per lane the same operations in the same order as
/// ImplicitTileAvx2, so every output is bitwise the AVX2 tile's.
template <std::size_t MR, std::size_t NB>
struct ImplicitTileAvx512 {
    /// Rows and 16-column blocks per tile.
    static constexpr std::size_t mr = MR, nb = NB;
    static_assert(MR * NB <= 28, "a tile's accumulators must fit the 32 registers");
    /// Computes one tile; requires k >= 1.
    template <class A, class B>
    DTRAIN_AVX512 static void run(std::size_t k, A a, B b, const float* init, float* buf, std::size_t ldbuf) {
        if (k <= sum_block)
            one_chain(k, a, b, init, buf, ldbuf);
        else
            blocked(k, a, b, init, buf, ldbuf);
    }

private:
    // The chain of steps [t, end) from zero in acc.
    template <class A, class B>
    [[gnu::always_inline]] DTRAIN_AVX512 static void chain(std::size_t t, std::size_t end, A a, B b,
                                                           __m512 (&acc)[MR][NB]) {
        DTRAIN_UNROLL
        for (std::size_t i = 0; i < MR; ++i) {
            DTRAIN_UNROLL
            for (std::size_t j = 0; j < NB; ++j)
                acc[i][j] = _mm512_setzero_ps();
        }
        do {  // a chain is never empty; with a loop that may run 0 times, g++ -O3 keeps the accumulators in
              // memory
            __m512 bv[NB];
            DTRAIN_UNROLL
            for (std::size_t j = 0; j < NB; ++j)
                bv[j] = _mm512_loadu_ps(b(t, j));
            DTRAIN_UNROLL
            for (std::size_t i = 0; i < MR; ++i) {
                const __m512 av = _mm512_set1_ps(*a(i, t));
                DTRAIN_UNROLL
                for (std::size_t j = 0; j < NB; ++j)
                    acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
            }
        } while (++t < end);
    }

    // buf = from + r, row by row (from: init, the same for every row, or buf itself).
    [[gnu::always_inline]] DTRAIN_AVX512 static void add_store(const __m512 (&r)[MR][NB], const float* init,
                                                               bool from_init, float* buf,
                                                               std::size_t ldbuf) {
        DTRAIN_UNROLL
        for (std::size_t i = 0; i < MR; ++i) {
            DTRAIN_UNROLL
            for (std::size_t j = 0; j < NB; ++j) {
                float* d = buf + i * ldbuf + j * implicit_nr;
                _mm512_storeu_ps(
                    d, _mm512_add_ps(_mm512_loadu_ps(from_init ? init + j * implicit_nr : d), r[i][j]));
            }
        }
    }

    // run() for k <= sum_block: one chain from zero, added to init. The same sum as blocked(), as one
    // straight loop.
    template <class A, class B>
    DTRAIN_AVX512 static void one_chain(std::size_t k, A a, B b, const float* init, float* buf,
                                        std::size_t ldbuf) {
        __m512 acc[MR][NB];
        chain(0, k, a, b, acc);
        add_store(acc, init, true, buf, ldbuf);
    }

    // run() for k > sum_block: SumBlocks' chains, partial sums and total. Each chain's end takes one of a
    // few straight paths, chosen once per chain (the partial sums stay in memory).
    template <class A, class B>
    DTRAIN_AVX512 static void blocked(std::size_t k, A a, B b, const float* init, float* buf,
                                      std::size_t ldbuf) {
        __m512 acc[MR][NB], part[MR][NB] = {};  // = {}: g++ cannot see that the first chain sets it
        for (SumBlocks s(k); s.next();) {
            chain(s.begin, s.end, a, b, acc);
            if (s.first_in_part()) {
                DTRAIN_UNROLL
                for (std::size_t i = 0; i < MR; ++i) {
                    DTRAIN_UNROLL
                    for (std::size_t j = 0; j < NB; ++j)
                        part[i][j] = acc[i][j];
                }
            } else {
                DTRAIN_UNROLL
                for (std::size_t i = 0; i < MR; ++i) {
                    DTRAIN_UNROLL
                    for (std::size_t j = 0; j < NB; ++j)
                        part[i][j] = _mm512_add_ps(part[i][j], acc[i][j]);
                }
            }
            if (s.part_done()) add_store(part, init, s.first_part(), buf, ldbuf);
        }
    }
};

/// The tile of the AVX-512 kernels: 8 positions (or taps) x 32 columns, 16 accumulators (the shapes tried
/// are in benchmarks/train/README.md).
using ImplicitTile512 = ImplicitTileAvx512<8, 2>;
/// The AVX-512 kernels' tile for a last single block of 16 columns.
using ImplicitTile512Tail = ImplicitTileAvx512<8, 1>;

#endif  // DTRAIN_DIRECT_CONV

}  // namespace dtrain::detail

#pragma once

/// @file
/// The fixed structure in which dtrain's native float kernels (dense_gemm.hpp, implicit_conv_tiles.hpp,
/// direct_conv.hpp, direct_conv_grad.hpp) sum a long reduction. One chain of FMAs over k products
/// accumulates a rounding error that grows like the square root of k times the running sum; split into
/// chains of sum_block products, each started from zero, whose results are summed in order into a partial
/// sum of up to sum_super_block products, and those partial sums added in order into the output, the error
/// grows like the square root of sum_block + sum_super_block / sum_block + k / sum_super_block instead. The
/// blocks are fixed by the reduction index alone (chain b holds products [b * sum_block, (b + 1) *
/// sum_block)), so that a result stays deterministic and independent of the other rows of a batch and of
/// the register tile that computes it.

#include <cstddef>

/// Unrolls the loop that follows completely (its trip count is a template argument): a register tile's
/// accumulators stay in registers only when no loop indexes them at run time (without it, g++ 12 kept
/// the dense GEMM tile's 24 accumulators in memory as well, at a third of the speed).
#if defined(__GNUC__) && !defined(__clang__)
#define DTRAIN_UNROLL _Pragma("GCC unroll 16")
#elif defined(__clang__)
#define DTRAIN_UNROLL _Pragma("unroll")
#else
#define DTRAIN_UNROLL
#endif

namespace dtrain::detail {

/// Products per chain of FMAs started from zero in a register tile's accumulators.
constexpr std::size_t sum_block = 128;

/// Products per partial sum: sum_super_block / sum_block chains added in order in memory before the partial
/// sum is added into the output.
constexpr std::size_t sum_super_block = 1024;

static_assert(sum_super_block % sum_block == 0, "a partial sum holds whole chains");

/// Walks the chains of a sum over steps [0, k), k >= 1, in order: `for (SumBlocks s(k); s.next();)` visits
/// each chain [begin, end) (never empty) and says whether it starts a partial sum (first_in_part: the partial
/// sum = the chain, else the partial sum += the chain), whether it ends one (part_done: then the output =
/// its initial value + the partial sum when first_part, else the output += the partial sum). A kernel whose
/// step is a run of several products (a row of outputs) passes its own chain and partial-sum lengths.
struct SumBlocks {
    /// Steps of the current chain: [begin, end).
    std::size_t begin = 0, end = 0;
    /// The sum's number of steps, the steps per chain and per partial sum.
    std::size_t k, block, super;

    /// The chains of a sum over `steps` >= 1 steps; `part` is a multiple of `chain` >= 1.
    explicit SumBlocks(std::size_t steps, std::size_t chain = sum_block, std::size_t part = sum_super_block)
        : k(steps), block(chain), super(part) {}

    /// Moves to the next chain; false after the last.
    bool next() {
        if (end >= k) return false;
        begin = end;
        end = k - begin < block ? k : begin + block;
        return true;
    }
    /// The current chain starts a partial sum.
    bool first_in_part() const { return begin % super == 0; }
    /// The current chain ends a partial sum.
    bool part_done() const { return end == k || end % super == 0; }
    /// The current chain's partial sum is the first of the sum.
    bool first_part() const { return begin < super; }
};

}  // namespace dtrain::detail

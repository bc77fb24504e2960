#pragma once

// The order in which dtrain's native float kernels sum a long reduction (nn/layers/detail/summation.hpp),
// in scalar float, for tests that check a kernel bitwise.

#include <algorithm>
#include <cmath>
#include <cstddef>

#include <dtrain/nn/layers/detail/summation.hpp>

namespace dtrain::test {

/// (accumulate ? c : nothing) + the sum over p in [0, k) of f(p, 0) * f(p, 1), as the kernels sum it:
/// chains of sum_block FMAs from zero, added in order into partial sums of sum_super_block products, each
/// added in order to the result (the first one is the result when not accumulating). k == 0 gives c, or 0.
template <class F>
float blocked_fma_sum(float c, bool accumulate, std::size_t k, F f) {
    using dtrain::detail::sum_block;
    using dtrain::detail::sum_super_block;
    if (!accumulate) c = 0.0f;
    for (std::size_t s = 0; s < k; s += sum_super_block) {
        float part = 0.0f;
        for (std::size_t b = s; b < std::min(k, s + sum_super_block); b += sum_block) {
            float r = 0.0f;
            for (std::size_t p = b; p < std::min(k, b + sum_block); ++p)
                r = std::fma(f(p, 0), f(p, 1), r);
            part = b == s ? r : part + r;
        }
        c = s == 0 && !accumulate ? part : c + part;
    }
    return c;
}

}  // namespace dtrain::test

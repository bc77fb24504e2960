#pragma once

// Statistics helpers shared by the benchmark programs (benchmarks/*; not part of the library).

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <vector>

namespace dtrain::bench {

/// The median of `v` (taken by value and sorted): the middle value for an odd count, the mean of the two
/// middle values for an even one. Requires a non-empty `v`; throws std::invalid_argument on an empty one.
inline double median(std::vector<double> v) {
    if (v.empty()) throw std::invalid_argument("dtrain::bench::median of an empty vector");
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace dtrain::bench

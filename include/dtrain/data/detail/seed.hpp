#pragma once

#include <cstdint>

namespace dtrain::detail {

/// splitmix64 finaliser: a bijective mix of the 64 bits of `x`.
inline std::uint64_t mix64(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/// Combines a user seed, an epoch number and a stream tag into one generator seed, so that (seed, epoch)
/// pairs do not collide the way seed + epoch would ((0, 1) and (1, 0) give different streams).
inline std::uint64_t epoch_seed(std::uint64_t seed, std::uint64_t epoch, std::uint64_t stream = 0) {
    return mix64(mix64(mix64(seed) ^ epoch) ^ (stream * 0xd1b54a32d192ed03ULL));
}

}  // namespace dtrain::detail

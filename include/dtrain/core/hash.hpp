#pragma once

#include <cstddef>
#include <cstdint>

namespace dtrain::detail {

/// FNV-1a offset basis: the hash of zero bytes.
inline constexpr std::uint64_t fnv1a_basis = 14695981039346656037ull;

/// FNV-1a hash of the `n` bytes at `data`, continuing from `h` (fnv1a_basis for a fresh hash). Used to
/// compare buffers across ranks and to checksum checkpoints; not a cryptographic hash.
inline std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h = fnv1a_basis) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

}  // namespace dtrain::detail

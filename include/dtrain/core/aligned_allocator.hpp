#pragma once

/// @file
/// The allocator of dtrain's tensors, flat parameter buffers and kernel scratch: every block starts on a
/// 64-byte boundary.

#include <cstddef>
#include <new>
#include <vector>

namespace dtrain::detail {

/// The alignment, in bytes, of every block AlignedAllocator hands out: one cache line, one AVX-512 vector.
inline constexpr std::size_t buffer_alignment = 64;

/// A std::allocator whose blocks start on buffer_alignment bytes. With std::allocator, glibc places a
/// large block 16 bytes past a page boundary and a small one wherever its heap has room, so a kernel's
/// 64-byte loads would span two cache lines or not from one buffer to the next, and a step's speed would
/// depend on the order its buffers were allocated in (benchmarks/accuracy/README.md).
template <class T>
struct AlignedAllocator {
    /// The element type.
    using value_type = T;

    /// A stateless allocator.
    AlignedAllocator() noexcept = default;
    /// The same allocator for another element type (std::allocator_traits' rebind).
    template <class U>
    AlignedAllocator(const AlignedAllocator<U>&) noexcept {}

    /// Room for `n` elements, starting on buffer_alignment bytes; throws std::bad_alloc (or
    /// std::bad_array_new_length when n * sizeof(T) overflows).
    T* allocate(std::size_t n) {
        if (n > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
        return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(buffer_alignment)));
    }
    /// Frees a block from allocate().
    void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t(buffer_alignment)); }

    /// Every AlignedAllocator frees what any other allocated.
    template <class U>
    bool operator==(const AlignedAllocator<U>&) const noexcept {
        return true;
    }
    /// Never: see operator==.
    template <class U>
    bool operator!=(const AlignedAllocator<U>&) const noexcept {
        return false;
    }
};

/// A std::vector on AlignedAllocator: the flat buffers and kernel scratch of dtrain.
template <class T>
using AlignedVector = std::vector<T, AlignedAllocator<T>>;

}  // namespace dtrain::detail

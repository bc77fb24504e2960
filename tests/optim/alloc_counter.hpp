#pragma once

// Replaces the global operator new/delete to count allocations. Include from exactly ONE translation
// unit of a test program (it defines the replacement functions).
//
// Every replaceable form is replaced (plain, array, nothrow, aligned, sized), all on malloc/aligned_alloc
// and free, so every pair the program or the C++ library uses matches: a form left out would come from
// the C++ runtime or, under AddressSanitizer, from ASan's allocator, and its delete would free memory of
// another allocator (ASan: alloc-dealloc-mismatch; std::stable_sort allocates with new(nothrow)).

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace dtrain::test {
/// Number of calls to the global operator new (any form) so far.
inline std::atomic<std::size_t> allocation_count{0};

namespace detail {
/// malloc for the unaligned forms; nullptr on failure.
inline void* counted_alloc(std::size_t n) noexcept {
    ++allocation_count;
    return std::malloc(n ? n : 1);
}

/// aligned_alloc (size rounded up to a multiple of the alignment) for the aligned forms; nullptr on failure.
inline void* counted_alloc(std::size_t n, std::align_val_t al) noexcept {
    ++allocation_count;
    const auto a = static_cast<std::size_t>(al);
    const std::size_t rounded = ((n ? n : 1) + a - 1) / a * a;
    return rounded < n ? nullptr : std::aligned_alloc(a, rounded);
}

template <class... Align>
void* counted_alloc_or_throw(std::size_t n, Align... al) {
    if (void* p = counted_alloc(n, al...)) return p;
    throw std::bad_alloc();
}
}  // namespace detail
}  // namespace dtrain::test

// GCC flags free() on memory from operator new, not knowing this file replaces both.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
    return dtrain::test::detail::counted_alloc_or_throw(n);
}
void* operator new[](std::size_t n) {
    return dtrain::test::detail::counted_alloc_or_throw(n);
}
void* operator new(std::size_t n, std::align_val_t al) {
    return dtrain::test::detail::counted_alloc_or_throw(n, al);
}
void* operator new[](std::size_t n, std::align_val_t al) {
    return dtrain::test::detail::counted_alloc_or_throw(n, al);
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    return dtrain::test::detail::counted_alloc(n);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
    return dtrain::test::detail::counted_alloc(n);
}
void* operator new(std::size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
    return dtrain::test::detail::counted_alloc(n, al);
}
void* operator new[](std::size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
    return dtrain::test::detail::counted_alloc(n, al);
}

void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete[](void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
    std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    std::free(p);
}
#pragma GCC diagnostic pop

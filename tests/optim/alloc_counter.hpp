#pragma once

// Replaces the global operator new/delete to count allocations. Include from exactly ONE translation
// unit of a test program (it defines the replacement functions).

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace dtrain::test {
/// Number of calls to the global operator new so far.
inline std::atomic<std::size_t> allocation_count{0};
}  // namespace dtrain::test

// GCC flags free() on memory from operator new, not knowing this file replaces both.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
    ++dtrain::test::allocation_count;
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}
#pragma GCC diagnostic pop

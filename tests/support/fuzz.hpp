#pragma once

// Pieces for tests that feed hostile files to a loader: an allocation limit, byte mutations of a seed file
// and a runner that classifies each attempt. Self-contained (the standard library, glibc and
// <dtrain/core/error.hpp>; no Catch2), so any area's tests can use it.
//
// The allocation limit replaces the global operator new and delete. Define DTRAIN_FUZZ_REPLACE_NEW before
// including this header in exactly ONE translation unit of a test program; AllocationLimit's constructor
// throws std::logic_error in a program where no translation unit did. Such a program cannot also include
// tests/optim/alloc_counter.hpp, which replaces the same functions.

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <dtrain/core/error.hpp>

namespace dtrain::test::fuzz {

namespace detail {

/// The state the replaced operator new reads and updates.
struct AllocationState {
    std::atomic<bool> replaced{false};     // set by the replacement's translation unit at start-up
    std::atomic<bool> active{false};       // an AllocationLimit is alive
    std::atomic<std::size_t> max_one{0};   // largest single allocation admitted
    std::atomic<std::size_t> max_live{0};  // largest live total admitted, above `base`
    std::atomic<long long> live{0};        // bytes of every live allocation made through operator new
    std::atomic<long long> base{0};        // `live` when the limit (or its last reset) started
    std::atomic<long long> peak{0};        // largest live - base seen while active
    std::atomic<std::size_t> refused{0};   // allocations refused while active
    std::atomic<std::size_t> largest_refused{0};
};

/// The one state of the program.
inline AllocationState& allocation_state() {
    static AllocationState s;
    return s;
}

/// False (and the refusal recorded) when an allocation of `n` bytes would break the active limit.
inline bool admit(std::size_t n) {
    auto& s = allocation_state();
    if (!s.active.load(std::memory_order_relaxed)) return true;
    const long long above = s.live.load() - s.base.load();
    if (n <= s.max_one.load() &&
        above + static_cast<long long>(n) <= static_cast<long long>(s.max_live.load()))
        return true;
    ++s.refused;
    std::size_t old = s.largest_refused.load();
    while (old < n && !s.largest_refused.compare_exchange_weak(old, n)) {
    }
    return false;
}

/// Records that `p` (from malloc or aligned_alloc) is now live, or with `sign` -1 that it is freed.
inline void count(void* p, int sign) {
    auto& s = allocation_state();
    const auto bytes = static_cast<long long>(malloc_usable_size(p));
    const long long live = (s.live += sign * bytes);
    if (sign > 0 && s.active.load(std::memory_order_relaxed)) {
        const long long above = live - s.base.load();
        long long old = s.peak.load();
        while (old < above && !s.peak.compare_exchange_weak(old, above)) {
        }
    }
}

}  // namespace detail

/// While alive, the replaced operator new refuses (throws std::bad_alloc for) any single allocation above
/// `max_allocation` bytes and any allocation that would raise the bytes live through operator new by more
/// than `max_live` above what was live at construction (or at the last reset()). Refusals are recorded, so
/// a test fails on them even when the code under test catches std::bad_alloc. Not nestable.
class AllocationLimit {
public:
    /// Activates the limit (defaults: 64 MiB per allocation, 256 MiB live).
    explicit AllocationLimit(std::size_t max_allocation = std::size_t(64) << 20,
                             std::size_t max_live = std::size_t(256) << 20) {
        auto& s = detail::allocation_state();
        if (!s.replaced)
            throw std::logic_error("AllocationLimit: no translation unit defined DTRAIN_FUZZ_REPLACE_NEW");
        if (s.active) throw std::logic_error("AllocationLimit: a limit is already active");
        s.max_one = max_allocation;
        s.max_live = max_live;
        reset();
        s.active = true;
    }
    ~AllocationLimit() { detail::allocation_state().active = false; }
    AllocationLimit(const AllocationLimit&) = delete;
    AllocationLimit& operator=(const AllocationLimit&) = delete;

    /// Starts counting afresh: no refusals, the live total measured from now.
    void reset() {
        auto& s = detail::allocation_state();
        s.base = s.live.load();
        s.peak = 0;
        s.refused = 0;
        s.largest_refused = 0;
    }
    /// Allocations refused since construction or reset().
    std::size_t refused() const { return detail::allocation_state().refused; }
    /// Size of the largest refused allocation (0 when none).
    std::size_t largest_refused() const { return detail::allocation_state().largest_refused; }
    /// Largest number of bytes live above the baseline since construction or reset().
    std::size_t peak_live() const {
        return static_cast<std::size_t>(std::max(0LL, detail::allocation_state().peak.load()));
    }
    /// "" when nothing was refused, else a sentence saying what was.
    std::string violation() const {
        if (refused() == 0) return "";
        return std::to_string(refused()) + " allocation(s) refused by the limit, the largest of " +
               std::to_string(largest_refused()) + " bytes (limit " +
               std::to_string(detail::allocation_state().max_one.load()) + " per allocation, " +
               std::to_string(detail::allocation_state().max_live.load()) + " live)";
    }
};

}  // namespace dtrain::test::fuzz

#ifdef DTRAIN_FUZZ_REPLACE_NEW
// The replacements: malloc and free underneath, with every block's usable size counted.
namespace dtrain::test::fuzz::detail {
inline const bool replacement_installed = (allocation_state().replaced = true);
}  // namespace dtrain::test::fuzz::detail

// GCC flags free() on memory from operator new, not knowing this file replaces both.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
    if (!dtrain::test::fuzz::detail::admit(n)) throw std::bad_alloc();
    void* p = std::malloc(n ? n : 1);
    if (p == nullptr) throw std::bad_alloc();
    dtrain::test::fuzz::detail::count(p, +1);
    return p;
}
void* operator new(std::size_t n, std::align_val_t a) {
    if (!dtrain::test::fuzz::detail::admit(n)) throw std::bad_alloc();
    const auto align = static_cast<std::size_t>(a);
    void* p = std::aligned_alloc(align, (std::max<std::size_t>(n, 1) + align - 1) / align * align);
    if (p == nullptr) throw std::bad_alloc();
    dtrain::test::fuzz::detail::count(p, +1);
    return p;
}
void operator delete(void* p) noexcept {
    if (p == nullptr) return;
    dtrain::test::fuzz::detail::count(p, -1);
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    ::operator delete(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
    ::operator delete(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
    ::operator delete(p);
}
#pragma GCC diagnostic pop
#endif

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

/// The bytes of a file.
using Bytes = std::vector<unsigned char>;

/// Writes `bytes` to `path` as a new file (removing the old one first: ext4 flushes a file truncated and
/// rewritten in place when it is closed, which made thousands of cases take seconds); throws
/// std::runtime_error when it cannot.
inline void write_file(const std::string& path, const Bytes& bytes) {
    std::remove(path.c_str());
    std::FILE* f = std::fopen(path.c_str(), "wb");
    const bool ok =
        f != nullptr && (bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
    if ((f == nullptr || std::fclose(f) != 0) || !ok) throw std::runtime_error("cannot write " + path);
}

/// Positions 0..size-1 when size <= `dense`, else about `dense` of them: the first and last 64 (headers and
/// trailers) and a sample of the rest drawn from `seed` (sorted, without repeats). Deterministic.
inline std::vector<std::size_t> positions(std::size_t size, std::size_t dense, std::uint64_t seed) {
    std::vector<std::size_t> out;
    if (size <= dense) {
        for (std::size_t i = 0; i < size; ++i)
            out.push_back(i);
        return out;
    }
    for (std::size_t i = 0; i < 64 && i < size; ++i)
        out.push_back(i), out.push_back(size - 1 - i);
    std::uint64_t x = seed;
    while (out.size() < dense) {  // splitmix64
        x += 0x9e3779b97f4a7c15ULL;
        std::uint64_t z = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        out.push_back(static_cast<std::size_t>((z ^ (z >> 31)) % size));
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

/// Calls fn(bytes, what) with `seed` cut to each length in `lengths` that is shorter than it.
template <class F>
void for_each_truncation(const Bytes& seed, const std::vector<std::size_t>& lengths, F&& fn) {
    for (auto n : lengths)
        if (n < seed.size())
            fn(Bytes(seed.begin(), seed.begin() + static_cast<std::ptrdiff_t>(n)),
               "cut to " + std::to_string(n) + " of " + std::to_string(seed.size()) + " bytes");
}

/// Calls fn(bytes, what) with the byte of `seed` at each of `at` XORed with each mask (low bit, high bit,
/// all bits by default).
template <class F>
void for_each_flip(const Bytes& seed, const std::vector<std::size_t>& at, F&& fn,
                   const std::vector<unsigned char>& masks = {0x01, 0x80, 0xFF}) {
    for (auto i : at)
        for (auto m : masks) {
            if (i >= seed.size()) continue;
            Bytes b = seed;
            b[i] ^= m;
            char what[64];
            std::snprintf(what, sizeof what, "byte %zu xor 0x%02X", i, static_cast<unsigned>(m));
            fn(std::move(b), std::string(what));
        }
}

/// Calls fn(bytes, what) with `seed` followed by each of: a zero byte, a newline, "junk", 512 zero bytes
/// (block padding), a lone 0x1f, the gzip magic 1f 8b alone, and a second copy of `seed` (for gzip, a second
/// member).
template <class F>
void for_each_append(const Bytes& seed, F&& fn) {
    const std::vector<std::pair<std::string, Bytes>> tails = {{"a zero byte", {0}},
                                                              {"a newline", {'\n'}},
                                                              {"'junk'", {'j', 'u', 'n', 'k'}},
                                                              {"512 zero bytes", Bytes(512, 0)},
                                                              {"0x1f", {0x1f}},
                                                              {"1f 8b", {0x1f, 0x8b}},
                                                              {"a copy of itself", seed}};
    for (const auto& [what, tail] : tails) {
        Bytes b = seed;
        b.insert(b.end(), tail.begin(), tail.end());
        fn(std::move(b), "followed by " + what);
    }
}

/// `bytes` with the 32-bit field at `offset` set to `value`, big-endian (IDX) or little-endian (gzip).
inline Bytes with_u32(Bytes bytes, std::size_t offset, std::uint32_t value, bool big_endian) {
    for (std::size_t i = 0; i < 4 && offset + i < bytes.size(); ++i)
        bytes[offset + i] = static_cast<unsigned char>(value >> (big_endian ? 24 - 8 * i : 8 * i));
    return bytes;
}

/// Values for a 32-bit size field: empty, tiny, just past 16 bits, and at the signed and unsigned limits.
inline std::vector<std::uint32_t> hostile_u32() {
    return {0, 1, 2, 255, 65537, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFEu, 0xFFFFFFFFu};
}

/// Counts of a fuzz run and the first failures, described.
struct Report {
    std::size_t cases = 0, loaded = 0, rejected = 0, failed = 0;
    /// Largest number of bytes live during one case (above what was live before it).
    std::size_t peak_live = 0;
    /// The first 20 failures: what was tried and what went wrong.
    std::vector<std::string> failures;

    /// Records a failure.
    void fail(const std::string& what) {
        ++failed;
        if (failures.size() < 20) failures.push_back(what);
    }
    /// "N cases: L loaded, R rejected, F failed; peak P bytes" and the failures, one a line.
    std::string summary() const {
        std::string s = std::to_string(cases) + " cases: " + std::to_string(loaded) + " loaded, " +
                        std::to_string(rejected) + " rejected, " + std::to_string(failed) + " failed; peak " +
                        std::to_string(peak_live) + " bytes live in one case";
        for (const auto& f : failures)
            s += "\n  " + f;
        return s;
    }
};

/// Runs one case: `load()` loads the file and returns "" when what it loaded agrees with what the file
/// declares, else what disagrees. The case passes when load() returns "" (loaded) or throws dtrain::Error
/// whose message contains `must_name` (rejected). It fails, recorded in `report` as `what` and why, when the
/// result disagrees, the message does not name `must_name`, another exception escapes, or `limit` refused
/// an allocation (even one the loader caught).
template <class F>
void run_case(Report& report, AllocationLimit& limit, const std::string& what, const std::string& must_name,
              F&& load) {
    ++report.cases;
    limit.reset();
    std::string problem;
    try {
        problem = load();
        if (problem.empty()) ++report.loaded;
        problem = problem.empty() ? "" : "loaded, but " + problem;
    } catch (const dtrain::Error& e) {
        ++report.rejected;
        const std::string m = e.what();
        if (m.find(must_name) == std::string::npos)
            problem = "the error does not name " + must_name + ": " + m;
    } catch (const std::exception& e) {
        problem = std::string("threw a std::exception that is not dtrain::Error: ") + e.what();
    } catch (...) {
        problem = "threw something that is not a std::exception";
    }
    const std::string refused = limit.violation();
    if (!refused.empty()) problem += (problem.empty() ? "" : "; ") + refused;
    report.peak_live = std::max(report.peak_live, limit.peak_live());
    if (!problem.empty()) report.fail(what + ": " + problem);
}

}  // namespace dtrain::test::fuzz

#ifdef DTRAIN_FUZZ_REPLACE_NEW
// The replacements: malloc and free underneath, with every block's usable size counted.
namespace dtrain::test::fuzz::detail {
inline const bool replacement_installed = (allocation_state().replaced = true);
}  // namespace dtrain::test::fuzz::detail

namespace dtrain::test::fuzz::detail {

/// The one allocation path of every replaced operator new: limit, allocate, count.
inline void* allocate(std::size_t n, std::size_t align, bool nothrow) {
    void* p = nullptr;
    if (admit(n))
        p = align <= alignof(std::max_align_t)
                ? std::malloc(n ? n : 1)
                : std::aligned_alloc(align, (std::max<std::size_t>(n, 1) + align - 1) / align * align);
    if (p != nullptr)
        count(p, +1);
    else if (!nothrow)
        throw std::bad_alloc();
    return p;
}

/// The one release path of every replaced operator delete.
inline void release(void* p) noexcept {
    if (p == nullptr) return;
    count(p, -1);
    std::free(p);
}

}  // namespace dtrain::test::fuzz::detail

// Every replaceable form, so that none falls back to the sanitizer's or the library's own (AddressSanitizer
// reports a block from its operator new that reaches free() here). GCC flags free() on memory from operator
// new, not knowing this file replaces both.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
using dtrain::test::fuzz::detail::allocate;
using dtrain::test::fuzz::detail::release;
void* operator new(std::size_t n) {
    return allocate(n, 0, false);
}
void* operator new[](std::size_t n) {
    return allocate(n, 0, false);
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    return allocate(n, 0, true);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
    return allocate(n, 0, true);
}
void* operator new(std::size_t n, std::align_val_t a) {
    return allocate(n, static_cast<std::size_t>(a), false);
}
void* operator new[](std::size_t n, std::align_val_t a) {
    return allocate(n, static_cast<std::size_t>(a), false);
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    return allocate(n, static_cast<std::size_t>(a), true);
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    return allocate(n, static_cast<std::size_t>(a), true);
}
void operator delete(void* p) noexcept {
    release(p);
}
void operator delete[](void* p) noexcept {
    release(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
    release(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
    release(p);
}
void operator delete(void* p, std::size_t) noexcept {
    release(p);
}
void operator delete[](void* p, std::size_t) noexcept {
    release(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
    release(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
    release(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    release(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    release(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
    release(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
    release(p);
}
#pragma GCC diagnostic pop
#endif

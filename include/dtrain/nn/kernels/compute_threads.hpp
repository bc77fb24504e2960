#pragma once

/// @file
/// Threads within a rank: how many threads one rank computes with (DTRAIN_THREADS), and the small pool of
/// workers that Conv2d and Dense split a batch over for the algorithms that allow it.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <dtrain/core/error.hpp>

namespace dtrain {

/// The threads one rank computes with: DTRAIN_THREADS at first use (a whole number from 1 to 4096; unset
/// or empty: 1, one thread per rank), then whatever a program or a test assigns. Conv2d and Dense split the
/// forward pass and the input gradient of a batch over this many threads where their algorithm's results do
/// not depend on the rest of the batch (the native kernels), and Dense its weight gradient over output
/// rows, so results do not depend on it; Conv2d's weight gradient runs on one thread beside the input
/// gradient's parts. The oneDNN algorithms run on this many OpenMP threads instead.
/// Throws dtrain::Error naming the variable for another value.
inline int& compute_threads() {
    static int threads = [] {
        const char* env = std::getenv("DTRAIN_THREADS");
        if (env == nullptr || *env == '\0') return 1;
        char* end = nullptr;
        const long v = std::strtol(env, &end, 10);
        DTRAIN_CHECK(*end == '\0' && v >= 1 && v <= 4096,
                     "DTRAIN_THREADS must be a whole number from 1 to 4096, got '", env, "'");
        return int(v);
    }();
    return threads;
}

namespace detail {

/// Persistent worker threads, started as needed: run(n, f) calls f(0), ..., f(n - 1) on the calling thread
/// and at most compute_threads() - 1 workers, each part on whichever thread takes it first (f(0) on the
/// caller; a worker whose core is busy with another process then holds up a run by at most the part it
/// took), and returns when all have returned (rethrowing the first exception). One run at a time; f must
/// not call run. Waiting threads spin for up to spin_time before they block, since a layer's calls follow
/// one another within a fraction of a millisecond and waking a blocked thread costs about as much.
class ComputePool {
public:
    /// How long an idle worker, and the caller waiting for the workers, spin before blocking.
    static constexpr std::chrono::microseconds spin_time{500};

    /// The process's pool.
    static ComputePool& get() {
        static ComputePool pool;
        return pool;
    }

    ComputePool() = default;
    ComputePool(const ComputePool&) = delete;
    ComputePool& operator=(const ComputePool&) = delete;

    ~ComputePool() {
        {
            std::lock_guard<std::mutex> lock(m_);
            stop_ = true;
        }
        wake_.notify_all();
        for (std::thread& t : workers_)
            t.join();
    }

    /// Calls f(i) for i in [0, n) on this thread and up to compute_threads() - 1 workers; returns when all
    /// are done.
    void run(std::size_t n, const std::function<void(std::size_t)>& f) {
        const std::size_t helpers = std::min<std::size_t>(n, std::size_t(std::max(compute_threads(), 1))) - 1;
        if (helpers == 0) {
            for (std::size_t i = 0; i < n; ++i)
                f(i);
            return;
        }
        std::unique_lock<std::mutex> lock(m_);
        while (workers_.size() < helpers)
            workers_.emplace_back([this, k = workers_.size(), seen = generation_.load()] { work(k, seen); });
        active_.store(helpers, std::memory_order_relaxed);
        job_ = &f;
        next_ = 1;
        end_ = n;
        pending_.store(n - 1);
        error_ = nullptr;
        generation_.fetch_add(1, std::memory_order_release);
        lock.unlock();
        wake_.notify_all();
        std::exception_ptr mine;
        try {
            f(0);
        } catch (...) {
            mine = std::current_exception();
        }
        lock.lock();
        take_parts(lock);  // the parts no worker has started yet (a worker may be descheduled)
        lock.unlock();
        spin_until([this] { return pending_.load(std::memory_order_acquire) == 0; });
        lock.lock();
        done_.wait(lock, [this] { return pending_.load() == 0; });
        job_ = nullptr;
        if (mine) std::rethrow_exception(mine);
        if (error_) std::rethrow_exception(error_);
    }

private:
    // Spins until ready() or spin_time has passed.
    template <class Ready>
    static void spin_until(Ready ready) {
        const auto until = std::chrono::steady_clock::now() + spin_time;
        for (unsigned k = 1; !ready(); ++k)
            if (k % 64 == 0) {
                if (std::chrono::steady_clock::now() > until) return;
                // to another thread of the process (communication, MPI) if one waits for a core
                std::this_thread::yield();
            }
    }

    // Worker k's loop; `seen` is the generation it was started in (it takes part from the next one). Only
    // the first active_ workers take parts (and spin): no more threads than compute_threads() run.
    void work(std::size_t k, std::size_t seen) {
        for (;;) {
            if (k < active_.load(std::memory_order_relaxed))
                spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; });
            std::unique_lock<std::mutex> lock(m_);
            wake_.wait(lock, [&] { return stop_ || generation_.load() != seen; });
            if (stop_) return;
            seen = generation_.load();
            if (k < active_.load(std::memory_order_relaxed)) take_parts(lock);
        }
    }

    // Runs the current run's parts not yet taken, one at a time, with `lock` (on m_) held between them.
    void take_parts(std::unique_lock<std::mutex>& lock) {
        while (next_ < end_) {
            const std::size_t i = next_++;
            const std::function<void(std::size_t)>* f = job_;
            lock.unlock();
            std::exception_ptr e;
            try {
                (*f)(i);
            } catch (...) {
                e = std::current_exception();
            }
            lock.lock();
            if (e && !error_) error_ = e;
            if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) done_.notify_one();
        }
    }

    std::mutex m_;
    std::condition_variable wake_, done_;
    std::vector<std::thread> workers_;
    const std::function<void(std::size_t)>* job_ = nullptr;
    std::size_t next_ = 0, end_ = 0;
    bool stop_ = false;
    std::exception_ptr error_;
    // What spinning threads read, each on a cache line of its own, apart from what other threads write.
    alignas(64) std::atomic<std::size_t> pending_{0};
    alignas(64) std::atomic<std::size_t> generation_{0};
    std::atomic<std::size_t> active_{0};  // the workers taking part in the current run
};

/// The fewest output rows a thread takes of a weight gradient split over threads (Dense), so that each
/// thread's share outweighs the pool's hand-over.
constexpr std::size_t min_rows_per_thread = 16;

/// The sample ranges [begin, end) of `parts` near-equal chunks of a batch of n (the first ones one larger).
inline std::vector<std::size_t> batch_chunks(std::size_t n, std::size_t parts) {
    std::vector<std::size_t> bounds{0};
    for (std::size_t k = 0; k < parts; ++k)
        bounds.push_back(bounds.back() + n / parts + (k < n % parts ? 1 : 0));
    return bounds;
}

/// A layer's batch split over compute_threads() threads: one algorithm instance per part, each prepared
/// for its part's samples. Empty when the threads are 1, the batch has one sample, or the algorithm does
/// not split (its entry's splits_batch).
template <class Algorithm>
class BatchSplit {
public:
    /// Sets up the parts of a batch of n for `chosen` (an algorithm-list entry: splits_batch, make());
    /// problem(samples) is the problem of a part of that many samples.
    template <class Entry, class Problem>
    void prepare(const Entry& chosen, std::size_t n, Problem problem) {
        threads_ = compute_threads();
        const std::size_t parts = std::min<std::size_t>(std::size_t(std::max(threads_, 1)), n);
        parts_.clear();
        bounds_.clear();
        if (!chosen.splits_batch || parts < 2) return;
        bounds_ = batch_chunks(n, parts);
        for (std::size_t k = 0; k < parts; ++k) {
            parts_.push_back(chosen.make());
            parts_.back()->prepare(problem(bounds_[k + 1] - bounds_[k]));
        }
    }

    /// True when prepare() ran for another compute_threads() than today's.
    bool stale() const { return threads_ != compute_threads(); }

    /// True when there are no parts (the layer computes on its own instance).
    bool empty() const { return parts_.empty(); }

    /// The number of parts (0 when empty()).
    std::size_t size() const { return parts_.size(); }

    /// Calls f(part's algorithm, its first sample) for every part at once, on the pool.
    template <class F>
    void run(F f) {
        ComputePool::get().run(parts_.size(), [&](std::size_t k) { f(*parts_[k], bounds_[k]); });
    }

    /// Calls first() and f(part's algorithm, its first sample) for every part, all at once on the pool
    /// (first() on the calling thread): a product independent of the parts' beside them.
    template <class First, class F>
    void run_beside(First first, F f) {
        ComputePool::get().run(parts_.size() + 1, [&](std::size_t k) {
            if (k == 0) return first();
            f(*parts_[k - 1], bounds_[k - 1]);
        });
    }

private:
    int threads_ = 1;
    std::vector<std::unique_ptr<Algorithm>> parts_;
    std::vector<std::size_t> bounds_;  // the parts' first samples, then the batch size
};

}  // namespace detail

}  // namespace dtrain

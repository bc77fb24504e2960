#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include <mpi.h>
#if defined(__linux__)
#include <sched.h>
#endif

#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>

namespace dtrain {

/// A thread that advances outstanding nonblocking operations while the main thread computes: MPI libraries
/// such as MPICH move data only inside MPI calls, so without it a reduction started during backward() would
/// make progress only at the next hook call. It calls `poll()` every `interval` while `pending()` is true
/// and sleeps on a condition variable otherwise (so it costs nothing between steps); both run with the
/// caller's mutex held, which the caller also holds around its own calls on the same operations.
///
/// An exception thrown by poll() is kept and rethrown once, by rethrow_error(), in the caller's thread; the
/// thread then stops polling until the error is taken. stop() (or destruction) ends and joins the thread.
/// Not copyable or movable.
class ProgressThread {
public:
    /// Poll interval DistOptimizer uses: short against a bucket's reduction, long against one test().
    static constexpr std::chrono::microseconds default_interval{20};

    /// A thread that is not running.
    ProgressThread() = default;
    ProgressThread(const ProgressThread&) = delete;
    ProgressThread& operator=(const ProgressThread&) = delete;
    /// Stops and joins the thread.
    ~ProgressThread() { stop(); }

    /// Starts the thread (see the class comment). `mutex` must outlive it. Throws what std::thread throws
    /// (std::system_error) when no thread can be started; nothing is running then.
    void start(std::mutex& mutex, std::function<bool()> pending, std::function<void()> poll,
               std::chrono::microseconds interval = default_interval) {
        mutex_ = &mutex;
        pending_ = std::move(pending);
        poll_ = std::move(poll);
        interval_ = interval;
        stop_ = false;
        thread_ = std::thread([this] { loop(); });
    }

    /// Wakes the thread after the caller made work pending (call it without holding the mutex).
    void notify() { wake_.notify_one(); }

    /// Ends and joins the thread; does nothing when it is not running.
    void stop() noexcept {
        if (!thread_.joinable()) return;
        {
            std::lock_guard<std::mutex> lock(*mutex_);
            stop_ = true;
        }
        wake_.notify_all();
        thread_.join();
    }

    /// True while the thread runs.
    bool running() const noexcept { return thread_.joinable(); }

    /// Rethrows, once, an exception poll() threw. Requires the mutex held.
    void rethrow_error() {
        if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    }

private:
    void loop() {
        std::unique_lock<std::mutex> lock(*mutex_);
        for (;;) {
            wake_.wait(lock, [this] { return stop_ || (!error_ && pending_()); });
            if (stop_) return;
            try {
                poll_();
            } catch (...) {
                error_ = std::current_exception();
                continue;
            }
            if (pending_()) {
                lock.unlock();
                std::this_thread::sleep_for(interval_);
                lock.lock();
            }
        }
    }

    std::mutex* mutex_ = nullptr;
    std::function<bool()> pending_;
    std::function<void()> poll_;
    std::chrono::microseconds interval_ = default_interval;
    std::condition_variable wake_;
    std::thread thread_;
    bool stop_ = false;         // guarded by *mutex_
    std::exception_ptr error_;  // guarded by *mutex_
};

namespace detail {

/// Number of CPUs this process may run on (its affinity mask on Linux, else the hardware's count; >= 1).
inline int available_cpus() {
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
#endif
    return std::max(1, int(std::thread::hardware_concurrency()));
}

}  // namespace detail

/// Whether DistOptimizer starts its progress thread, from the environment variable DTRAIN_PROGRESS_THREAD:
/// "1" = yes, "0" = no, unset or "auto" = only when this process may use at least two CPUs per rank on its
/// node (`local_ranks` = ranks sharing the node), so the thread has a CPU of its own instead of taking
/// time from the computation it should overlap with. Always no unless MPI provides MPI_THREAD_MULTIPLE
/// (the thread calls MPI while the main thread may, too). Throws dtrain::Error on another value.
inline bool progress_thread_enabled(int local_ranks) {
    const char* env = std::getenv("DTRAIN_PROGRESS_THREAD");
    const std::string mode = env != nullptr ? env : "auto";
    DTRAIN_CHECK(mode == "0" || mode == "1" || mode == "auto",
                 "DistOptimizer: DTRAIN_PROGRESS_THREAD must be 0, 1 or auto, got '", mode, "'");
    int provided = MPI_THREAD_SINGLE;
    DTRAIN_MPI_CHECK(MPI_Query_thread(&provided));
    if (provided != MPI_THREAD_MULTIPLE || mode == "0") return false;
    return mode == "1" || detail::available_cpus() >= 2 * local_ranks;
}

}  // namespace dtrain

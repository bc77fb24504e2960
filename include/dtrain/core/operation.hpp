#pragma once

/// @file
/// What this process is doing inside dtrain right now: every blocking dtrain operation (a collective, a wait
/// for a reduction, a parameter-server receive) opens an OperationScope, so the stall watchdog
/// (core/watchdog.hpp) can tell how long this rank has waited and in what, and describe it to other ranks.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <string>

#include <mpi.h>

#include <dtrain/core/error.hpp>

namespace dtrain {

namespace detail {

/// Seconds since an arbitrary fixed point of the steady clock.
inline double steady_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// "No step number" in an operation frame.
inline constexpr std::uint64_t no_step = std::numeric_limits<std::uint64_t>::max();

/// The stack of dtrain operations this process is in (innermost last), shared by the thread that runs
/// them and the watchdog thread that reads them; every access holds `mutex`.
struct OperationRecord {
    /// One open operation.
    struct Frame {
        const char* name = nullptr;     // static string, e.g. "DistOptimizer::step" or "Ring"
        const char* what = nullptr;     // static string appended as "name::what" (nullptr: none)
        std::uint64_t step = no_step;   // e.g. the optimizer step
        double timeout = 0.0;           // stall timeout set by the operation (0: inherit)
        MPI_Comm comm = MPI_COMM_NULL;  // the communicator it waits on (MPI_COMM_NULL: not known)
    };
    /// Deepest nesting recorded; deeper frames are counted but not described.
    static constexpr int max_depth = 6;

    std::mutex mutex;
    Frame frames[max_depth];
    int depth = 0;              // open operations (may exceed max_depth)
    double since = 0.0;         // when the innermost operation started or last made progress
    double idle_since = 0.0;    // when the last outermost operation ended
    std::uint64_t entered = 0;  // operations opened so far (tells a new wait from a continued one)
};

/// The process's record.
inline OperationRecord& operation_record() {
    static OperationRecord record;
    return record;
}

/// "DistOptimizer::step (step 12)" or "Ring::wait": one open operation as the watchdog names it.
inline std::string describe_frame(const OperationRecord::Frame& f) {
    std::string s = f.name;
    if (f.what != nullptr) s += concat("::", f.what);
    if (f.step != no_step) s += concat(" (step ", f.step, ")");
    return s;
}

/// "DistOptimizer::step (step 12) > Ring all-reduce" for the open operations, or "" when there are none.
/// Requires r.mutex.
inline std::string describe_operations(const OperationRecord& r) {
    std::string s;
    for (int i = 0; i < std::min(r.depth, OperationRecord::max_depth); ++i)
        s += (i > 0 ? " > " : "") + describe_frame(r.frames[i]);
    return s;
}

/// "DistOptimizer::step (step 12)": the outermost open operation, which tells where a rank stands (ranks in
/// the same outermost operation have arrived at the same place even when their inner waits differ), or ""
/// when there is none. Requires r.mutex.
inline std::string describe_outermost(const OperationRecord& r) {
    return r.depth == 0 ? std::string() : describe_frame(r.frames[0]);
}

/// The stall timeout in seconds from DTRAIN_STALL_TIMEOUT: unset = 300; "0" or "off" = no watchdog (0).
/// Throws dtrain::Error naming the variable for anything else than a non-negative number or "off".
inline double stall_timeout_from_environment() {
    const char* env = std::getenv("DTRAIN_STALL_TIMEOUT");
    if (env == nullptr || *env == '\0') return 300.0;
    const std::string v = env;
    if (v == "off") return 0.0;
    char* end = nullptr;
    const double t = std::strtod(env, &end);
    DTRAIN_CHECK(end != env && *end == '\0' && t >= 0.0 && t < 1e9,
                 "DTRAIN_STALL_TIMEOUT must be a number of ",
                 "seconds >= 0 (0 or 'off' disables the stall watchdog), got '", v, "'");
    return t;
}

}  // namespace detail

/// Marks the scope of a blocking dtrain operation for the stall watchdog: while it is open, the watchdog
/// knows that this rank waits in `name` (nested scopes read "outer > inner"), since when, on which
/// communicator and, optionally, at which step, and it ends the job with a message naming the operation and
/// the ranks that did not arrive when the wait exceeds the stall timeout (see Environment). Costs one
/// uncontended mutex lock at entry and at exit. `name` must be a string literal (or live as long).
class OperationScope {
public:
    /// Opens the operation `name` on `comm` at `step`, with `timeout` seconds of patience (0: inherit the
    /// enclosing operation's, else DTRAIN_STALL_TIMEOUT's).
    explicit OperationScope(const char* name, MPI_Comm comm = MPI_COMM_NULL,
                            std::uint64_t step = detail::no_step, double timeout = 0.0) {
        open({name, nullptr, step, timeout, comm});
    }
    /// Opens the operation "<who>::<what>" on `comm` (e.g. a communicator policy's name and its call).
    OperationScope(const char* who, const char* what, MPI_Comm comm) {
        open({who, what, detail::no_step, 0.0, comm});
    }
    OperationScope(const OperationScope&) = delete;
    OperationScope& operator=(const OperationScope&) = delete;
    /// Closes the operation.
    ~OperationScope() {
        detail::OperationRecord& r = detail::operation_record();
        std::lock_guard<std::mutex> lock(r.mutex);
        --r.depth;
        const double now = detail::steady_seconds();
        r.since = now;
        if (r.depth == 0) r.idle_since = now;
    }

private:
    static void open(const detail::OperationRecord::Frame& f) {
        detail::OperationRecord& r = detail::operation_record();
        std::lock_guard<std::mutex> lock(r.mutex);
        if (r.depth < detail::OperationRecord::max_depth) r.frames[r.depth] = f;
        ++r.depth;
        ++r.entered;
        r.since = detail::steady_seconds();
    }

public:
    /// Tells the watchdog that a long-running operation made progress (a parameter server that received a
    /// message): its wait starts again from now.
    static void progress() {
        detail::OperationRecord& r = detail::operation_record();
        std::lock_guard<std::mutex> lock(r.mutex);
        r.since = detail::steady_seconds();
    }
};

}  // namespace dtrain

#pragma once

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include <mpi.h>

#include <dtrain/core/abort.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/node.hpp>
#include <dtrain/core/watchdog.hpp>

namespace dtrain {

namespace detail {

/// The std::terminate handler dtrain::Environment installs: reports the in-flight exception (if any) with
/// the rank, then aborts the job.
[[noreturn]] inline void terminate_handler() noexcept {
    std::string what = "std::terminate called without an active exception";
    if (std::exception_ptr e = std::current_exception()) {
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& ex) {
            what = std::string("uncaught exception: ") + ex.what();
        } catch (...) {
            what = "uncaught exception of a type not derived from std::exception";
        }
    }
    abort_job(what);
}

}  // namespace detail

/// RAII owner of the MPI runtime for a dtrain program. Construct one at the top of main().
///
/// - Initialises MPI with MPI_Init_thread requesting `required` (default MPI_THREAD_MULTIPLE); if the
///   library provides less, the program goes on and thread_level() says what was provided. If MPI was
///   already initialised (by the user or another library), it is used as is and left running.
/// - Exposes rank() and size() in MPI_COMM_WORLD and the node-local rank (MPI_Comm_split_type with
///   MPI_COMM_TYPE_SHARED), e.g. to pick a device or pin threads.
/// - Finalises MPI at scope exit only if it initialised it.
/// - An uncaught exception ends the whole job: the Environment installs a std::terminate handler that prints
///   the exception's message with the rank and calls MPI_Abort (restored at scope exit), and its destructor
///   also aborts the job when it runs during stack unwinding, because finalising while other ranks wait in
///   a collective would hang them. Catch exceptions inside the Environment's scope to handle them locally.
/// - No wait inside dtrain lasts forever: with MPI_THREAD_MULTIPLE, a stall Watchdog thread (on a private
///   duplicate of MPI_COMM_WORLD) ends the job with a message naming the operation, the step and the ranks
///   that did not arrive once a rank has waited `stall_timeout()` seconds in a dtrain operation (after a
///   warning at half of it), or a few seconds after a rank it waits for has left the job (its Environment
///   ended). The timeout is DTRAIN_STALL_TIMEOUT (seconds; default 300; 0 or "off": no watchdog) or an
///   operation's own (DistOptions::stall_timeout). At scope exit this rank tells the others it leaves and
///   waits (at most 10 s) for them to say the same, so MPI finalizes with no message left unreceived.
///
/// Not copyable or movable; create one per process.
class Environment {
public:
    /// Initialises MPI without command-line arguments (see the class comment).
    explicit Environment(int required = MPI_THREAD_MULTIPLE) : Environment(nullptr, nullptr, required) {}

    /// Initialises MPI, passing main's arguments to MPI_Init_thread (see the class comment).
    Environment(int& argc, char**& argv, int required = MPI_THREAD_MULTIPLE)
        : Environment(&argc, &argv, required) {}

    Environment(const Environment&) = delete;
    Environment& operator=(const Environment&) = delete;

    /// Finalises MPI if this Environment initialised it; aborts the job instead while an exception is
    /// propagating through it (see the class comment).
    ~Environment() {
        std::set_terminate(previous_handler_);
        if (std::uncaught_exceptions() > uncaught_at_start_) {
            detail::abort_job("an exception is propagating out of the scope of dtrain::Environment");
        }
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (owns_watchdog_) {
            watchdog_.stop();
            if (!finalized) watchdog_.leave(10.0);
            watchdog_running() = false;
        }
        if (!finalized && control_ != MPI_COMM_NULL) MPI_Comm_free(&control_);
        if (owns_ && !finalized) MPI_Finalize();
    }

    /// This process's rank in MPI_COMM_WORLD.
    int rank() const noexcept { return rank_; }
    /// Number of processes in MPI_COMM_WORLD.
    int size() const noexcept { return size_; }
    /// This process's rank among the processes sharing its node (memory).
    int local_rank() const noexcept { return local_rank_; }
    /// Number of processes sharing this node.
    int local_size() const noexcept { return local_size_; }
    /// The thread support MPI provides (MPI_THREAD_SINGLE ... MPI_THREAD_MULTIPLE).
    int thread_level() const noexcept { return thread_level_; }
    /// True when MPI provides MPI_THREAD_MULTIPLE.
    bool thread_multiple() const noexcept { return thread_level_ >= MPI_THREAD_MULTIPLE; }
    /// True when this Environment initialised MPI (and will finalise it).
    bool owns_mpi() const noexcept { return owns_; }
    /// The stall timeout in seconds (0: no watchdog); see the class comment.
    double stall_timeout() const noexcept { return stall_timeout_; }
    /// True when the stall watchdog runs (MPI_THREAD_MULTIPLE and a stall timeout above 0).
    bool watchdog() const noexcept { return watchdog_.running(); }
    /// MPI_COMM_WORLD, for constructing communicators.
    MPI_Comm world() const noexcept { return MPI_COMM_WORLD; }

private:
    Environment(int* argc, char*** argv, int required) {
        int initialized = 0, finalized = 0;
        MPI_Initialized(&initialized);
        MPI_Finalized(&finalized);
        DTRAIN_CHECK(!finalized, "dtrain::Environment: MPI has already been finalized and cannot restart");
        if (!initialized) {
            DTRAIN_MPI_CHECK(MPI_Init_thread(argc, argv, required, &thread_level_));
            owns_ = true;
        } else {
            DTRAIN_MPI_CHECK(MPI_Query_thread(&thread_level_));
        }
        // From here on a throw would skip the destructor: finalise what we started before rethrowing.
        try {
            DTRAIN_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
            DTRAIN_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
            {
                const detail::CommHandle local = detail::node_comm(MPI_COMM_WORLD);
                local_rank_ = local.rank();
                local_size_ = local.size();
            }
            stall_timeout_ = detail::stall_timeout_from_environment();
            if (stall_timeout_ > 0 && thread_level_ >= MPI_THREAD_MULTIPLE &&
                !watchdog_running().exchange(true)) {
                owns_watchdog_ = true;
                DTRAIN_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &control_));
                watchdog_.start(control_, stall_timeout_);
            }
        } catch (...) {
            if (owns_watchdog_) watchdog_running() = false;
            if (control_ != MPI_COMM_NULL) MPI_Comm_free(&control_);
            if (owns_) MPI_Finalize();
            throw;
        }
        uncaught_at_start_ = std::uncaught_exceptions();
        previous_handler_ = std::set_terminate(&detail::terminate_handler);
    }

    // True while some Environment of this process runs the watchdog (a nested Environment starts none).
    static std::atomic<bool>& watchdog_running() {
        static std::atomic<bool> running{false};
        return running;
    }

    bool owns_ = false;
    bool owns_watchdog_ = false;
    int thread_level_ = MPI_THREAD_SINGLE;
    int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
    int uncaught_at_start_ = 0;
    double stall_timeout_ = 0.0;
    MPI_Comm control_ = MPI_COMM_NULL;  // private duplicate of MPI_COMM_WORLD for the watchdog
    Watchdog watchdog_;
    std::terminate_handler previous_handler_ = nullptr;
};

}  // namespace dtrain

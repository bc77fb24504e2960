#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include <mpi.h>

#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>

namespace dtrain {

namespace detail {

/// Prints "dtrain: rank R of P: uncaught exception: <what>" to stderr and aborts the whole MPI job with
/// MPI_Abort, so one rank's failure never leaves the other ranks waiting in a collective.
[[noreturn]] inline void abort_job(const std::string& what) noexcept {
    int initialized = 0, finalized = 0, rank = -1, size = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    const bool running = initialized && !finalized;
    if (running) {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
    }
    std::fprintf(stderr, "dtrain: rank %d of %d: %s; aborting the MPI job\n", rank, size, what.c_str());
    std::fflush(stderr);
    if (running) MPI_Abort(MPI_COMM_WORLD, 1);
    std::abort();
}

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
            MPI_Comm local = MPI_COMM_NULL;
            DTRAIN_MPI_CHECK(
                MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local));
            DTRAIN_MPI_CHECK(MPI_Comm_rank(local, &local_rank_));
            DTRAIN_MPI_CHECK(MPI_Comm_size(local, &local_size_));
            DTRAIN_MPI_CHECK(MPI_Comm_free(&local));
        } catch (...) {
            if (owns_) MPI_Finalize();
            throw;
        }
        uncaught_at_start_ = std::uncaught_exceptions();
        previous_handler_ = std::set_terminate(&detail::terminate_handler);
    }

    bool owns_ = false;
    int thread_level_ = MPI_THREAD_SINGLE;
    int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
    int uncaught_at_start_ = 0;
    std::terminate_handler previous_handler_ = nullptr;
};

}  // namespace dtrain

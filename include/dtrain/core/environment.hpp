#pragma once

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include <mpi.h>

#include <dtrain/core/abort.hpp>
#include <dtrain/core/crash_report.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/exit_timer.hpp>
#include <dtrain/core/launcher.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/node.hpp>
#include <dtrain/core/precompiled.hpp>
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

/// The bound in seconds on MPI_Finalize once every rank has left the job (at most finalize_timeout()).
inline constexpr double finalize_after_leave = 10.0;

/// The bound in seconds on the end of a job (see Environment) from DTRAIN_FINALIZE_TIMEOUT: unset = the
/// stall timeout `stall_timeout` (0 there: no bound); "0" or "off" = no bound. Throws dtrain::Error naming
/// the variable for anything else than a non-negative number or "off".
inline double finalize_timeout_from_environment(double stall_timeout) {
    const char* env = std::getenv("DTRAIN_FINALIZE_TIMEOUT");
    if (env == nullptr || *env == '\0') return stall_timeout;
    const std::string v = env;
    if (v == "off") return 0.0;
    char* end = nullptr;
    const double t = std::strtod(env, &end);
    DTRAIN_CHECK(end != env && *end == '\0' && t >= 0.0 && t < 1e9,
                 "DTRAIN_FINALIZE_TIMEOUT must be a number of seconds >= 0 (0 or 'off': the end of the job ",
                 "is not bounded), got '", v, "'");
    return t;
}

/// The host names of the ranks of `comm`, by rank (MPI_Allgather). Collective over `comm`.
inline std::vector<std::string> gather_host_names(MPI_Comm comm) {
    constexpr int width = 64;
    int size = 1;
    DTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size));
    char mine[width] = {};
    const std::string host = host_name();
    host.copy(mine, width - 1);
    std::vector<char> all(std::size_t(size) * width);
    DTRAIN_MPI_CHECK(MPI_Allgather(mine, width, MPI_CHAR, all.data(), width, MPI_CHAR, comm));
    std::vector<std::string> hosts;
    for (int r = 0; r < size; ++r)
        hosts.emplace_back(all.data() + std::size_t(r) * width);
    return hosts;
}

}  // namespace detail

/// RAII owner of the MPI runtime for a dtrain program. Construct one at the top of main().
///
/// - Initialises MPI with MPI_Init_thread requesting `required` (default MPI_THREAD_MULTIPLE); if the
///   library provides less, the program goes on and thread_level() says what was provided. If MPI was
///   already initialised (by the user or another library), it is used as is and left running.
/// - Refuses a wrong launch: when the launcher announced N > 1 processes (srun, MPICH's or Open MPI's
///   mpiexec, see detail::launch_info) but MPI sees one, every process throws dtrain::Error saying so, naming
///   the MPI this program is built with and the launcher to use. DTRAIN_ALLOW_SINGLETON=1 allows
///   independent single processes on purpose.
/// - Exposes rank() and size() in MPI_COMM_WORLD and the node-local rank (MPI_Comm_split_type with
///   MPI_COMM_TYPE_SHARED), e.g. to pick a device or pin threads.
/// - Finalises MPI at scope exit only if it initialised it.
/// - A process killed by SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT prints "dtrain: rank R of P (host H):
///   killed by SIGSEGV (invalid memory access)" before it ends as it would have
///   (detail::install_crash_report).
/// - An uncaught exception ends the whole job: the Environment installs a std::terminate handler that prints
///   the exception's message with the rank and calls MPI_Abort (restored at scope exit), and its destructor
///   also aborts the job when it runs during stack unwinding, because finalising while other ranks wait in
///   a collective would hang them. Catch exceptions inside the Environment's scope to handle them locally.
/// - No wait inside dtrain lasts forever: with MPI_THREAD_MULTIPLE, a stall Watchdog thread (on a private
///   duplicate of MPI_COMM_WORLD) ends the job with a message naming the operation, the step and the ranks
///   that did not arrive once a rank has waited `stall_timeout()` seconds in a dtrain operation (after a
///   warning at half of it), or a few seconds after a rank it waits for has left the job (its Environment
///   ended). The timeout is DTRAIN_STALL_TIMEOUT (seconds; default 300; 0 or "off": no watchdog) or an
///   operation's own (DistOptions::stall_timeout). The start-up's own collectives (node ranks, host names)
///   run under the watchdog; MPI_Init_thread and the duplicate the watchdog needs are bounded by the stall
///   timeout too: a process still in them then prints its rank and host and exits with status 1.
/// - The end of the job is bounded by finalize_timeout() (DTRAIN_FINALIZE_TIMEOUT, seconds; default the
///   stall timeout; 0 or "off": not bounded). At scope exit this rank tells the others it leaves and waits
///   for them to say the same, so MPI finalizes with no message left unreceived. A rank that has not said so
///   within the bound (stopped, dead, or computing after its last dtrain operation) ends the job (MPI_Abort,
///   non-zero status) with "rank 0 (host a) left main (...) and has waited T s in MPI_Finalize for rank 1;
///   rank 1 (host b) did not answer (stopped or dead)". When every rank has left but MPI_Finalize itself
///   does not return within detail::finalize_after_leave (10 s) or the bound if lower (an MPI library that
///   hangs there, as MPICH 4.0 with UCX over TCP can), the process prints so and exits
///   with status 0 without finalizing, since the job's work is done (main's own return value is lost then;
///   and the launcher may end the ranks that have not exited yet when the first one does, and report the
///   job as failed: MPICH's mpiexec sometimes does).
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
    /// propagating through it, or when another rank does not leave within finalize_timeout() (see the class
    /// comment).
    ~Environment();

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
    /// The bound in seconds on the end of the job (0: none); see the class comment.
    double finalize_timeout() const noexcept { return finalize_timeout_; }
    /// True when the stall watchdog runs (MPI_THREAD_MULTIPLE and a stall timeout above 0).
    bool watchdog() const noexcept { return watchdog_.running(); }
    /// MPI_COMM_WORLD, for constructing communicators.
    MPI_Comm world() const noexcept { return MPI_COMM_WORLD; }

private:
    Environment(int* argc, char*** argv, int required);

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
    double finalize_timeout_ = 0.0;
    std::string host_;                  // this process's host name
    std::vector<std::string> hosts_;    // every rank's host name (with the watchdog), for the end of the job
    detail::ExitTimer exit_timer_;      // bounds MPI start-up and the end of the job
    MPI_Comm control_ = MPI_COMM_NULL;  // private duplicate of MPI_COMM_WORLD for the watchdog
    Watchdog watchdog_;
    std::terminate_handler previous_handler_ = nullptr;
};

#if DTRAIN_HEADER_DEFINITIONS

DTRAIN_INLINE Environment::Environment(int* argc, char*** argv, int required) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    DTRAIN_CHECK(!finalized, "dtrain::Environment: MPI has already been finalized and cannot restart");
    stall_timeout_ = detail::stall_timeout_from_environment();
    finalize_timeout_ = detail::finalize_timeout_from_environment(stall_timeout_);
    host_ = detail::host_name();
    const detail::EnvironmentMap launch = detail::launcher_environment();
    const std::string timed_out =
        detail::concat(" (DTRAIN_STALL_TIMEOUT ", stall_timeout_, " s); exiting with status 1");
    if (!initialized) {
        const long launch_rank = detail::launch_info(launch).rank;
        if (stall_timeout_ > 0)
            exit_timer_.arm(
                stall_timeout_,
                detail::concat("rank ", launch_rank >= 0 ? std::to_string(launch_rank) : "?", " (host ",
                               host_, "): MPI_Init_thread has not returned after ", stall_timeout_,
                               " s: MPI could not start the job (a process did not start or "
                               "cannot reach the others)",
                               timed_out),
                1);
        DTRAIN_MPI_CHECK(MPI_Init_thread(argc, argv, required, &thread_level_));
        exit_timer_.disarm();
        owns_ = true;
    } else {
        DTRAIN_MPI_CHECK(MPI_Query_thread(&thread_level_));
    }
    // From here on a throw would skip the destructor: finalise what we started before rethrowing.
    try {
        DTRAIN_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
        DTRAIN_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
        const std::string wrong_launch = detail::singleton_error(launch, size_, detail::mpi_library_name());
        DTRAIN_CHECK(wrong_launch.empty(), wrong_launch);
        if (stall_timeout_ > 0 && thread_level_ >= MPI_THREAD_MULTIPLE &&
            !watchdog_running().exchange(true)) {
            owns_watchdog_ = true;
            // Collective over every rank before the watchdog can run: bounded by the timer instead.
            exit_timer_.arm(stall_timeout_,
                            detail::concat("rank ", rank_, " of ", size_, " (host ", host_,
                                           "): dtrain::Environment's start-up has waited ", stall_timeout_,
                                           " s in MPI_Comm_dup(MPI_COMM_WORLD) for the other ranks: a rank "
                                           "did not reach its dtrain::Environment (stopped, dead or "
                                           "computing)",
                                           timed_out),
                            1, detail::ExitBy::MpiAbort);
            DTRAIN_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &control_));
            exit_timer_.disarm();
            watchdog_.start(control_, stall_timeout_);
        }
        {
            const OperationScope scope("dtrain::Environment start-up", MPI_COMM_WORLD);
            const detail::CommHandle local = detail::node_comm(MPI_COMM_WORLD);
            local_rank_ = local.rank();
            local_size_ = local.size();
            if (owns_watchdog_) {
                hosts_ = detail::gather_host_names(MPI_COMM_WORLD);
                watchdog_.set_hosts(hosts_);
            }
        }
    } catch (...) {
        exit_timer_.disarm();
        watchdog_.stop();
        if (owns_watchdog_) watchdog_running() = false;
        if (control_ != MPI_COMM_NULL) MPI_Comm_free(&control_);
        if (owns_) MPI_Finalize();
        throw;
    }
    detail::install_crash_report(rank_, size_, host_);
    uncaught_at_start_ = std::uncaught_exceptions();
    previous_handler_ = std::set_terminate(&detail::terminate_handler);
}

DTRAIN_INLINE Environment::~Environment() {
    std::set_terminate(previous_handler_);
    if (std::uncaught_exceptions() > uncaught_at_start_) {
        detail::abort_job("an exception is propagating out of the scope of dtrain::Environment");
    }
    int finalized = 0;
    MPI_Finalized(&finalized);
    std::fflush(stdout);
    std::fflush(stderr);
    const std::string me = detail::concat("rank ", rank_, " (host ", host_, ")");
    const std::string bound =
        detail::concat("(finalize timeout ", finalize_timeout_, " s, DTRAIN_FINALIZE_TIMEOUT)");
    bool all_left = false;
    try {
        if (owns_watchdog_) {
            watchdog_.stop();
            if (!finalized) {
                // Also bounds MPI_Abort below, should it hang.
                if (finalize_timeout_ > 0)
                    exit_timer_.arm(finalize_timeout_ + 5.0,
                                    me + " could not end the job after another rank did not leave it " +
                                        bound + "; exiting with status 1",
                                    1);
                const std::string late =
                    watchdog_.leave(finalize_timeout_ > 0 ? finalize_timeout_ : 10.0, hosts_);
                if (!late.empty() && finalize_timeout_ > 0) detail::abort_job(late + " " + bound);
                all_left = late.empty();
            }
            watchdog_running() = false;
        }
        if (!finalized && control_ != MPI_COMM_NULL) MPI_Comm_free(&control_);
        if (owns_ && !finalized) {
            // Once every rank has left, MPI_Finalize has nothing left to wait for: a library that hangs
            // there gets seconds, not the whole timeout, so a finished job ends with its result.
            if (finalize_timeout_ > 0)
                exit_timer_.arm(
                    all_left ? std::min(finalize_timeout_, detail::finalize_after_leave) : finalize_timeout_,
                    all_left ? me +
                                   ": MPI_Finalize has not returned although every rank has finished its "
                                   "work (the MPI library hangs in MPI_Finalize) " +
                                   bound + "; exiting with status 0 without finalizing"
                             : me +
                                   ": MPI_Finalize has not returned: another rank has not reached the "
                                   "end (stopped, dead or computing) or the MPI library hangs in "
                                   "MPI_Finalize " +
                                   bound + "; exiting with status 1",
                    all_left ? 0 : 1);
            MPI_Finalize();
        }
    } catch (...) {  // the timer's thread could not start: finalize without a bound
        if (!finalized && control_ != MPI_COMM_NULL) MPI_Comm_free(&control_);
        if (owns_ && !finalized) MPI_Finalize();
    }
    exit_timer_.disarm();
}

#endif

}  // namespace dtrain

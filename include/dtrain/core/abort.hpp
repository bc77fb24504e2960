#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include <mpi.h>

namespace dtrain::detail {

/// How long abort_job() lets the launcher forward the message before MPI_Abort tears the job down: without
/// it, mpiexec.hydra sometimes killed the job before the failing rank's line had been forwarded (3% of
/// runs with the output redirected to a file).
inline constexpr std::chrono::milliseconds abort_flush_delay{300};

/// Prints "dtrain: rank R of P: <what>; aborting the MPI job" to stderr and ends the whole MPI job with
/// MPI_Abort, so one rank's failure never leaves the other ranks waiting; from any thread. While the launcher
/// forwards the line (abort_flush_delay), `while_waiting` (if set) is called every millisecond, e.g. to keep
/// answering other ranks; an exception from it is ignored.
[[noreturn]] inline void abort_job(const std::string& what,
                                   const std::function<void()>& while_waiting = {}) noexcept {
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
    std::fflush(stdout);
    if (running) {
        const auto end = std::chrono::steady_clock::now() + abort_flush_delay;
        while (std::chrono::steady_clock::now() < end) {
            try {
                if (while_waiting) while_waiting();
            } catch (...) {
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    std::abort();
}

}  // namespace dtrain::detail

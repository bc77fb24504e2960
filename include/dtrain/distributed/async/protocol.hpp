#pragma once

/// @file
/// The parameter-server wire protocol of DistOptimizer<Async, Opt> and its public records: what master 0
/// reports per gradient (AsyncStepInfo) and what each rank counted in a run (AsyncStats).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace dtrain {

/// What master 0 (rank 0) learns about one gradient it receives; see
/// DistOptimizer<Async, Opt>::set_step_callback.
struct AsyncStepInfo {
    /// Worker index (0 .. num_workers() - 1) that sent the gradient.
    int worker = 0;
    /// The worker's step number (0-based) of this gradient.
    std::uint64_t step = 0;
    /// Loss the worker passed to report() before this step (NaN when it reported none).
    double loss = std::numeric_limits<double>::quiet_NaN();
    /// Samples the worker passed to report() before this step (0 when none).
    std::uint64_t samples = 0;
    /// The worker's clock (steps sent) minus the slowest unfinished worker's clock when the gradient arrived.
    std::uint64_t clock_gap = 0;
    /// Updates applied to master 0's shard between the worker's read of it and this gradient's arrival.
    std::uint64_t delay = 0;
    /// Seconds since run() started on rank 0.
    double seconds = 0.0;
};

/// Counters of one rank's part in the last run() of DistOptimizer<Async, Opt>.
struct AsyncStats {
    /// Master: gradient shards received. Worker: steps (gradient sends) performed.
    std::uint64_t gradients = 0;
    /// Master: optimizer steps applied to its shard (fewer than gradients when rounds are averaged).
    std::uint64_t updates = 0;
    /// Master: largest clock gap (worker clock minus slowest unfinished worker's clock) at a
    /// reply; <= staleness.
    std::uint64_t max_staleness = 0;
    /// Master: largest number of updates between a worker's read of the shard and its gradient's arrival.
    std::uint64_t max_delay = 0;
    /// Master: mean of those delays.
    double mean_delay = 0.0;
    /// Master: replies held back by the staleness bound.
    std::uint64_t withheld = 0;
    /// Worker: seconds spent in step() waiting for the masters. Master: seconds waiting for messages.
    double wait_seconds = 0.0;
    /// Wall-clock seconds of run() on this rank, including the final assembly.
    double seconds = 0.0;
};

namespace detail {

/// Header of a gradient message (followed by the gradient shard).
struct AsyncGradHeader {
    /// The worker's step number of this gradient.
    std::uint64_t step;
    /// Samples the worker reported for it.
    std::uint64_t samples;
    /// Loss the worker reported for it.
    double loss;
    /// The worker's optimizer step count when it sent it: the schedule step (learning rate, Adam's bias
    /// correction) the masters apply it with.
    std::uint64_t schedule_step;
};

/// Message tags of the parameter-server protocol, on a communicator private to one DistOptimizer: a worker
/// sends each master a Gradient message per step and receives Parameters back, and a Done message with its
/// step count when its loop ends. A worker whose loop threw sends Failed to master 0, which sends Stop to
/// every worker still training, so their next step() throws instead of training on alone.
enum class AsyncTag : int { Gradient = 71, Parameters = 72, Done = 73, Failed = 74, Stop = 75 };

/// The tag's MPI value.
constexpr int tag(AsyncTag t) noexcept {
    return static_cast<int>(t);
}

/// Number of T values a gradient message's header occupies at the front of the message.
template <class T>
constexpr std::size_t header_elems = (sizeof(AsyncGradHeader) + sizeof(T) - 1) / sizeof(T);

/// Seconds on a monotonic clock.
inline double async_now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace detail

}  // namespace dtrain

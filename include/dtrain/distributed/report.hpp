#pragma once

#include <cstdint>

namespace dtrain {

/// What a worker passed to DistOptimizer::report() since the last reset_report(): running sums for
/// per-epoch metrics, the same under every policy (each worker holds its own; combine them with
/// DistOptimizer::global_sum()).
struct Reported {
    /// Sum over reported steps of loss * samples.
    double loss_sum = 0.0;
    /// Sum of the reported sample counts.
    double samples = 0.0;
    /// Number of report() calls.
    std::uint64_t steps = 0;
    /// loss_sum / samples (0 when nothing was reported).
    double mean_loss() const noexcept { return samples > 0 ? loss_sum / samples : 0.0; }
    /// Adds one step's batch-mean `loss` over `n` samples.
    void add(double loss, double n) noexcept {
        loss_sum += loss * n;
        samples += n;
        ++steps;
    }
};

}  // namespace dtrain

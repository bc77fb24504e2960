#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <utility>

#include <dtrain/core/error.hpp>

namespace dtrain {

/// A learning-rate schedule: a multiplier of the base learning rate as a function of the step count.
///
/// An optimizer holding a schedule uses `learning_rate() = base_lr * schedule(steps())` for its next step,
/// where `steps()` counts the steps already taken (0 for the first step). Schedules are small value types
/// (a `std::function`), cheap to copy and safe to share; calling one does not allocate. They compose:
/// warmup() delegates to an inner schedule after its ramp, e.g.
/// `Schedule::warmup(500, Schedule::cosine(10000, 0.01), 0.1)`.
///
/// The factories follow PyTorch's closed forms (StepLR, CosineAnnealingLR, LinearLR + SequentialLR), with
/// one documented difference: cosine() stays at its floor after T steps instead of rising again.
class Schedule {
public:
    /// The multiplier as a function of the number of steps already taken.
    using Function = std::function<double(std::uint64_t step)>;

    /// The constant schedule (multiplier 1 at every step).
    Schedule() = default;

    /// A custom schedule; `f(step)` must return a finite, non-negative multiplier (checked by the
    /// optimizers at every step). An empty `f` means the constant schedule.
    explicit Schedule(Function f) : f_(std::move(f)) {}

    /// The multiplier for the step that follows `step` completed steps.
    double operator()(std::uint64_t step) const { return f_ ? f_(step) : 1.0; }

    /// Multiplier 1 at every step.
    static Schedule constant() { return Schedule(); }

    /// PyTorch StepLR: `gamma^floor(step / every)`, i.e. the rate is multiplied by `gamma` after every
    /// `every` steps. Requires every > 0 and gamma finite and > 0.
    static Schedule step_decay(std::uint64_t every, double gamma) {
        DTRAIN_CHECK(every > 0, "Schedule::step_decay: the period must be > 0 steps, got ", every);
        DTRAIN_CHECK(std::isfinite(gamma) && gamma > 0.0,
                     "Schedule::step_decay: gamma must be finite and > 0, got ", gamma);
        return Schedule([every, gamma](std::uint64_t step) { return std::pow(gamma, double(step / every)); });
    }

    /// Cosine annealing (PyTorch CosineAnnealingLR's closed form, relative to the base rate):
    /// `min_factor + (1 - min_factor) * (1 + cos(pi * step / total)) / 2` for step < total, and
    /// `min_factor` from step `total` on (PyTorch would rise again). Requires total > 0 and
    /// 0 <= min_factor <= 1.
    static Schedule cosine(std::uint64_t total, double min_factor = 0.0) {
        DTRAIN_CHECK(total > 0, "Schedule::cosine: the length must be > 0 steps, got ", total);
        DTRAIN_CHECK(min_factor >= 0.0 && min_factor <= 1.0,
                     "Schedule::cosine: min_factor must be in [0, 1], got ", min_factor);
        return Schedule([total, min_factor](std::uint64_t step) {
            if (step >= total) return min_factor;
            const double pi = 3.14159265358979323846;
            return min_factor +
                   (1.0 - min_factor) * 0.5 * (1.0 + std::cos(pi * double(step) / double(total)));
        });
    }

    /// Linear warm-up (PyTorch LinearLR followed, via SequentialLR, by `inner`): the multiplier rises
    /// linearly from `start_factor` at step 0 to 1 at step `steps`, i.e.
    /// `start_factor + (1 - start_factor) * step / steps` for step < steps, then `inner(step - steps)`, so
    /// the inner schedule starts counting when the warm-up ends. `steps` = 0 means no warm-up. Requires
    /// start_factor finite and > 0. With the linear scaling rule (see scaled_lr()), Goyal et al. use
    /// `start_factor = 1 / world_size` so the ramp starts at the single-process rate.
    static Schedule warmup(std::uint64_t steps, Schedule inner = Schedule(),
                           double start_factor = 1.0 / 3.0) {
        DTRAIN_CHECK(std::isfinite(start_factor) && start_factor > 0.0,
                     "Schedule::warmup: start_factor must be finite and > 0, got ", start_factor);
        if (steps == 0) return inner;
        return Schedule([steps, start_factor, inner = std::move(inner)](std::uint64_t step) {
            if (step < steps) return start_factor + (1.0 - start_factor) * double(step) / double(steps);
            return inner(step - steps);
        });
    }

private:
    Function f_;
};

/// The linear scaling rule of Goyal et al. (2017), "Accurate, Large Minibatch SGD": when `world_size`
/// processes each keep the per-process batch size, multiply the single-process learning rate by
/// `world_size`. Pair it with `Schedule::warmup(w, inner, 1.0 / world_size)` so the first steps start at
/// `base_lr`. Requires base_lr >= 0 and world_size >= 1.
inline double scaled_lr(double base_lr, int world_size) {
    DTRAIN_CHECK(std::isfinite(base_lr) && base_lr >= 0.0, "scaled_lr: base_lr must be finite and >= 0, got ",
                 base_lr);
    DTRAIN_CHECK(world_size >= 1, "scaled_lr: world_size must be >= 1, got ", world_size);
    return base_lr * double(world_size);
}

}  // namespace dtrain

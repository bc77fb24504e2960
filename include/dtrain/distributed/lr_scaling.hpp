#pragma once

#include <cstdint>
#include <utility>

#include <dtrain/core/error.hpp>
#include <dtrain/optim/schedule.hpp>

namespace dtrain {

/// Goyal et al.'s gradual warm-up for the linear scaling rule as a Schedule multiplier of the SCALED
/// rate `scaled_lr(base_lr, world_size)`: the multiplier rises linearly from 1 / world_size (i.e. the
/// single-process rate base_lr) at step 0 to 1 at step `warmup_steps`, after which `inner` takes over
/// (counting from 0). The same as `Schedule::warmup(warmup_steps, inner, 1.0 / world_size)`. Requires
/// world_size >= 1.
inline Schedule linear_scaling_warmup(int world_size, std::uint64_t warmup_steps,
                                      Schedule inner = Schedule()) {
    DTRAIN_CHECK(world_size >= 1, "linear_scaling_warmup: world_size must be >= 1, got ", world_size);
    return Schedule::warmup(warmup_steps, std::move(inner), 1.0 / double(world_size));
}

/// Applies the linear scaling rule with gradual warm-up (Goyal et al. 2017) to a dtrain optimizer (SGD,
/// Adam, AdamW, or any type with base_learning_rate(), set_learning_rate(), schedule() and
/// set_schedule()): the base rate becomes `world_size * base_learning_rate()` and the optimizer's current
/// schedule runs after a linear ramp of `warmup_steps` steps that starts at the old base rate. Call it once,
/// before training, with the number of data-parallel workers (DistOptimizer::num_workers()).
template <class Opt>
void apply_linear_scaling(Opt& opt, int world_size, std::uint64_t warmup_steps) {
    const double base = opt.base_learning_rate();
    Schedule inner = opt.schedule();
    opt.set_schedule(linear_scaling_warmup(world_size, warmup_steps, std::move(inner)));
    opt.set_learning_rate(scaled_lr(base, world_size));
}

}  // namespace dtrain

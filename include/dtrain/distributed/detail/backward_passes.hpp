#pragma once

/// @file
/// The backward-pass bookkeeping of gradient accumulation (k backward passes per step()), shared by the
/// distributed optimizers, and the synchronous one's state machine that follows the gradient events of a
/// pass (from the model's hooks, hook_backward_passes()) to know which suffix of the flat gradient buffer
/// is final.

#include <algorithm>
#include <cstddef>

#include <dtrain/core/error.hpp>
#include <dtrain/nn/model.hpp>

namespace dtrain::detail {

/// Throws dtrain::Error naming `who` ("DistOptimizer::step") unless `passes` backward passes, the number
/// since the last step, equal `accumulation_steps`.
inline void check_step_passes(const char* who, std::size_t passes, std::size_t accumulation_steps) {
    DTRAIN_CHECK(passes == accumulation_steps, who, ": ", passes,
                 " backward passes since the last step, but accumulation_steps is ", accumulation_steps,
                 "; call step() once after every ", accumulation_steps, " model.backward() calls");
}

/// The backward passes of the synchronous DistOptimizer, fed by the model's gradient hooks: counts them
/// against accumulation_steps (one pass too many throws at its first gradient event) and, in the last pass
/// of a step when reductions overlap backward, tracks the suffix [ready_from(), n) of the flat gradient
/// buffer whose values are final, calling back when a suffix is worth reducing.
class BackwardPasses {
public:
    /// One pass per step over an empty buffer, without overlap (a placeholder until assigned).
    BackwardPasses() noexcept = default;

    /// `accumulation_steps` passes per step over a buffer of `n` values; with `overlap`, the last pass of
    /// each step reports its final suffixes.
    BackwardPasses(std::size_t accumulation_steps, bool overlap, std::size_t n) noexcept
        : accumulation_steps_(accumulation_steps), overlap_(overlap), n_(n) {}

    /// Layer `layer`'s gradient, at `offset` of the buffer, is final (layers run last to first). In a
    /// reporting pass, calls `launch(ready_from())` unless `layer` is 0: buckets that become ready at layer 0
    /// have no computation left to overlap with, so step() reduces them (pipelined with the optimizer, or
    /// with the often faster blocking call). Layer 0 ends the pass.
    template <class Launch>
    void layer_ready(std::size_t layer, std::size_t offset, Launch&& launch) {
        if (!in_pass_) begin_pass();
        if (reporting_) {
            ready_from_ = std::min(ready_from_, offset);
            if (layer > 0) launch(ready_from_);
        }
        if (layer == 0) {
            ++passes_;
            in_pass_ = false;
            reporting_ = false;
        }
    }

    /// Values [offset + begin, offset + end) of a layer whose gradient starts at `offset` are final (the
    /// end of the layer first). In a reporting pass, calls `launch(ready_from())` when they extend the final
    /// suffix.
    template <class Launch>
    void partial_ready(std::size_t offset, std::size_t begin, std::size_t end, Launch&& launch) {
        if (!in_pass_) begin_pass();
        if (!reporting_ || offset + end != ready_from_) return;
        ready_from_ = std::min(ready_from_, offset + begin);
        launch(ready_from_);
    }

    /// Throws dtrain::Error naming `who` unless accumulation_steps passes ran since the last step.
    void check_step(const char* who) const { check_step_passes(who, passes_, accumulation_steps_); }
    /// Counts from zero again after a step.
    void end_step() noexcept { passes_ = 0; }
    /// Counts from zero again and forgets a pass in progress (zero_grad()).
    void restart() noexcept {
        passes_ = 0;
        in_pass_ = false;
    }

    /// Complete backward passes since the last step.
    std::size_t passes() const noexcept { return passes_; }
    /// Start of the final suffix of the current reporting pass (n at its start).
    std::size_t ready_from() const noexcept { return ready_from_; }

private:
    // The first gradient event of a pass: checks the count and decides whether this pass (the last of the
    // step) reports final suffixes.
    void begin_pass() {
        DTRAIN_CHECK(passes_ < accumulation_steps_, "DistOptimizer: backward pass ", passes_ + 1,
                     " since the last step, but accumulation_steps is ", accumulation_steps_,
                     "; call step() once after every ", accumulation_steps_, " model.backward() calls");
        in_pass_ = true;
        reporting_ = overlap_ && passes_ + 1 == accumulation_steps_;
        ready_from_ = n_;
    }

    std::size_t accumulation_steps_ = 1;
    bool overlap_ = false;
    std::size_t n_ = 0;
    std::size_t passes_ = 0;      // complete passes since the last step / restart
    bool in_pass_ = false;        // a pass has reported gradients and not finished
    bool reporting_ = false;      // the current pass reports final suffixes
    std::size_t ready_from_ = 0;  // gradients [ready_from_, n_) are final in this pass
};

/// Feeds `model`'s gradient events to `passes` (the synchronous DistOptimizer): installs the model's
/// grad-ready hook, called after a layer's gradients are final (last layer first), and, when `chunk` > 0,
/// its partial-gradient hook, called with every `chunk` values of a layer's slice that are final (end of the
/// slice first); both replace the user's and hand `passes` the layer's offset in the flat gradient buffer
/// and `launch`, which it calls with the start of a final suffix worth reducing. `model` and `passes` must
/// outlive the hooks (set_grad_ready_hook(nullptr) and set_partial_grad_hook(nullptr, 0) remove them).
template <class T, class Launch>
void hook_backward_passes(Model<T>& model, BackwardPasses& passes, std::size_t chunk, Launch launch) {
    model.set_grad_ready_hook([&model, &passes, launch](std::size_t layer) {
        passes.layer_ready(layer, model.parameter_ranges()[layer].offset, launch);
    });
    if (chunk == 0) return;
    model.set_partial_grad_hook(
        [&model, &passes, launch](std::size_t layer, std::size_t begin, std::size_t end) {
            passes.partial_ready(model.parameter_ranges()[layer].offset, begin, end, launch);
        },
        chunk);
}

}  // namespace dtrain::detail

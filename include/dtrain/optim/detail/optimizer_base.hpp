#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <dtrain/core/aligned_allocator.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/optim/schedule.hpp>

namespace dtrain::detail {

/// Throws dtrain::Error "<who>: <what> must be finite and >= 0, got <v>" unless v is finite and >= 0.
inline void check_non_negative(const char* who, const char* what, double v) {
    DTRAIN_CHECK(std::isfinite(v) && v >= 0.0, who, ": ", what, " must be finite and >= 0, got ", v);
}

/// Throws dtrain::Error "<who>: <what> must be in [0, 1), got <v>" unless 0 <= v < 1.
inline void check_unit_interval(const char* who, const char* what, double v) {
    DTRAIN_CHECK(v >= 0.0 && v < 1.0, who, ": ", what, " must be in [0, 1), got ", v);
}

/// `v` in the shortest form that reads back as the same double ("0.05", "1e-08"), for describe().
inline std::string shortest(double v) {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
}

/// What every dtrain optimizer shares: the flat state buffer (`slots` slots of n values), the step count,
/// the base learning rate and the schedule. Derived optimizers implement step() on top of begin_step()
/// and end_step(), and the range form of the Optimizer concept (step_range() + finish_step()) on top of
/// begin_range() and finish_step(). Not part of the public API; use the optimizers (SGD, Adam, AdamW).
///
/// @tparam T float or double.
template <class T>
class OptimizerBase {
    static_assert(std::is_floating_point_v<T>, "dtrain optimizers: T must be float or double");

public:
    /// Element type of parameters, gradients and state.
    using value_type = T;

    /// Allocates zeroed state for `n` parameters and sets the step count to 0.
    void reset(std::size_t n) {
        state_.assign(slots_ * n, T(0));
        n_ = n;
        steps_ = 0;
        ready_ = true;
    }

    /// All state as one flat buffer: slot k is [k*n, (k+1)*n) in the parameter layout. Empty before the
    /// first reset() or step(), and always empty when state_slots() is 0.
    Span<T> state() noexcept { return Span<T>(state_.data(), state_.size()); }
    /// Read-only view of state().
    Span<const T> state() const noexcept { return Span<const T>(state_.data(), state_.size()); }

    /// Number of per-parameter state slots.
    std::size_t state_slots() const noexcept { return slots_; }

    /// Number of parameters the state is sized for (0 before the first reset() or step()).
    std::size_t size() const noexcept { return n_; }

    /// Number of steps taken.
    std::uint64_t steps() const noexcept { return steps_; }
    /// Sets the step count (e.g. when restoring a checkpoint together with state()).
    void set_steps(std::uint64_t s) noexcept { steps_ = s; }

    /// The learning rate the next step() uses: base_learning_rate() * schedule()(steps()).
    double learning_rate() const { return base_lr_ * schedule_(steps_); }
    /// The base learning rate (before the schedule).
    double base_learning_rate() const noexcept { return base_lr_; }
    /// Sets the base learning rate; requires it finite and >= 0.
    void set_learning_rate(double lr) {
        check_non_negative(name_, "learning rate", lr);
        base_lr_ = lr;
    }

    /// The schedule applied to the base learning rate.
    const Schedule& schedule() const noexcept { return schedule_; }
    /// Replaces the schedule; it takes effect from the next step() (it reads the current steps()).
    void set_schedule(Schedule s) { schedule_ = std::move(s); }

    /// Ends a step made of step_range() calls: counts it, exactly as the end of step() does.
    void finish_step() noexcept { ++steps_; }

    /// The optimizer's name as used in error messages ("SGD", "Adam", ...).
    const char* name() const noexcept { return name_; }

protected:
    /// An optimizer named `name` (a string literal) with `slots` state slots and base rate `lr`.
    OptimizerBase(const char* name, std::size_t slots, double lr) : name_(name), slots_(slots) {
        set_learning_rate(lr);
    }

    /// Checks sizes before an update and returns the learning rate of this step. The first call without a
    /// prior reset() allocates zeroed state for params.size() values (this is the only allocation; the
    /// step count is kept, so set_steps() before the first step is honoured). Throws when params and
    /// grads differ in size or from the size given to reset(), or when the schedule yields a negative or
    /// non-finite rate.
    double begin_step(Span<T> params, Span<const T> grads) {
        DTRAIN_CHECK(params.size() == grads.size(), name_, "::step: params have ", params.size(),
                     " values but grads have ", grads.size());
        if (!ready_) {
            state_.assign(slots_ * params.size(), T(0));
            n_ = params.size();
            ready_ = true;
        }
        DTRAIN_CHECK(params.size() == n_, name_, "::step: params and grads have ", params.size(),
                     " values but the optimizer was reset() for ", n_);
        return checked_learning_rate("step");
    }

    /// Checks a range update (step_range()) and returns the learning rate of the current step: the state
    /// must be sized (reset() or a first step()), params and grads must have the same size, and
    /// [offset, offset + params.size()) must lie within the size given to reset(). Throws dtrain::Error
    /// naming the optimizer and the sizes otherwise, or when the schedule yields a bad rate.
    double begin_range(Span<T> params, Span<const T> grads, std::size_t offset) const {
        DTRAIN_CHECK(ready_, name_, "::step_range: call reset(n) (or a first step()) before updating ranges");
        DTRAIN_CHECK(params.size() == grads.size(), name_, "::step_range: params have ", params.size(),
                     " values but grads have ", grads.size());
        DTRAIN_CHECK(offset <= n_ && params.size() <= n_ - offset, name_, "::step_range: the range [", offset,
                     ", ", offset + params.size(), ") is outside the ", n_, " values given to reset()");
        return checked_learning_rate("step_range");
    }

    /// The learning rate of the current step; throws dtrain::Error naming `<name>::<fn>` when the schedule
    /// yields a negative or non-finite rate.
    double checked_learning_rate(const char* fn) const {
        const double lr = learning_rate();
        DTRAIN_CHECK(std::isfinite(lr) && lr >= 0.0, name_, "::", fn, ": the schedule gives learning rate ",
                     lr, " at step ", steps_, " (base ", base_lr_, "); it must be finite and >= 0");
        return lr;
    }

    /// Counts the step just taken.
    void end_step() noexcept { ++steps_; }

    /// Slot `k` of the state (n values).
    T* slot(std::size_t k) noexcept { return state_.data() + k * n_; }

private:
    const char* name_;
    std::size_t slots_;
    AlignedVector<T> state_;
    std::size_t n_ = 0;
    std::uint64_t steps_ = 0;
    bool ready_ = false;
    double base_lr_ = 0.0;
    Schedule schedule_;
};

}  // namespace dtrain::detail

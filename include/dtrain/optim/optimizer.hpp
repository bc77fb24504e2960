#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include <dtrain/core/span.hpp>

namespace dtrain {

/// The Optimizer concept. A type `Opt` models it when it provides:
///
/// | member | meaning |
/// |---|---|
/// | `using value_type = T;` | element type of parameters and gradients (float or double) |
/// | `void reset(std::size_t n)` | allocates zeroed state for `n` parameters and sets the step count to 0 |
/// | `void step(Span<T> params, Span<const T> grads)` | one update of `params` in place from `grads`; both have the size given to reset() (a first step() without reset() sizes the zeroed state itself, keeping the step count). Must not allocate after that. |
/// | `Span<T> state()` | all state as one flat buffer of `state_slots() * n` values: slot k (momentum, Adam's first moment, ...) is [k*n, (k+1)*n), in the parameter layout, so it can be broadcast, sharded and checkpointed like the parameters |
/// | `std::size_t state_slots() const` | number of per-parameter state slots (0 for plain SGD) |
/// | `std::uint64_t steps() const`, `void set_steps(std::uint64_t)` | number of steps taken (Adam's bias correction and schedules use it) |
/// | `double learning_rate() const` | the learning rate the next step() uses (schedule applied) |
/// | `void set_learning_rate(double)` | sets the base learning rate |
///
/// Optional: `std::string describe() const`, the kind and hyper-parameters, e.g.
/// "SGD(lr=0.05, momentum=0.9, dampening=0, nesterov=false, weight_decay=0)" (has_describe_v checks it).
/// DistOptimizer compares it across ranks at construction and checkpoints record it, so a rank or a file
/// with another optimizer or learning rate is an error that names both.
///
/// DistOptimizer wraps any model of this concept, including a user's own; is_optimizer_v checks it.
///
/// The optional RANGE FORM, for element-wise optimizers (each value's update depends only on that value,
/// its gradient, its state and the step count; SGD, Adam and AdamW provide it; has_step_range_v checks it):
///
/// | member | meaning |
/// |---|---|
/// | `void step_range(Span<T> params, Span<const T> grads, std::size_t offset)` | the update of step() for the values [offset, offset + params.size()) of the full buffer only (params and grads are those values, the state is the same range of every slot), without counting the step |
/// | `void finish_step()` | counts the step: step_range() over ranges that cover every value once, then finish_step(), must give bitwise the result of one step() |
///
/// With it, the synchronous DistOptimizer updates each gradient bucket as soon as its reduction is
/// complete, while the next bucket's reduction is still in flight.
template <class Opt, class = void>
struct is_optimizer : std::false_type {};

/// Specialisation that detects every member of the Optimizer concept.
template <class Opt>
struct is_optimizer<
    Opt,
    std::void_t<typename Opt::value_type, decltype(std::declval<Opt&>().reset(std::size_t{})),
                decltype(std::declval<Opt&>().step(std::declval<Span<typename Opt::value_type>>(),
                                                   std::declval<Span<const typename Opt::value_type>>())),
                decltype(std::declval<Opt&>().state()), decltype(std::declval<const Opt&>().state_slots()),
                decltype(std::declval<const Opt&>().steps()),
                decltype(std::declval<Opt&>().set_steps(std::uint64_t{})),
                decltype(std::declval<const Opt&>().learning_rate()),
                decltype(std::declval<Opt&>().set_learning_rate(0.0))>>
    : std::bool_constant<
          std::is_same_v<decltype(std::declval<Opt&>().state()), Span<typename Opt::value_type>>> {};

/// True when Opt models the Optimizer concept.
template <class Opt>
inline constexpr bool is_optimizer_v = is_optimizer<Opt>::value;

/// Detects the optional describe() of the Optimizer concept.
template <class Opt, class = void>
struct has_describe : std::false_type {};

/// Specialisation that detects `std::string describe() const`.
template <class Opt>
struct has_describe<Opt, std::void_t<decltype(std::string(std::declval<const Opt&>().describe()))>>
    : std::true_type {};

/// True when Opt provides describe().
template <class Opt>
inline constexpr bool has_describe_v = has_describe<Opt>::value;

/// Detects the range form of the Optimizer concept (step_range() and finish_step()).
template <class Opt, class = void>
struct has_step_range : std::false_type {};

/// Specialisation that detects step_range() and finish_step().
template <class Opt>
struct has_step_range<Opt,
                      std::void_t<decltype(std::declval<Opt&>().step_range(
                                      std::declval<Span<typename Opt::value_type>>(),
                                      std::declval<Span<const typename Opt::value_type>>(), std::size_t{})),
                                  decltype(std::declval<Opt&>().finish_step())>> : std::true_type {};

/// True when Opt provides the range form of the Optimizer concept.
template <class Opt>
inline constexpr bool has_step_range_v = has_step_range<Opt>::value;

namespace detail {

/// True when `Opt<float>` and `Opt<double>` model the Optimizer concept, range form included: what each of
/// dtrain's optimizers asserts at the end of its header.
template <template <class> class Opt>
inline constexpr bool is_range_optimizer_template_v =
    std::conjunction_v<is_optimizer<Opt<float>>, is_optimizer<Opt<double>>, has_step_range<Opt<float>>,
                       has_step_range<Opt<double>>>;

}  // namespace detail

}  // namespace dtrain

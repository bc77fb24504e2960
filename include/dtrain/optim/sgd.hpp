#pragma once

#include <cstddef>
#include <string>

#include <dtrain/core/cpu.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/optim/detail/optimizer_base.hpp>
#include <dtrain/optim/optimizer.hpp>
#include <dtrain/optim/schedule.hpp>

namespace dtrain {

/// Options of SGD, set fluently: `SGDOptions().lr(0.005).momentum(0.9).weight_decay(1e-5)`.
/// Each setter returns the options; each getter of the same name reads the value. Checked by SGD's
/// constructor, not here.
///
/// | option | default | meaning (PyTorch torch.optim.SGD) |
/// |---|---|---|
/// | lr | 1e-3 | base learning rate, >= 0 |
/// | momentum | 0 | momentum factor in [0, 1); 0 disables the momentum buffer |
/// | dampening | 0 | dampening of the momentum in [0, 1] |
/// | nesterov | false | Nesterov momentum; requires momentum > 0 and dampening = 0 |
/// | weight_decay | 0 | L2 penalty added to the gradient, >= 0 |
class SGDOptions {
public:
    /// Sets the base learning rate.
    SGDOptions& lr(double v) noexcept {
        lr_ = v;
        return *this;
    }
    /// Sets the momentum factor.
    SGDOptions& momentum(double v) noexcept {
        momentum_ = v;
        return *this;
    }
    /// Sets the dampening of the momentum.
    SGDOptions& dampening(double v) noexcept {
        dampening_ = v;
        return *this;
    }
    /// Turns Nesterov momentum on or off.
    SGDOptions& nesterov(bool v) noexcept {
        nesterov_ = v;
        return *this;
    }
    /// Sets the L2 weight decay.
    SGDOptions& weight_decay(double v) noexcept {
        weight_decay_ = v;
        return *this;
    }

    /// The base learning rate.
    double lr() const noexcept { return lr_; }
    /// The momentum factor.
    double momentum() const noexcept { return momentum_; }
    /// The dampening of the momentum.
    double dampening() const noexcept { return dampening_; }
    /// Whether Nesterov momentum is on.
    bool nesterov() const noexcept { return nesterov_; }
    /// The L2 weight decay.
    double weight_decay() const noexcept { return weight_decay_; }

private:
    double lr_ = 1e-3;
    double momentum_ = 0.0;
    double dampening_ = 0.0;
    bool nesterov_ = false;
    double weight_decay_ = 0.0;
};

namespace detail {

/// SGD's fused update over n values (one pass: weight decay, momentum, update). See SGD for the rule.
template <bool Decay, bool Momentum, bool First, bool Nesterov, class T>
void sgd_kernel(T* __restrict p, const T* __restrict g, T* __restrict buf, std::size_t n, T lr, T wd, T mom,
                T one_minus_damp) {
    for (std::size_t i = 0; i < n; ++i) {
        T d = g[i];
        if constexpr (Decay) d += wd * p[i];
        if constexpr (Momentum) {
            T b;
            if constexpr (First) {
                b = d;
            } else {
                b = mom * buf[i] + one_minus_damp * d;
            }
            buf[i] = b;
            if constexpr (Nesterov) {
                d = d + mom * b;
            } else {
                d = b;
            }
        }
        p[i] -= lr * d;
    }
}

}  // namespace detail

/// Stochastic gradient descent with optional momentum, dampening, Nesterov momentum and L2 weight decay,
/// following PyTorch's torch.optim.SGD exactly. For each value, with `lr` the scheduled rate of the step:
///
///     g = grad + weight_decay * p                        (if weight_decay != 0)
///     if momentum != 0:
///         buf = g                                        (first step, steps() == 0)
///         buf = momentum * buf + (1 - dampening) * g     (later steps)
///         g = nesterov ? g + momentum * buf : buf
///     p = p - lr * g
///
/// State: one slot (the momentum buffer `buf`) when momentum != 0, none otherwise. The buffer is taken
/// as fresh (set to g) exactly when steps() == 0, so restore state() together with set_steps().
/// step() runs one fused pass over the values and never allocates after the first call.
///
/// Constructed from options, `SGD<float>(SGDOptions().lr(0.005).momentum(0.9).weight_decay(1e-5))`
/// (also spelled `SGD<float>::Options()`), or from just a learning rate, `SGD<float>(0.1)`. There is
/// deliberately no positional (lr, momentum, ...) constructor: PyTorch's positional order puts dampening
/// before weight_decay, so such a constructor would silently mean different things to different readers.
///
/// @tparam T float or double.
template <class T = float>
class SGD : public detail::OptimizerBase<T> {
    using Base = detail::OptimizerBase<T>;

public:
    /// The options type.
    using Options = SGDOptions;

    /// SGD with the given options. Throws dtrain::Error naming SGD and the value when lr < 0,
    /// momentum is outside [0, 1), dampening is outside [0, 1], weight_decay < 0, or nesterov is set
    /// with momentum = 0 or dampening != 0.
    explicit SGD(const SGDOptions& options = SGDOptions())
        : Base("SGD", options.momentum() != 0.0 ? 1 : 0, options.lr()), options_(options) {
        detail::check_unit_interval("SGD", "momentum", options.momentum());
        DTRAIN_CHECK(options.dampening() >= 0.0 && options.dampening() <= 1.0,
                     "SGD: dampening must be in [0, 1], got ", options.dampening());
        detail::check_non_negative("SGD", "weight_decay", options.weight_decay());
        DTRAIN_CHECK(!options.nesterov() || (options.momentum() > 0.0 && options.dampening() == 0.0),
                     "SGD: nesterov requires momentum > 0 and dampening = 0, got momentum ",
                     options.momentum(), " and dampening ", options.dampening());
    }

    /// Plain SGD (no momentum, no weight decay) with learning rate `lr`.
    explicit SGD(double lr) : SGD(SGDOptions().lr(lr)) {}

    /// The options given at construction (lr is the initial base rate; see base_learning_rate()).
    const SGDOptions& options() const noexcept { return options_; }

    /// "SGD(lr=..., momentum=..., dampening=..., nesterov=..., weight_decay=...)" with the current base rate.
    std::string describe() const {
        return detail::concat("SGD(lr=", detail::shortest(this->base_learning_rate()),
                              ", momentum=", detail::shortest(options_.momentum()),
                              ", dampening=", detail::shortest(options_.dampening()),
                              ", nesterov=", options_.nesterov() ? "true" : "false",
                              ", weight_decay=", detail::shortest(options_.weight_decay()), ")");
    }

    /// One update of `params` from `grads` (see the class comment for the rule). Both must have the size
    /// given to reset(); the first call without reset() sizes the state from params.
    void step(Span<T> params, Span<const T> grads) {
        const T lr = T(this->begin_step(params, grads));
        update(params.data(), grads.data(), 0, params.size(), lr);
        this->end_step();
    }

    /// The update of step() restricted to the values [offset, offset + params.size()) of the full buffer
    /// (`params` and `grads` are those values; the state used is the same range of every slot), without
    /// counting the step: step_range() calls that cover every value once, then finish_step(), give
    /// bitwise the result of one step(). Requires reset() first; throws when the range is outside it.
    void step_range(Span<T> params, Span<const T> grads, std::size_t offset) {
        const T lr = T(this->begin_range(params, grads, offset));
        update(params.data(), grads.data(), offset, params.size(), lr);
    }

private:
    // The fused update of n values p[0..n) whose state is at [offset, offset + n) of the slots.
    void update(T* p, const T* g, std::size_t offset, std::size_t n, T lr) {
        detail::with_avx2([&] { update_kernel(p, g, offset, n, lr); });
    }

    // update() as compiled for the CPU with_avx2 chose.
    void update_kernel(T* p, const T* g, std::size_t offset, std::size_t n, T lr) {
        const T wd = T(options_.weight_decay());
        const T mom = T(options_.momentum());
        const T omd = T(1.0 - options_.dampening());
        const bool decay = options_.weight_decay() != 0.0;
        if (options_.momentum() == 0.0) {
            if (decay)
                detail::sgd_kernel<true, false, false, false>(p, g, static_cast<T*>(nullptr), n, lr, wd, mom,
                                                              omd);
            else
                detail::sgd_kernel<false, false, false, false>(p, g, static_cast<T*>(nullptr), n, lr, wd, mom,
                                                               omd);
            return;
        }
        T* buf = this->slot(0) + offset;
        const bool first = this->steps() == 0;
        const bool nest = options_.nesterov();
        if (decay) {
            if (first)
                nest ? detail::sgd_kernel<true, true, true, true>(p, g, buf, n, lr, wd, mom, omd)
                     : detail::sgd_kernel<true, true, true, false>(p, g, buf, n, lr, wd, mom, omd);
            else
                nest ? detail::sgd_kernel<true, true, false, true>(p, g, buf, n, lr, wd, mom, omd)
                     : detail::sgd_kernel<true, true, false, false>(p, g, buf, n, lr, wd, mom, omd);
        } else {
            if (first)
                nest ? detail::sgd_kernel<false, true, true, true>(p, g, buf, n, lr, wd, mom, omd)
                     : detail::sgd_kernel<false, true, true, false>(p, g, buf, n, lr, wd, mom, omd);
            else
                nest ? detail::sgd_kernel<false, true, false, true>(p, g, buf, n, lr, wd, mom, omd)
                     : detail::sgd_kernel<false, true, false, false>(p, g, buf, n, lr, wd, mom, omd);
        }
    }

    SGDOptions options_;
};

static_assert(detail::is_range_optimizer_template_v<SGD>,
              "SGD<float> and SGD<double> must model the Optimizer concept with its range form");

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class SGD<float>)
DTRAIN_PRECOMPILED_INSTANCE(class SGD<double>)

}  // namespace dtrain

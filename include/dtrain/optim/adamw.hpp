#pragma once

#include <dtrain/core/precompiled.hpp>
#include <dtrain/optim/detail/adam_base.hpp>
#include <dtrain/optim/optimizer.hpp>
#include <dtrain/optim/schedule.hpp>

namespace dtrain {

/// Options of AdamW, set fluently: `AdamWOptions().lr(0.001).weight_decay(0.05)`.
///
/// | option | default | meaning (PyTorch torch.optim.AdamW) |
/// |---|---|---|
/// | lr | 1e-3 | base learning rate, >= 0 |
/// | beta1, beta2 (or betas(b1, b2)) | 0.9, 0.999 | decay of the moment averages, each in [0, 1) |
/// | eps | 1e-8 | added to the denominator, >= 0 |
/// | weight_decay | 1e-2 | decoupled decay: p is multiplied by 1 - lr * weight_decay each step, >= 0 |
class AdamWOptions : public detail::AdamOptionsBase<AdamWOptions> {
public:
    /// The defaults above.
    AdamWOptions() noexcept : detail::AdamOptionsBase<AdamWOptions>(1e-2) {}
};

/// AdamW (Loshchilov & Hutter): Adam with decoupled weight decay, following PyTorch's
/// torch.optim.AdamW (amsgrad = false) exactly. For each value, with `lr` the scheduled rate and
/// t = steps() + 1 the number of this step:
///
///     p = p * (1 - lr * weight_decay)                    (decoupled: the gradient is not changed)
///     m = m + (1 - beta1) * (grad - m)
///     v = beta2 * v + (1 - beta2) * grad * grad
///     p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
///
/// State: two slots, m (slot 0) and v (slot 1). step() runs one fused pass and never allocates after
/// the first call.
///
/// Constructed from options: `AdamW<float>(AdamWOptions().lr(0.001).weight_decay(0.05))` (also spelled
/// `AdamW<float>::Options()`).
///
/// @tparam T float or double.
template <class T = float>
class AdamW : public detail::BasicAdam<T, AdamWOptions, true> {
public:
    /// AdamW with the given options. Throws dtrain::Error naming AdamW and the value when lr, eps or
    /// weight_decay is negative or a beta is outside [0, 1).
    explicit AdamW(const AdamWOptions& options = AdamWOptions())
        : detail::BasicAdam<T, AdamWOptions, true>(options) {}
};

static_assert(detail::is_range_optimizer_template_v<AdamW>,
              "AdamW<float> and AdamW<double> must model the Optimizer concept with its range form");

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class AdamW<float>)
DTRAIN_PRECOMPILED_INSTANCE(class AdamW<double>)

}  // namespace dtrain

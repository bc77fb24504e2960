#pragma once

#include <dtrain/core/precompiled.hpp>
#include <dtrain/optim/detail/adam_base.hpp>
#include <dtrain/optim/optimizer.hpp>
#include <dtrain/optim/schedule.hpp>

namespace dtrain {

/// Options of Adam, set fluently: `AdamOptions().lr(0.001).weight_decay(0.001)`.
///
/// | option | default | meaning (PyTorch torch.optim.Adam) |
/// |---|---|---|
/// | lr | 1e-3 | base learning rate, >= 0 |
/// | beta1, beta2 (or betas(b1, b2)) | 0.9, 0.999 | decay of the moment averages, each in [0, 1) |
/// | eps | 1e-8 | added to the denominator, >= 0 |
/// | weight_decay | 0 | L2 penalty added to the gradient, >= 0 |
class AdamOptions : public detail::AdamOptionsBase<AdamOptions> {
public:
    /// The defaults above.
    AdamOptions() noexcept : detail::AdamOptionsBase<AdamOptions>(0.0) {}
};

/// Adam (Kingma & Ba) with bias correction and optional L2 weight decay, following PyTorch's
/// torch.optim.Adam (amsgrad = false) exactly. For each value, with `lr` the scheduled rate and
/// t = steps() + 1 the number of this step:
///
///     g = grad + weight_decay * p                        (if weight_decay != 0; L2, coupled)
///     m = m + (1 - beta1) * (g - m)                      (PyTorch's lerp form of beta1*m + (1-beta1)*g)
///     v = beta2 * v + (1 - beta2) * g * g
///     p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
///
/// State: two slots, m (slot 0) and v (slot 1). step() runs one fused pass and never allocates after
/// the first call. For decoupled weight decay use AdamW.
///
/// Constructed from options: `Adam<float>(AdamOptions().lr(0.001).weight_decay(0.001))` (also spelled
/// `Adam<float>::Options()`).
///
/// @tparam T float or double.
template <class T = float>
class Adam : public detail::BasicAdam<T, AdamOptions, false> {
public:
    /// Adam with the given options. Throws dtrain::Error naming Adam and the value when lr, eps or
    /// weight_decay is negative or a beta is outside [0, 1).
    explicit Adam(const AdamOptions& options = AdamOptions())
        : detail::BasicAdam<T, AdamOptions, false>(options) {}
};

static_assert(detail::is_range_optimizer_template_v<Adam>,
              "Adam<float> and Adam<double> must model the Optimizer concept with its range form");

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class Adam<float>)
DTRAIN_PRECOMPILED_INSTANCE(class Adam<double>)

}  // namespace dtrain

#pragma once

#include <cmath>
#include <cstddef>
#include <string>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <dtrain/core/cpu.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/optim/detail/optimizer_base.hpp>

namespace dtrain::detail {

/// The options shared by Adam and AdamW, set fluently; `Derived` is the concrete options type so that
/// chained setters keep it (AdamOptions and AdamWOptions differ only in their default weight decay).
template <class Derived>
class AdamOptionsBase {
public:
    /// Sets the base learning rate.
    Derived& lr(double v) noexcept {
        lr_ = v;
        return self();
    }
    /// Sets beta1, the decay of the first-moment average.
    Derived& beta1(double v) noexcept {
        beta1_ = v;
        return self();
    }
    /// Sets beta2, the decay of the second-moment average.
    Derived& beta2(double v) noexcept {
        beta2_ = v;
        return self();
    }
    /// Sets both betas, as PyTorch's `betas=(b1, b2)`.
    Derived& betas(double b1, double b2) noexcept {
        beta1_ = b1;
        beta2_ = b2;
        return self();
    }
    /// Sets epsilon, added to the denominator.
    Derived& eps(double v) noexcept {
        eps_ = v;
        return self();
    }
    /// Sets the weight decay.
    Derived& weight_decay(double v) noexcept {
        weight_decay_ = v;
        return self();
    }

    /// The base learning rate.
    double lr() const noexcept { return lr_; }
    /// beta1.
    double beta1() const noexcept { return beta1_; }
    /// beta2.
    double beta2() const noexcept { return beta2_; }
    /// epsilon.
    double eps() const noexcept { return eps_; }
    /// The weight decay.
    double weight_decay() const noexcept { return weight_decay_; }

protected:
    /// Options with the given default weight decay.
    explicit AdamOptionsBase(double default_weight_decay) noexcept : weight_decay_(default_weight_decay) {}

private:
    Derived& self() noexcept { return static_cast<Derived&>(*this); }

    double lr_ = 1e-3;
    double beta1_ = 0.9;
    double beta2_ = 0.999;
    double eps_ = 1e-8;
    double weight_decay_;
};

/// out[i] = sqrt(in[i]) for i < n, correctly rounded like std::sqrt. Explicit SSE2 on x86-64: GCC does not
/// vectorise std::sqrt loops unless the user compiles with -fno-math-errno, and a scalar sqrt made the
/// whole Adam step about 10x slower. Other targets use the scalar loop.
template <class T>
void sqrt_n(const T* __restrict in, T* __restrict out, std::size_t n) {
    std::size_t i = 0;
#if defined(__SSE2__)
    if constexpr (std::is_same_v<T, float>) {
        for (; i + 4 <= n; i += 4)
            _mm_storeu_ps(out + i, _mm_sqrt_ps(_mm_loadu_ps(in + i)));
    } else if constexpr (std::is_same_v<T, double>) {
        for (; i + 2 <= n; i += 2)
            _mm_storeu_pd(out + i, _mm_sqrt_pd(_mm_loadu_pd(in + i)));
    }
#endif
    for (; i < n; ++i)
        out[i] = std::sqrt(in[i]);
}

/// The fused Adam/AdamW update over n values; see Adam and AdamW for the rule. `decay_factor` is
/// 1 - lr * weight_decay for AdamW (Decoupled), `wd` the L2 coefficient for Adam (L2).
/// Works in blocks of `block` values so the square roots can go through sqrt_n() while both plain loops
/// around it vectorise; the block (a few KiB) stays in L1, and nothing is allocated.
template <bool L2, bool Decoupled, class T>
void adam_kernel(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, std::size_t n,
                 T wd, T decay_factor, T one_minus_b1, T b2, T one_minus_b2, T step_size, T sqrt_bc2, T eps) {
    constexpr std::size_t block = 512;
    T root[block];
    for (std::size_t start = 0; start < n; start += block) {
        const std::size_t len = n - start < block ? n - start : block;
        T* __restrict pb = p + start;
        const T* __restrict gb = g + start;
        T* __restrict mb = m + start;
        T* __restrict vb = v + start;
        for (std::size_t i = 0; i < len; ++i) {
            T pi = pb[i];
            T gi = gb[i];
            if constexpr (L2) gi += wd * pi;
            if constexpr (Decoupled) pb[i] = pi * decay_factor;
            mb[i] = mb[i] + one_minus_b1 * (gi - mb[i]);  // PyTorch: m.lerp_(g, 1 - beta1)
            vb[i] = b2 * vb[i] + one_minus_b2 * gi * gi;
        }
        sqrt_n(vb, root, len);
        for (std::size_t i = 0; i < len; ++i) {
            const T denom = root[i] / sqrt_bc2 + eps;  // PyTorch: (v.sqrt() / sqrt(bc2)).add_(eps)
            pb[i] = pb[i] - step_size * (mb[i] / denom);
        }
    }
}

/// Adam and AdamW: two state slots (slot 0 the first moment m, slot 1 the second moment v).
/// `Decoupled` selects AdamW's decoupled weight decay instead of Adam's L2 term, and the name "AdamW"
/// instead of "Adam".
template <class T, class Opts, bool Decoupled>
class BasicAdam : public OptimizerBase<T> {
    using Base = OptimizerBase<T>;

public:
    /// The options type.
    using Options = Opts;

    /// The options given at construction (lr is the initial base rate; see base_learning_rate()).
    const Options& options() const noexcept { return options_; }

    /// "<name>(lr=..., beta1=..., beta2=..., eps=..., weight_decay=...)" with the current base rate.
    std::string describe() const {
        return concat(this->name(), "(lr=", shortest(this->base_learning_rate()),
                      ", beta1=", shortest(options_.beta1()), ", beta2=", shortest(options_.beta2()),
                      ", eps=", shortest(options_.eps()),
                      ", weight_decay=", shortest(options_.weight_decay()), ")");
    }

    /// One update of `params` from `grads`. Both must have the size given to reset(); the first call
    /// without reset() sizes the state from params.
    void step(Span<T> params, Span<const T> grads) {
        const double lr = this->begin_step(params, grads);
        update(params.data(), grads.data(), 0, params.size(), lr);
        this->end_step();
    }

    /// The update of step() restricted to the values [offset, offset + params.size()) of the full buffer
    /// (`params` and `grads` are those values; the moments used are the same range of both slots),
    /// without counting the step: step_range() calls that cover every value once, then finish_step(), give
    /// bitwise the result of one step(). Requires reset() first; throws when the range is outside it.
    void step_range(Span<T> params, Span<const T> grads, std::size_t offset) {
        const double lr = this->begin_range(params, grads, offset);
        update(params.data(), grads.data(), offset, params.size(), lr);
    }

protected:
    /// Checks the options, naming the optimizer in errors.
    explicit BasicAdam(const Options& options) : Base(kind, 2, options.lr()), options_(options) {
        check_unit_interval(kind, "beta1", options.beta1());
        check_unit_interval(kind, "beta2", options.beta2());
        check_non_negative(kind, "eps", options.eps());
        check_non_negative(kind, "weight_decay", options.weight_decay());
    }

private:
    static constexpr const char* kind = Decoupled ? "AdamW" : "Adam";

    // The fused update of n values p[0..n) whose moments are at [offset, offset + n) of the slots.
    void update(T* p, const T* g, std::size_t offset, std::size_t n, double lr) {
        with_avx2([&] { update_kernel(p, g, offset, n, lr); });
    }

    // update() as compiled for the CPU with_avx2 chose.
    void update_kernel(T* p, const T* g, std::size_t offset, std::size_t n, double lr) {
        const double b1 = options_.beta1(), b2 = options_.beta2(), wd = options_.weight_decay();
        const double t = double(this->steps() + 1);
        const double bc1 = 1.0 - std::pow(b1, t);
        const double bc2 = 1.0 - std::pow(b2, t);
        const T step_size = T(lr / bc1);
        const T sqrt_bc2 = T(std::sqrt(bc2));
        const T eps = T(options_.eps());
        T* m = this->slot(0) + offset;
        T* v = this->slot(1) + offset;
        const bool decay = wd != 0.0;
        if constexpr (Decoupled) {
            if (decay)
                adam_kernel<false, true>(p, g, m, v, n, T(0), T(1.0 - lr * wd), T(1.0 - b1), T(b2),
                                         T(1.0 - b2), step_size, sqrt_bc2, eps);
            else
                adam_kernel<false, false>(p, g, m, v, n, T(0), T(1), T(1.0 - b1), T(b2), T(1.0 - b2),
                                          step_size, sqrt_bc2, eps);
        } else {
            if (decay)
                adam_kernel<true, false>(p, g, m, v, n, T(wd), T(1), T(1.0 - b1), T(b2), T(1.0 - b2),
                                         step_size, sqrt_bc2, eps);
            else
                adam_kernel<false, false>(p, g, m, v, n, T(0), T(1), T(1.0 - b1), T(b2), T(1.0 - b2),
                                          step_size, sqrt_bc2, eps);
        }
    }

    Options options_;
};

}  // namespace dtrain::detail

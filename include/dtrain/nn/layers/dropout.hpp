#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <dtrain/core/aligned_allocator.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/rng.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/layer.hpp>

namespace dtrain {

/// Inverted dropout: in training mode each element is zeroed with probability `p` and the survivors are
/// scaled by 1 / (1 - p), so eval mode (the identity) needs no rescaling. Masks come from the layer's
/// own generator seeded with `seed`, so a seed fixes every mask; a copied model continues the same
/// stream. Any input shape. Note that in data-parallel training every rank constructing the layer with
/// the same seed draws the same mask sequence.
template <class T = float>
class Dropout final : public Layer<T> {
public:
    /// Drop probability `p` in [0, 1); masks are drawn from Rng(seed).
    explicit Dropout(double p, std::uint64_t seed = 0) : p_(p), rng_(seed) {
        DTRAIN_CHECK(p_ >= 0.0 && p_ < 1.0, "Dropout: probability must be in [0, 1), got ", p_);
    }

    std::string name() const override { return detail::concat("Dropout(", p_, ")"); }
    Shape output_shape(const Shape& input) const override { return input; }

    /// Layer<T>::forward: in training, zeroes each element with probability p and scales the rest by
    /// 1 / (1 - p); the identity otherwise.
    void forward(const Tensor<T>& in, Tensor<T>& out, bool training) override {
        ensure_shape(out, in.shape());
        const std::size_t n = in.size();
        const T* x = in.data();
        T* y = out.data();
        masked_ = training && p_ > 0.0;
        if (!masked_) {
            std::copy(x, x + n, y);
            return;
        }
        mask_.resize(n);
        const T scale = T(1.0 / (1.0 - p_));
        for (std::size_t i = 0; i < n; ++i)
            mask_[i] = rng_.uniform() < p_ ? T(0) : scale;
        for (std::size_t i = 0; i < n; ++i)
            y[i] = x[i] * mask_[i];
    }

    /// Layer<T>::backward: passes `grad_out` through the mask of the last training forward.
    void backward(const Tensor<T>& in, const Tensor<T>&, const Tensor<T>& grad_out, Tensor<T>& grad_in,
                  bool need_grad_in) override {
        if (!need_grad_in) return;
        ensure_shape(grad_in, in.shape());
        const std::size_t n = in.size();
        const T* g = grad_out.data();
        T* d = grad_in.data();
        if (!masked_) {
            std::copy(g, g + n, d);
            return;
        }
        for (std::size_t i = 0; i < n; ++i)
            d[i] = g[i] * mask_[i];
    }

    /// A copy continuing the same mask stream (unbound; dropout has no parameters).
    std::unique_ptr<Layer<T>> clone() const override { return std::make_unique<Dropout>(*this); }

    /// Restarts the mask stream from `seed` (e.g. to repeat a mask).
    void reseed(std::uint64_t seed) { rng_.reseed(seed); }

    /// Appends the mask generator's state (Rng::state_words words).
    void save_extra_state(std::vector<std::uint64_t>& out) const override {
        const auto w = rng_.state();
        out.insert(out.end(), w.begin(), w.end());
    }
    /// Restores the mask generator's state saved by save_extra_state().
    void load_extra_state(Span<const std::uint64_t>& in) override {
        DTRAIN_CHECK(in.size() >= Rng::state_words, name(), ": extra state needs ", Rng::state_words,
                     " words, got ", in.size());
        std::array<std::uint64_t, Rng::state_words> w{};
        std::copy(in.data(), in.data() + Rng::state_words, w.begin());
        rng_.set_state(w);
        in = in.subspan(Rng::state_words, in.size() - Rng::state_words);
    }

    /// Drop probability.
    double probability() const { return p_; }

private:
    double p_;
    Rng rng_;
    bool masked_ = false;
    detail::AlignedVector<T> mask_;  // 0 or 1 / (1 - p) per element of the last training forward
};

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class Dropout<float>)
DTRAIN_PRECOMPILED_INSTANCE(class Dropout<double>)

}  // namespace dtrain

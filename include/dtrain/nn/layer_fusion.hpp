#pragma once

/// @file
/// The opt-in interfaces of a layer that computes itself and the layer before it, or the layer after it, in
/// one pass.

#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/layer.hpp>

namespace dtrain {

/// The opt-in interface of a layer that can compute the layer before it and itself in one pass, the
/// previous layer's output never written: MaxPool2d takes a ReLU before it this way, so that the ReLU's
/// output and its gradient, the size of a convolution's output, are never stored. A layer opts in by
/// deriving from it besides Layer<T> (`class MaxPool2d final : public Layer<T>, public
/// FusesWithPrevious<T>`); Sequential finds it with one dynamic_cast when the layer is added (or cloned) and,
/// wherever fuses_with() accepts the layer before it and neither has parameters or state, runs the pair
/// through forward_with_previous() and backward_with_previous(). Outputs and gradients are bitwise those of
/// the two layers run one after the other; the previous layer's output is not kept.
///
/// @tparam T float or double.
template <class T>
class FusesWithPrevious {
public:
    virtual ~FusesWithPrevious() = default;

    /// True when this layer computes `previous` and itself in one pass on this CPU and kernel set.
    virtual bool fuses_with(const Layer<T>& previous) const = 0;

    /// out = this layer applied to previous(in); with `training`, keeps what backward_with_previous()
    /// needs, as forward() would.
    virtual void forward_with_previous(const Tensor<T>& in, Tensor<T>& out, bool training) = 0;

    /// grad_in = dLoss/d(in) of the pair, given its input `in`, its output `out` and grad_out =
    /// dLoss/d(out), after forward_with_previous(in, out, true).
    virtual void backward_with_previous(const Tensor<T>& in, const Tensor<T>& out, const Tensor<T>& grad_out,
                                        Tensor<T>& grad_in) = 0;
};

/// The opt-in interface of a layer that can compute itself and the layer after it in one pass, its own
/// output never written: BatchNorm takes a ReLU after it this way, applying it as it writes its output and
/// masking the gradient before its own backward. Found and run by Sequential as FusesWithPrevious is,
/// wherever fuses_with_next() accepts the next layer and that layer has no parameters or state (this one
/// may have both). Outputs and gradients are bitwise those of the two layers run one after the other; this
/// layer's own output is not kept.
///
/// @tparam T float or double.
template <class T>
class FusesWithNext {
public:
    virtual ~FusesWithNext() = default;

    /// True when this layer computes itself and `next` in one pass on this CPU and kernel set.
    virtual bool fuses_with_next(const Layer<T>& next) const = 0;

    /// out = next(this layer applied to in); with `training`, keeps what backward_with_next() needs, as
    /// forward() would.
    virtual void forward_with_next(const Tensor<T>& in, Tensor<T>& out, bool training) = 0;

    /// Adds this layer's parameter gradients, as backward() does, and, when `need_grad_in`, writes grad_in =
    /// dLoss/d(in) of the pair, given its input `in`, its output `out` and grad_out = dLoss/d(out), after
    /// forward_with_next(in, out, ...).
    virtual void backward_with_next(const Tensor<T>& in, const Tensor<T>& out, const Tensor<T>& grad_out,
                                    Tensor<T>& grad_in, bool need_grad_in) = 0;
};

/// True when Sequential runs `previous` and `next` as one pass: `fusing`, `next`'s FusesWithPrevious
/// interface (null when it does not opt in), accepts `previous`, and neither layer has parameters or state.
template <class T>
bool runs_fused(const Layer<T>& previous, const Layer<T>& next, const FusesWithPrevious<T>* fusing) {
    return fusing != nullptr && previous.num_params() == 0 && next.num_params() == 0 &&
           previous.num_state() == 0 && next.num_state() == 0 && fusing->fuses_with(previous);
}

/// True when Sequential runs `layer` and `next` as one pass: `fusing`, `layer`'s FusesWithNext interface
/// (null when it does not opt in), accepts `next`, and `next` has no parameters or state.
template <class T>
bool runs_fused([[maybe_unused]] const Layer<T>& layer, const Layer<T>& next,
                const FusesWithNext<T>* fusing) {
    return fusing != nullptr && next.num_params() == 0 && next.num_state() == 0 &&
           fusing->fuses_with_next(next);
}

}  // namespace dtrain

#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/rng.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/core/tensor.hpp>

namespace dtrain {

/// Where one layer's values sit in a flat buffer (a model's, or a composite layer's slice of it):
/// [offset, offset + size).
struct Range {
    /// First element.
    std::size_t offset = 0;
    /// Number of elements.
    std::size_t size = 0;
};

/// Base class of every layer. A layer computes a batch-first forward pass and its backward pass; it owns
/// no parameter memory. The Model allocates one flat parameter buffer, one flat gradient buffer and one
/// flat state buffer (non-trainable, e.g. BatchNorm running statistics) and hands each layer its slice
/// through bind(); layers keep TensorView views into those slices.
///
/// To write a layer: report num_params()/num_state(), validate shapes in output_shape() (throw
/// dtrain::Error naming the layer and the shapes), create views in bind(), fill parameters in
/// init_params(), implement forward() and backward() without allocating once shapes are steady, and
/// clone() (a clone is unbound; the Model binds it). The base class knows no kernels and no gradient
/// overlap: a layer that takes part in overlapping the gradient reduction with backward() (partial
/// gradient reports, writing its slice instead of adding after zero_grad(); Dense) also derives from
/// ReportsGradients (nn/grad_reporting.hpp), and a layer with several ways to compute that
/// Model::summary() should name (Dense, Conv2d) from DescribesKernels (nn/kernel_description.hpp).
template <class T>
class Layer {
public:
    virtual ~Layer() = default;

    /// Human-readable name with configuration, e.g. "Dense(800, 500)".
    virtual std::string name() const = 0;

    /// Per-sample output shape for a per-sample input shape; throws dtrain::Error naming the layer and
    /// the shapes when the input does not fit.
    virtual Shape output_shape(const Shape& input) const = 0;

    /// Number of trainable parameters (the layer's slice of the flat parameter and gradient buffers).
    virtual std::size_t num_params() const { return 0; }

    /// Number of non-trainable state values (the layer's slice of the flat state buffer).
    virtual std::size_t num_state() const { return 0; }

    /// Points the layer's views at its slices: `params` and `grads` have num_params() elements, `state`
    /// has num_state() elements. Called by the Model whenever its buffers move.
    virtual void bind(T* params, T* grads, T* state) {
        (void)params;
        (void)grads;
        (void)state;
    }

    /// Initialises parameters (and state) from `rng`; called once when the layer joins a model.
    virtual void init_params(Rng& rng) { (void)rng; }

    /// Computes `out` from the batch `in` (shape {batch, input...}); `training` selects train behaviour
    /// (dropout, batch statistics). Resizes `out` as needed.
    virtual void forward(const Tensor<T>& in, Tensor<T>& out, bool training) = 0;

    /// Given the `in` and `out` of the last forward and `grad_out` = dLoss/dout, ADDS dLoss/dparams into
    /// the bound gradient slice and, when `need_grad_in`, writes dLoss/din into `grad_in`.
    virtual void backward(const Tensor<T>& in, const Tensor<T>& out, const Tensor<T>& grad_out,
                          Tensor<T>& grad_in, bool need_grad_in) = 0;

    /// A new, unbound layer of the same configuration.
    virtual std::unique_ptr<Layer<T>> clone() const = 0;

    /// Appends to `out` the layer's state that lives OUTSIDE the flat buffers and that an exact resume from
    /// a checkpoint needs (e.g. Dropout's mask generator), as 64-bit words. Default: nothing. A composite
    /// layer appends its children's in order.
    virtual void save_extra_state(std::vector<std::uint64_t>& out) const { (void)out; }

    /// Restores what save_extra_state() appended: reads its words from the front of `in` and advances `in`
    /// past them. Throws dtrain::Error naming the layer when `in` holds too few words.
    virtual void load_extra_state(Span<const std::uint64_t>& in) { (void)in; }
};

namespace detail {

/// Checks that `in` is a batch of samples of `expected` shape; throws naming `layer` otherwise.
template <class T>
void check_batch_shape(const Tensor<T>& in, const Shape& expected, const std::string& layer) {
    const auto& s = in.shape();
    bool ok = in.dimension() == expected.size() + 1;
    for (std::size_t i = 0; ok && i < expected.size(); ++i)
        ok = s[i + 1] == expected[i];
    DTRAIN_CHECK(ok, layer, ": expected input of shape [batch, ", shape_str(expected).substr(1), " but got ",
                 shape_str(s));
}

}  // namespace detail

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class Layer<float>)
DTRAIN_PRECOMPILED_INSTANCE(class Layer<double>)

}  // namespace dtrain

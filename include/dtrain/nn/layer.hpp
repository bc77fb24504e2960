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

/// Where a layer reports, during its backward(), parts of its parameter-gradient slice that are already
/// final: fn(context, begin, end) for the values [begin, end) of the slice, in pieces of about `chunk`
/// values. Sequential::backward() (run by Model and by composite layers) sets it on each layer before
/// calling the layer's backward() (see Model::set_partial_grad_hook()); an empty one (fn null) asks for no
/// reports.
struct GradProgress {
    /// Receiver of the reports; null for none.
    void (*fn)(void* context, std::size_t begin, std::size_t end) = nullptr;
    /// First argument of fn.
    void* context = nullptr;
    /// Requested report granularity in values (0: none).
    std::size_t chunk = 0;
};

/// Base class of every layer. A layer computes a batch-first forward pass and its backward pass; it owns
/// no parameter memory. The Model allocates one flat parameter buffer, one flat gradient buffer and one
/// flat state buffer (non-trainable, e.g. BatchNorm running statistics) and hands each layer its slice
/// through bind(); layers keep TensorView views into those slices.
///
/// To write a layer: report num_params()/num_state(), validate shapes in output_shape() (throw
/// dtrain::Error naming the layer and the shapes), create views in bind(), fill parameters in
/// init_params(), implement forward() and backward() without allocating once shapes are steady, and
/// clone() (a clone is unbound; the Model binds it). A layer whose parameter gradient is large and can be
/// computed in parts (Dense) may, when grad_chunk() is not 0, compute it in parts of about grad_chunk()
/// values, from the END of its slice to its start, and call report_grads_ready() after each, so that a
/// distributed optimizer can start reducing them before the layer's backward() returns. A layer that can
/// write its whole gradient slice in one pass (Dense) may say so with writes_unset_grads(): after
/// zero_grad() its backward() then writes instead of adding (grads_unset()), which saves the zeroing pass
/// and the reads of zeros.
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

    /// The kernels this layer computes with on samples of shape `input` (a valid input shape), as
    /// Model::summary() lists them: e.g. "direct (AVX2)" or "im2col + BLAS" (they follow the CPU and
    /// DTRAIN_KERNELS). Empty for a layer with one way to compute.
    virtual std::string kernels(const Shape& input) const {
        (void)input;
        return {};
    }

    /// Sets where backward() reports final parts of the gradient slice (called by Sequential::backward()).
    void set_grad_progress(const GradProgress& progress) noexcept { progress_ = progress; }

    /// True for a layer whose next backward(), when grads_unset() is true, WRITES its parameter gradients
    /// (every value of its slice, whatever the slice held) instead of adding them, with bit for bit the
    /// result of adding them to zeros, and then clears grads_unset(). Default false: Model::zero_grad()
    /// zeroes such a layer's slice itself.
    virtual bool writes_unset_grads() const noexcept { return false; }

    /// Marks the layer's gradient slice as holding nothing yet (set by Model::zero_grad() for layers whose
    /// writes_unset_grads() is true; cleared by the layer's backward() and by Model::gradients()).
    void set_grads_unset(bool unset) noexcept { grads_unset_ = unset; }

    /// True while the gradient slice holds nothing yet: the next backward() writes it.
    bool grads_unset() const noexcept { return grads_unset_; }

protected:
    /// Requested granularity of partial gradient reports in values; 0 when nobody listens.
    std::size_t grad_chunk() const noexcept { return progress_.fn != nullptr ? progress_.chunk : 0; }
    /// Reports that values [begin, end) of this layer's gradient slice are final for this backward().
    void report_grads_ready(std::size_t begin, std::size_t end) const {
        if (progress_.fn != nullptr) progress_.fn(progress_.context, begin, end);
    }

private:
    GradProgress progress_;
    bool grads_unset_ = false;
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

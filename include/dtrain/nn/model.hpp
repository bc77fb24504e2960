#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <dtrain/core/aligned_allocator.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/rng.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/grad_reporting.hpp>
#include <dtrain/nn/inference_plan.hpp>
#include <dtrain/nn/layer.hpp>
#include <dtrain/nn/model_summary.hpp>
#include <dtrain/nn/sequential.hpp>

namespace dtrain {

/// A sequential model: an ordered list of layers whose parameters live in ONE contiguous flat buffer,
/// gradients in a second buffer of the same layout and non-trainable state in a third. Layers hold views
/// into them, so all-reduce, broadcast, sharding and checkpointing each move one buffer.
///
/// Layers are appended with add(); each new layer's shape is checked against the previous output and its
/// parameters are initialised from the model's seeded generator, so a seed fixes the initial model.
/// Copying or moving a model rebinds every view to the new buffers. The layers run in a Sequential
/// (nn/sequential.hpp), the forward/backward chain that composite layers such as Residual run too; the
/// model adds the buffers, the shapes, the generator, the training flag and the backward hooks.
///
/// @tparam T float or double.
template <class T = float>
class Model {
    static_assert(std::is_floating_point_v<T>, "dtrain::Model<T>: T must be float or double");

public:
    /// Hook called during backward() with the index of a layer once its gradient slice is final.
    using GradReadyHook = std::function<void(std::size_t layer)>;
    /// Hook called during a layer's backward() with values [begin, end) of its gradient slice (relative to
    /// parameter_ranges()[layer]) that are already final.
    using PartialGradHook = std::function<void(std::size_t layer, std::size_t begin, std::size_t end)>;

    /// An empty model taking samples of shape `input_shape`; parameters are initialised from `seed`.
    explicit Model(Shape input_shape, std::uint64_t seed = 0)
        : input_shape_(std::move(input_shape)), rng_(seed) {
        DTRAIN_CHECK(!input_shape_.empty() && shape_size(input_shape_) > 0,
                     "Model: input shape must be non-empty with no zero dimension, got ",
                     detail::shape_str(input_shape_));
    }

    /// Deep copy: clones the layers, copies the three buffers and rebinds the views.
    Model(const Model& other)
        : input_shape_(other.input_shape_),
          seq_(other.seq_),
          shapes_(other.shapes_),
          params_(other.params_),
          grads_(other.grads_),
          state_(other.state_),
          rng_(other.rng_),
          training_(other.training_) {
        rebind();
        // The cloned layers start with nothing unset: give them the zeros zero_grad() deferred.
        if (other.grads_unset_) zero_unset_slices(other.seq_);
    }

    /// Move: takes the buffers and layers and rebinds the views (vector moves keep addresses, but rebinding
    /// keeps the invariant explicit).
    Model(Model&& other) noexcept
        : input_shape_(std::move(other.input_shape_)),
          seq_(std::move(other.seq_)),
          shapes_(std::move(other.shapes_)),
          params_(std::move(other.params_)),
          grads_(std::move(other.grads_)),
          grads_unset_(other.grads_unset_),
          state_(std::move(other.state_)),
          input_grad_(std::move(other.input_grad_)),
          rng_(other.rng_),
          training_(other.training_) {
        rebind();
    }

    /// Copy assignment (copy-and-swap).
    Model& operator=(const Model& other) {
        if (this != &other) {
            Model tmp(other);
            *this = std::move(tmp);
        }
        return *this;
    }

    /// Move assignment; rebinds the views.
    Model& operator=(Model&& other) noexcept {
        input_shape_ = std::move(other.input_shape_);
        seq_ = std::move(other.seq_);
        shapes_ = std::move(other.shapes_);
        params_ = std::move(other.params_);
        grads_ = std::move(other.grads_);
        grads_unset_ = other.grads_unset_;
        state_ = std::move(other.state_);
        input_grad_ = std::move(other.input_grad_);
        rng_ = other.rng_;
        training_ = other.training_;
        hook_ = nullptr;
        partial_hook_ = nullptr;
        input_ = nullptr;
        rebind();
        return *this;
    }

    ~Model() = default;

    /// Appends a layer (taken by value, e.g. model.add(Dense<float>(4, 30))). Checks its input shape,
    /// grows the flat buffers (existing values are kept), rebinds all views and initialises the new layer.
    template <class L, class = std::enable_if_t<std::is_base_of_v<Layer<T>, std::decay_t<L>>>>
    Model& add(L&& layer) {
        return add(std::unique_ptr<Layer<T>>(new std::decay_t<L>(std::forward<L>(layer))));
    }

    /// Appends a heap-allocated layer; see add(L&&).
    Model& add(std::unique_ptr<Layer<T>> layer) {
        Shape out = layer != nullptr ? layer->output_shape(output_shape()) : Shape{};
        seq_.add(std::move(layer));  // throws on a null layer, before anything changed
        shapes_.push_back(std::move(out));
        params_.resize(seq_.num_params(), T(0));
        grads_.resize(seq_.num_params(), T(0));
        state_.resize(seq_.num_state(), T(0));
        rebind();
        seq_.layer(seq_.num_layers() - 1).init_params(rng_);
        return *this;
    }

    /// Runs the batch `x` (shape {batch, input_shape...}) through every layer and returns the output.
    /// `x` must stay alive and unchanged until backward(). Throws when the model is empty or `x` has the
    /// wrong shape.
    const Tensor<T>& forward(const Tensor<T>& x) {
        DTRAIN_CHECK(!seq_.empty(), "Model::forward: the model has no layers");
        detail::check_batch_shape(x, input_shape_, "Model::forward");
        input_ = &x;
        return seq_.forward(x, training_);
    }

    /// The outputs of the batch `x` in evaluation mode, whatever the model's mode, for inference only:
    /// bitwise those of forward() in eval mode, with runs of Dense layers (each optionally followed by ReLU)
    /// computed on transposed activations where Dense runs its AVX-512 or AVX2 GEMM (nn/inference_plan.hpp).
    /// Keeps nothing for backward(), which throws until the next forward(). predict() and evaluate() run it.
    const Tensor<T>& infer(const Tensor<T>& x) {
        DTRAIN_CHECK(!seq_.empty(), "Model::infer: the model has no layers");
        detail::check_batch_shape(x, input_shape_, "Model::infer");
        input_ = nullptr;
        return plan_.run(seq_, x);
    }

    /// Back-propagates `grad_output` (dLoss/doutput of the last forward()), ADDING parameter gradients
    /// into gradients(). Layers run last to first; after layer i is done the grad-ready hook, if set, is
    /// called with i (before that, layers that compute their gradient in parts call the partial-gradient
    /// hook, if set, with each finished part). Returns dLoss/dinput only if `need_input_grad`, otherwise
    /// an empty tensor.
    const Tensor<T>& backward(const Tensor<T>& grad_output, bool need_input_grad = false) {
        DTRAIN_CHECK(input_ != nullptr,
                     "Model::backward: call forward() first (infer() keeps nothing for it)");
        const Tensor<T>& out = seq_.output(seq_.num_layers() - 1);
        DTRAIN_CHECK(grad_output.shape() == out.shape(), "Model::backward: gradient of shape ",
                     detail::shape_str(grad_output.shape()), " does not match the output shape ",
                     detail::shape_str(out.shape()));
        BackwardListener listener;
        listener.context = this;
        if (hook_) listener.done = &Model::layer_done;
        if (partial_hook_) {
            listener.partial = &Model::layer_partial;
            listener.chunk = partial_chunk_;
        }
        grads_unset_ = false;  // from here on each layer's own flag says (gradients() zeroes nothing)
        seq_.backward(*input_, grad_output, input_grad_, need_input_grad, listener);
        return input_grad_;
    }

    /// Sets every gradient to zero. Layers that can write their whole gradient slice in backward()
    /// (ReportsGradients::writes_unset_grads(), e.g. Dense) are told so instead, which saves a pass over
    /// their part of the buffer and their backward()'s reads of zeros, with bit for bit the same gradients;
    /// the rest is zeroed here. gradients() zeroes what a backward() has not written yet, so a Span taken
    /// from gradients() before zero_grad() reads the old values of those slices until the next backward()
    /// or gradients().
    void zero_grad() {
        grads_unset_ = false;
        for (std::size_t i = 0; i < seq_.num_layers(); ++i) {
            ReportsGradients* r = seq_.reporting(i);
            const bool unset = r != nullptr && r->writes_unset_grads();
            if (r != nullptr) r->set_grads_unset(unset);
            grads_unset_ = grads_unset_ || unset;
            if (!unset) zero_slice(i);
        }
    }

    /// Flat view of all parameters (layer 0 first).
    Span<T> parameters() { return {params_.data(), params_.size()}; }
    /// Read-only flat view of all parameters.
    Span<const T> parameters() const { return {params_.data(), params_.size()}; }
    /// Flat view of all gradients, same layout as parameters() (zeroes first the slices zero_grad() left
    /// to a backward() that has not run).
    Span<T> gradients() {
        if (grads_unset_) {
            zero_unset_slices(seq_);
            for (std::size_t i = 0; i < seq_.num_layers(); ++i)
                if (ReportsGradients* r = seq_.reporting(i)) r->set_grads_unset(false);
            grads_unset_ = false;
        }
        return {grads_.data(), grads_.size()};
    }
    /// Read-only flat view of all gradients (zeroes first the slices zero_grad() left to a backward() that
    /// has not run; the layers may still write them).
    Span<const T> gradients() const {
        if (grads_unset_) zero_unset_slices(seq_);
        return {grads_.data(), grads_.size()};
    }
    /// Flat view of the non-trainable state (BatchNorm running statistics).
    Span<T> state() { return {state_.data(), state_.size()}; }
    /// Read-only flat view of the non-trainable state.
    Span<const T> state() const { return {state_.data(), state_.size()}; }

    /// Every layer's state outside the flat buffers (Layer::save_extra_state(), e.g. Dropout's generator),
    /// layer 0 first: what a checkpoint keeps besides parameters() and state() for an exact resume.
    std::vector<std::uint64_t> extra_state() const {
        std::vector<std::uint64_t> out;
        seq_.save_extra_state(out);
        return out;
    }
    /// Restores extra_state() of a model with the same layers. Throws dtrain::Error when `words` holds too
    /// few or too many words for this model's layers.
    void set_extra_state(Span<const std::uint64_t> words) {
        seq_.load_extra_state(words);
        DTRAIN_CHECK(words.empty(), "Model::set_extra_state: ", words.size(),
                     " words left over after every layer took its own (the state is from another model)");
    }

    /// Total number of trainable parameters.
    std::size_t num_parameters() const { return params_.size(); }
    /// Number of layers.
    std::size_t num_layers() const { return seq_.num_layers(); }
    /// Layer `i` (checked).
    Layer<T>& layer(std::size_t i) { return seq_.layer(i); }
    /// Layer `i` (checked), read-only.
    const Layer<T>& layer(std::size_t i) const { return seq_.layer(i); }
    /// Where layer i's parameters and gradients sit in the flat buffers.
    const std::vector<Range>& parameter_ranges() const { return seq_.parameter_ranges(); }
    /// Where layer i's non-trainable state sits in the state buffer.
    const std::vector<Range>& state_ranges() const { return seq_.state_ranges(); }
    /// Per-sample input shape.
    const Shape& input_shape() const { return input_shape_; }
    /// Per-sample output shape (the input shape while the model is empty).
    const Shape& output_shape() const { return shapes_.empty() ? input_shape_ : shapes_.back(); }
    /// Per-sample output shape of layer i.
    const Shape& layer_output_shape(std::size_t i) const { return shapes_.at(i); }

    /// Training mode: dropout active, BatchNorm uses and updates batch statistics.
    void train() { training_ = true; }
    /// Evaluation mode: dropout is the identity, BatchNorm uses running statistics.
    void eval() { training_ = false; }
    /// True in training mode.
    bool training() const { return training_; }

    /// Installs (or clears, with nullptr) the hook backward() calls as each layer's gradients are final.
    void set_grad_ready_hook(GradReadyHook hook) { hook_ = std::move(hook); }

    /// Installs (or clears, with nullptr) the hook that layers able to compute their parameter gradient in
    /// parts (Dense) call during their backward() with each finished part, of about `chunk_values` values,
    /// from the end of the layer's slice to its start; the grad-ready hook still follows every layer.
    /// Layers whose slice is not larger than chunk_values compute it whole. Requires chunk_values > 0 with
    /// a hook. Not copied or moved with the model.
    void set_partial_grad_hook(PartialGradHook hook, std::size_t chunk_values) {
        DTRAIN_CHECK(!hook || chunk_values > 0, "Model::set_partial_grad_hook: chunk_values must be > 0");
        partial_hook_ = std::move(hook);
        partial_chunk_ = partial_hook_ ? chunk_values : 0;
    }

    /// The generator used to initialise layers (also usable for seeded dropout masks).
    Rng& rng() { return rng_; }

    /// Writes a Keras-like table: layer, output shape and parameter count per layer, and the totals
    /// (nn/model_summary.hpp). Then, for the layers that have several ways to compute (DescribesKernels),
    /// the kernels each runs on this CPU under DTRAIN_KERNELS.
    void summary(std::ostream& os) const { detail::write_model_summary(os, *this); }

    /// summary() as a string.
    std::string summary() const {
        std::ostringstream os;
        summary(os);
        return os.str();
    }

private:
    void rebind() { seq_.bind(params_.data(), grads_.data(), state_.data()); }

    // Zeroes the gradient slice of layer `layer`.
    void zero_slice(std::size_t layer) const {
        const Range r = seq_.parameter_ranges()[layer];
        std::fill(grads_.begin() + std::ptrdiff_t(r.offset),
                  grads_.begin() + std::ptrdiff_t(r.offset + r.size), T(0));
    }

    // Zeroes the slices of `seq`'s layers (this model's or the one it copies) whose gradients are unset.
    void zero_unset_slices(const Sequential<T>& seq) const {
        for (std::size_t i = 0; i < seq.num_layers(); ++i)
            if (const ReportsGradients* r = seq.reporting(i); r != nullptr && r->grads_unset()) zero_slice(i);
    }

    // BackwardListener functions: pass the sequence's events on to the hooks.
    static void layer_done(void* self, std::size_t layer) { static_cast<Model*>(self)->hook_(layer); }
    static void layer_partial(void* self, std::size_t layer, std::size_t begin, std::size_t end) {
        static_cast<Model*>(self)->partial_hook_(layer, begin, end);
    }

    Shape input_shape_;
    Sequential<T> seq_{"Model"};
    std::vector<Shape> shapes_;  // shapes_[i] = per-sample output shape of layer i
    detail::AlignedVector<T> params_;
    mutable detail::AlignedVector<T> grads_;  // mutable: gradients() const zeroes what zero_grad() left unset
    bool grads_unset_ = false;  // some layer's slice is unset (zero_grad() since the last backward())
    detail::AlignedVector<T> state_;
    Tensor<T> input_grad_;  // dLoss/dinput of the last backward() that asked for it
    const Tensor<T>* input_ = nullptr;
    detail::InferencePlan<T> plan_;  // infer()'s scratch (not copied or moved: it holds no state)
    Rng rng_;
    bool training_ = true;
    GradReadyHook hook_;
    PartialGradHook partial_hook_;
    std::size_t partial_chunk_ = 0;
};

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class Model<float>)
DTRAIN_PRECOMPILED_INSTANCE(class Model<double>)

}  // namespace dtrain

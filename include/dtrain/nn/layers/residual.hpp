#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <dtrain/core/cpu.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/rng.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/grad_reporting.hpp>
#include <dtrain/nn/kernel_description.hpp>
#include <dtrain/nn/layer.hpp>
#include <dtrain/nn/sequential.hpp>

namespace dtrain {

/// A residual block (skip connection, Needle's nn.Residual, ResNet's identity shortcut): out = f(x) + x,
/// where f is a sequence of child layers added with add(), the way a Model is built:
///
/// \code
/// model.add(Residual<float>()
///               .add(Conv2d<float>(32, 32, 3, 1, 1)).add(BatchNorm2d<float>(32)).add(ReLU<float>())
///               .add(Conv2d<float>(32, 32, 3, 1, 1)).add(BatchNorm2d<float>(32)).add(ReLU<float>()));
/// \endcode
///
/// The block is one layer of its Model, so its parameters, gradients and state are each ONE contiguous
/// slice of the model's flat buffers: the children's slices follow each other in order (child 0 first),
/// and bind() splits the block's slices among them (parameter_ranges() and state_ranges() give each
/// child's range relative to the block's slice). init_params() initialises the children in order, so
/// they draw from the model's generator exactly as if they had been added to the model directly.
///
/// Shapes: the children's input shapes follow from the block's input shape, as in a Model; output_shape()
/// (called by Model::add()) checks every child and that f keeps the input's shape, which the skip
/// connection needs, and throws dtrain::Error naming the block and the shapes otherwise. The children run
/// in a Sequential (nn/sequential.hpp), the chain a Model runs too, which holds their outputs and input
/// gradients, sized on the first batch and reused (no allocation while the batch shape is steady).
/// Children may be any layers, including nested Residual blocks.
///
/// Partial gradient reports (the block opts in to ReportsGradients for its children): when the model asks
/// for them (grad_chunk() is not 0), the reports of the children that make them (Dense) are forwarded with
/// their offsets in the block's slice, and after each child's backward() the rest of its slice is
/// reported, so the final part grows from the end of the block's slice to its start. The block always adds
/// (writes_unset_grads() is false): Model::zero_grad() zeroes its slice.
///
/// Copying a block clones its children (a copy is unbound until a Model binds it); layers cannot be added
/// once the block is bound to a model.
///
/// @tparam T float or double.
template <class T = float>
class Residual final : public Layer<T>, public ReportsGradients, public DescribesKernels {
public:
    /// An empty block; add at least one layer before adding the block to a model.
    Residual() = default;

    /// Deep copy of the configuration: clones every child; the copy is unbound (its parameter values
    /// come from the Model that binds it).
    Residual(const Residual& other)
        : Layer<T>(other), ReportsGradients(other), DescribesKernels(other), seq_(other.seq_) {}

    /// Move: takes the children (and their bindings).
    Residual(Residual&&) noexcept = default;

    /// Copy assignment (copy-and-swap); the result is unbound.
    Residual& operator=(const Residual& other) {
        if (this != &other) {
            Residual tmp(other);
            *this = std::move(tmp);
        }
        return *this;
    }

    /// Move assignment.
    Residual& operator=(Residual&&) noexcept = default;

    ~Residual() override = default;

    /// Appends a layer to f (taken by value, e.g. block.add(ReLU<float>())); returns the block so calls
    /// chain. Throws once the block is bound to a model.
    template <class L, class = std::enable_if_t<std::is_base_of_v<Layer<T>, std::decay_t<L>>>>
    Residual& add(L&& layer) & {
        return add(std::unique_ptr<Layer<T>>(new std::decay_t<L>(std::forward<L>(layer))));
    }

    /// Appends a layer to a temporary block, so `Residual<T>().add(a).add(b)` can be moved into a Model.
    template <class L, class = std::enable_if_t<std::is_base_of_v<Layer<T>, std::decay_t<L>>>>
    Residual&& add(L&& layer) && {
        add(std::unique_ptr<Layer<T>>(new std::decay_t<L>(std::forward<L>(layer))));
        return std::move(*this);
    }

    /// Appends a heap-allocated layer; see add(L&&).
    Residual& add(std::unique_ptr<Layer<T>> layer) & {
        DTRAIN_CHECK(layer == nullptr || !bound_, name(), "::add: cannot add ", layer->name(),
                     " to a block that is already part of a model (its slice of the flat buffers is fixed)");
        seq_.add(std::move(layer));  // throws "Residual::add: null layer"
        return *this;
    }

    /// Appends a heap-allocated layer to a temporary block; see add(L&&).
    Residual&& add(std::unique_ptr<Layer<T>> layer) && {
        add(std::move(layer));
        return std::move(*this);
    }

    /// "Residual(child, child, ...)" with the children's names.
    std::string name() const override { return "Residual(" + seq_.names() + ")"; }

    /// Checks every child in turn and that f(x) has the shape of x; returns `input`.
    Shape output_shape(const Shape& input) const override {
        check_not_empty();
        const Shape s = seq_.output_shape(input, name());
        DTRAIN_CHECK(s == input, name(),
                     ": the skip connection adds f(x) to x, so f must keep the shape, but "
                     "input [batch, ",
                     detail::shape_str(input).substr(1), " gives f(x) of shape [batch, ",
                     detail::shape_str(s).substr(1));
        return input;
    }

    /// Sum of the children's parameters.
    std::size_t num_params() const override { return seq_.num_params(); }

    /// DescribesKernels::kernels: the children's that describe theirs, in order, each after its name.
    std::string kernels(const Shape& input) const override {
        std::string all;
        Shape s = input;
        for (std::size_t i = 0; i < seq_.num_layers(); ++i) {
            const std::string k = kernels_of(seq_.layer(i), s);
            if (!k.empty()) all += (all.empty() ? "" : "; ") + seq_.layer(i).name() + ": " + k;
            s = seq_.layer(i).output_shape(s);
        }
        return all;
    }
    /// Sum of the children's state values.
    std::size_t num_state() const override { return seq_.num_state(); }

    /// Splits the block's slices among the children (child 0 first).
    void bind(T* params, T* grads, T* state) override {
        seq_.bind(params, grads, state);
        bound_ = true;
    }

    /// Initialises the children in order from `rng`.
    void init_params(Rng& rng) override { seq_.init_params(rng); }

    /// Runs the children on `in`, keeping their outputs, and writes f(in) + in into `out`.
    void forward(const Tensor<T>& in, Tensor<T>& out, bool training) override {
        check_not_empty();
        const Tensor<T>& f = seq_.forward(in, training);
        DTRAIN_CHECK(f.shape() == in.shape(), name(), ": the skip connection adds f(x) to x, but input ",
                     detail::shape_str(in.shape()), " gives f(x) of shape ", detail::shape_str(f.shape()));
        ensure_shape(out, in.shape());
        const T* a = f.data();
        const T* b = in.data();
        T* y = out.data();
        const std::size_t n = in.size();
        detail::with_avx2([&] {
            for (std::size_t k = 0; k < n; ++k)
                y[k] = a[k] + b[k];
        });
    }

    /// Back-propagates through the children (last first), adding their parameter gradients into their
    /// slices; dLoss/din = f's input gradient + grad_out (the skip path).
    void backward(const Tensor<T>& in, const Tensor<T>&, const Tensor<T>& grad_out, Tensor<T>& grad_in,
                  bool need_grad_in) override {
        const std::size_t chunk = this->grad_chunk();
        ready_from_ = seq_.num_params();
        seq_.backward(in, grad_out, grad_in, need_grad_in,
                      chunk > 0
                          ? BackwardListener{&Residual::child_report, &Residual::child_done, this, chunk}
                          : BackwardListener{});
        if (!need_grad_in) return;
        ensure_shape(grad_in, in.shape());
        const T* d = grad_out.data();
        T* gi = grad_in.data();
        const std::size_t n = grad_in.size();
        detail::with_avx2([&] {
            for (std::size_t k = 0; k < n; ++k)
                gi[k] += d[k];
        });
    }

    /// Appends the children's state outside the flat buffers (e.g. a Dropout child's generator), child 0
    /// first.
    void save_extra_state(std::vector<std::uint64_t>& out) const override { seq_.save_extra_state(out); }

    /// Restores what save_extra_state() appended, child 0 first, advancing `in` past it.
    void load_extra_state(Span<const std::uint64_t>& in) override { seq_.load_extra_state(in); }

    /// A new, unbound block with clones of the children.
    std::unique_ptr<Layer<T>> clone() const override { return std::make_unique<Residual>(*this); }

    /// Number of child layers.
    std::size_t num_layers() const { return seq_.num_layers(); }
    /// Child `i` (checked).
    Layer<T>& layer(std::size_t i) { return seq_.layer(i); }
    /// Child `i` (checked), read-only.
    const Layer<T>& layer(std::size_t i) const { return seq_.layer(i); }
    /// Where child i's parameters and gradients sit in the block's slices (offsets relative to them).
    const std::vector<Range>& parameter_ranges() const { return seq_.parameter_ranges(); }
    /// Where child i's state sits in the block's state slice (offsets relative to it).
    const std::vector<Range>& state_ranges() const { return seq_.state_ranges(); }

private:
    void check_not_empty() const {
        DTRAIN_CHECK(!seq_.empty(), name(), ": the block has no layers; add at least one (out = f(x) + x)");
    }

    // BackwardListener::partial: a report of a running child, moved to the block's slice.
    static void child_report(void* self, std::size_t child, std::size_t begin, std::size_t end) {
        auto* r = static_cast<Residual*>(self);
        const std::size_t offset = r->seq_.parameter_ranges()[child].offset;
        if (offset + end == r->ready_from_) r->ready_from_ = offset + begin;
        r->report_grads_ready(offset + begin, offset + end);
    }

    // BackwardListener::done: the rest of the child's slice is final now.
    static void child_done(void* self, std::size_t child) {
        auto* r = static_cast<Residual*>(self);
        const std::size_t offset = r->seq_.parameter_ranges()[child].offset;
        if (r->ready_from_ > offset) {
            r->report_grads_ready(offset, r->ready_from_);
            r->ready_from_ = offset;
        }
    }

    Sequential<T> seq_{"Residual"};  // f: the children
    bool bound_ = false;
    std::size_t ready_from_ = 0;  // the block's gradients from here to the end are final (reports only)
};

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class Residual<float>)
DTRAIN_PRECOMPILED_INSTANCE(class Residual<double>)

}  // namespace dtrain

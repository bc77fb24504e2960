#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/rng.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/grad_reporting.hpp>
#include <dtrain/nn/layer.hpp>
#include <dtrain/nn/layer_fusion.hpp>

namespace dtrain {

/// What Sequential::backward() tells its caller while it runs, as plain function pointers (no allocation,
/// no std::function per layer): `partial` receives the partial gradient reports of the running layer
/// (ReportsGradients::report_grads_ready(), offsets relative to that layer's slice) and `done` is called
/// once a layer's backward() has returned. Either may be null.
struct BackwardListener {
    /// Receives (context, layer, begin, end) for values [begin, end) of `layer`'s gradient slice that are
    /// final; null for no partial reports.
    void (*partial)(void* context, std::size_t layer, std::size_t begin, std::size_t end) = nullptr;
    /// Receives (context, layer) after `layer`'s backward() returned; null for none.
    void (*done)(void* context, std::size_t layer) = nullptr;
    /// First argument of both functions.
    void* context = nullptr;
    /// Requested granularity of partial reports in values (ReportsGradients::grad_chunk()); 0 asks for none.
    std::size_t chunk = 0;
};

/// The forward/backward chain over an ordered list of layers, shared by Model (which owns the flat
/// buffers) and composite layers such as Residual (which run their children on a slice of them).
///
/// A sequence owns its layers and, after forward(), every layer's output: output(i) is layer i's output,
/// and backward() keeps the gradient with respect to every layer's input but the first, which goes to the
/// caller's tensor. It owns no parameter memory: the parameters, gradients and state of the sequence are
/// each one contiguous slice of someone else's flat buffer, laid out layer 0 first; parameter_ranges()
/// and state_ranges() give every layer's place in those slices and bind() hands each layer its part.
///
/// The owner of the buffers binds: a copy clones every layer and is unbound, a move keeps the layers and
/// their bindings. Error messages start with the owner's class name given to the constructor.
///
/// Layers that opt in to ReportsGradients (nn/grad_reporting.hpp) are found with one dynamic_cast when
/// they are added or cloned; backward() hands only them a GradProgress, and reporting(i) gives the owner
/// their interface (Model::zero_grad() uses it). The others never report and always add. Layers that opt
/// in to FusesWithPrevious or FusesWithNext (nn/layer_fusion.hpp) are found the same way: forward() runs
/// such a layer and the one before (after) it as one pass wherever it accepts that layer, and backward()
/// runs the pair the same way; the first layer's output of the pair is then not kept (output() of it is
/// empty).
///
/// @tparam T float or double.
template <class T>
class Sequential {
public:
    /// An empty sequence; `owner` (a string literal, e.g. "Model") starts the messages of the errors
    /// add(), layer() and forward() throw.
    explicit Sequential(const char* owner = "Sequential") noexcept : owner_(owner) {}

    /// Deep copy: clones every layer; the copy is unbound and holds no outputs yet.
    Sequential(const Sequential& other)
        : owner_(other.owner_),
          param_ranges_(other.param_ranges_),
          state_ranges_(other.state_ranges_),
          num_params_(other.num_params_),
          num_state_(other.num_state_) {
        layers_.reserve(other.layers_.size());
        reporting_.reserve(other.layers_.size());
        for (const auto& l : other.layers_) {
            layers_.push_back(l->clone());
            reporting_.push_back(dynamic_cast<ReportsGradients*>(layers_.back().get()));
            fusing_.push_back(dynamic_cast<FusesWithPrevious<T>*>(layers_.back().get()));
            fusing_next_.push_back(dynamic_cast<FusesWithNext<T>*>(layers_.back().get()));
        }
        outs_.resize(layers_.size());
        grad_ins_.resize(layers_.size());
        fused_.resize(layers_.size());
    }

    /// Move: takes the layers with their bindings and the kept tensors.
    Sequential(Sequential&&) noexcept = default;

    /// Copy assignment (copy-and-swap); the result is unbound.
    Sequential& operator=(const Sequential& other) {
        if (this != &other) {
            Sequential tmp(other);
            *this = std::move(tmp);
        }
        return *this;
    }

    /// Move assignment.
    Sequential& operator=(Sequential&&) noexcept = default;

    ~Sequential() = default;

    /// Appends a layer (unbound; the owner binds and initialises it). Its parameter range starts at
    /// num_params() and its state range at num_state(). Throws dtrain::Error "<owner>::add: null layer".
    void add(std::unique_ptr<Layer<T>> layer) {
        DTRAIN_CHECK(layer != nullptr, owner_, "::add: null layer");
        param_ranges_.push_back(Range{num_params_, layer->num_params()});
        state_ranges_.push_back(Range{num_state_, layer->num_state()});
        num_params_ += layer->num_params();
        num_state_ += layer->num_state();
        reporting_.push_back(dynamic_cast<ReportsGradients*>(layer.get()));
        fusing_.push_back(dynamic_cast<FusesWithPrevious<T>*>(layer.get()));
        fusing_next_.push_back(dynamic_cast<FusesWithNext<T>*>(layer.get()));
        layers_.push_back(std::move(layer));
        outs_.resize(layers_.size());
        grad_ins_.resize(layers_.size());
        fused_.resize(layers_.size());
    }

    /// Number of layers.
    std::size_t num_layers() const noexcept { return layers_.size(); }
    /// True when the sequence has no layers.
    bool empty() const noexcept { return layers_.empty(); }
    /// Sum of the layers' parameters: the size of the sequence's parameter (and gradient) slice.
    std::size_t num_params() const noexcept { return num_params_; }
    /// Sum of the layers' state values: the size of the sequence's state slice.
    std::size_t num_state() const noexcept { return num_state_; }
    /// Where layer i's parameters and gradients sit in the sequence's slices.
    const std::vector<Range>& parameter_ranges() const noexcept { return param_ranges_; }
    /// Where layer i's state sits in the sequence's state slice.
    const std::vector<Range>& state_ranges() const noexcept { return state_ranges_; }

    /// Layer `i`; throws dtrain::Error "<owner>::layer: index i out of range (n layers)".
    Layer<T>& layer(std::size_t i) { return const_cast<Layer<T>&>(std::as_const(*this).layer(i)); }
    /// Layer `i`, read-only; checked as layer(i).
    const Layer<T>& layer(std::size_t i) const {
        DTRAIN_CHECK(i < layers_.size(), owner_, "::layer: index ", i, " out of range (", layers_.size(),
                     " layers)");
        return *layers_[i];
    }

    /// Layer `i`'s ReportsGradients interface, or null for a layer that does not opt in to it (it never
    /// reports and always adds); checked as layer(i).
    ReportsGradients* reporting(std::size_t i) {
        return const_cast<ReportsGradients*>(std::as_const(*this).reporting(i));
    }
    /// Layer `i`'s ReportsGradients interface, read-only; checked as layer(i).
    const ReportsGradients* reporting(std::size_t i) const {
        DTRAIN_CHECK(i < layers_.size(), owner_, "::reporting: index ", i, " out of range (", layers_.size(),
                     " layers)");
        return reporting_[i];
    }

    /// Layer `i` when forward() runs it and layer i + 1 as one pass by its FusesWithNext interface, else
    /// null (also where layer i + 1 runs the pair, FusesWithPrevious); checked as layer(i).
    FusesWithNext<T>* runs_with_next(std::size_t i) const {
        DTRAIN_CHECK(i < layers_.size(), owner_, "::runs_with_next: index ", i, " out of range (",
                     layers_.size(), " layers)");
        return fusion(i) == run_by_first ? fusing_next_[i] : nullptr;
    }

    /// The layers' names joined by ", " (layer 0 first).
    std::string names() const {
        std::string s;
        for (std::size_t i = 0; i < layers_.size(); ++i)
            s += (i ? ", " : "") + layers_[i]->name();
        return s;
    }

    /// Per-sample output shape of the whole chain for a per-sample `input` (`input` itself when empty).
    /// When layer i rejects its input, throws dtrain::Error "<who>: layer i of the block does not fit:
    /// <the layer's message>".
    Shape output_shape(const Shape& input, const std::string& who) const {
        Shape s = input;
        for (std::size_t i = 0; i < layers_.size(); ++i) {
            try {
                s = layers_[i]->output_shape(s);
            } catch (const Error& e) {
                throw Error(detail::concat(who, ": layer ", i, " of the block does not fit: ", e.what()));
            }
        }
        return s;
    }

    /// Points every layer at its part of the slices: `params` and `grads` have num_params() values,
    /// `state` num_state() (a null slice stays null for every layer).
    void bind(T* params, T* grads, T* state) {
        for (std::size_t i = 0; i < layers_.size(); ++i) {
            const std::size_t p = param_ranges_[i].offset;
            const std::size_t s = state_ranges_[i].offset;
            layers_[i]->bind(params == nullptr ? nullptr : params + p, grads == nullptr ? nullptr : grads + p,
                             state == nullptr ? nullptr : state + s);
        }
    }

    /// Initialises the layers in order from `rng` (as if each had been initialised when added).
    void init_params(Rng& rng) {
        for (auto& l : layers_)
            l->init_params(rng);
    }

    /// Runs the batch `in` through every layer, keeping each layer's output (but that of the first layer of
    /// a pair run as one, FusesWithPrevious or FusesWithNext), and returns the last one. `in` must stay
    /// alive and unchanged until backward(). Throws when the sequence is empty.
    const Tensor<T>& forward(const Tensor<T>& in, bool training) {
        DTRAIN_CHECK(!layers_.empty(), owner_, "::forward: no layers");
        const Tensor<T>* x = &in;
        for (std::size_t i = 0; i < layers_.size(); ++i) {
            fused_[i] = none;
            if (const char f = fusion(i); f != none) {
                if (outs_[i].dimension() != 0) outs_[i] = Tensor<T>();  // not kept: free it
                if (f == run_by_second)
                    fusing_[i + 1]->forward_with_previous(*x, outs_[i + 1], training);
                else
                    fusing_next_[i]->forward_with_next(*x, outs_[i + 1], training);
                fused_[++i] = f;
            } else {
                layers_[i]->forward(*x, outs_[i], training);
            }
            x = &outs_[i];
        }
        return outs_.back();
    }

    /// Runs layer i alone on `in` into its output (as forward() does) and returns that output.
    const Tensor<T>& forward_layer(std::size_t i, const Tensor<T>& in, bool training) {
        layer(i).forward(in, outs_[i], training);
        return outs_[i];
    }

    /// Output of layer i in the last forward() (checked; empty before the first, and for the first layer of
    /// a pair run as one).
    const Tensor<T>& output(std::size_t i) const {
        DTRAIN_CHECK(i < outs_.size(), owner_, "::output: index ", i, " out of range (", outs_.size(),
                     " layers)");
        return outs_[i];
    }

    /// Back-propagates `grad_out` (dLoss/d(last output)) from the last layer to the first, given the `in`
    /// of the last forward(): every layer ADDS its parameter gradients into its bound slice, layer 0
    /// writes dLoss/din into `grad_in` when `need_grad_in`. While layer i runs, its partial reports go to
    /// `listener.partial` (when set) with i (only layers that opt in to ReportsGradients report); after it
    /// returns, `listener.done` gets i.
    void backward(const Tensor<T>& in, const Tensor<T>& grad_out, Tensor<T>& grad_in, bool need_grad_in,
                  const BackwardListener& listener = {}) {
        const bool partial = listener.partial != nullptr;
        listener_ = listener;
        const Tensor<T>* g = &grad_out;
        for (std::size_t i = layers_.size(); i-- > 0;) {
            if (fused_[i] != none) {  // layers i - 1 and i as one; only layer i - 1 may have parameters
                const std::size_t p = --i;
                Tensor<T>& gin = p == 0 ? grad_in : grad_ins_[p];
                const Tensor<T>& pin = p == 0 ? in : outs_[p - 1];
                if (fused_[p + 1] == run_by_second) {
                    if (p > 0 || need_grad_in)
                        fusing_[p + 1]->backward_with_previous(pin, outs_[p + 1], *g, gin);
                } else {
                    start_backward(p, partial, listener.chunk);
                    fusing_next_[p]->backward_with_next(pin, outs_[p + 1], *g, gin, p > 0 || need_grad_in);
                }
                if (listener.done != nullptr)
                    listener.done(listener.context, p + 1), listener.done(listener.context, p);
                g = &gin;
                continue;
            }
            start_backward(i, partial, listener.chunk);
            Tensor<T>& gin = i == 0 ? grad_in : grad_ins_[i];
            layers_[i]->backward(i == 0 ? in : outs_[i - 1], outs_[i], *g, gin, i > 0 || need_grad_in);
            if (listener.done != nullptr) listener.done(listener.context, i);
            g = &gin;
        }
    }

    /// Appends every layer's state outside the flat buffers (Layer::save_extra_state()), layer 0 first.
    void save_extra_state(std::vector<std::uint64_t>& out) const {
        for (const auto& l : layers_)
            l->save_extra_state(out);
    }

    /// Restores what save_extra_state() appended, layer 0 first, advancing `in` past it.
    void load_extra_state(Span<const std::uint64_t>& in) {
        for (auto& l : layers_)
            l->load_extra_state(in);
    }

private:
    // What fused_[i] holds: layers i - 1 and i did not run as one, the second of them ran both
    // (FusesWithPrevious), or the first did (FusesWithNext).
    static constexpr char none = 0, run_by_second = 1, run_by_first = 2;

    // Whether layers i and i + 1 run as one pass (runs_fused()), and which of them runs it, as fused_ says.
    char fusion(std::size_t i) const {
        if (i + 1 >= layers_.size()) return none;
        if (runs_fused(*layers_[i], *layers_[i + 1], fusing_[i + 1])) return run_by_second;
        return runs_fused(*layers_[i], *layers_[i + 1], fusing_next_[i]) ? run_by_first : none;
    }

    // Makes layer i the running one and hands it, if it reports (ReportsGradients), where its partial
    // reports go: to report() when `partial`, nowhere otherwise.
    void start_backward(std::size_t i, bool partial, std::size_t chunk) {
        running_ = i;
        if (ReportsGradients* r = reporting_[i])
            r->set_grad_progress(partial ? GradProgress{&Sequential::report, this, chunk} : GradProgress{});
    }

    // GradProgress::fn of the layers: a report of the running layer, passed on with its index.
    static void report(void* self, std::size_t begin, std::size_t end) {
        auto* s = static_cast<Sequential*>(self);
        s->listener_.partial(s->listener_.context, s->running_, begin, end);
    }

    const char* owner_;
    std::vector<std::unique_ptr<Layer<T>>> layers_;
    std::vector<ReportsGradients*> reporting_;    // reporting_[i] = layer i as ReportsGradients, or null
    std::vector<FusesWithPrevious<T>*> fusing_;   // fusing_[i] = layer i as FusesWithPrevious, or null
    std::vector<FusesWithNext<T>*> fusing_next_;  // fusing_next_[i] = layer i as FusesWithNext, or null
    // fused_[i]: whether the last forward() ran layers i - 1 and i as one, and which ran them (fusion())
    std::vector<char> fused_;
    std::vector<Range> param_ranges_;  // layer i's range in the parameter (and gradient) slice
    std::vector<Range> state_ranges_;  // layer i's range in the state slice
    std::size_t num_params_ = 0;
    std::size_t num_state_ = 0;
    std::vector<Tensor<T>> outs_;      // outs_[i] = output of layer i in the last forward()
    std::vector<Tensor<T>> grad_ins_;  // grad_ins_[i] = dLoss/d(input of layer i), i > 0 (0: the caller's)
    BackwardListener listener_;        // the running backward()'s listener (for report())
    std::size_t running_ = 0;          // the layer whose backward() is running
};

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class Sequential<float>)
DTRAIN_PRECOMPILED_INSTANCE(class Sequential<double>)

}  // namespace dtrain

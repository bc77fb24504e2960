#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/grad_reporting.hpp>
#include <dtrain/nn/init.hpp>
#include <dtrain/nn/kernel_description.hpp>
#include <dtrain/nn/kernels/compute_threads.hpp>
#include <dtrain/nn/kernels/dense_algorithms.hpp>
#include <dtrain/nn/layer.hpp>

namespace dtrain {

/// Fully connected layer: out = in * W^T + b, with W of shape [out_features, in_features] (PyTorch's
/// Linear layout) followed by b in the flat buffer. Input must be [batch, in_features] (use Flatten
/// first for images). Weights are initialised by `init` (default Glorot uniform), biases to zero.
/// The products run on the first algorithm of dense_algorithms<T>() (nn/kernels/) that applies on this CPU
/// (kernel_cpu(), which follows DTRAIN_KERNELS, read at every call); Model::summary() names it. With
/// compute_threads() T > 1 and an algorithm that allows it, the forward pass and the input gradient run on T
/// parts of the batch at once, and the weight gradient on T parts of its rows, bitwise as on one thread.
/// Dense takes part in the gradient overlap (ReportsGradients): its weight gradient in parts, last rows
/// first, and written instead of added after Model::zero_grad().
template <class T = float>
class Dense final : public Layer<T>, public ReportsGradients, public DescribesKernels {
public:
    /// A layer mapping `in_features` to `out_features`; both must be positive.
    Dense(std::size_t in_features, std::size_t out_features, Init init = Init::GlorotUniform)
        : in_(in_features), out_(out_features), init_(init) {
        DTRAIN_CHECK(in_ > 0 && out_ > 0, "Dense: in_features and out_features must be positive, got (", in_,
                     ", ", out_, ")");
    }

    std::string name() const override { return detail::concat("Dense(", in_, ", ", out_, ")"); }

    Shape output_shape(const Shape& input) const override {
        DTRAIN_CHECK(input.size() == 1 && input[0] == in_, name(), ": expected input of shape [batch, ", in_,
                     "] but got [batch, ", detail::shape_str(input).substr(1),
                     input.size() == 1 ? "" : " (add Flatten before Dense)");
        return {out_};
    }

    std::size_t num_params() const override { return out_ * in_ + out_; }

    /// DescribesKernels::kernels: the name of the algorithm a batch of 64 runs on.
    std::string kernels(const Shape&) const override {
        return choose_dense_algorithm<T>(DenseProblem{64, in_, out_}).name;
    }

    /// Layer<T>::bind: the weights [out, in] (row-major) then the biases [out].
    void bind(T* params, T* grads, T*) override {
        w_ = params;
        b_ = params + out_ * in_;
        dw_ = grads;
        db_ = grads + out_ * in_;
    }

    void init_params(Rng& rng) override {
        init_weights(w_, out_ * in_, init_, in_, out_, rng);
        std::fill(b_, b_ + out_, T(0));
    }

    /// Layer<T>::forward: `out` = `in` W^T + b for `in` of shape [batch, in].
    void forward(const Tensor<T>& in, Tensor<T>& out, bool) override {
        if (in.dimension() != 2 || in.shape()[1] != in_) detail::check_batch_shape(in, {in_}, name());
        const std::size_t n = in.shape()[0];
        ensure_shape(out, std::array<std::size_t, 2>{n, out_});
        prepare(n);
        if (split_.empty()) return algo_->forward(in.data(), w_, b_, out.data());
        const T* x = in.data();
        T* y = out.data();
        split_.run([&](auto& part, std::size_t s0) { part.forward(x + s0 * in_, w_, b_, y + s0 * out_); });
    }

    /// Layer<T>::backward: accumulates dW and db; writes `grad_in` = `grad_out` W when asked.
    void backward(const Tensor<T>& in, const Tensor<T>&, const Tensor<T>& grad_out, Tensor<T>& grad_in,
                  bool need_grad_in) override {
        const std::size_t n = in.shape()[0];
        prepare(n);
        const T* g = grad_out.data();
        // db += column sums of g ; dW += g^T * in (the bias follows the weights in the slice); after
        // zero_grad() both are written, not added (the same values as added to zeros)
        const bool add = !this->grads_unset();
        this->set_grads_unset(false);
        if (!add) std::fill(db_, db_ + out_, T(0));
        for (std::size_t r = 0; r < n; ++r) {
            const T* gr = g + r * out_;
            for (std::size_t j = 0; j < out_; ++j)
                db_[j] += gr[j];
        }
        // dW rows [lo, hi), split over the batch's threads: rows are independent of each other, so the
        // result is bitwise that of one call
        auto weights = [&](std::size_t lo, std::size_t hi) {
            const std::size_t parts = std::min(split_.size(), (hi - lo) / detail::min_rows_per_thread);
            if (parts < 2) return algo_->backward_weights(in.data(), g, lo, hi, add, dw_);
            const std::vector<std::size_t> b = detail::batch_chunks(hi - lo, parts);
            detail::ComputePool::get().run(parts, [&](std::size_t k) {
                algo_->backward_weights(in.data(), g, lo + b[k], lo + b[k + 1], add, dw_);
            });
        };
        const std::size_t chunk = this->grad_chunk();
        if (chunk > 0 && num_params() > chunk) {
            // In parts of `rows` output rows, last rows first, each reported final as soon as computed.
            this->report_grads_ready(out_ * in_, out_ * in_ + out_);
            const std::size_t rows = std::max<std::size_t>(1, chunk / in_);
            for (std::size_t hi = out_; hi > 0;) {
                const std::size_t lo = hi > rows ? hi - rows : 0;
                weights(lo, hi);
                this->report_grads_ready(lo * in_, hi * in_);
                hi = lo;
            }
        } else {
            weights(0, out_);
        }
        if (need_grad_in) {
            ensure_shape(grad_in, in.shape());
            if (split_.empty()) return algo_->backward_data(g, w_, grad_in.data());
            T* dx = grad_in.data();
            split_.run(
                [&](auto& part, std::size_t s0) { part.backward_data(g + s0 * out_, w_, dx + s0 * in_); });
        }
    }

    std::unique_ptr<Layer<T>> clone() const override { return std::make_unique<Dense>(in_, out_, init_); }

    /// Dense writes its whole slice in backward() after Model::zero_grad() (ReportsGradients::grads_unset()).
    bool writes_unset_grads() const noexcept override { return true; }

    /// Input features.
    std::size_t in_features() const noexcept { return in_; }
    /// Output features.
    std::size_t out_features() const noexcept { return out_; }

    /// Weight matrix view [out_features, in_features] (valid once bound to a model).
    TensorView<T, 2> weight() { return make_view<T, 2>(w_, {out_, in_}); }
    /// Bias view [out_features].
    TensorView<T, 1> bias() { return make_view<T, 1>(b_, {out_}); }

private:
    // Chooses the algorithm for a batch of n on kernel_cpu() as it is now, and prepares it when it or the
    // batch size changed.
    void prepare(std::size_t n) {
        const DenseProblem problem{n, in_, out_};
        const DenseAlgorithmEntry<T>& chosen = choose_dense_algorithm<T>(problem);
        if (algo_ && n == n_ && chosen.name == algo_name_ && !split_.stale()) return;
        if (chosen.name != algo_name_) algo_ = chosen.make();
        algo_->prepare(problem);
        algo_name_ = chosen.name;
        n_ = n;
        split_.prepare(chosen, n, [&](std::size_t samples) { return DenseProblem{samples, in_, out_}; });
    }

    std::size_t in_, out_;
    Init init_;
    T* w_ = nullptr;
    T* b_ = nullptr;
    T* dw_ = nullptr;
    T* db_ = nullptr;
    std::size_t n_ = 0;                            // batch size algo_ is prepared for
    const char* algo_name_ = nullptr;              // the entry algo_ was made from
    std::unique_ptr<DenseAlgorithm<T>> algo_;      // the algorithm of the last call
    detail::BatchSplit<DenseAlgorithm<T>> split_;  // the batch split over threads (or none)
};

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class Dense<float>)
DTRAIN_PRECOMPILED_INSTANCE(class Dense<double>)

}  // namespace dtrain

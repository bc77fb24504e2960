#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <dtrain/core/blas.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/grad_reporting.hpp>
#include <dtrain/nn/init.hpp>
#include <dtrain/nn/kernel_description.hpp>
#include <dtrain/nn/layer.hpp>
#include <dtrain/nn/layers/detail/dense_gemm.hpp>

namespace dtrain {

/// Fully connected layer: out = in * W^T + b, with W of shape [out_features, in_features] (PyTorch's
/// Linear layout) followed by b in the flat buffer. Input must be [batch, in_features] (use Flatten
/// first for images). Weights are initialised by `init` (default Glorot uniform), biases to zero.
/// Dense<float> computes its products with the AVX-512 kernels of detail/dense_gemm.hpp where the CPU has
/// AVX-512F and DTRAIN_KERNELS is native (detail::kernel_set()): each output summed in one fixed order, so
/// a sample's output does not depend on the rest of its batch. Elsewhere, and for double, with BLAS gemm.
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

    /// DescribesKernels::kernels: "GEMM (AVX-512)" or "BLAS".
    std::string kernels(const Shape&) const override {
        return std::is_same_v<T, float> && detail::gemm_avx512_available() ? "GEMM (AVX-512)" : "BLAS";
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
        T* o = out.data();
        if constexpr (std::is_same_v<T, float>) {
            if (detail::gemm_avx512_available()) {
                xt_.resize(in_ * n);
                ot_.resize(out_ * n);
                return detail::dense_forward_avx512(n, in_, out_, in.data(), w_, b_, xt_.data(), ot_.data(),
                                                    o);
            }
        }
        for (std::size_t r = 0; r < n; ++r)
            std::copy(b_, b_ + out_, o + r * out_);
        detail::gemm(false, true, n, out_, in_, T(1), in.data(), in_, w_, in_, T(1), o, out_);
    }

    /// Layer<T>::backward: accumulates dW and db; writes `grad_in` = `grad_out` W when asked.
    void backward(const Tensor<T>& in, const Tensor<T>&, const Tensor<T>& grad_out, Tensor<T>& grad_in,
                  bool need_grad_in) override {
        const std::size_t n = in.shape()[0];
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
        const std::size_t chunk = this->grad_chunk();
        if (chunk > 0 && num_params() > chunk) {
            // In parts of `rows` output rows, last rows first, each reported final as soon as computed.
            this->report_grads_ready(out_ * in_, out_ * in_ + out_);
            const std::size_t rows = std::max<std::size_t>(1, chunk / in_);
            for (std::size_t hi = out_; hi > 0;) {
                const std::size_t lo = hi > rows ? hi - rows : 0;
                weight_grad(add, n, lo, hi, g, in.data());
                this->report_grads_ready(lo * in_, hi * in_);
                hi = lo;
            }
        } else {
            weight_grad(add, n, 0, out_, g, in.data());
        }
        if (need_grad_in) {
            ensure_shape(grad_in, in.shape());
            if constexpr (std::is_same_v<T, float>) {
                if (detail::gemm_avx512_available())
                    return detail::gemm_avx512(false, n, in_, out_, g, out_, 1, w_, in_, grad_in.data(), in_);
            }
            detail::gemm(false, false, n, in_, out_, T(1), g, out_, w_, in_, T(0), grad_in.data(), in_);
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
    // dW[lo, hi) (+)= g[:, lo, hi)^T * in for output rows [lo, hi): g [n, out], in [n, in_]; adds when `add`,
    // else writes.
    void weight_grad(bool add, std::size_t n, std::size_t lo, std::size_t hi, const T* g, const T* in) {
        if constexpr (std::is_same_v<T, float>) {
            if (detail::gemm_avx512_available())
                return detail::gemm_avx512(add, hi - lo, in_, n, g + lo, 1, out_, in, in_, dw_ + lo * in_,
                                           in_);
        }
        detail::gemm(true, false, hi - lo, in_, n, T(1), g + lo, out_, in, in_, add ? T(1) : T(0),
                     dw_ + lo * in_, in_);
    }

    std::size_t in_, out_;
    Init init_;
    T* w_ = nullptr;
    T* b_ = nullptr;
    T* dw_ = nullptr;
    T* db_ = nullptr;
    std::vector<T> xt_, ot_;  // AVX-512 forward: the input and output transposed, [in, n] and [out, n]
};

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class Dense<float>)
DTRAIN_PRECOMPILED_INSTANCE(class Dense<double>)

}  // namespace dtrain

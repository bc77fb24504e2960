#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <dtrain/core/aligned_allocator.hpp>
#include <dtrain/core/cpu.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/layer.hpp>
#include <dtrain/nn/layer_fusion.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/detail/max_pool_avx512.hpp>

namespace dtrain {

namespace detail {

/// Shared configuration and shape logic of the 2-D pooling layers: a `kernel` x `kernel` window moved by
/// `stride` over each channel of [batch, C, H, W], no padding, floor rounding (PyTorch's defaults):
/// OH = (H - kernel) / stride + 1.
template <class T>
class Pool2dBase : public Layer<T> {
public:
    /// Requires kernel > 0; `stride` 0 means stride = kernel; `kind` is "MaxPool2d" or "AvgPool2d".
    Pool2dBase(const char* kind, std::size_t kernel, std::size_t stride)
        : kind_(kind), k_(kernel), s_(stride == 0 ? kernel : stride) {
        DTRAIN_CHECK(k_ > 0 && s_ > 0, kind_, ": kernel and stride must be positive, got kernel=", k_,
                     ", stride=", s_);
    }

    std::string name() const override { return concat(kind_, "(kernel=", k_, ", stride=", s_, ")"); }

    Shape output_shape(const Shape& input) const override {
        DTRAIN_CHECK(input.size() == 3, name(), ": expected input of shape [batch, C, H, W] but got [batch, ",
                     shape_str(input).substr(1));
        DTRAIN_CHECK(input[1] >= k_ && input[2] >= k_, name(), ": kernel ", k_,
                     " is larger than the input [batch, ", shape_str(input).substr(1));
        return {input[0], (input[1] - k_) / s_ + 1, (input[2] - k_) / s_ + 1};
    }

    /// Window size (both axes).
    std::size_t kernel() const noexcept { return k_; }
    /// Step between windows (both axes).
    std::size_t stride() const noexcept { return s_; }

protected:
    // The loop bounds of the current batch: planes = batch * C, the input plane h x w, the output plane
    // oh x ow, the kernel and the stride.
    struct Geometry {
        std::size_t planes, h, w, oh, ow, k, stride;
    };

    Geometry geometry() const { return {out_[0] * out_[1], in_[2], in_[3], out_[2], out_[3], k_, s_}; }

    // Validates a batch, sizes `out` for it and returns its loop bounds.
    Geometry prepare_forward(const Tensor<T>& in, Tensor<T>& out) {
        ensure_shape(out, prepare(in));
        return geometry();
    }

    // Validates a batch and returns its output shape; cheap when the shape is unchanged.
    const std::array<std::size_t, 4>& prepare(const Tensor<T>& in) {
        const auto& s = in.shape();
        if (in.dimension() == 4 && s[0] == in_[0] && s[1] == in_[1] && s[2] == in_[2] && s[3] == in_[3])
            return out_;
        DTRAIN_CHECK(in.dimension() == 4, name(), ": expected input of shape [batch, C, H, W] but got ",
                     shape_str(s));
        const Shape o = output_shape({s[1], s[2], s[3]});
        in_ = {s[0], s[1], s[2], s[3]};
        out_ = {s[0], o[0], o[1], o[2]};
        resized();
        return out_;
    }
    // Called after the batch shape changed (in_ and out_ are set).
    virtual void resized() {}

    const char* kind_;
    std::size_t k_, s_;
    std::array<std::size_t, 4> in_{};
    std::array<std::size_t, 4> out_{};
};

/// Whether max pooling replaces the running maximum `m` by `v`: PyTorch's `v > m || isnan(v)`, written
/// with a bitwise or so that it stays a branch-free compare-and-select the compiler vectorises.
template <class T>
bool max_takes(T v, T m) {
    return bool(int(v > m) | int(v != v));
}

}  // namespace detail

/// 2-D max pooling over [batch, C, H, W] with a `kernel` x `kernel` window and `stride` (default
/// kernel), no padding. Forward records the arg-max of every window (first maximum on ties) and
/// backward routes each output gradient to it. NaN counts as the maximum, as in PyTorch's max_pool2d
/// (`val > max || isnan(val)`, scanning the window row by row): a window holding a NaN outputs NaN and
/// its gradient goes to the NaN (the last one in scan order if there are several). Float 2 x 2 windows of
/// stride 2 run on AVX-512 where the kernel set allows (detail/max_pool_avx512.hpp), with the same results;
/// there the layer also takes a ReLU before it in the same pass (FusesWithPrevious), which never writes the
/// ReLU's output nor its gradient.
template <class T = float>
class MaxPool2d final : public detail::Pool2dBase<T>, public FusesWithPrevious<T> {
    using Base = detail::Pool2dBase<T>;

public:
    /// Window `kernel`, step `stride` (0 means stride = kernel); kernel must be positive.
    explicit MaxPool2d(std::size_t kernel, std::size_t stride = 0) : Base("MaxPool2d", kernel, stride) {}

    /// Layer<T>::forward: the maximum of each window, remembering where it was.
    void forward(const Tensor<T>& in, Tensor<T>& out, bool) override {
        const auto geo = this->prepare_forward(in, out);  // named: a C++17 lambda captures no bindings
        const std::size_t planes = geo.planes, h = geo.h, w = geo.w, oh = geo.oh, ow = geo.ow, k = geo.k,
                          st = geo.stride;
        const T* x = in.data();
        T* y = out.data();
        Index* am = argmax_.data();
        if constexpr (std::is_same_v<T, float>)
            if (avx512_windows()) return detail::max_pool2x2_avx512(planes, h, w, oh, ow, x, y, am, false);
        detail::with_avx2([&] {  // the 2x2 windows vectorise with AVX2
            for (std::size_t pl = 0; pl < planes; ++pl) {
                const T* xp = x + pl * h * w;
                for (std::size_t i = 0; i < oh; ++i) {
                    if (k == 2 && st == 2) {
                        // Common case, branch-free: the first maximum of each 2x2 window (NaN wins).
                        const T* r0 = xp + 2 * i * w;
                        const T* r1 = r0 + w;
                        const Index row = Index(2 * i * w);
                        for (std::size_t j = 0; j < ow; ++j) {
                            const T a = r0[2 * j], b = r0[2 * j + 1], c = r1[2 * j], d = r1[2 * j + 1];
                            const Index col = Index(2 * j);
                            const bool tb = detail::max_takes(b, a);
                            T m = tb ? b : a;
                            Index idx = tb ? col + 1 : col;
                            const bool tc = detail::max_takes(c, m);
                            m = tc ? c : m;
                            idx = tc ? Index(w) + col : idx;
                            const bool td = detail::max_takes(d, m);
                            m = td ? d : m;
                            idx = td ? Index(w) + col + 1 : idx;
                            y[j] = m;
                            am[j] = row + idx;
                        }
                    } else {
                        for (std::size_t j = 0; j < ow; ++j) {
                            std::size_t best = i * st * w + j * st;
                            T m = xp[best];
                            for (std::size_t a = 0; a < k; ++a) {
                                const std::size_t r = (i * st + a) * w + j * st;
                                for (std::size_t b = 0; b < k; ++b) {
                                    if (detail::max_takes(xp[r + b], m)) {
                                        m = xp[r + b];
                                        best = r + b;
                                    }
                                }
                            }
                            y[j] = m;
                            am[j] = Index(best);
                        }
                    }
                    y += ow;
                    am += ow;
                }
            }
        });
    }

    /// The outputs of ReLU followed by this layer, from ReLU's input `in`, for inference only: nothing is
    /// kept for backward(), and on the AVX-512 windows ReLU's outputs are never written (Model::infer()).
    void forward_after_relu(const Tensor<T>& in, Tensor<T>& out) {
        if (avx512_windows()) return forward_with_previous(in, out, false);
        ensure_shape(relu_in_, in.shape());
        for (std::size_t i = 0; i < in.size(); ++i)
            relu_in_.data()[i] = detail::ReluFn::f(in.data()[i]);
        forward(relu_in_, out, false);
    }

    /// FusesWithPrevious: a ReLU, on the AVX-512 windows (float, 2 x 2, stride 2, kernel set native).
    bool fuses_with(const Layer<T>& previous) const override {
        return avx512_windows() && dynamic_cast<const ReLU<T>*>(&previous) != nullptr;
    }

    /// FusesWithPrevious: the maximum of each window of ReLU(in), ReLU applied as each input is read; with
    /// `training` the arg-maxes are kept, as forward() keeps them. Requires fuses_with() of a ReLU.
    void forward_with_previous(const Tensor<T>& in, Tensor<T>& out, bool training) override {
        DTRAIN_CHECK(avx512_windows(), this->name(),
                     ": a ReLU is fused only into 2 x 2 windows of stride 2 on AVX-512 (check fuses_with())");
        if constexpr (std::is_same_v<T, float>) {
            const auto geo = this->prepare_forward(in, out);
            detail::max_pool2x2_avx512(geo.planes, geo.h, geo.w, geo.oh, geo.ow, in.data(), out.data(),
                                       training ? argmax_.data() : nullptr, true);
        }
    }

    /// FusesWithPrevious: dLoss/d(ReLU's input). ReLU passes the gradient where its input is not <= 0,
    /// that is where its output, the window's maximum `out`, is not <= 0 (NaN passes): the output gradient
    /// so masked, routed as backward() routes it.
    void backward_with_previous(const Tensor<T>& in, const Tensor<T>& out, const Tensor<T>& grad_out,
                                Tensor<T>& grad_in) override {
        ReLU<T>().backward(out, out, grad_out, masked_, true);  // ReLU's own backward, `out` for its input
        backward(in, out, masked_, grad_in, true);
    }

    /// Layer<T>::backward: routes each gradient to the input element that was the window's maximum.
    void backward(const Tensor<T>& in, const Tensor<T>&, const Tensor<T>& grad_out, Tensor<T>& grad_in,
                  bool need_grad_in) override {
        if (!need_grad_in) return;
        ensure_shape(grad_in, in.shape());
        if constexpr (std::is_same_v<T, float>) {
            // Output rows of fewer than 8 windows fill too little of a vector: zeroing and scattering is
            // faster there (benchmarks/onednn/README.md, "On an Intel Xeon").
            if (avx512_windows() && this->out_[3] >= 8) {
                const auto geo = this->geometry();
                return detail::max_pool2x2_backward_avx512(geo.planes, geo.h, geo.w, geo.oh, geo.ow,
                                                           grad_out.data(), argmax_.data(), grad_in.data());
            }
        }
        std::fill(grad_in.begin(), grad_in.end(), T(0));
        const std::size_t plane = this->in_[2] * this->in_[3], per_plane = this->out_[2] * this->out_[3];
        const std::size_t planes = this->out_[0] * this->out_[1];
        const T* g = grad_out.data();
        const Index* am = argmax_.data();
        T* d = grad_in.data();
        for (std::size_t pl = 0; pl < planes; ++pl, d += plane, g += per_plane, am += per_plane)
            for (std::size_t i = 0; i < per_plane; ++i)
                d[am[i]] += g[i];
    }

    std::unique_ptr<Layer<T>> clone() const override {
        return std::make_unique<MaxPool2d>(this->k_, this->s_);
    }

private:
    // True when forward() runs max_pool2x2_avx512() (and backward() max_pool2x2_backward_avx512() for rows
    // of 8 windows or more): float, 2 x 2 windows of stride 2, AVX-512.
    bool avx512_windows() const {
        return std::is_same_v<T, float> && this->k_ == 2 && this->s_ == 2 &&
               detail::max_pool_avx512_available();
    }

    void resized() override {
        DTRAIN_CHECK(this->in_[2] * this->in_[3] <= std::numeric_limits<Index>::max(), this->name(),
                     ": input planes of more than 2^32 elements are not supported, got ",
                     detail::shape_str(this->in_));
        argmax_.resize(this->out_[0] * this->out_[1] * this->out_[2] * this->out_[3]);
    }

    using Index = std::uint32_t;
    detail::AlignedVector<Index> argmax_;  // index of each output's maximum within its input plane
    Tensor<T> relu_in_;                    // forward_after_relu()'s ReLU outputs where it writes them
    Tensor<T> masked_;                     // backward_with_previous()'s output gradient, ReLU's mask applied
};

/// 2-D average pooling over [batch, C, H, W] with a `kernel` x `kernel` window and `stride` (default
/// kernel), no padding; each output is the mean of its window.
template <class T = float>
class AvgPool2d final : public detail::Pool2dBase<T> {
    using Base = detail::Pool2dBase<T>;

public:
    /// Window `kernel`, step `stride` (0 means stride = kernel); kernel must be positive.
    explicit AvgPool2d(std::size_t kernel, std::size_t stride = 0) : Base("AvgPool2d", kernel, stride) {}

    /// Layer<T>::forward: the mean of each window.
    void forward(const Tensor<T>& in, Tensor<T>& out, bool) override {
        const auto [planes, h, w, oh, ow, k, st] = this->prepare_forward(in, out);
        const T scale = T(1) / T(k * k);
        const T* x = in.data();
        T* y = out.data();
        for (std::size_t pl = 0; pl < planes; ++pl) {
            const T* xp = x + pl * h * w;
            for (std::size_t i = 0; i < oh; ++i) {
                for (std::size_t j = 0; j < ow; ++j) {
                    T acc = T(0);
                    for (std::size_t a = 0; a < k; ++a) {
                        const T* r = xp + (i * st + a) * w + j * st;
                        for (std::size_t b = 0; b < k; ++b)
                            acc += r[b];
                    }
                    *y++ = acc * scale;
                }
            }
        }
    }

    /// Layer<T>::backward: spreads each gradient evenly over its window.
    void backward(const Tensor<T>& in, const Tensor<T>&, const Tensor<T>& grad_out, Tensor<T>& grad_in,
                  bool need_grad_in) override {
        if (!need_grad_in) return;
        this->prepare(in);
        ensure_shape(grad_in, in.shape());
        std::fill(grad_in.begin(), grad_in.end(), T(0));
        const auto [planes, h, w, oh, ow, k, st] = this->geometry();
        const T scale = T(1) / T(k * k);
        const T* g = grad_out.data();
        T* d = grad_in.data();
        for (std::size_t pl = 0; pl < planes; ++pl) {
            T* dp = d + pl * h * w;
            for (std::size_t i = 0; i < oh; ++i) {
                for (std::size_t j = 0; j < ow; ++j) {
                    const T v = *g++ * scale;
                    for (std::size_t a = 0; a < k; ++a) {
                        T* r = dp + (i * st + a) * w + j * st;
                        for (std::size_t b = 0; b < k; ++b)
                            r[b] += v;
                    }
                }
            }
        }
    }

    std::unique_ptr<Layer<T>> clone() const override {
        return std::make_unique<AvgPool2d>(this->k_, this->s_);
    }
};

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class MaxPool2d<float>)
DTRAIN_PRECOMPILED_INSTANCE(class MaxPool2d<double>)
DTRAIN_PRECOMPILED_INSTANCE(class AvgPool2d<float>)
DTRAIN_PRECOMPILED_INSTANCE(class AvgPool2d<double>)

}  // namespace dtrain

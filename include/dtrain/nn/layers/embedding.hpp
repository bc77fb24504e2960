#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>

#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/rng.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/layer.hpp>

namespace dtrain {

/// A lookup table of `count` vectors of `dim` values (PyTorch's Embedding(count, dim)): input [batch, L]
/// holds ids, whole numbers in [0, count) stored as T, and the output [batch, L, dim] holds the table's row
/// of each id. Parameters in the flat buffer: the table [count, dim], initialised from N(0, 1) as in
/// PyTorch. backward() adds each position's output gradient to its id's row, positions in order (so the
/// result is deterministic and does not depend on the other samples of the batch). Ids have no gradient:
/// an Embedding belongs first in a model; elsewhere its grad_in is zeros. An id that is not a whole number
/// in [0, count) is an error naming it, its sample and its position. With T = float, `count` is at most
/// 2^24, the ids a float holds exactly.
template <class T = float>
class Embedding final : public Layer<T> {
public:
    /// A table of `count` rows of `dim` values; both must be positive.
    Embedding(std::size_t count, std::size_t dim) : count_(count), dim_(dim) {
        DTRAIN_CHECK(count_ > 0 && dim_ > 0, "Embedding: count and dim must be positive, got (", count_, ", ",
                     dim_, ")");
        constexpr double exact = std::is_same_v<T, float> ? 16777216.0 : 9007199254740992.0;
        DTRAIN_CHECK(double(count_) <= exact, "Embedding: ", count_,
                     " ids do not fit the value type, which holds ", "whole numbers exactly up to ", exact,
                     ": use Embedding<double>");
    }

    std::string name() const override { return detail::concat("Embedding(", count_, ", ", dim_, ")"); }

    Shape output_shape(const Shape& input) const override {
        DTRAIN_CHECK(input.size() == 1, name(), ": expected ids of shape [batch, length] but got [batch, ",
                     detail::shape_str(input).substr(1));
        return {input[0], dim_};
    }

    std::size_t num_params() const override { return count_ * dim_; }

    /// Layer<T>::bind: the table [count, dim], row-major.
    void bind(T* params, T* grads, T*) override {
        w_ = params;
        dw_ = grads;
    }

    void init_params(Rng& rng) override {
        for (std::size_t i = 0; i < count_ * dim_; ++i)
            w_[i] = T(rng.normal());
    }

    /// Layer<T>::forward: out[s][p] = table[in[s][p]].
    void forward(const Tensor<T>& in, Tensor<T>& out, bool) override {
        DTRAIN_CHECK(in.dimension() == 2, name(), ": expected ids [batch, length] but got ",
                     detail::shape_str(in.shape()));
        const std::size_t n = in.shape()[0], len = in.shape()[1];
        ensure_shape(out, std::array<std::size_t, 3>{n, len, dim_});
        for (std::size_t i = 0; i < n * len; ++i) {
            const T* row = w_ + row_of(in.data()[i], i, len) * dim_;
            std::copy(row, row + dim_, out.data() + i * dim_);
        }
    }

    /// Layer<T>::backward: the table's gradient rows += the output gradient of each position with that id.
    void backward(const Tensor<T>& in, const Tensor<T>&, const Tensor<T>& grad_out, Tensor<T>& grad_in,
                  bool need_grad_in) override {
        const std::size_t positions = in.size();
        DTRAIN_CHECK(grad_out.size() == positions * dim_, name(), ": grad_out has ", grad_out.size(),
                     " elements, the output of ids ", detail::shape_str(in.shape()), " has ",
                     positions * dim_);
        const std::size_t len = in.dimension() == 2 ? in.shape()[1] : 1;
        for (std::size_t i = 0; i < positions; ++i) {
            T* d = dw_ + row_of(in.data()[i], i, len) * dim_;
            const T* g = grad_out.data() + i * dim_;
            for (std::size_t k = 0; k < dim_; ++k)
                d[k] += g[k];
        }
        if (need_grad_in) {
            ensure_shape(grad_in, in.shape());
            std::fill(grad_in.begin(), grad_in.end(), T(0));
        }
    }

    std::unique_ptr<Layer<T>> clone() const override { return std::make_unique<Embedding>(count_, dim_); }

    /// Rows of the table (ids are in [0, count)).
    std::size_t count() const noexcept { return count_; }
    /// Values per row.
    std::size_t dim() const noexcept { return dim_; }
    /// The table [count, dim] (valid once bound to a model).
    TensorView<T, 2> weight() { return make_view<T, 2>(w_, {count_, dim_}); }

private:
    // The row of id `v` at flat position i (sample i / len, position i % len); throws unless v is an id.
    std::size_t row_of(T v, std::size_t i, std::size_t len) const {
        DTRAIN_CHECK(v >= T(0) && v < T(count_) && std::floor(v) == v, name(), ": id ", v, " at sample ",
                     i / len, ", position ", i % len, " is not a whole number in [0, ", count_, ")");
        return std::size_t(v);
    }

    std::size_t count_, dim_;
    T* w_ = nullptr;
    T* dw_ = nullptr;
};

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class Embedding<float>)
DTRAIN_PRECOMPILED_INSTANCE(class Embedding<double>)

}  // namespace dtrain

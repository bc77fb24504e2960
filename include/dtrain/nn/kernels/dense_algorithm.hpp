#pragma once

/// @file
/// The compute-backend seam of Dense: a matrix-product algorithm is a type with a name, a static
/// applies(problem, cpu) and the three products (forward, backward_weights, backward_data); Dense keeps the
/// parameters, shapes and errors and runs the first algorithm of dense_algorithms() that applies.

#include <cstddef>
#include <string>

#include <dtrain/nn/kernels/conv_algorithm.hpp>

namespace dtrain {

/// One fully connected product to compute: batch size, input and output features.
struct DenseProblem {
    std::size_t batch = 0;  ///< samples per call
    std::size_t in = 0;     ///< input features
    std::size_t out = 0;    ///< output features
};

/// The interface of a matrix-product algorithm of Dense for element type T: x [batch, in], y and dy
/// [batch, out], w [out, in] (row-major), bias [out]. prepare() sizes the scratch for a problem (the
/// algorithm's applies() holds for it); the products then allocate nothing. All are deterministic; where the
/// algorithm's `splits_batch` is true a sample's forward and input gradient do not depend on the rest of
/// its batch, and Dense may split a batch over threads (one instance per part).
template <class T>
class DenseAlgorithm {
public:
    virtual ~DenseAlgorithm() = default;

    /// The name Model::summary() lists, e.g. "BLAS".
    virtual std::string name() const = 0;

    /// Sizes the scratch for `problem`.
    virtual void prepare(const DenseProblem& problem) = 0;

    /// y = x w^T + bias.
    virtual void forward(const T* x, const T* w, const T* bias, T* y) = 0;

    /// Rows [lo, hi) of dw (+)= dy[:, lo:hi)^T x: adds when `add`, else writes. An algorithm whose entry
    /// says splits_batch computes each row independently of the others and allows calls on disjoint row
    /// ranges at once (Dense splits its weight gradient over threads so).
    virtual void backward_weights(const T* x, const T* dy, std::size_t lo, std::size_t hi, bool add,
                                  T* dw) = 0;

    /// dx = dy w.
    virtual void backward_data(const T* dy, const T* w, T* dx) = 0;
};

}  // namespace dtrain

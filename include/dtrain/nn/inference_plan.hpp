#pragma once

/// @file
/// The forward pass of Model::infer(): every layer's eval-mode forward, except for three fusions.
/// - A run of Dense<float> layers, each optionally followed by ReLU, is computed on transposed activations
///   where Dense runs the AVX-512 or the AVX2 GEMM (GemmDense). Dense's forward transposes its input to [in,
///   batch] and its product back to [batch, out] on every call; a run transposes its input once, keeps every
///   product as [out, batch], adds the bias and applies the ReLU as the GEMM stores it (GemmEpilogue), reads
///   it as the next layer's transposed input, and transposes only the last product back.
/// - A ReLU followed by a MaxPool2d of 2 x 2 windows and stride 2 is one pass where the pooling runs on
///   AVX-512 (MaxPool2d's FusesWithPrevious, as in Model::forward()): ReLU's output, the size of a
///   convolution's, is never written, and no arg-max is kept.
/// - A layer followed by one it fuses with (FusesWithNext, as in Model::forward(): BatchNorm and ReLU) is one
///   pass.
/// The operations are the layers' own in the same order, so the outputs are bitwise those of
/// Model::forward() in eval mode.

#include <algorithm>
#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include <dtrain/core/aligned_allocator.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/kernels/compute_threads.hpp>
#include <dtrain/nn/kernels/dense_algorithms.hpp>
#include <dtrain/nn/layer_fusion.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/detail/dense_gemm.hpp>
#include <dtrain/nn/layers/detail/dense_gemm_avx2.hpp>
#include <dtrain/nn/layers/pool2d.hpp>
#include <dtrain/nn/sequential.hpp>

namespace dtrain::detail {

/// Model::infer()'s pass over a Sequential: the runs of Dense(+ReLU) layers fused as described above, the
/// other layers through Sequential::forward_layer(). Holds only scratch: which layers form a run is read
/// from the sequence on every call (a few casts), so a plan never refers to layers that have changed.
template <class T>
class InferencePlan {
public:
    /// The eval-mode output of `seq` for the batch x ([batch, ...], checked by the caller).
    const Tensor<T>& run(Sequential<T>& seq, const Tensor<T>& x) {
        const Tensor<T>* cur = &x;
        for (std::size_t i = 0; i < seq.num_layers();) {
            const std::size_t end = dense_run_end(seq, i, x.shape()[0]);
            if (end > i) {
                cur = &dense_run(seq, i, end, *cur);
                i = end;
            } else if (MaxPool2d<T>* pool = pool_after_relu(seq, i)) {
                Tensor<T>& out = fused_[next_fused_ ^= 1];  // never the tensor it reads (the other one)
                pool->forward_with_previous(*cur, out, false);
                cur = &out;
                i += 2;
            } else if (FusesWithNext<T>* pair = seq.runs_with_next(i)) {
                Tensor<T>& out = fused_[next_fused_ ^= 1];
                pair->forward_with_next(*cur, out, false);
                cur = &out;
                i += 2;
            } else {
                cur = &seq.forward_layer(i, *cur, false);
                ++i;
            }
        }
        return *cur;
    }

    /// The end of the run of Dense layers (each optionally followed by ReLU) that run() fuses from layer i
    /// of `seq` for a batch of n, or i when none starts there: T is not float, the layers run on more than
    /// one thread (compute_threads(): Dense then splits the batch), a Dense runs neither GEMM of GemmDense,
    /// or the run is a lone Dense (nothing to save).
    static std::size_t dense_run_end(Sequential<T>& seq, std::size_t i, std::size_t n) {
        if constexpr (!std::is_same_v<T, float>) {
            return i;
        } else {
            if (compute_threads() != 1) return i;
            std::size_t end = i;
            while (end < seq.num_layers()) {
                const auto* d = dynamic_cast<const Dense<float>*>(&seq.layer(end));
                if (d == nullptr || !runs_gemm(*d, n)) break;
                end += relu_follows(seq, end) ? 2 : 1;
            }
            return end - i >= 2 ? end : i;
        }
    }

    /// The MaxPool2d at layer i + 1 of `seq` when layer i is a ReLU and the pooling takes ReLU's input
    /// without writing ReLU's outputs (MaxPool2d::fuses_with(): float, 2 x 2 windows of stride 2, AVX-512),
    /// else null.
    static MaxPool2d<T>* pool_after_relu(Sequential<T>& seq, std::size_t i) {
        if (i + 1 >= seq.num_layers()) return nullptr;
        auto* pool = dynamic_cast<MaxPool2d<T>*>(&seq.layer(i + 1));
        return pool != nullptr && pool->fuses_with(seq.layer(i)) ? pool : nullptr;
    }

private:
    // True when layer i + 1 of `seq` is a ReLU<float> (which a run takes with the Dense at i).
    static bool relu_follows(Sequential<T>& seq, std::size_t i) {
        return i + 1 < seq.num_layers() && dynamic_cast<const ReLU<float>*>(&seq.layer(i + 1)) != nullptr;
    }

    // True when Dense `d` computes a batch of n with GemmDense (the AVX-512 one where
    // gemm_avx512_available(), else the AVX2 one).
    static bool runs_gemm(const Dense<float>& d, std::size_t n) {
        const std::string name =
            choose_dense_algorithm<float>(DenseProblem{n, d.in_features(), d.out_features()}).name;
        return name == GemmAvx512Dense::label || name == GemmAvx2Dense::label;
    }

    // Layers [begin, end) of `seq` (a run found by dense_run_end()) on the batch x [n, in].
    const Tensor<T>& dense_run(Sequential<T>& seq, std::size_t begin, std::size_t end, const Tensor<T>& x) {
        if constexpr (std::is_same_v<T, float>) {
            const std::size_t n = x.shape()[0];
            std::size_t widest = 0;
            for (std::size_t i = begin; i < end; ++i)
                if (const auto* d = dynamic_cast<const Dense<float>*>(&seq.layer(i)))
                    widest = std::max({widest, d->in_features(), d->out_features()});
            a_.resize(widest * n);
            b_.resize(widest * n);
            float *in = a_.data(), *out = b_.data();
            const bool avx512 = gemm_avx512_available();
            const auto gemm = avx512 ? &gemm_avx512 : &gemm_avx2;
            const auto transpose = avx512 ? &transpose_avx512 : &transpose_avx2;
            auto& first = static_cast<Dense<float>&>(seq.layer(begin));
            transpose(n, first.in_features(), x.data(), first.in_features(), in, n, nullptr);
            for (std::size_t i = begin; i < end;) {
                auto& d = static_cast<Dense<float>&>(seq.layer(i));
                const std::size_t fi = d.in_features(), fo = d.out_features();
                const bool relu = relu_follows(seq, i);  // then the run holds it (dense_run_end)
                i += relu ? 2 : 1;
                // the bias and the ReLU applied as each product is stored
                gemm(false, fo, n, fi, d.weight().data(), fi, 1, in, n, out, n,
                     GemmEpilogue{d.bias().data(), relu});
                if (i == end) {  // the last product, transposed back to [batch, out]
                    if (out_.dimension() != 2 || out_.shape()[0] != n || out_.shape()[1] != fo)
                        out_ = Tensor<T>::from_shape({n, fo});
                    transpose(fo, n, out, n, out_.data(), fo, nullptr);
                    return out_;
                }
                std::swap(in, out);
            }
        }
        return out_;  // not reached: a run ends with a product
    }

    AlignedVector<float> a_, b_;  // the transposed activations, [features, batch], in turn input and output
    Tensor<T> out_;               // the run's output [batch, out]
    Tensor<T> fused_[2];          // the outputs of pairs of layers run as one, in turn
    int next_fused_ = 0;
};

}  // namespace dtrain::detail

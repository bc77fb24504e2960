#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xtensor.hpp>

#include <dtrain/core/aligned_allocator.hpp>

namespace dtrain {

/// Shape of one sample (batch dimension excluded), e.g. {1, 28, 28} or {4}.
using Shape = std::vector<std::size_t>;

/// Batch-first activation tensor of dynamic rank, row-major. Resizing to the same number of elements
/// reuses its memory, so steady-state training does not allocate. Its data starts on 64 bytes
/// (detail::AlignedAllocator).
template <class T>
using Tensor = xt::xarray<T, xt::layout_type::row_major, detail::AlignedAllocator<T>>;

/// Integer class labels of a batch, one per sample.
using Labels = xt::xtensor<std::int32_t, 1>;

/// A non-owning N-dimensional view into memory owned elsewhere (a model's flat buffers).
template <class T, std::size_t N>
using TensorView =
    xt::xtensor_adaptor<xt::xbuffer_adaptor<T*, xt::no_ownership>, N, xt::layout_type::row_major>;

/// Makes a view of `shape` over `p`; `p` is taken as an rvalue so the view holds the pointer by value.
template <class T, std::size_t N>
TensorView<T, N> make_view(T* p, const std::array<std::size_t, N>& shape) {
    std::size_t n = 1;
    for (auto s : shape)
        n *= s;
    return xt::adapt(std::move(p), n, xt::no_ownership(), shape);
}

/// Number of elements of a sample shape.
inline std::size_t shape_size(const Shape& s) {
    std::size_t n = 1;
    for (auto v : s)
        n *= v;
    return n;
}

/// The batch shape {batch, sample...}.
inline std::vector<std::size_t> batch_shape(std::size_t batch, const Shape& sample) {
    std::vector<std::size_t> s;
    s.reserve(sample.size() + 1);
    s.push_back(batch);
    s.insert(s.end(), sample.begin(), sample.end());
    return s;
}

/// Resizes `t` to `shape` only when the shape differs (no allocation when the element count is unchanged).
template <class T, class S>
void ensure_shape(Tensor<T>& t, const S& shape) {
    if (t.dimension() == shape.size() && std::equal(shape.begin(), shape.end(), t.shape().begin())) return;
    t.resize(std::vector<std::size_t>(shape.begin(), shape.end()));
}

}  // namespace dtrain

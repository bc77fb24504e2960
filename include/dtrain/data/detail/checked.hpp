#pragma once

#include <cstddef>

#include <dtrain/core/error.hpp>
#include <dtrain/core/tensor.hpp>

namespace dtrain::detail {

/// Stores a * b in `out` and returns true, or returns false when the product does not fit std::size_t
/// (`out` is then unspecified). Sizes read from files or given by callers are multiplied only through this.
inline bool mul_fits(std::size_t a, std::size_t b, std::size_t& out) {
    return !__builtin_mul_overflow(a, b, &out);
}

/// a * b; throws dtrain::Error "<context...>: a x b overflows std::size_t" when the product does not fit.
template <class... Context>
std::size_t checked_mul(std::size_t a, std::size_t b, const Context&... context) {
    std::size_t out = 0;
    DTRAIN_CHECK(mul_fits(a, b, out), context..., ": ", a, " x ", b, " overflows std::size_t");
    return out;
}

/// The product of the dimensions of `shape` (a Shape or a tensor's shape) from index `first` on: the values
/// per sample of a batch-first shape for first = 1. Throws dtrain::Error "<context...>: shape [..] has more
/// elements than std::size_t holds" when that product or the product of all dimensions overflows, where
/// shape_size() and xtensor would wrap around and describe a buffer far smaller than the shape.
template <class S, class... Context>
std::size_t checked_trailing_size(const S& shape, std::size_t first, const Context&... context) {
    std::size_t whole = 1, trailing = 1;
    for (std::size_t i = 0; i < shape.size(); ++i)
        DTRAIN_CHECK(
            mul_fits(whole, shape[i], whole) && (i < first || mul_fits(trailing, shape[i], trailing)),
            context..., ": shape ", shape_str(shape), " has more elements than std::size_t holds (overflow)");
    return trailing;
}

/// The number of elements of `shape` (the product of all its dimensions), checked as checked_trailing_size().
template <class S, class... Context>
std::size_t checked_shape_size(const S& shape, const Context&... context) {
    return checked_trailing_size(shape, 0, context...);
}

}  // namespace dtrain::detail

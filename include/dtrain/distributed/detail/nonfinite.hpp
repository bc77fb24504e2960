#pragma once

/// @file
/// Finiteness checks of gradient buffers, cheap enough to run at every step: an integer OR over the
/// exponent bits plus one (the sum reaches the sign bit only for NaN and infinity), which the compiler
/// vectorises with baseline SSE2 (an unsigned max needs SSE4.1; a floating-point reduction is not
/// reordered), fused with the scaling pass where there is one.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/nn/layer.hpp>
#include <dtrain/nn/model.hpp>

namespace dtrain::detail {

/// The unsigned integer of T's size, the mask of T's exponent bits (all set: NaN or infinity), the lowest
/// exponent bit and the sign bit: (bits & exponent) + one_exponent sets the sign bit exactly when the value
/// is NaN or infinite.
template <class T>
struct FloatBits {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "float or double");
    using type = std::conditional_t<std::is_same_v<T, float>, std::uint32_t, std::uint64_t>;
    static constexpr type exponent =
        std::is_same_v<T, float> ? type(0x7f800000u) : type(0x7ff0000000000000ull);
    static constexpr type one_exponent = exponent & ~(exponent << 1);
    static constexpr type sign = type(1) << (8 * sizeof(type) - 1);
};

/// Multiplies the n values at p by `scale` (unless `scale` is 1) and returns true when all of them are
/// finite afterwards (always true without `check`, which then leaves out the pass when `scale` is 1). One
/// pass; vectorised.
template <class T>
bool scale_and_check(T* p, std::size_t n, T scale, bool check = true) noexcept {
    if (!check) {
        if (scale != T(1))
            for (std::size_t i = 0; i < n; ++i)
                p[i] *= scale;
        return true;
    }
    using U = typename FloatBits<T>::type;
    constexpr U e = FloatBits<T>::exponent, one = FloatBits<T>::one_exponent;
    U m = 0;
    if (scale != T(1)) {
        for (std::size_t i = 0; i < n; ++i) {
            p[i] *= scale;
            U u;
            std::memcpy(&u, &p[i], sizeof u);
            m |= (u & e) + one;
        }
    } else {
        for (std::size_t i = 0; i < n; ++i) {
            U u;
            std::memcpy(&u, &p[i], sizeof u);
            m |= (u & e) + one;
        }
    }
    return (m & FloatBits<T>::sign) == 0;
}

/// Index of the first value of [p, p + n) that is NaN or infinite (n when there is none).
template <class T>
std::size_t first_nonfinite(const T* p, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i)
        if (!(p[i] - p[i] == T(0))) return i;
    return n;
}

/// Index of the layer whose range in `ranges` (contiguous, in order) holds flat index `i`.
inline std::size_t layer_of(const std::vector<Range>& ranges, std::size_t i) {
    const auto it = std::upper_bound(ranges.begin(), ranges.end(), i,
                                     [](std::size_t v, const Range& r) { return v < r.offset + r.size; });
    return std::size_t(it - ranges.begin());
}

/// Where the first NaN or infinity among the gradients [offset, offset + n) of `model` is, for the errors
/// of the distributed optimizers: "<value> at index <i>, in layer <l> (<layer name>); a NaN or an infinity
/// in the input, the loss or the parameters reached the gradients".
template <class T>
std::string locate_nonfinite_gradient(const Model<T>& model, std::size_t offset, std::size_t n) {
    const Span<const T> g = model.gradients();
    const std::size_t i = offset + first_nonfinite(g.data() + offset, n);
    const std::size_t layer = layer_of(model.parameter_ranges(), i);
    return concat(g[i], " at index ", i, ", in layer ", layer, " (", model.layer(layer).name(),
                  "); a NaN or an infinity in the input, the loss or the parameters reached the gradients");
}

/// The error of a synchronous step whose (averaged, over `ranks` ranks) gradient in [offset, offset + n)
/// is not finite: names the step, the value, the layer and `hint` (the compression's, maybe ""), and
/// says that every rank stops and how to skip such steps instead.
template <class T>
std::string nonfinite_step_message(const Model<T>& model, std::size_t offset, std::size_t n,
                                   std::uint64_t step, int ranks, const char* hint) {
    return concat("DistOptimizer::step: the ", ranks > 1 ? "averaged " : "", "gradient of step ", step,
                  " is not finite: ", locate_nonfinite_gradient(model, offset, n), hint,
                  ". Every rank stops here (options.nonfinite = NonFinite::Skip skips such steps instead)");
}

/// The error of DistOptimizer<Async>'s step `step` on worker `worker` whose gradient (all of `model`'s) is
/// not finite: names the step, the value and the layer, and how to skip such steps instead.
template <class T>
std::string async_nonfinite_message(const Model<T>& model, int worker, std::uint64_t step) {
    return concat("DistOptimizer<Async>::step: worker ", worker, "'s gradient of step ", step,
                  " is not finite: ", locate_nonfinite_gradient(model, 0, model.gradients().size()),
                  " (options.nonfinite = NonFinite::Skip skips such steps instead)");
}

}  // namespace dtrain::detail

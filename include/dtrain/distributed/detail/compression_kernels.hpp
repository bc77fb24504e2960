#pragma once

/// @file
/// The per-bucket kernels of GradientCompressor (distributed/compression.hpp): the 16-bit wire conversions of
/// float and double gradients (comm/half.hpp's bulk conversions), and TopK's selection: the indices of the k
/// values of largest magnitude, ties to the lower index, NaN above infinity (NaNs among themselves by
/// payload), in ascending order. TopKSelector finds the k-th largest magnitude by a radix select on the
/// magnitudes' bit patterns (11 bits per pass from the top, the later passes over the few candidates left)
/// and then collects the indices in one ordered pass: the same set as top_k_by_nth_element, its reference.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

#include <dtrain/core/error.hpp>

namespace dtrain::detail {

/// The bits of the 16-bit wire values w[o..].
template <class W>
std::uint16_t* wire_bits(std::vector<W>& w, std::size_t o) noexcept {
    static_assert(sizeof(W) == sizeof(std::uint16_t) && std::is_standard_layout_v<W>, "a 16-bit wire type");
    return reinterpret_cast<std::uint16_t*>(w.data() + o);
}

/// The values per block of float on the stack through which double gradients are converted.
inline constexpr std::size_t wire_block = 256;

/// dst[0..n) from src[0..n) by the bulk conversion `convert(const S*, D*, n)` between float and 16-bit wire
/// bits, where S or D may be double: then through float blocks on the stack (nothing allocates), each double
/// rounded to float on the way in or each float widened on the way out.
template <class S, class D, class Convert>
void convert_through_float(const S* src, D* dst, std::size_t n, Convert convert) noexcept {
    if constexpr (!std::is_same_v<S, double> && !std::is_same_v<D, double>) {
        convert(src, dst, n);
    } else {
        float f[wire_block];
        for (std::size_t i = 0; i < n; i += wire_block) {
            const std::size_t m = std::min(wire_block, n - i);
            if constexpr (std::is_same_v<S, double>) {
                std::copy(src + i, src + i + m, f);
                convert(f, dst + i, m);
            } else {
                convert(src + i, f, m);
                std::copy(f, f + m, dst + i);
            }
        }
    }
}

/// The unsigned integer type of T's bits (float or double).
template <class T>
using MagnitudeBits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;

/// |x| as an unsigned integer that orders like the magnitude, NaN above infinity (x float or double).
template <class T>
MagnitudeBits<T> magnitude_bits(T x) noexcept {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "float or double");
    MagnitudeBits<T> u;
    std::memcpy(&u, &x, sizeof u);
    return u & (~MagnitudeBits<T>(0) >> 1);
}

/// Writes to idx[0..k) the indices of the k values of x[0..n) of largest magnitude_bits, ties to the lower
/// index, in ascending order, with std::nth_element over all n indices (the reference of TopKSelector;
/// idx must hold n values). Requires k <= n < 2^32.
template <class T>
void top_k_by_nth_element(const T* x, std::size_t n, std::size_t k, std::uint32_t* idx) {
    std::iota(idx, idx + n, std::uint32_t(0));
    const auto first = [x](std::uint32_t a, std::uint32_t b) {  // larger magnitude, then lower index
        const MagnitudeBits<T> ma = magnitude_bits(x[a]), mb = magnitude_bits(x[b]);
        return ma > mb || (ma == mb && a < b);
    };
    if (k < n) std::nth_element(idx, idx + k, idx + n, first);
    std::sort(idx, idx + k);
}

/// Top-k selection by radix select with its scratch allocated once (select() allocates nothing): selects
/// the same indices as top_k_by_nth_element, in ascending order. Not thread-safe.
///
/// @tparam T the value type (float or double).
template <class T>
class TopKSelector {
public:
    /// Selects from nothing.
    TopKSelector() = default;
    /// Scratch for selections from up to `largest` values.
    explicit TopKSelector(std::size_t largest) : candidates_(largest) {}

    /// Writes to out[0..k) the indices of the k values of x[0..n) of largest magnitude_bits, ties to the
    /// lower index, in ascending order. Requires k <= n <= the constructor's `largest` and n < 2^32.
    void select(const T* x, std::size_t n, std::size_t k, std::uint32_t* out) {
        DTRAIN_CHECK(k <= n && n <= candidates_.size(), "TopKSelector: k = ", k, " of n = ", n,
                     " values with scratch for ", candidates_.size());
        if (k == n) {
            std::iota(out, out + n, std::uint32_t(0));
            return;
        }
        if (k == 0) return;
        // The k-th largest magnitude lies in bucket `prefix` of the top digit; `need` of that bucket's values
        // are taken, and all values of the buckets above it.
        int shift = total_bits - digit_bits;
        counts_.fill(0);
        for (std::size_t i = 0; i < n; ++i)
            ++counts_[std::size_t(magnitude_bits(x[i]) >> shift)];
        std::size_t need = k, b = pick(std::size_t(1) << digit_bits, need);
        Bits prefix = Bits(b);
        bool whole = counts_[b] == need;  // the bucket is taken whole
        const std::size_t c = gather(x, n, prefix << shift);
        // Refine among the candidates' magnitudes with `prefix` in their top bits by the next digit.
        while (!whole && shift > 0) {
            const int width = std::min(digit_bits, shift);
            shift -= width;
            const Bits mask = (Bits(1) << width) - 1;
            std::fill(counts_.begin(), counts_.begin() + (std::ptrdiff_t(1) << width), 0u);
            for (std::size_t j = 0; j < c; ++j) {
                const Bits m = magnitude_bits(x[candidates_[j]]);
                if ((m >> (shift + width)) == prefix) ++counts_[std::size_t((m >> shift) & mask)];
            }
            b = pick(std::size_t(1) << width, need);
            prefix = (prefix << width) | Bits(b);
            whole = counts_[b] == need;
        }
        // Taken, in index order: every magnitude above `low`, and of those equal to it all (when the last
        // bucket is taken whole) or the first `need`.
        const Bits low = prefix << shift;
        std::size_t j = 0, tied = 0;
        for (std::size_t q = 0; q < c; ++q) {
            const std::uint32_t i = candidates_[q];
            const Bits m = magnitude_bits(x[i]);
            if (m > low || (m == low && (whole || tied++ < need))) out[j++] = i;
        }
    }

private:
    using Bits = MagnitudeBits<T>;
    static constexpr int total_bits = int(sizeof(Bits)) * 8 - 1;  // the sign bit is masked off
    static constexpr int digit_bits = 11;

    /// candidates_[0..c) = the indices i of x[0..n) with magnitude_bits(x[i]) >= low, ascending; returns c.
    /// Blocks of 16 with none are passed over after a comparison the compiler vectorises.
    std::size_t gather(const T* x, std::size_t n, Bits low) noexcept {
        std::size_t c = 0, i = 0;
        for (; i + 16 <= n; i += 16) {
            bool any = false;
            for (std::size_t l = 0; l < 16; ++l)
                any |= magnitude_bits(x[i + l]) >= low;
            if (any)
                for (std::size_t l = i; l < i + 16; ++l)
                    if (magnitude_bits(x[l]) >= low) candidates_[c++] = std::uint32_t(l);
        }
        for (; i < n; ++i)
            if (magnitude_bits(x[i]) >= low) candidates_[c++] = std::uint32_t(i);
        return c;
    }

    /// The highest bucket of counts_[0..buckets) at which the counts from the top reach `need`; lowers
    /// `need` by the counts above it.
    std::size_t pick(std::size_t buckets, std::size_t& need) const noexcept {
        std::size_t above = 0, b = buckets - 1;
        for (; above + counts_[b] < need; --b)
            above += counts_[b];
        need -= above;
        return b;
    }

    std::vector<std::uint32_t> candidates_;
    std::array<std::uint32_t, std::size_t(1) << digit_bits> counts_{};
};

}  // namespace dtrain::detail

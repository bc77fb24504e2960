#pragma once

/// @file
/// The loops of batch normalisation over [batch, C, inner]: per-channel sums in a fixed order and passes
/// with per-channel coefficients, both laid out so that they vectorise at every map size.

#include <algorithm>
#include <array>
#include <cstddef>
#include <type_traits>
#include <vector>

#include <dtrain/core/aligned_allocator.hpp>

namespace dtrain::detail {

/// Per-channel sums and per-channel elementwise passes over values laid out [batch, C, inner], with the
/// scratch they need. When a sample's block of C * inner values is small enough (or its rows too short),
/// the loops run over whole blocks with the per-channel values laid out per value of a block, not over rows
/// of one channel, which at ResNet9's 1x1 to 4x4 maps are 1 to 16 values long. Larger blocks keep the row
/// loops, whose partial sums stay in registers (measured: benchmarks/train/README.md).
template <class T>
class ChannelPasses {
public:
    /// For `channels` channels.
    explicit ChannelPasses(std::size_t channels)
        : c_(channels),
          mean_(channels),
          invstd_(channels),
          sum1_(channels),
          sum2_(channels),
          lane1_(channels * lanes),
          lane2_(channels * lanes) {}

    /// Prepares the passes for rows of `inner` values; allocates only when a block grows.
    void size_for(std::size_t inner) {
        if (!blockwise(inner)) return;
        const std::size_t b = c_ * inner;
        if (lane1_.size() < b) lane1_.resize(b), lane2_.resize(b);
        if (stat_.size() < 2 * b) stat_.resize(2 * b), coef_.resize(4 * b);
    }

    /// The per-channel mean [C] that sums() passes to its functions (set it, then call statistics_set()).
    double* mean() noexcept { return mean_.data(); }
    /// The per-channel inverse standard deviation [C] that sums() passes to its functions.
    double* invstd() noexcept { return invstd_.data(); }

    /// Makes the values of mean() and invstd() those that sums() passes from now on: call after size_for()
    /// and after changing them, before a sums() whose functions use them.
    void statistics_set(std::size_t inner) {
        if (!blockwise(inner)) return;
        spread(stat_.data(), inner, [&](std::size_t c) { return mean_[c]; });
        spread(stat_.data() + c_ * inner, inner, [&](std::size_t c) { return invstd_[c]; });
    }

    /// Sets sum1(c) (and sum2(c), unless f2 is nullptr) to the sums of f1(mean, invstd, i) (and f2) over
    /// channel c's values i (flat indices), in double, with the channel's statistics of statistics_set().
    /// The order is fixed (the same result on every call): blockwise, each value of a block is summed over
    /// the samples and then each channel's values in order; otherwise each row of one channel in 8
    /// interleaved partial sums, added lane by lane into 8 per channel that are added up at the end.
    template <class F1, class F2>
    void sums(std::size_t n, std::size_t inner, F1&& f1, F2&& f2) {
        constexpr bool two = !std::is_same_v<std::decay_t<F2>, std::nullptr_t>;
        std::fill(sum1_.begin(), sum1_.end(), 0.0);
        std::fill(sum2_.begin(), sum2_.end(), 0.0);
        double* p1 = lane1_.data();
        double* p2 = lane2_.data();
        if (blockwise(inner)) {
            const std::size_t b = c_ * inner;
            const double* mean = stat_.data();
            const double* invstd = mean + b;
            std::fill_n(p1, b, 0.0);
            if constexpr (two) std::fill_n(p2, b, 0.0);
            for (std::size_t s = 0; s < n; ++s)
                for (std::size_t k = 0; k < b; ++k) {
                    p1[k] += f1(mean[k], invstd[k], s * b + k);
                    if constexpr (two) p2[k] += f2(mean[k], invstd[k], s * b + k);
                }
            for (std::size_t c = 0; c < c_; ++c)
                for (std::size_t j = 0; j < inner; ++j) {
                    sum1_[c] += p1[c * inner + j];
                    if constexpr (two) sum2_[c] += p2[c * inner + j];
                }
            return;
        }
        std::fill_n(p1, c_ * lanes, 0.0);
        std::fill_n(p2, c_ * lanes, 0.0);
        for (std::size_t s = 0; s < n; ++s)
            for (std::size_t c = 0; c < c_; ++c) {
                double a[lanes] = {}, z[lanes] = {};  // in registers over the row
                const double mean = mean_[c], invstd = invstd_[c];
                const std::size_t base = (s * c_ + c) * inner;
                std::size_t j = 0;
                for (; j + lanes <= inner; j += lanes)
                    for (std::size_t k = 0; k < lanes; ++k) {
                        a[k] += f1(mean, invstd, base + j + k);
                        if constexpr (two) z[k] += f2(mean, invstd, base + j + k);
                    }
                for (std::size_t k = 0; j < inner; ++j, ++k) {
                    a[k] += f1(mean, invstd, base + j);
                    if constexpr (two) z[k] += f2(mean, invstd, base + j);
                }
                for (std::size_t k = 0; k < lanes; ++k) {
                    p1[c * lanes + k] += a[k];
                    p2[c * lanes + k] += z[k];
                }
            }
        for (std::size_t c = 0; c < c_; ++c)
            for (std::size_t k = 0; k < lanes; ++k) {
                sum1_[c] += p1[c * lanes + k];
                sum2_[c] += p2[c * lanes + k];
            }
    }

    /// Channel c's first sum of the last sums().
    double sum1(std::size_t c) const { return sum1_[c]; }
    /// Channel c's second sum of the last sums() (0 when it took no f2).
    double sum2(std::size_t c) const { return sum2_[c]; }

    /// For every value i (flat index) of channel c, calls op(i, k) with k(q) the q-th of the K coefficients
    /// make(c) returns (a std::array<T, K>). Blockwise, the coefficients are first laid out per value of a
    /// block, so that the loop runs over whole blocks.
    template <std::size_t K, class Make, class Op>
    void elementwise(std::size_t n, std::size_t inner, Make&& make, Op&& op) {
        static_assert(K <= 4, "ChannelPasses::elementwise: at most 4 coefficients");
        if (blockwise(inner)) {
            const std::size_t b = c_ * inner;
            T* e = coef_.data();
            for (std::size_t q = 0; q < K; ++q)
                spread(e + q * b, inner, [&](std::size_t c) { return make(c)[q]; });
            for (std::size_t s = 0; s < n; ++s)
                for (std::size_t k = 0; k < b; ++k)
                    op(s * b + k, [&](std::size_t q) { return e[q * b + k]; });
            return;
        }
        for (std::size_t s = 0; s < n; ++s)
            for (std::size_t c = 0; c < c_; ++c) {
                const std::array<T, K> a = make(c);
                const std::size_t base = (s * c_ + c) * inner;
                for (std::size_t j = 0; j < inner; ++j)
                    op(base + j, [&](std::size_t q) { return a[q]; });
            }
    }

private:
    bool blockwise(std::size_t inner) const { return c_ * inner <= block_max || inner < lanes; }

    // Blockwise: lays v(c) out over channel c's values of a block of C * inner at dst.
    template <class U, class V>
    void spread(U* dst, std::size_t inner, V&& v) const {
        for (std::size_t c = 0; c < c_; ++c)
            std::fill_n(dst + c * inner, inner, v(c));
    }

    static constexpr std::size_t lanes = 8;
    static constexpr std::size_t block_max = 512;  // largest block of C * inner values taken blockwise
    std::size_t c_;
    std::vector<double> mean_, invstd_;    // the statistics sums() passes, [C]
    std::vector<double> sum1_, sum2_;      // sums()' results, [C]
    AlignedVector<double> lane1_, lane2_;  // sums()' partial sums, [C][lanes] or (blockwise) [C * inner]
    AlignedVector<double> stat_;           // blockwise: mean and invstd per value of a block, [2][C * inner]
    AlignedVector<T> coef_;                // blockwise: elementwise()'s coefficients, [K][C * inner]
};

}  // namespace dtrain::detail

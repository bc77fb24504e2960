#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/data/detail/checked.hpp>

namespace dtrain {

namespace detail {

/// The per-feature scalers' fit() input: [N, ...] with N > 0; returns the values per sample. `who` names the
/// call in the error ("Standardizer::fit").
DTRAIN_INLINE std::size_t check_scaler_fit_input(const Tensor<float>& x, const char* who);

/// The per-feature scalers' apply() input: fitted (`fitted` values per sample, 0 before fit()) and [N, ...]
/// with that many values per sample. `who` names the call in the error ("MinMaxScaler::apply").
DTRAIN_INLINE void check_scaler_apply_input(const Tensor<float>& x, std::size_t fitted, const char* who);

}  // namespace detail

/// Z-score standardisation per feature: x' = (x - mean) / std, where "feature" is every position of a
/// sample (a column of an [N, F] table). Fit it on the training split only and apply the same object to
/// every other split. A constant feature (std below 1e-12) is only centred (its std is taken as 1).
class Standardizer {
public:
    /// An unfitted standardiser; apply() throws until fit() has been called.
    Standardizer() = default;

    /// Computes the mean and population standard deviation of every feature of `x` (shape {N, ...}, N > 0).
    void fit(const Tensor<float>& x);

    /// Standardises `x` in place with the fitted statistics; its sample size must match the fitted one.
    void apply(Tensor<float>& x) const;

    /// Fitted mean of every feature.
    const std::vector<float>& mean() const { return mean_; }
    /// Fitted standard deviation of every feature (1 for constant features).
    const std::vector<float>& stddev() const { return std_; }

    /// The fitted statistics as one array (every mean, then every standard deviation), e.g. to keep in a
    /// model file's extras (save_model) next to the model; empty before fit().
    std::vector<double> state() const {
        std::vector<double> s(mean_.begin(), mean_.end());
        s.insert(s.end(), std_.begin(), std_.end());
        return s;
    }

    /// A fitted standardiser from state(); throws dtrain::Error naming the problem when `s` is empty, of odd
    /// length or holds a standard deviation that is not positive and finite.
    static Standardizer from_state(const std::vector<double>& s) {
        DTRAIN_CHECK(!s.empty() && s.size() % 2 == 0, "Standardizer::from_state: need the means and the ",
                     "standard deviations (an even number of values, at least 2), got ", s.size(), " values");
        Standardizer z;
        const std::size_t m = s.size() / 2;
        for (std::size_t j = 0; j < m; ++j) {
            DTRAIN_CHECK(std::isfinite(s[m + j]) && s[m + j] > 0.0 && std::isfinite(s[j]),
                         "Standardizer::from_state: feature ", j, " has mean ", s[j],
                         " and standard deviation ", s[m + j],
                         " (need finite values and a positive deviation)");
            z.mean_.push_back(static_cast<float>(s[j]));
            z.std_.push_back(static_cast<float>(s[m + j]));
        }
        return z;
    }

private:
    std::vector<float> mean_, std_;
};

/// Min-max scaling per feature into [lo, hi] (default [0, 1]): x' = lo + (x - min) (hi - lo) / (max - min).
/// Fit on the training split; other splits may fall outside [lo, hi] (values are not clipped). A constant
/// feature maps to lo.
class MinMaxScaler {
public:
    /// A scaler into [lo, hi]; requires lo < hi.
    explicit MinMaxScaler(float lo = 0.0f, float hi = 1.0f) : lo_(lo), hi_(hi) {
        DTRAIN_CHECK(lo < hi, "MinMaxScaler: need lo < hi, got [", lo, ", ", hi, "]");
    }

    /// Computes every feature's minimum and maximum over the N samples of `x` (N > 0).
    void fit(const Tensor<float>& x);

    /// Scales `x` in place; its sample size must match the fitted one.
    void apply(Tensor<float>& x) const;

    /// Fitted minimum of every feature.
    const std::vector<float>& min() const { return min_; }
    /// Fitted maximum of every feature.
    const std::vector<float>& max() const { return max_; }

    /// The range and the fitted statistics as one array (lo, hi, every minimum, then every maximum), e.g. to
    /// keep in a model file's extras; only lo and hi before fit().
    std::vector<double> state() const {
        std::vector<double> s{lo_, hi_};
        s.insert(s.end(), min_.begin(), min_.end());
        s.insert(s.end(), max_.begin(), max_.end());
        return s;
    }

    /// A scaler from state(); throws dtrain::Error naming the problem when `s` has no lo < hi, an odd number
    /// of statistics, or a minimum above its maximum.
    static MinMaxScaler from_state(const std::vector<double>& s) {
        DTRAIN_CHECK(s.size() >= 2 && s.size() % 2 == 0,
                     "MinMaxScaler::from_state: need lo, hi, the minima and ",
                     "the maxima (an even number of values, at least 2), got ", s.size(), " values");
        MinMaxScaler r(static_cast<float>(s[0]), static_cast<float>(s[1]));
        const std::size_t m = (s.size() - 2) / 2;
        for (std::size_t j = 0; j < m; ++j) {
            DTRAIN_CHECK(s[2 + j] <= s[2 + m + j], "MinMaxScaler::from_state: feature ", j, " has minimum ",
                         s[2 + j], " above its maximum ", s[2 + m + j]);
            r.min_.push_back(static_cast<float>(s[2 + j]));
            r.max_.push_back(static_cast<float>(s[2 + m + j]));
        }
        return r;
    }

private:
    float lo_, hi_;
    std::vector<float> min_, max_;
};

/// Per-channel normalisation of image data [N, C, ...]: x' = (x - mean[c]) / std[c]. The statistics are
/// given (e.g. the published CIFAR-10 values) or fitted on the training split.
class ChannelNormalizer {
public:
    /// An unfitted normaliser; apply() throws until fit() or the statistics are given.
    ChannelNormalizer() = default;
    /// A normaliser with known per-channel `mean` and `stddev` (same length, every std > 0).
    ChannelNormalizer(std::vector<float> mean, std::vector<float> stddev)
        : mean_(std::move(mean)), std_(std::move(stddev)) {
        DTRAIN_CHECK(!mean_.empty() && mean_.size() == std_.size(), "ChannelNormalizer: got ", mean_.size(),
                     " means and ", std_.size(), " standard deviations");
        for (auto s : std_)
            DTRAIN_CHECK(s > 0.0f, "ChannelNormalizer: standard deviation ", s, " is not > 0");
    }

    /// Computes each channel's mean and population std over all samples and positions of `x` [N, C, ...].
    void fit(const Tensor<float>& x);

    /// Normalises `x` [N, C, ...] in place; C must equal the number of channels of the statistics.
    void apply(Tensor<float>& x) const;

    /// Per-channel means.
    const std::vector<float>& mean() const { return mean_; }
    /// Per-channel standard deviations.
    const std::vector<float>& stddev() const { return std_; }

private:
    std::vector<float> mean_, std_;
};

#if DTRAIN_HEADER_DEFINITIONS

DTRAIN_INLINE std::size_t detail::check_scaler_fit_input(const Tensor<float>& x, const char* who) {
    DTRAIN_CHECK(x.dimension() >= 2 && x.shape()[0] > 0, who,
                 ": need batch-first features with N > 0, got shape ", shape_str(x.shape()));
    return checked_trailing_size(x.shape(), 1, who);
}

DTRAIN_INLINE void detail::check_scaler_apply_input(const Tensor<float>& x, std::size_t fitted,
                                                    const char* who) {
    DTRAIN_CHECK(fitted > 0, who, ": call fit() on the training features first");
    DTRAIN_CHECK(x.dimension() >= 2 && checked_trailing_size(x.shape(), 1, who) == fitted, who,
                 ": fitted on samples of ", fitted, " values but got features of shape ",
                 shape_str(x.shape()));
}

DTRAIN_INLINE void Standardizer::fit(const Tensor<float>& x) {
    const std::size_t m = detail::check_scaler_fit_input(x, "Standardizer::fit"), n = x.shape()[0];
    std::vector<double> sum(m, 0.0), sq(m, 0.0);
    const float* p = x.data();
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < m; ++j)
            sum[j] += p[i * m + j];
    mean_.assign(m, 0.0f);
    std_.assign(m, 1.0f);
    for (std::size_t j = 0; j < m; ++j)
        sum[j] /= static_cast<double>(n);
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < m; ++j) {
            const double d = p[i * m + j] - sum[j];
            sq[j] += d * d;
        }
    for (std::size_t j = 0; j < m; ++j) {
        const double s = std::sqrt(sq[j] / static_cast<double>(n));
        mean_[j] = static_cast<float>(sum[j]);
        std_[j] = s < 1e-12 ? 1.0f : static_cast<float>(s);
    }
}

DTRAIN_INLINE void Standardizer::apply(Tensor<float>& x) const {
    detail::check_scaler_apply_input(x, mean_.size(), "Standardizer::apply");
    const std::size_t m = mean_.size(), n = x.shape()[0];
    float* p = x.data();
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < m; ++j)
            p[i * m + j] = (p[i * m + j] - mean_[j]) / std_[j];
}

DTRAIN_INLINE void MinMaxScaler::fit(const Tensor<float>& x) {
    const std::size_t m = detail::check_scaler_fit_input(x, "MinMaxScaler::fit"), n = x.shape()[0];
    min_.assign(m, std::numeric_limits<float>::infinity());
    max_.assign(m, -std::numeric_limits<float>::infinity());
    const float* p = x.data();
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < m; ++j) {
            min_[j] = std::min(min_[j], p[i * m + j]);
            max_[j] = std::max(max_[j], p[i * m + j]);
        }
}

DTRAIN_INLINE void MinMaxScaler::apply(Tensor<float>& x) const {
    detail::check_scaler_apply_input(x, min_.size(), "MinMaxScaler::apply");
    const std::size_t m = min_.size(), n = x.shape()[0];
    float* p = x.data();
    for (std::size_t j = 0; j < m; ++j) {
        const float range = max_[j] - min_[j];
        const float scale = range > 0.0f ? (hi_ - lo_) / range : 0.0f;
        for (std::size_t i = 0; i < n; ++i)
            p[i * m + j] = lo_ + (p[i * m + j] - min_[j]) * scale;
    }
}

DTRAIN_INLINE void ChannelNormalizer::fit(const Tensor<float>& x) {
    DTRAIN_CHECK(x.dimension() >= 3 && x.size() > 0,
                 "ChannelNormalizer::fit: need image features [N, C, ...], got shape ",
                 detail::shape_str(x.shape()));
    const std::size_t n = x.shape()[0], c = x.shape()[1],
                      hw = detail::checked_trailing_size(x.shape(), 2, "ChannelNormalizer::fit");
    std::vector<double> sum(c, 0.0), sq(c, 0.0);
    const float* p = x.data();
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t k = 0; k < c; ++k) {
            const float* q = p + (i * c + k) * hw;
            double s = 0.0;
            for (std::size_t j = 0; j < hw; ++j)
                s += q[j];
            sum[k] += s;
        }
    const double cnt = static_cast<double>(n * hw);
    for (auto& s : sum)
        s /= cnt;
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t k = 0; k < c; ++k) {
            const float* q = p + (i * c + k) * hw;
            double s = 0.0;
            for (std::size_t j = 0; j < hw; ++j)
                s += (q[j] - sum[k]) * (q[j] - sum[k]);
            sq[k] += s;
        }
    mean_.resize(c);
    std_.resize(c);
    for (std::size_t k = 0; k < c; ++k) {
        mean_[k] = static_cast<float>(sum[k]);
        const double s = std::sqrt(sq[k] / cnt);
        std_[k] = s < 1e-12 ? 1.0f : static_cast<float>(s);
    }
}

DTRAIN_INLINE void ChannelNormalizer::apply(Tensor<float>& x) const {
    DTRAIN_CHECK(!mean_.empty(), "ChannelNormalizer::apply: no statistics (call fit() or pass them)");
    DTRAIN_CHECK(x.dimension() >= 3 && x.shape()[1] == mean_.size(), "ChannelNormalizer::apply: have ",
                 mean_.size(), " channel statistics but features have shape ", detail::shape_str(x.shape()));
    const std::size_t n = x.shape()[0], c = x.shape()[1],
                      hw = detail::checked_trailing_size(x.shape(), 2, "ChannelNormalizer::apply");
    float* p = x.data();
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t k = 0; k < c; ++k) {
            float* q = p + (i * c + k) * hw;
            const float m = mean_[k], inv = 1.0f / std_[k];
            for (std::size_t j = 0; j < hw; ++j)
                q[j] = (q[j] - m) * inv;
        }
}

#endif

}  // namespace dtrain

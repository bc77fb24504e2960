#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

namespace dtrain {

/// Seeded random generator (xoshiro256** seeded by splitmix64) with uniform and normal draws implemented
/// here, not by the standard library, so that the same seed gives bitwise-identical numbers on every
/// platform and standard library.
class Rng {
public:
    /// Generator seeded from `seed`; equal seeds give equal streams.
    explicit Rng(std::uint64_t seed = 0) { reseed(seed); }

    /// Restarts the stream from `seed`.
    void reseed(std::uint64_t seed) {
        std::uint64_t x = seed;
        for (auto& s : s_)
            s = splitmix(x);
        has_spare_ = false;
    }

    /// Next 64 random bits. Satisfies UniformRandomBitGenerator.
    std::uint64_t operator()() {
        const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
        const std::uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return result;
    }
    /// Smallest value operator() returns.
    static constexpr std::uint64_t min() { return 0; }
    /// Largest value operator() returns.
    static constexpr std::uint64_t max() { return std::numeric_limits<std::uint64_t>::max(); }

    /// Uniform double in [0, 1) with 53 random bits.
    double uniform() { return static_cast<double>((*this)() >> 11) * 0x1.0p-53; }
    /// Uniform double in [lo, hi).
    double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
    /// Uniform integer in [0, n); requires n > 0. Unbiased (rejection sampling).
    std::uint64_t below(std::uint64_t n) {
        const std::uint64_t limit = max() - max() % n;
        std::uint64_t r;
        do
            r = (*this)();
        while (r >= limit);
        return r % n;
    }
    /// Standard normal draw (Box-Muller, caching the second value).
    double normal() {
        if (has_spare_) {
            has_spare_ = false;
            return spare_;
        }
        double u1 = uniform();
        while (u1 <= 0.0)
            u1 = uniform();
        const double u2 = uniform();
        const double r = std::sqrt(-2.0 * std::log(u1));
        const double th = 6.283185307179586476925286766559 * u2;
        spare_ = r * std::sin(th);
        has_spare_ = true;
        return r * std::cos(th);
    }
    /// Normal draw with mean `mean` and standard deviation `stddev`.
    double normal(double mean, double stddev) { return mean + stddev * normal(); }

    /// Number of 64-bit words in state().
    static constexpr std::size_t state_words = 6;
    /// The whole generator state (the four xoshiro words, the cached normal draw and whether it is valid),
    /// so that a checkpoint can continue the stream exactly (set_state()).
    std::array<std::uint64_t, state_words> state() const {
        std::uint64_t spare = 0;
        std::memcpy(&spare, &spare_, sizeof spare);
        return {s_[0], s_[1], s_[2], s_[3], spare, has_spare_ ? 1u : 0u};
    }
    /// Restores a state() of any generator: the stream continues as that generator's would.
    void set_state(const std::array<std::uint64_t, state_words>& w) {
        for (int i = 0; i < 4; ++i)
            s_[i] = w[std::size_t(i)];
        std::memcpy(&spare_, &w[4], sizeof spare_);
        has_spare_ = w[5] != 0;
    }

private:
    static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    static std::uint64_t splitmix(std::uint64_t& x) {
        std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    std::uint64_t s_[4]{};
    double spare_ = 0.0;
    bool has_spare_ = false;
};

/// Fisher-Yates shuffle of [first, last) driven by `rng` (portable, unlike std::shuffle).
template <class It>
void shuffle(It first, It last, Rng& rng) {
    const auto n = static_cast<std::uint64_t>(last - first);
    for (std::uint64_t i = n; i > 1; --i) {
        const std::uint64_t j = rng.below(i);
        std::swap(first[i - 1], first[j]);
    }
}

}  // namespace dtrain

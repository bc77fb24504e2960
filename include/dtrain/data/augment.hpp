#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <dtrain/core/rng.hpp>

namespace dtrain {

/// Image augmentation as in the SINGA CIFAR-10 example: random crop of the original size after symmetric
/// zero padding by `crop_padding` pixels, then a random horizontal flip with probability 1/2. Draws come
/// from a generator seeded with (seed, epoch, rank), so a run is reproducible.
struct AugmentOptions {
    /// Padding on each side before the random crop; 0 disables cropping.
    std::size_t crop_padding = 0;
    /// Mirror each image left-right with probability 1/2.
    bool horizontal_flip = false;
    /// Seed of the augmentation draws (independent of the shuffling seed).
    std::uint64_t seed = 0;
    /// True when any augmentation is switched on.
    bool enabled() const { return crop_padding > 0 || horizontal_flip; }
};

/// Writes image `src` ([c, h, w], row-major) to `dst` (same shape, not overlapping) shifted by (dy, dx)
/// with zero fill, i.e. the crop at offset (pad + dy, pad + dx) of the image zero-padded by pad, and then
/// mirrored left-right when `flip`. dst(y, x) = src(y + dy, x' + dx) with x' = flip ? w - 1 - x : x.
inline void augment_image(const float* src, float* dst, std::size_t c, std::size_t h, std::size_t w, long dy,
                          long dx, bool flip) {
    const long H = static_cast<long>(h), W = static_cast<long>(w);
    for (std::size_t k = 0; k < c; ++k) {
        const float* s = src + k * h * w;
        float* d = dst + k * h * w;
        for (long y = 0; y < H; ++y) {
            float* drow = d + y * W;
            const long sy = y + dy;
            if (sy < 0 || sy >= H) {
                std::memset(drow, 0, w * sizeof(float));
                continue;
            }
            const float* srow = s + sy * W;
            // Columns x with a source column inside the image; the rest is padding.
            const long lo = std::max(0L, flip ? dx : -dx), hi = std::min(W, flip ? W + dx : W - dx);
            if (lo >= hi) {
                std::memset(drow, 0, w * sizeof(float));
                continue;
            }
            std::memset(drow, 0, static_cast<std::size_t>(lo) * sizeof(float));
            if (flip) {
                for (long x = lo; x < hi; ++x)
                    drow[x] = srow[W - 1 + dx - x];
            } else {
                std::memcpy(drow + lo, srow + lo + dx, static_cast<std::size_t>(hi - lo) * sizeof(float));
            }
            std::memset(drow + hi, 0, static_cast<std::size_t>(W - hi) * sizeof(float));
        }
    }
}

/// Augments one [c, h, w] image from `src` into `dst` with offsets and flip drawn from `rng` per `opt`.
inline void augment_image(const float* src, float* dst, std::size_t c, std::size_t h, std::size_t w,
                          const AugmentOptions& opt, Rng& rng) {
    long dy = 0, dx = 0;
    if (opt.crop_padding > 0) {
        const auto span = static_cast<std::uint64_t>(2 * opt.crop_padding + 1);
        dy = static_cast<long>(rng.below(span)) - static_cast<long>(opt.crop_padding);
        dx = static_cast<long>(rng.below(span)) - static_cast<long>(opt.crop_padding);
    }
    const bool flip = opt.horizontal_flip && (rng() >> 63) != 0;
    augment_image(src, dst, c, h, w, dy, dx, flip);
}

}  // namespace dtrain

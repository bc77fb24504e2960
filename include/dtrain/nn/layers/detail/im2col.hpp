#pragma once

#include <algorithm>
#include <cstddef>

namespace dtrain::detail {

/// For kernel offset `k` along an axis of input length `len`, stride `s` and padding `p`, the range
/// [lo, hi) of output positions whose input index o * s + k - p lies inside [0, len).
inline void valid_range(std::size_t k, std::size_t len, std::size_t s, std::size_t p, std::size_t out,
                        std::size_t& lo, std::size_t& hi) {
    lo = k >= p ? 0 : (p - k + s - 1) / s;
    if (len + p <= k) {
        lo = hi = 0;
        return;
    }
    hi = std::min(out, (len + p - k - 1) / s + 1);
    lo = std::min(lo, hi);
}

/// Geometry of a 2-D convolution on one sample: input [c, h, w], kernel [kh, kw], strides, zero
/// paddings and the resulting output size [oh, ow]. Requires h + 2 ph >= kh and w + 2 pw >= kw.
struct ConvGeometry {
    /// Input channels.
    std::size_t c = 0;
    /// Input height.
    std::size_t h = 0;
    /// Input width.
    std::size_t w = 0;
    /// Kernel height.
    std::size_t kh = 0;
    /// Kernel width.
    std::size_t kw = 0;
    /// Vertical stride.
    std::size_t sh = 1;
    /// Horizontal stride.
    std::size_t sw = 1;
    /// Zero rows added above and below.
    std::size_t ph = 0;
    /// Zero columns added left and right.
    std::size_t pw = 0;
    /// Output height (set by finish()).
    std::size_t oh = 0;
    /// Output width (set by finish()).
    std::size_t ow = 0;
    /// Kernel rows [k0h, k1h) and columns [k0w, k1w) that meet the input at some output position (set by
    /// finish()); the other taps see only padding, e.g. all but the centre of a 3x3 kernel with padding 1
    /// on a 1x1 map, and are left out of the column matrix.
    std::size_t k0h = 0, k1h = 0, k0w = 0, k1w = 0;

    /// Computes oh, ow and the used kernel taps from the other fields.
    void finish() {
        oh = (h + 2 * ph - kh) / sh + 1;
        ow = (w + 2 * pw - kw) / sw + 1;
        used_taps(kh, h, sh, ph, oh, k0h, k1h);
        used_taps(kw, w, sw, pw, ow, k0w, k1w);
    }
    /// Rows of the column matrix: c * (k1h - k0h) * (k1w - k0w), one per channel and used tap.
    std::size_t col_rows() const { return c * (k1h - k0h) * (k1w - k0w); }
    /// True when every kernel tap is used (the column matrix has c * kh * kw rows).
    bool full_kernel() const { return k0h == 0 && k1h == kh && k0w == 0 && k1w == kw; }
    /// Output positions per sample: oh * ow.
    std::size_t positions() const { return oh * ow; }

private:
    // The kernel offsets [lo, hi) along one axis whose valid output range is not empty (a contiguous range).
    static void used_taps(std::size_t k, std::size_t len, std::size_t s, std::size_t p, std::size_t out,
                          std::size_t& lo, std::size_t& hi) {
        lo = k;
        hi = 0;
        for (std::size_t t = 0; t < k; ++t) {
            std::size_t a, b;
            valid_range(t, len, s, p, out, a, b);
            if (a < b) {
                lo = std::min(lo, t);
                hi = t + 1;
            }
        }
        if (hi == 0) lo = 0;
    }
};

/// Sum of x[0, n) in 16 interleaved partial sums added up in a fixed order at the end: the same result
/// on every call (no dependence on alignment), and a loop the compiler vectorises without -ffast-math.
template <class T>
T lane_sum(const T* x, std::size_t n) {
    constexpr std::size_t lanes = 16;
    T acc[lanes] = {};
    std::size_t i = 0;
    for (; i + lanes <= n; i += lanes)
        for (std::size_t j = 0; j < lanes; ++j)
            acc[j] += x[i + j];
    for (std::size_t j = 0; i < n; ++i, ++j)
        acc[j] += x[i];
    T total = T(0);
    for (std::size_t j = 0; j < lanes; ++j)
        total += acc[j];
    return total;
}

/// Samples per chunk of columns that Conv2d unfolds a chunk at a time (so they stay in cache): as many of
/// the batch's `n` as fit in 512 KiB at `bytes_per_sample` each, at least 1.
inline std::size_t col_chunk_samples(std::size_t n, std::size_t bytes_per_sample) {
    const std::size_t fit = (std::size_t(512) << 10) / std::max<std::size_t>(1, bytes_per_sample);
    return std::max<std::size_t>(1, std::min(n, fit));
}

/// Unfolds a batch of `n` samples x [n, c, h, w] into the column matrix col [g.col_rows(), n*oh*ow] (row
/// (ci, ki, kj) over the used taps, column (sample, oy, ox)), writing zeros where the kernel covers padding.
template <class T>
void im2col(const T* x, std::size_t n, const ConvGeometry& g, T* col) {
    const std::size_t plane = g.h * g.w, pos = g.positions(), ld = n * pos;
    if (g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0) {
        // Fast path (stride 1, no padding): every row is an [oh, ow] window of one input plane.
        const std::size_t oh = g.oh, ow = g.ow, w = g.w;
        for (std::size_t s = 0; s < n; ++s) {
            for (std::size_t ci = 0; ci < g.c; ++ci) {
                const T* src = x + (s * g.c + ci) * plane;
                T* dst = col + ci * g.kh * g.kw * ld + s * pos;
                for (std::size_t ki = 0; ki < g.kh; ++ki) {
                    for (std::size_t kj = 0; kj < g.kw; ++kj, dst += ld) {
                        const T* sp = src + ki * w + kj;
                        T* dp = dst;
                        for (std::size_t oy = 0; oy < oh; ++oy, sp += w, dp += ow)
                            for (std::size_t ox = 0; ox < ow; ++ox)
                                dp[ox] = sp[ox];
                    }
                }
            }
        }
        return;
    }
    // One row (ci, ki, kj) at a time: the valid window is the same for every sample, so each output row
    // segment is copied for all samples in the inner loop (tight even when a sample has 1-4 positions, as
    // in the late layers of small-image networks); rows touching padding are zeroed first.
    const std::size_t cplane = g.c * plane;
    T* row = col;
    for (std::size_t ci = 0; ci < g.c; ++ci) {
        for (std::size_t ki = g.k0h; ki < g.k1h; ++ki) {
            std::size_t ylo, yhi;
            valid_range(ki, g.h, g.sh, g.ph, g.oh, ylo, yhi);
            for (std::size_t kj = g.k0w; kj < g.k1w; ++kj, row += ld) {
                std::size_t xlo, xhi;
                valid_range(kj, g.w, g.sw, g.pw, g.ow, xlo, xhi);
                if (ylo != 0 || yhi != g.oh || xlo != 0 || xhi != g.ow) std::fill(row, row + ld, T(0));
                const std::size_t len = xhi - xlo;
                if (ylo >= yhi || len == 0) continue;
                for (std::size_t oy = ylo; oy < yhi; ++oy) {
                    const T* src = x + ci * plane + (oy * g.sh + ki - g.ph) * g.w + (xlo * g.sw + kj - g.pw);
                    T* dst = row + oy * g.ow + xlo;
                    if (len == 1) {
                        for (std::size_t s = 0; s < n; ++s)
                            dst[s * pos] = src[s * cplane];
                    } else if (g.sw == 1 && len >= 16) {
                        for (std::size_t s = 0; s < n; ++s)
                            std::copy(src + s * cplane, src + s * cplane + len, dst + s * pos);
                    } else {
                        // short runs (and strides): an element loop, cheaper than a memmove call per run
                        for (std::size_t s = 0; s < n; ++s)
                            for (std::size_t ox = 0; ox < len; ++ox)
                                dst[s * pos + ox] = src[s * cplane + ox * g.sw];
                    }
                }
            }
        }
    }
}

/// Adjoint of im2col: folds col [g.col_rows(), n*oh*ow] back into dx [n, c, h, w], summing overlapping
/// contributions. Overwrites dx (padding contributions are dropped).
template <class T>
void col2im(const T* col, std::size_t n, const ConvGeometry& g, T* dx) {
    const std::size_t plane = g.h * g.w, pos = g.positions(), ld = n * pos;
    std::fill(dx, dx + n * g.c * plane, T(0));
    const std::size_t cplane = g.c * plane;
    const T* row = col;
    for (std::size_t ci = 0; ci < g.c; ++ci) {
        for (std::size_t ki = g.k0h; ki < g.k1h; ++ki) {
            std::size_t ylo, yhi;
            valid_range(ki, g.h, g.sh, g.ph, g.oh, ylo, yhi);
            for (std::size_t kj = g.k0w; kj < g.k1w; ++kj, row += ld) {
                std::size_t xlo, xhi;
                valid_range(kj, g.w, g.sw, g.pw, g.ow, xlo, xhi);
                const std::size_t len = xhi - xlo;
                if (ylo >= yhi || len == 0) continue;
                for (std::size_t oy = ylo; oy < yhi; ++oy) {
                    T* dst = dx + ci * plane + (oy * g.sh + ki - g.ph) * g.w + (xlo * g.sw + kj - g.pw);
                    const T* src = row + oy * g.ow + xlo;
                    if (len == 1) {
                        for (std::size_t s = 0; s < n; ++s)
                            dst[s * cplane] += src[s * pos];
                    } else if (g.sw == 1) {
                        for (std::size_t s = 0; s < n; ++s)
                            for (std::size_t ox = 0; ox < len; ++ox)
                                dst[s * cplane + ox] += src[s * pos + ox];
                    } else {
                        for (std::size_t s = 0; s < n; ++s)
                            for (std::size_t ox = 0; ox < len; ++ox)
                                dst[s * cplane + ox * g.sw] += src[s * pos + ox];
                    }
                }
            }
        }
    }
}

}  // namespace dtrain::detail

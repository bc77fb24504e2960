#pragma once

/// @file
/// The geometry of the implicit-GEMM convolutions along one axis: output positions grouped by the kernel
/// offsets that meet the input, and the phases in which a strided convolution's input gradient is itself
/// a convolution.

#include <algorithm>
#include <cstddef>
#include <vector>

namespace dtrain::detail {

/// One run of output positions along an axis, [begin, end), that meet the input at the same kernel offsets
/// [tap_begin, tap_end) (empty where every offset falls on padding).
struct ConvSegment {
    /// First and one-past-last output index.
    std::size_t begin, end;
    /// First and one-past-last kernel offset that lands inside the input.
    std::size_t tap_begin, tap_end;
};

/// The output positions along one axis (kernel k, input length len, stride s, padding p, out outputs)
/// grouped into runs with the same valid kernel offsets: e.g. 3 runs (first, middle, last) for a 3x3
/// kernel with padding 1 and stride 1.
inline std::vector<ConvSegment> conv_segments(std::size_t k, std::size_t len, std::size_t s, std::size_t p,
                                              std::size_t out) {
    std::vector<ConvSegment> segs;
    for (std::size_t o = 0; o < out; ++o) {
        // offset t is valid when 0 <= o * s + t - p < len
        const std::size_t lo = o * s >= p ? 0 : std::min(k, p - o * s);
        const std::size_t hi = len + p > o * s ? std::min(k, len + p - o * s) : 0;
        const ConvSegment seg{o, o + 1, lo, std::max(lo, hi)};
        if (!segs.empty() && segs.back().tap_begin == seg.tap_begin && segs.back().tap_end == seg.tap_end)
            segs.back().end = o + 1;
        else
            segs.push_back(seg);
    }
    return segs;
}

/// One axis of a phase of the input gradient of a convolution (kernel k, stride s, padding p, input length
/// len): the inputs a, a + s, ... (`count` of them) are reached by the kernel offsets first, first + s, ...
/// (`taps` of them), input a + s * q by offset first + s * (taps - 1 - u) from output q - lead + u. Not ok
/// when the phase has no input or no offset, or would need a negative lead.
struct InputGradPhase {
    /// Inputs of the phase, its first kernel offset, its number of offsets and its lead (left padding).
    std::size_t count, first, taps, lead;
    /// False when the phase cannot be computed as a convolution.
    bool ok;
};

/// The phase of inputs a, a + s, ... along one axis (InputGradPhase).
inline InputGradPhase input_grad_phase(std::size_t a, std::size_t k, std::size_t s, std::size_t p,
                                       std::size_t len) {
    InputGradPhase x{};
    x.first = (a + p) % s;
    const std::size_t e = (a + p) / s;  // input a + s * q meets output q + e - u at offset first + s * u
    x.taps = k > x.first ? (k - x.first + s - 1) / s : 0;
    x.count = len > a ? (len - a + s - 1) / s : 0;
    x.ok = x.taps > 0 && x.count > 0 && e < x.taps;
    x.lead = x.ok ? x.taps - 1 - e : 0;
    return x;
}

}  // namespace dtrain::detail

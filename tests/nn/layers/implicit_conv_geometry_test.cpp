#include <catch2/catch.hpp>

#include <cstddef>
#include <set>
#include <tuple>

#include <dtrain/nn/layers/detail/implicit_conv_geometry.hpp>

using dtrain::detail::conv_segments;
using dtrain::detail::ConvSegment;
using dtrain::detail::input_grad_phase;
using dtrain::detail::InputGradPhase;

namespace {

// (input, kernel offset, output) along one axis of a convolution: every triple with input = output * s +
// offset - p inside [0, len), the pairs that the input gradient sums.
using Triples = std::set<std::tuple<std::size_t, std::size_t, std::size_t>>;

Triples forward_triples(std::size_t k, std::size_t s, std::size_t p, std::size_t len) {
    Triples t;
    const std::size_t out = (len + 2 * p - k) / s + 1;
    for (std::size_t o = 0; o < out; ++o)
        for (std::size_t off = 0; off < k; ++off)
            if (o * s + off >= p && o * s + off - p < len) t.insert({o * s + off - p, off, o});
    return t;
}

}  // namespace

TEST_CASE("input_grad_phase: the phases sum exactly the input gradient's pairs, each input in one phase",
          "[nn][conv2d]") {
    std::size_t checked = 0, not_ok = 0;
    for (std::size_t k = 1; k <= 7; ++k)
        for (std::size_t s = 1; s <= 4; ++s)
            for (std::size_t p = 0; p < k; ++p)
                for (std::size_t len = 1; len <= 12; ++len) {
                    if (len + 2 * p < k) continue;
                    INFO("k=" << k << " s=" << s << " p=" << p << " len=" << len);
                    const std::size_t out = (len + 2 * p - k) / s + 1;
                    Triples phases;
                    bool ok = true;
                    std::size_t inputs = 0;
                    for (std::size_t a = 0; a < s; ++a) {
                        const InputGradPhase ph = input_grad_phase(a, k, s, p, len);
                        if (!ph.ok) {
                            ok = false;
                            continue;
                        }
                        inputs += ph.count;
                        // input a + s * q: offset first + s * (taps - 1 - u) from output q - lead + u,
                        // for the outputs that exist (as the phase's convolution of the outputs reads them)
                        for (std::size_t q = 0; q < ph.count; ++q)
                            for (std::size_t u = 0; u < ph.taps; ++u)
                                if (q + u >= ph.lead && q + u - ph.lead < out)
                                    phases.insert(
                                        {a + s * q, ph.first + s * (ph.taps - 1 - u), q + u - ph.lead});
                    }
                    if (!ok) {
                        ++not_ok;
                        continue;
                    }
                    CHECK(inputs == len);
                    CHECK(phases == forward_triples(k, s, p, len));
                    ++checked;
                }
    CHECK(checked > 500);  // the cases the convolutions take, not only the ones left to the scatter
    CHECK(not_ok > 0);     // e.g. a 1x1 kernel with stride 2 reaches no odd input
}

TEST_CASE("conv_segments: runs of outputs with the same valid kernel offsets", "[nn][conv2d]") {
    // 3 taps, padding 1, stride 1 over 5 inputs: first (taps 1-2), middle (0-2), last (0-1)
    const auto segs = conv_segments(3, 5, 1, 1, 5);
    REQUIRE(segs.size() == 3);
    CHECK((segs[0].begin == 0 && segs[0].end == 1 && segs[0].tap_begin == 1 && segs[0].tap_end == 3));
    CHECK((segs[1].begin == 1 && segs[1].end == 4 && segs[1].tap_begin == 0 && segs[1].tap_end == 3));
    CHECK((segs[2].begin == 4 && segs[2].end == 5 && segs[2].tap_begin == 0 && segs[2].tap_end == 2));
}

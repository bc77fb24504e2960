#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include <dtrain/core/aligned_allocator.hpp>
#include <dtrain/core/cpu.hpp>
#include <dtrain/nn/layers/detail/direct_conv.hpp>
#include <dtrain/nn/layers/detail/im2col.hpp>
#include <dtrain/nn/layers/detail/implicit_conv_geometry.hpp>
#include <dtrain/nn/layers/detail/implicit_conv_kernels.hpp>

namespace dtrain::detail {

/// Packs the weights of the `rows` used taps (tap u at w[o * fan_in + used_w[u]] of w [out, fan_in]) for
/// implicit_conv_forward: block b (channels [16b, 16b + 16)) at wp + 16b * rows holds [rows][16], channels
/// at or beyond `out` zero.
DTRAIN_OUT_OF_LINE inline void pack_implicit_weights(const float* w, std::size_t out, std::size_t fan_in,
                                                     std::size_t rows, const std::size_t* used_w, float* wp) {
    for (std::size_t o0 = 0; o0 < out; o0 += implicit_nr)
        for (std::size_t u = 0; u < rows; ++u)
            for (std::size_t c = 0; c < implicit_nr; ++c)
                wp[o0 * rows + u * implicit_nr + c] = o0 + c < out ? w[(o0 + c) * fan_in + used_w[u]] : 0.0f;
}

/// wt [out, taps_p] = the weights of one class's `taps` taps (tap t at w[o * fan_in + w_idx[t]]), taps_p =
/// implicit_round(taps), the extra taps 0: the weights as implicit_conv_input_grad reads them.
DTRAIN_OUT_OF_LINE inline void pack_implicit_input_grad_weights(const float* w, std::size_t out,
                                                                std::size_t fan_in, std::size_t taps,
                                                                const std::size_t* w_idx, float* wt) {
    const std::size_t tp = implicit_round(taps);
    for (std::size_t o = 0; o < out; ++o) {
        const float* wo = w + o * fan_in;
        float* d = wt + o * tp;
        for (std::size_t t = 0; t < taps; ++t)
            d[t] = wo[w_idx[t]];
        std::fill(d + taps, d + tp, 0.0f);
    }
}

/// The padded and strided convolutions of Conv2d<float> (ImplicitGemmConv in nn/kernels/) as implicit GEMMs
/// over the input itself: the output positions are grouped into classes whose rows and columns meet the input
/// at the same kernel offsets (corners, edges, interior; conv_segments), and each class is one GEMM over
/// only its valid taps, read at signed offsets from the input. No padded copy, no column matrix, no
/// products with padding. The input gradient is computed the same way, as convolutions of the output
/// gradient with the flipped weights, one per phase of the input under the stride (input_grad_phase(); one
/// with stride 1), each input's gradient one fixed-order sum; where a phase cannot be (it would need negative
/// padding, or no tap reaches it) it is scattered from a GEMM per class instead. The register-tiled kernels
/// are those of implicit_conv_kernels.hpp; figures for the Needle ResNet9 (maps of 8x8 to 1x1) in
/// benchmarks/train/README.md. Scratch is sized by prepare() and reused; nothing allocates while the shape
/// stays. Results agree with im2col + GEMM within float rounding and are deterministic.
class ImplicitConv {
public:
    /// Builds the classes and sizes the scratch for `n` samples of geometry `g` into `out` channels;
    /// requires AVX2 and FMA and g.col_rows() > 0 (ImplicitGemmConv::applies() for Conv2d's layers; the
    /// input gradient's convolution may be unpadded). With forward_only, backward() must not be called.
    /// With avx512 the AVX-512 tiles run (requires cpu_has_avx512f()), else the AVX2 ones.
    void prepare(const ConvGeometry& g, std::size_t n, std::size_t out, bool forward_only = false,
                 bool avx512 = gemm_avx512_available()) {
        // dx as convolutions of dy (no scatter of overlapping taps into a zeroed dx)
        dx_conv_.clear();
        flip_w_.clear();
        if (!forward_only) plan_input_grad(g, n, out, avx512);
        build(g, n, out, forward_only, avx512, {out * g.positions(), g.positions(), g.ow, 1, 1, 0, 0});
    }

private:
    // Where output (oy, ox) of channel ch of sample s goes: y[s * sample + ch * plane + (oy * sy + ay) *
    // row + ox * sx + ax] (a convolution's own NCHW output, or one phase of a larger map).
    struct Placement {
        std::size_t sample, plane, row, sy, sx, ay, ax;
    };

    // The input gradient as sh * sw convolutions of dy, one per phase (a, b) of dx (its rows a, a + sh, ...
    // by columns b, b + sw, ...; input_grad_phase()) with the kernel's taps that reach that phase, turned by
    // 180 degrees and transposed: each dx value one fixed-order sum, written once. With stride 1 one
    // convolution with padding k - 1 - p. Left empty (the scatter) when a phase would need negative
    // padding or has no tap.
    void plan_input_grad(const ConvGeometry& g, std::size_t n, std::size_t out, bool avx512) {
        for (std::size_t a = 0; a < g.sh; ++a)
            for (std::size_t b = 0; b < g.sw; ++b) {
                const InputGradPhase ya = input_grad_phase(a, g.kh, g.sh, g.ph, g.h),
                                     xa = input_grad_phase(b, g.kw, g.sw, g.pw, g.w);
                ConvGeometry gp{out, g.oh, g.ow, ya.taps, xa.taps, 1, 1, ya.lead, xa.lead};
                gp.oh = ya.count;
                gp.ow = xa.count;
                if (!ya.ok || !xa.ok || !used_tap_range(gp.kh, gp.h, gp.ph, gp.oh, gp.k0h, gp.k1h) ||
                    !used_tap_range(gp.kw, gp.w, gp.pw, gp.ow, gp.k0w, gp.k1w)) {
                    dx_conv_.clear();
                    flip_w_.clear();
                    return;
                }
                dx_conv_.emplace_back();
                ImplicitConv& t = dx_conv_.back();
                t.build(gp, n, g.c, true, avx512, {g.c * g.h * g.w, g.h * g.w, g.w, g.sh, g.sw, a, b});
                // its used tap u, (o, ki, kj), of output channel ci reads w at flip + ci * kh * kw
                flip_w_.emplace_back();
                for (const std::size_t u : t.used_w_) {
                    const std::size_t o = u / (gp.kh * gp.kw), ki = u / gp.kw % gp.kh, kj = u % gp.kw;
                    flip_w_.back().push_back(o * g.c * g.kh * g.kw +
                                             (ya.first + g.sh * (gp.kh - 1 - ki)) * g.kw + xa.first +
                                             g.sw * (gp.kw - 1 - kj));
                }
            }
    }

    // [k0, k1): the taps of a stride-1 convolution (kernel k, input len, left padding p, `out` outputs) that
    // meet the input at some output; false when none does.
    static bool used_tap_range(std::size_t k, std::size_t len, std::size_t p, std::size_t out,
                               std::size_t& k0, std::size_t& k1) {
        k0 = k;
        k1 = 0;
        for (const ConvSegment& s : conv_segments(k, len, 1, p, out))
            if (s.tap_begin < s.tap_end) {
                k0 = std::min(k0, s.tap_begin);
                k1 = std::max(k1, s.tap_end);
            }
        return k0 < k1;
    }

    // prepare() for geometry g (its oh, ow, k0h, k1h, k0w and k1w set), writing outputs where `place` says.
    void build(const ConvGeometry& g, std::size_t n, std::size_t out, bool forward_only, bool avx512,
               const Placement& place) {
        g_ = g;
        n_ = n;
        out_ = out;
        y_plane_ = place.plane;
        const std::size_t nkh = g.k1h - g.k0h, nkw = g.k1w - g.k0w, pos = g.positions();
        used_w_.clear();
        for (std::size_t ci = 0; ci < g.c; ++ci)
            for (std::size_t ki = g.k0h; ki < g.k1h; ++ki)
                for (std::size_t kj = g.k0w; kj < g.k1w; ++kj)
                    used_w_.push_back((ci * g.kh + ki) * g.kw + kj);
        classes_.clear();
        m_off_.clear();
        y_off_.clear();
        y_row_.clear();
        tap_off_.clear();
        tap_u_.clear();
        tap_w_.clear();
        std::size_t max_taps = 0;
        for (const ConvSegment& r : conv_segments(g.kh, g.h, g.sh, g.ph, g.oh))
            for (const ConvSegment& c : conv_segments(g.kw, g.w, g.sw, g.pw, g.ow)) {
                const std::size_t cp = (r.end - r.begin) * (c.end - c.begin);
                classes_.push_back({y_off_.size(), cp, tap_off_.size(), 0, false});
                for (std::size_t s = 0; s < n; ++s)
                    for (std::size_t oy = r.begin; oy < r.end; ++oy)
                        for (std::size_t ox = c.begin; ox < c.end; ++ox) {
                            // input (oy * sh + ki - ph, ox * sw + kj - pw) of sample s = m_off + tap_off
                            m_off_.push_back(std::ptrdiff_t(s * g.c * g.h * g.w) +
                                             (std::ptrdiff_t(oy * g.sh) - std::ptrdiff_t(g.ph)) *
                                                 std::ptrdiff_t(g.w) +
                                             std::ptrdiff_t(ox * g.sw) - std::ptrdiff_t(g.pw));
                            y_off_.push_back(s * place.sample + (oy * place.sy + place.ay) * place.row +
                                             ox * place.sx + place.ax);
                            y_row_.push_back(s * pos + oy * g.ow + ox);
                        }
                for (std::size_t ci = 0; ci < g.c; ++ci)
                    for (std::size_t ki = r.tap_begin; ki < r.tap_end; ++ki)
                        for (std::size_t kj = c.tap_begin; kj < c.tap_end; ++kj) {
                            tap_off_.push_back((ci * g.h + ki) * g.w + kj);
                            tap_u_.push_back((ci * nkh + ki - g.k0h) * nkw + kj - g.k0w);
                        }
                for (std::size_t t = classes_.back().tap_begin; t < tap_u_.size(); ++t)
                    tap_w_.push_back(used_w_[tap_u_[t]]);
                Class& cl = classes_.back();
                cl.taps = tap_off_.size() - cl.tap_begin;
                cl.taps_in_order = cl.taps == used_w_.size();  // then tap_u_ runs 0, 1, ... in order
                max_taps = std::max(max_taps, classes_.back().taps);
            }
        const bool scatter_dx = !forward_only && dx_conv_.empty();
        dyt_.resize(forward_only ? 0 : n * pos * implicit_round(out));
        dwt_.resize(forward_only ? 0 : g.col_rows() * implicit_round(out));
        dwo_.resize(!forward_only && avx512 ? g.col_rows() * out : 0);
        // Rows of 8 positions or more (AVX-512): dy transposed per sample before its rows are copied, and
        // the forward pass into rows too where it writes its own NCHW output. One buffer serves both.
        dy_rows_ = !forward_only && avx512 && pos >= 8;
        y_rows_ = avx512 && pos >= 8 && place.plane == pos && place.sy == 1 && place.sx == 1 &&
                  place.ay == 0 && place.ax == 0;
        rows_.assign(dy_rows_ || y_rows_ ? n * pos * implicit_round(out) : 0, 0.0f);
        wt_.resize(
            std::max(implicit_round(out) * g.col_rows(), scatter_dx ? out * implicit_round(max_taps) : 0));
        dxt_.resize(scatter_dx ? implicit_mr_max * implicit_round(max_taps) : 0);
        avx512_ = avx512;
    }

public:
    /// y [n, out, oh, ow] = the convolution of x [n, c, h, w] with w [out, c, kh, kw] plus bias [out].
    void forward(const float* x, const float* w, const float* bias, float* y) {
        pack_implicit_weights(w, out_, fan_in(), used_w_.size(), used_w_.data(), wt_.data());
        run_forward(x, bias, y);
    }

    /// For the gradient dy [n, out, oh, ow] of forward(x): ADDS the weight gradient to dw and the bias
    /// gradient to db, and, when dx is not null, writes the input gradient [n, c, h, w] to dx.
    void backward(const float* x, const float* dy, const float* w, float* dw, float* db, float* dx) {
        backward_weights(x, dy, dw, db);
        if (dx != nullptr) backward_data(dy, w, dx);
    }

    /// The weight and bias gradients of backward(): ADDS them to dw and db (and keeps dy as rows for
    /// backward_data()).
    void backward_weights(const float* x, const float* dy, float* dw, float* db) {
#ifdef DTRAIN_DIRECT_CONV
        const std::size_t pos = g_.positions(), outp = implicit_round(out_);
        rows_from_nchw(dy, db);
        rows_of_ = dy;
        // dW a chunk of samples at a time, so that their input and gradient rows stay in cache, but at least
        // implicit_dw_min_positions positions of a class at a time
        std::fill(dwt_.begin(), dwt_.end(), 0.0f);
        const std::size_t chunk = std::max<std::size_t>(
            1, implicit_dw_chunk_bytes / (sizeof(float) * (g_.c * g_.h * g_.w + pos * outp)));
        for (const Class& c : classes_) {
            const std::size_t cc =
                std::max(chunk, (implicit_dw_min_positions + c.positions - 1) / c.positions);
            for (std::size_t s0 = 0; s0 < n_; s0 += cc)
                (avx512_ ? implicit_conv_weight_grad_avx512 : implicit_conv_weight_grad)(
                    x, view(c, s0, std::min(n_, s0 + cc)), dyt_.data(), out_, dwt_.data());
        }
        const std::size_t used = used_w_.size();
        if (avx512_) {  // dwt_ transposed first: reading it down its columns takes a cache line per value
            transpose_avx512(used, out_, dwt_.data(), outp, dwo_.data(), used, nullptr);
            for (std::size_t o = 0; o < out_; ++o)
                for (std::size_t u = 0; u < used; ++u)
                    dw[o * fan_in() + used_w_[u]] += dwo_[o * used + u];
        } else {
            for (std::size_t o = 0; o < out_; ++o)
                for (std::size_t u = 0; u < used; ++u)
                    dw[o * fan_in() + used_w_[u]] += dwt_[u * outp + o];
        }
#endif
        (void)x, (void)dy, (void)dw, (void)db;
    }

    /// The input gradient of backward(), written to dx [n, c, h, w]; reuses the rows of dy that
    /// backward_weights() of the same dy made, and makes them itself when it did not run.
    void backward_data(const float* dy, const float* w, float* dx) {
#ifdef DTRAIN_DIRECT_CONV
        if (!dx_conv_.empty()) {
            // their weights are taps of w [out, c, kh, kw] turned by 180 degrees and transposed, packed
            // straight away; each writes its phase of dx
            for (std::size_t p = 0; p < dx_conv_.size(); ++p) {
                ImplicitConv& t = dx_conv_[p];
                pack_implicit_weights(w, g_.c, g_.kh * g_.kw, t.used_w_.size(), flip_w_[p].data(),
                                      t.wt_.data());
                t.run_forward(dy, nullptr, dx);
            }
            return;
        }
        if (rows_of_ != dy) {
            unused_db_.assign(out_, 0.0f);
            rows_from_nchw(dy, unused_db_.data());
        }
        rows_of_ = nullptr;  // the next call sees new data, perhaps at the same address
        std::fill(dx, dx + n_ * g_.c * g_.h * g_.w, 0.0f);
        for (const Class& c : classes_) {
            if (c.taps == 0) continue;
            pack_implicit_input_grad_weights(w, out_, fan_in(), c.taps, tap_w_.data() + c.tap_begin,
                                             wt_.data());
            (avx512_ ? implicit_conv_input_grad_avx512 : implicit_conv_input_grad)(
                dyt_.data(), view(c, 0, n_), wt_.data(), out_, dx, dxt_.data());
        }
#endif
        (void)dy, (void)w, (void)dx;
    }

private:
    // A class of output positions: per sample, `positions` of them at [m_begin + s * positions, ...) of
    // m_off_ and y_off_ (and of the gradient rows); its `taps` valid taps at [tap_begin, tap_begin + taps)
    // of tap_off_ and tap_u_.
    struct Class {
        std::size_t m_begin, positions, tap_begin, taps;
        bool taps_in_order;
    };

    // forward() with the weights already packed into wt_.
    void run_forward(const float* x, const float* bias, float* y) {
#ifdef DTRAIN_DIRECT_CONV
        if (y_rows_) {  // rows of positions, then each sample's [pos, outp] transposed into y
            for (const Class& c : classes_)
                implicit_conv_forward_rows_avx512(x, view(c, 0, n_), wt_.data(), used_w_.size(), out_, bias,
                                                  rows_.data());
            const std::size_t pos = g_.positions(), outp = implicit_round(out_);
            for (std::size_t s = 0; s < n_; ++s)
                transpose_avx512(pos, out_, rows_.data() + s * pos * outp, outp, y + s * out_ * pos, pos,
                                 nullptr);
            return;
        }
        for (const Class& c : classes_)
            (avx512_ ? implicit_conv_forward_avx512 : implicit_conv_forward)(
                x, view(c, 0, n_), wt_.data(), used_w_.size(), out_, y_plane_, bias, y);
#endif
        (void)x, (void)bias, (void)y;
    }

    // dyt_ = the rows of dy, and db += its channel sums (implicit_rows_from_nchw).
    void rows_from_nchw(const float* dy, float* db) {
        if (avx512_)
            implicit_rows_from_nchw_avx512(dy, y_off_.data(), y_off_.size(), g_.positions(), out_,
                                           dyt_.data(), db, n_, dy_rows_ ? rows_.data() : nullptr,
                                           y_row_.data());
        else
            implicit_rows_from_nchw(dy, y_off_.data(), y_off_.size(), g_.positions(), out_, dyt_.data(), db);
    }

    std::size_t fan_in() const {
        return g_.c * g_.kh * g_.kw;
    }

    // Class c restricted to samples [s0, s1).
    ImplicitClass view(const Class& c, std::size_t s0, std::size_t s1) const {
        const std::size_t m = c.m_begin + s0 * c.positions;
        return {m_off_.data() + m,
                y_off_.data() + m,
                (s1 - s0) * c.positions,
                m,
                tap_off_.data() + c.tap_begin,
                tap_u_.data() + c.tap_begin,
                c.taps,
                c.taps_in_order,
                y_row_.data() + m};
    }

    ConvGeometry g_;
    std::size_t n_ = 0, out_ = 0;
    std::vector<Class> classes_;
    std::vector<std::size_t> used_w_;  // each used tap's index in a kernel [c, kh, kw] (column-matrix order)
    std::vector<std::ptrdiff_t> m_off_;  // each class position's input offset (plus a tap's, an input value)
    std::vector<std::size_t> y_off_;     // each class position's output offset (where Placement puts it)
    std::vector<std::size_t> y_row_;     // its row of rows_: sample * pos + position
    std::vector<std::size_t> tap_off_;   // each class tap's offset in a sample
    std::vector<std::size_t> tap_u_;     // each class tap's index among the used taps
    std::vector<std::size_t> tap_w_;     // each class tap's index in a kernel [c, kh, kw]: used_w_[tap_u_[t]]
    AlignedVector<float> dyt_;           // the output gradient as rows [n * pos, implicit_round(out)]
    AlignedVector<float> rows_;          // the forward output's or dy's rows [n * pos, implicit_round(out)]
    bool y_rows_ = false, dy_rows_ = false;  // forward() and rows_from_nchw() go through rows_
    AlignedVector<float> dwt_;  // the weight gradient of one backward, [used taps, implicit_round(out)]
    AlignedVector<float> dwo_;  // dwt_ transposed, [out, used taps] (AVX-512)
    AlignedVector<float> wt_;   // the packed weights (forward) or one class's rows (input gradient)
    AlignedVector<float> dxt_;  // the input gradient's tiles of one group of positions, before they are added
    bool avx512_ = false;       // the AVX-512 kernels (gemm_avx512_available() at prepare())
    std::vector<ImplicitConv> dx_conv_;  // the input gradient's convolutions, one per phase (or none)
    const float* rows_of_ = nullptr;     // the dy whose rows dyt_ holds (set by backward_weights)
    AlignedVector<float> unused_db_;     // the bias sums backward_data makes with the rows, discarded
    std::vector<std::vector<std::size_t>> flip_w_;  // where their used taps read w, for output channel 0
    std::size_t y_plane_ = 0;                       // the output's channel stride (Placement::plane)
};

}  // namespace dtrain::detail

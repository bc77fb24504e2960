#pragma once

#include <algorithm>
#include <cstddef>

#include <vector>

#include <dtrain/core/cpu.hpp>
#include <dtrain/nn/layers/detail/direct_conv.hpp>
#include <dtrain/nn/layers/detail/im2col.hpp>
#include <dtrain/nn/layers/detail/implicit_conv_kernels.hpp>

namespace dtrain::detail {

/// Where the implicit-GEMM kernels read a convolution's input: a zero-padded copy [n, c, hp, wp] holding
/// only the rows and columns the used taps (ConvGeometry::k0h etc.) reach, with input pixel (i, j) at
/// (i + top, j + left), or the input itself when that copy would equal it (`copy` false).
struct ImplicitLayout {
    /// Rows and columns of a padded plane.
    std::size_t hp = 0, wp = 0;
    /// Padded row and column of input row and column 0.
    std::size_t top = 0, left = 0;
    /// True when the kernels need the padded copy (pad_input); false when they read the input itself.
    bool copy = false;
    /// Values per padded sample: c * hp * wp.
    std::size_t sample = 0;
};

/// The padded layout of geometry `g` (requires g.col_rows() > 0): tap (ci, ki, kj) of output (oy, ox)
/// reads padded (oy * sh + ki - k0h, ox * sw + kj - k0w) of plane ci.
inline ImplicitLayout implicit_layout(const ConvGeometry& g) {
    ImplicitLayout l;
    l.hp = (g.oh - 1) * g.sh + (g.k1h - g.k0h);
    l.wp = (g.ow - 1) * g.sw + (g.k1w - g.k0w);
    l.top = g.ph - g.k0h;  // k0h <= ph: tap ph meets row 0 whenever ph < kh
    l.left = g.pw - g.k0w;
    l.copy = l.top != 0 || l.left != 0 || l.hp != g.h || l.wp != g.w;
    l.sample = g.c * l.hp * l.wp;
    return l;
}

/// Fills, for the used taps t in column-matrix order (g.col_rows() entries), tap_off[t] with the tap's
/// offset in a padded sample and tap_w[t] with its index in a kernel [c, kh, kw]; and m_off[m] (n *
/// g.positions() entries) with the offset of output position m = (sample s, position p) in the padded
/// batch, so that tap t of output m reads xp[m_off[m] + tap_off[t]].
inline void implicit_tables(const ConvGeometry& g, const ImplicitLayout& l, std::size_t n,
                            std::size_t* tap_off, std::size_t* tap_w, std::size_t* m_off) {
    for (std::size_t ci = 0, t = 0; ci < g.c; ++ci)
        for (std::size_t ki = 0; ki < g.k1h - g.k0h; ++ki)
            for (std::size_t kj = 0; kj < g.k1w - g.k0w; ++kj, ++t) {
                tap_off[t] = (ci * l.hp + ki) * l.wp + kj;
                tap_w[t] = (ci * g.kh + g.k0h + ki) * g.kw + g.k0w + kj;
            }
    for (std::size_t s = 0, m = 0; s < n; ++s)
        for (std::size_t oy = 0; oy < g.oh; ++oy)
            for (std::size_t ox = 0; ox < g.ow; ++ox, ++m)
                m_off[m] = s * l.sample + oy * g.sh * l.wp + ox * g.sw;
}

/// Copies x [n, c, h, w] into xp [n, c, hp, wp] of layout `l`, zeros around it; input rows and columns the
/// layout leaves out (no used tap reaches them) are dropped. Element loops: rows here are short (1-32
/// values), where a memcpy or memset call per row costs more than the copy.
template <class T>
DTRAIN_OUT_OF_LINE void pad_input(const T* x, std::size_t n, const ConvGeometry& g, const ImplicitLayout& l,
                                  T* xp) {
    const std::size_t rows = std::min(g.h, l.hp - l.top), cols = std::min(g.w, l.wp - l.left);
    for (std::size_t p = 0; p < n * g.c; ++p) {
        const T* src = x + p * g.h * g.w;
        T* d = xp + p * l.hp * l.wp;
        for (std::size_t i = 0; i < l.hp; ++i, d += l.wp) {
            if (i < l.top || i >= l.top + rows) {
                for (std::size_t j = 0; j < l.wp; ++j)
                    d[j] = T(0);
                continue;
            }
            const T* r = src + (i - l.top) * g.w;
            for (std::size_t j = 0; j < l.left; ++j)
                d[j] = T(0);
            for (std::size_t j = 0; j < cols; ++j)
                d[l.left + j] = r[j];
            for (std::size_t j = l.left + cols; j < l.wp; ++j)
                d[j] = T(0);
        }
    }
}

/// The adjoint of pad_input: dx [n, c, h, w] = the input pixels' values of dxp [n, c, hp, wp] (what fell
/// on padding is dropped; pixels the layout leaves out get 0).
template <class T>
DTRAIN_OUT_OF_LINE void unpad_input(const T* dxp, std::size_t n, const ConvGeometry& g,
                                    const ImplicitLayout& l, T* dx) {
    const std::size_t rows = std::min(g.h, l.hp - l.top), cols = std::min(g.w, l.wp - l.left);
    for (std::size_t p = 0; p < n * g.c; ++p) {
        const T* src = dxp + p * l.hp * l.wp + l.top * l.wp + l.left;
        T* d = dx + p * g.h * g.w;
        for (std::size_t i = 0; i < g.h; ++i, d += g.w, src += l.wp) {
            const std::size_t valid = i < rows ? cols : 0;
            for (std::size_t j = 0; j < valid; ++j)
                d[j] = src[j];
            for (std::size_t j = valid; j < g.w; ++j)
                d[j] = T(0);
        }
    }
}

/// Packs the used taps' weights (tap t at w[o * fan_in + tap_w[t]] of w [out, fan_in]) for
/// implicit_conv_forward: block b (channels [16b, 16b + 16)) at wp + 16b * rows holds [rows][16], channels
/// at or beyond `out` zero.
DTRAIN_OUT_OF_LINE inline void pack_implicit_weights(const float* w, std::size_t out, std::size_t fan_in,
                                                     std::size_t rows, const std::size_t* tap_w, float* wp) {
    for (std::size_t o0 = 0; o0 < out; o0 += implicit_nr)
        for (std::size_t t = 0; t < rows; ++t)
            for (std::size_t c = 0; c < implicit_nr; ++c)
                wp[o0 * rows + t * implicit_nr + c] = o0 + c < out ? w[(o0 + c) * fan_in + tap_w[t]] : 0.0f;
}

/// wt [out, rowsp] = the used taps' weights of w [out, fan_in] (as in pack_implicit_weights), rowsp =
/// implicit_round(rows), the extra taps 0: the weights as implicit_conv_input_grad reads them.
DTRAIN_OUT_OF_LINE inline void pack_implicit_input_grad_weights(const float* w, std::size_t out,
                                                                std::size_t fan_in, std::size_t rows,
                                                                const std::size_t* tap_w, float* wt) {
    const std::size_t rowsp = implicit_round(rows);
    for (std::size_t o = 0; o < out; ++o) {
        for (std::size_t t = 0; t < rows; ++t)
            wt[o * rowsp + t] = w[o * fan_in + tap_w[t]];
        std::fill(wt + o * rowsp + rows, wt + (o + 1) * rowsp, 0.0f);
    }
}

/// True when Conv2d<float> computes geometry `g` with ImplicitConv: every convolution
/// the direct kernels do not take (strided or padded ones) that has a used tap, on a CPU with AVX2 and FMA.
inline bool use_implicit_conv(const ConvGeometry& g) noexcept {
    return g.col_rows() > 0 && direct_conv_available() && !use_direct_conv_forward(g);
}

/// The implicit-GEMM path of Conv2d<float> (detail::use_implicit_conv): the input copied once into a
/// zero-padded layout (implicit_layout; not at all when it is already that layout), then forward, weight
/// gradient and input gradient each as one pass of the register-tiled kernels of implicit_conv_kernels.hpp,
/// with no column matrix and no GEMM packing of it. On the Needle ResNet9 (maps of 8x8 to 1x1) it trains
/// 1.4x and infers 1.8x faster than im2col + GEMM (benchmarks/train/README.md). Scratch is sized by
/// prepare() and reused; nothing allocates while the shape stays. Results agree with im2col + GEMM within
/// float rounding and are deterministic (a fixed summation order).
class ImplicitConv {
public:
    /// Sizes the tables and scratch for `n` samples of geometry `g` into `out` channels; requires
    /// use_implicit_conv(g).
    void prepare(const ConvGeometry& g, std::size_t n, std::size_t out) {
        g_ = g;
        n_ = n;
        out_ = out;
        lay_ = implicit_layout(g);
        const std::size_t rows = g.col_rows(), np = n * g.positions();
        xpad_.resize(lay_.copy ? n * lay_.sample : 0);
        tap_off_.resize(rows);
        tap_w_.resize(rows);
        m_off_.resize(np);
        implicit_tables(g, lay_, n, tap_off_.data(), tap_w_.data(), m_off_.data());
        dyt_.resize(np * implicit_round(out));
        dwt_.resize(rows * implicit_round(out));
        wt_.resize(std::max(implicit_round(out) * rows, out * implicit_round(rows)));
    }

    /// y [n, out, oh, ow] = the convolution of x [n, c, h, w] with w [out, c, kh, kw] plus bias [out].
    void forward(const float* x, const float* w, const float* bias, float* y) {
#ifdef DTRAIN_DIRECT_CONV
        pack_implicit_weights(w, out_, fan_in(), g_.col_rows(), tap_w_.data(), wt_.data());
        implicit_conv_forward(padded(x), n_, g_, tap_off_.data(), m_off_.data(), wt_.data(), out_, bias, y);
#endif
        (void)x, (void)w, (void)bias, (void)y;
    }

    /// For the gradient dy [n, out, oh, ow] of forward(x): ADDS the weight gradient to dw and the bias
    /// gradient to db, and, when dx is not null, writes the input gradient [n, c, h, w] to dx.
    void backward(const float* x, const float* dy, const float* w, float* dw, float* db, float* dx) {
#ifdef DTRAIN_DIRECT_CONV
        implicit_rows_from_nchw(dy, n_, g_.positions(), out_, dyt_.data(), db);
        implicit_conv_weight_grad(padded(x), n_, lay_.sample, g_, tap_off_.data(), tap_w_.data(),
                                  m_off_.data(), dyt_.data(), out_, dwt_.data(), dw);
        if (dx == nullptr) return;
        pack_implicit_input_grad_weights(w, out_, fan_in(), g_.col_rows(), tap_w_.data(), wt_.data());
        float* dxp = lay_.copy ? xpad_.data() : dx;
        std::fill(dxp, dxp + n_ * lay_.sample, 0.0f);
        implicit_conv_input_grad(dyt_.data(), n_, g_, tap_off_.data(), m_off_.data(), wt_.data(), out_, dxp);
        if (lay_.copy) unpad_input(dxp, n_, g_, lay_, dx);
#endif
        (void)x, (void)dy, (void)w, (void)dw, (void)db, (void)dx;
    }

private:
    std::size_t fan_in() const {
        return g_.c * g_.kh * g_.kw;
    }

    // The input as the kernels read it: its padded copy in xpad_ (made on every call: reusing forward's copy
    // in backward measured no faster), or itself.
    const float* padded(const float* x) {
        if (!lay_.copy) return x;
        pad_input(x, n_, g_, lay_, xpad_.data());
        return xpad_.data();
    }

    ConvGeometry g_;
    std::size_t n_ = 0, out_ = 0;
    ImplicitLayout lay_;
    std::vector<float> xpad_;           // the padded input, then (backward) the padded dX
    std::vector<std::size_t> tap_off_;  // implicit_tables: each used tap's offset in a padded sample
    std::vector<std::size_t> tap_w_;    // implicit_tables: each used tap's index in a kernel
    std::vector<std::size_t> m_off_;    // implicit_tables: each output position's offset in the batch
    std::vector<float> dyt_;            // the output gradient as rows [n * pos, implicit_round(out)]
    std::vector<float> dwt_;            // the weight gradient of one backward, [rows, implicit_round(out)]
    std::vector<float> wt_;             // the packed weights (forward) or padded rows (input gradient)
};

}  // namespace dtrain::detail

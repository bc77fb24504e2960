#pragma once

// The float64 convolution the Conv2d tests compare every kernel with.

#include <array>
#include <cstddef>

#include <dtrain/core/tensor.hpp>

namespace dtrain::test {

/// One convolution's shape: channels in and out, input height and width, kernel, stride and padding.
struct ConvCase {
    std::size_t c, o, h, w;
    std::array<std::size_t, 2> k, s, p;
};

/// Direct convolution:
/// y[n, o, i, j] = b[o] + sum_{c, a, b} w[o, c, a, b] * x[n, c, i*sh + a - ph, j*sw + b - pw].
inline Tensor<double> naive_conv(const Tensor<double>& x, const double* w, const double* b,
                                 const ConvCase& cc) {
    const std::size_t n = x.shape()[0];
    const std::size_t oh = (cc.h + 2 * cc.p[0] - cc.k[0]) / cc.s[0] + 1;
    const std::size_t ow = (cc.w + 2 * cc.p[1] - cc.k[1]) / cc.s[1] + 1;
    Tensor<double> y = Tensor<double>::from_shape({n, cc.o, oh, ow});
    for (std::size_t s = 0; s < n; ++s)
        for (std::size_t o = 0; o < cc.o; ++o)
            for (std::size_t i = 0; i < oh; ++i)
                for (std::size_t j = 0; j < ow; ++j) {
                    double acc = b[o];
                    for (std::size_t c = 0; c < cc.c; ++c)
                        for (std::size_t a = 0; a < cc.k[0]; ++a)
                            for (std::size_t bb = 0; bb < cc.k[1]; ++bb) {
                                const long yi = long(i * cc.s[0] + a) - long(cc.p[0]);
                                const long xj = long(j * cc.s[1] + bb) - long(cc.p[1]);
                                if (yi < 0 || xj < 0 || yi >= long(cc.h) || xj >= long(cc.w)) continue;
                                acc += w[((o * cc.c + c) * cc.k[0] + a) * cc.k[1] + bb] *
                                       x(s, c, std::size_t(yi), std::size_t(xj));
                            }
                    y(s, o, i, j) = acc;
                }
    return y;
}

/// The gradients of naive_conv() for output gradient `gy`: dw (weights then biases, Conv2d's parameter
/// layout) and dx, both summed in float64.
inline void naive_conv_grads(const Tensor<double>& x, const double* w, const Tensor<double>& gy,
                             const ConvCase& cc, std::vector<double>& dw, Tensor<double>& dx) {
    const std::size_t n = x.shape()[0], oh = gy.shape()[2], ow = gy.shape()[3],
                      fan = cc.c * cc.k[0] * cc.k[1];
    dw.assign(cc.o * fan + cc.o, 0.0);
    dx = Tensor<double>::from_shape({n, cc.c, cc.h, cc.w});
    dx.fill(0.0);
    for (std::size_t s = 0; s < n; ++s)
        for (std::size_t o = 0; o < cc.o; ++o)
            for (std::size_t i = 0; i < oh; ++i)
                for (std::size_t j = 0; j < ow; ++j) {
                    const double gv = gy(s, o, i, j);
                    dw[cc.o * fan + o] += gv;
                    for (std::size_t c = 0, t = 0; c < cc.c; ++c)
                        for (std::size_t a = 0; a < cc.k[0]; ++a)
                            for (std::size_t b = 0; b < cc.k[1]; ++b, ++t) {
                                const long yi = long(i * cc.s[0] + a) - long(cc.p[0]);
                                const long xj = long(j * cc.s[1] + b) - long(cc.p[1]);
                                if (yi < 0 || xj < 0 || yi >= long(cc.h) || xj >= long(cc.w)) continue;
                                dw[o * fan + t] += gv * x(s, c, std::size_t(yi), std::size_t(xj));
                                dx(s, c, std::size_t(yi), std::size_t(xj)) += gv * w[o * fan + t];
                            }
                }
}

}  // namespace dtrain::test

// Every kernel set (detail::KernelSet: native, avx2, reference, as DTRAIN_KERNELS chooses) computes
// Conv2d<float> and Dense<float> -- output, weight, bias and input gradients -- within float rounding of the
// same computation in float64, at the shipped models' shapes and at odd ones: channels 1, 3, 7, 17 and 33,
// kernels 1, 3 and 5, stride 2 with padding, batches of 1 and 65, fan-in up to 16,384. A set the CPU cannot
// run falls back to the next one down and is checked all the same.
//
// The bound is normwise: ||r - r64|| / ||r64|| <= 2 u sqrt(m) + 4 u with u = 2^-24 and m the length of the
// result's sums (the fan-in for the output, the output channels x taps for the input gradient, batch x
// positions for the parameter gradients): float rounding, with room for any summation order a BLAS or a
// kernel may take, while a wrong tap, lane, tail or padding is off by orders of magnitude more. The finer
// accuracy of the native kernels' fixed blocks is checked in dense_gemm_test.cpp and implicit_conv_test.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include <dtrain/nn/layers/conv2d.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/model.hpp>

#include "nn/gradcheck.hpp"
#include "nn/layers/conv_reference.hpp"

using dtrain::Conv2d;
using dtrain::Dense;
using dtrain::Model;
using dtrain::Rng;
using dtrain::Tensor;
using dtrain::detail::KernelSet;
using dtrain::test::ConvCase;

namespace {

constexpr KernelSet every_kernel_set[] = {KernelSet::native, KernelSet::avx2, KernelSet::reference};

// ||a - b|| / ||b|| over all elements.
template <class A, class B>
double kernel_set_error(const A& a, const B& b) {
    double num = 0.0, den = 0.0;
    auto ib = b.begin();
    for (auto ia = a.begin(); ia != a.end(); ++ia, ++ib) {
        const double d = double(*ia) - double(*ib);
        num += d * d;
        den += double(*ib) * double(*ib);
    }
    return den == 0.0 ? std::sqrt(num) : std::sqrt(num / den);
}

double kernel_set_bound(std::size_t m) {
    const double u = std::ldexp(1.0, -24);
    return 2.0 * u * std::sqrt(double(m)) + 4.0 * u;
}

// Sets the process's kernel set for a scope and restores the one it found.
struct ScopedKernelSet {
    KernelSet saved = dtrain::detail::kernel_set();
    explicit ScopedKernelSet(KernelSet set) { dtrain::detail::kernel_set() = set; }
    ~ScopedKernelSet() { dtrain::detail::kernel_set() = saved; }
};

// Conv2d `cc` on a batch of `n`: the float64 results once, then every kernel set on a fresh layer (Conv2d
// picks its kernels when it first sees an input shape) with the same parameters and data.
void check_conv_every_kernel_set(const ConvCase& cc, std::size_t n) {
    Rng rng(cc.c * 1000 + cc.o * 10 + n);
    const std::size_t fan = cc.c * cc.k[0] * cc.k[1], taps = cc.k[0] * cc.k[1];
    std::vector<double> p(cc.o * fan + cc.o);
    for (auto& v : p)
        v = double(float(rng.uniform(-1, 1)));
    const std::size_t oh = (cc.h + 2 * cc.p[0] - cc.k[0]) / cc.s[0] + 1,
                      ow = (cc.w + 2 * cc.p[1] - cc.k[1]) / cc.s[1] + 1;
    const Tensor<float> x = dtrain::test::random_tensor<float>({n, cc.c, cc.h, cc.w}, rng);
    const Tensor<float> gy = dtrain::test::random_tensor<float>({n, cc.o, oh, ow}, rng);
    const Tensor<double> xd = x;
    const Tensor<double> y64 = dtrain::test::naive_conv(xd, p.data(), p.data() + cc.o * fan, cc);
    std::vector<double> dw;
    Tensor<double> dx;
    dtrain::test::naive_conv_grads(xd, p.data(), Tensor<double>(gy), cc, dw, dx);
    const std::vector<double> dw64(dw.begin(), dw.begin() + std::ptrdiff_t(cc.o * fan)),
        db64(dw.begin() + std::ptrdiff_t(cc.o * fan), dw.end());
    for (const KernelSet set : every_kernel_set) {
        ScopedKernelSet scope(set);
        Model<float> m({cc.c, cc.h, cc.w}, 3);
        m.add(Conv2d<float>(cc.c, cc.o, cc.k, cc.s, cc.p));
        std::copy(p.begin(), p.end(), m.parameters().begin());
        INFO("Conv2d(" << cc.c << ", " << cc.o << ", " << cc.k[0] << "x" << cc.k[1] << ", stride " << cc.s[0]
                       << ", padding " << cc.p[0] << ") on " << n << "x" << cc.h << "x" << cc.w
                       << ", kernels " << dtrain::detail::kernel_set_name(set) << ": " << m.summary());
        m.zero_grad();
        CHECK(kernel_set_error(m.forward(x), y64) <= kernel_set_bound(fan));
        CHECK(kernel_set_error(m.backward(gy, true), dx) <= kernel_set_bound(cc.o * taps));
        const auto g = m.gradients();
        const std::vector<float> gw(g.begin(), g.begin() + std::ptrdiff_t(cc.o * fan)),
            gb(g.begin() + std::ptrdiff_t(cc.o * fan), g.end());
        CHECK(kernel_set_error(gw, dw64) <= kernel_set_bound(n * oh * ow));
        CHECK(kernel_set_error(gb, db64) <= kernel_set_bound(n * oh * ow));
    }
}

// Dense(in, out) on a batch of `n`: the float64 results once, then every kernel set.
void check_dense_every_kernel_set(std::size_t in, std::size_t out, std::size_t n) {
    Rng rng(in + out + n);
    std::vector<double> p(out * in + out);  // W [out, in], then b
    for (auto& v : p)
        v = double(float(rng.uniform(-1, 1)));
    const Tensor<float> x = dtrain::test::random_tensor<float>({n, in}, rng);
    const Tensor<float> gy = dtrain::test::random_tensor<float>({n, out}, rng);
    std::vector<double> y(n * out), dx(n * in, 0.0), dw(out * in, 0.0), db(out, 0.0);
    for (std::size_t s = 0; s < n; ++s)
        for (std::size_t o = 0; o < out; ++o) {
            double acc = p[out * in + o];
            for (std::size_t i = 0; i < in; ++i) {
                acc += p[o * in + i] * double(x(s, i));
                dx[s * in + i] += double(gy(s, o)) * p[o * in + i];
                dw[o * in + i] += double(gy(s, o)) * double(x(s, i));
            }
            y[s * out + o] = acc;
            db[o] += double(gy(s, o));
        }
    for (const KernelSet set : every_kernel_set) {
        ScopedKernelSet scope(set);
        Model<float> m({in}, 3);
        m.add(Dense<float>(in, out));
        std::copy(p.begin(), p.end(), m.parameters().begin());
        INFO("Dense(" << in << ", " << out << ") on a batch of " << n << ", kernels "
                      << dtrain::detail::kernel_set_name(set) << ": " << m.summary());
        m.zero_grad();
        CHECK(kernel_set_error(m.forward(x), y) <= kernel_set_bound(in));
        CHECK(kernel_set_error(m.backward(gy, true), dx) <= kernel_set_bound(out));
        const auto g = m.gradients();
        CHECK(kernel_set_error(std::vector<float>(g.begin(), g.begin() + std::ptrdiff_t(out * in)), dw) <=
              kernel_set_bound(n));
        CHECK(kernel_set_error(std::vector<float>(g.begin() + std::ptrdiff_t(out * in), g.end()), db) <=
              kernel_set_bound(n));
    }
}

}  // namespace

TEST_CASE("Every kernel set: Conv2d<float> within float rounding of float64, shipped and odd shapes",
          "[nn][conv2d][kernels]") {
    const std::vector<ConvCase> cases = {
        {1, 20, 28, 28, {5, 5}, {1, 1}, {0, 0}},   // the SINGA CNN's layers
        {20, 50, 12, 12, {5, 5}, {1, 1}, {0, 0}},  //
        {3, 16, 9, 9, {3, 3}, {1, 1}, {1, 1}},     // ResNet9's first layer, smaller images
        {64, 64, 4, 4, {3, 3}, {2, 2}, {1, 1}},    // a downsampling layer: stride 2 with padding
        {256, 32, 4, 4, {3, 3}, {1, 1}, {1, 1}},   // fan-in 2,304 (ResNet9's widest layers)
        {1, 3, 7, 9, {1, 1}, {1, 1}, {0, 0}},     {3, 7, 8, 7, {3, 3}, {2, 2}, {1, 1}},
        {7, 17, 9, 8, {5, 5}, {1, 1}, {2, 2}},    {17, 33, 7, 7, {3, 3}, {1, 1}, {0, 0}},
        {33, 7, 9, 11, {5, 5}, {2, 2}, {2, 2}},   {33, 1, 6, 6, {1, 1}, {2, 2}, {0, 0}},
    };
    for (const auto& cc : cases)
        for (const std::size_t n : {std::size_t(1), std::size_t(65)}) {
            if (n == 65 && cc.c * cc.o * cc.h * cc.w > 20000) continue;  // the float64 reference's time
            check_conv_every_kernel_set(cc, n);
        }
}

TEST_CASE("Every kernel set: Dense<float> within float rounding of float64, fan-in up to 16,384",
          "[nn][dense][kernels]") {
    struct Case {
        std::size_t in, out;
    };
    const Case cases[] = {{784, 512}, {512, 256}, {256, 10},  {800, 500}, {4, 3},
                          {17, 33},   {33, 7},    {2304, 64}, {16384, 64}};
    for (const Case& c : cases)
        for (const std::size_t n : {std::size_t(1), std::size_t(65)})
            check_dense_every_kernel_set(c.in, c.out, n);
}

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/model.hpp>

#include "nn/gradcheck.hpp"

using dtrain::Dense;
using dtrain::Model;
using dtrain::Rng;
using dtrain::Tensor;
using dtrain::detail::KernelSet;
using dtrain::test::contains;
using dtrain::test::error_message;
using dtrain::test::random_tensor;
using dtrain::test::without_avx512;

TEST_CASE("Dense: forward is x * W^T + b with PyTorch's [out, in] layout", "[nn][dense]") {
    Rng rng(3);
    Model<double> m({5}, 1);
    m.add(Dense<double>(5, 4));
    for (auto& v : m.parameters())
        v = rng.uniform(-1, 1);
    const Tensor<double> x = random_tensor<double>({3, 5}, rng);
    const Tensor<double>& y = m.forward(x);
    REQUIRE(y.shape() == std::vector<std::size_t>{3, 4});
    const auto p = m.parameters();
    for (std::size_t r = 0; r < 3; ++r)
        for (std::size_t o = 0; o < 4; ++o) {
            double acc = p[20 + o];
            for (std::size_t i = 0; i < 5; ++i)
                acc += p[o * 5 + i] * x(r, i);
            CHECK(y(r, o) == Approx(acc).epsilon(1e-12));
        }
    auto& d = dynamic_cast<Dense<double>&>(m.layer(0));
    CHECK(&d.weight()(3, 4) == &p[19]);
    CHECK(&d.bias()(0) == &p[20]);
}

TEST_CASE("Dense: gradients match finite differences", "[nn][dense][grad]") {
    Rng rng(4);
    Model<double> m({5}, 2);
    m.add(Dense<double>(5, 4)).add(Dense<double>(4, 3));
    for (auto& v : m.parameters())
        v = rng.uniform(-1, 1);
    const auto r = dtrain::test::check_model_gradients(m, random_tensor<double>({3, 5}, rng), rng);
    CHECK(r.input_err < 1e-7);
    CHECK(r.param_err < 1e-7);
    CHECK(r.input_max > 1e-2);
    CHECK(r.param_max > 1e-2);
}

TEST_CASE("Dense: wrong input width names the layer and the shapes", "[nn][dense][errors]") {
    CHECK_THROWS_AS(Dense<float>(0, 3), dtrain::Error);
    std::string msg = error_message([] {
        Model<float> m({5});
        m.add(Dense<float>(4, 3));
    });
    CHECK(contains(msg, "Dense(4, 3)"));
    CHECK(contains(msg, "[batch, 4]"));
    CHECK(contains(msg, "[batch, 5]"));
    // Direct forward with a mismatching batch.
    msg = error_message([] {
        Dense<float> d(4, 3);
        Tensor<float> x = Tensor<float>::from_shape({2, 6}), y;
        d.forward(x, y, true);
    });
    CHECK(contains(msg, "Dense(4, 3)"));
    CHECK(contains(msg, "[2, 6]"));
    // Images need Flatten first.
    msg = error_message([] {
        Model<float> m({1, 2, 2});
        m.add(Dense<float>(4, 3));
    });
    CHECK(contains(msg, "add Flatten before Dense"));
}

namespace {

struct DenseRun {
    std::vector<float> y, dw, dx;
};

// Forward and backward of a bound Dense<float>(in, out) on x [n, in] with output gradient gy [n, out]; the
// weight gradient is accumulated twice (so dW = 2 g^T x) and, when chunk > 0, computed in parts of about
// `chunk` values as DistOptimizer asks for them.
DenseRun run_dense(std::size_t in, std::size_t out, const std::vector<float>& params, const Tensor<float>& x,
                   const Tensor<float>& gy, std::size_t chunk) {
    Dense<float> d(in, out);
    std::vector<float> p = params, g(params.size(), 0.0f);
    d.bind(p.data(), g.data(), nullptr);
    std::size_t reported = 0;
    if (chunk > 0)
        d.set_grad_progress(
            {[](void* c, std::size_t b, std::size_t e) { *static_cast<std::size_t*>(c) += e - b; }, &reported,
             chunk});
    Tensor<float> y, dx;
    d.forward(x, y, true);
    d.backward(x, y, gy, dx, true);
    d.backward(x, y, gy, dx, true);
    if (chunk > 0) CHECK(reported == 2 * params.size());
    return {std::vector<float>(y.begin(), y.end()), std::vector<float>(g.begin(), g.begin() + in * out),
            std::vector<float>(dx.begin(), dx.end())};
}

}  // namespace

TEST_CASE("Dense<float>: the AVX-512 kernels and BLAS both match a double reference", "[nn][dense][avx512]") {
    // Batches of 64 (the MLP's), 70 (a strip of 64 and a masked one), 1 and 13; out % 6 = 0-5.
    const std::size_t shapes[][3] = {{784, 512, 64}, {37, 13, 70},   {5, 4, 1},
                                     {9, 7, 13},     {512, 256, 64}, {20, 11, 3}};
    Rng rng(43);
    for (const auto& sh : shapes) {
        const std::size_t in = sh[0], out = sh[1], n = sh[2];
        std::vector<float> params(out * in + out);
        for (auto& v : params)
            v = float(rng.uniform(-0.5, 0.5));
        const Tensor<float> x = random_tensor<float>({n, in}, rng), gy = random_tensor<float>({n, out}, rng);
        const KernelSet start = dtrain::detail::kernel_set();  // from DTRAIN_KERNELS
        for (const KernelSet set : {start, without_avx512(start)}) {
            dtrain::detail::kernel_set() = set;
            INFO(in << " -> " << out << " batch " << n << " AVX-512 kernels "
                    << dtrain::detail::gemm_avx512_available());
            const DenseRun r = run_dense(in, out, params, x, gy, 0);
            std::size_t bad_y = 0, bad_dw = 0, bad_dx = 0;
            for (std::size_t s = 0; s < n; ++s)
                for (std::size_t o = 0; o < out; ++o) {
                    double ref = params[out * in + o], mag = std::abs(ref);
                    for (std::size_t i = 0; i < in; ++i) {
                        ref += double(params[o * in + i]) * x(s, i);
                        mag += std::abs(double(params[o * in + i]) * x(s, i));
                    }
                    bad_y += std::abs(r.y[s * out + o] - ref) > 1e-5 * mag + 1e-30;
                }
            for (std::size_t o = 0; o < out; ++o)
                for (std::size_t i = 0; i < in; ++i) {
                    double ref = 0, mag = 0;
                    for (std::size_t s = 0; s < n; ++s) {
                        ref += double(gy(s, o)) * x(s, i);
                        mag += std::abs(double(gy(s, o)) * x(s, i));
                    }
                    bad_dw += std::abs(r.dw[o * in + i] - 2 * ref) > 2e-5 * mag + 1e-30;
                }
            for (std::size_t s = 0; s < n; ++s)
                for (std::size_t i = 0; i < in; ++i) {
                    double ref = 0, mag = 0;
                    for (std::size_t o = 0; o < out; ++o) {
                        ref += double(gy(s, o)) * params[o * in + i];
                        mag += std::abs(double(gy(s, o)) * params[o * in + i]);
                    }
                    bad_dx += std::abs(r.dx[s * in + i] - ref) > 1e-5 * mag + 1e-30;
                }
            CHECK(bad_y == 0);
            CHECK(bad_dw == 0);
            CHECK(bad_dx == 0);
            // Computed in parts of about two rows, from the last rows to the first: the same gradient.
            const DenseRun c = run_dense(in, out, params, x, gy, 2 * in);
            if (dtrain::kernel_cpu().avx2_fma) {  // GemmDense: the same sums in any parts of rows
                CHECK(c.dw == r.dw);
            } else {
                CHECK(dtrain::test::max_rel_diff(c.dw, r.dw) < 1e-5);
            }
        }
        dtrain::detail::kernel_set() = start;
    }
}

TEST_CASE("Dense<float> on AVX-512 or AVX2: a sample's output does not depend on the rest of its batch",
          "[nn][dense][avx512]") {
    if (!dtrain::kernel_cpu().avx2_fma) {
        WARN(
            "no AVX2 and FMA kernels here: Dense<float> runs BLAS sgemm, whose blocking depends on the "
            "batch");
        return;
    }
    Rng rng(44);
    const std::size_t in = 100, out = 30, n = 67;
    std::vector<float> params(out * in + out);
    for (auto& v : params)
        v = float(rng.uniform(-0.5, 0.5));
    const Tensor<float> x = random_tensor<float>({n, in}, rng);
    Dense<float> d(in, out);
    std::vector<float> g(params.size());
    d.bind(params.data(), g.data(), nullptr);
    Tensor<float> y, y1;
    d.forward(x, y, false);
    std::size_t differ = 0;
    for (std::size_t s : {std::size_t(0), std::size_t(5), std::size_t(64), n - 1}) {
        Tensor<float> xs = random_tensor<float>({1, in}, rng);
        for (std::size_t i = 0; i < in; ++i)
            xs(0, i) = x(s, i);
        d.forward(xs, y1, false);
        for (std::size_t o = 0; o < out; ++o)
            differ += y1(0, o) != y(s, o);
    }
    CHECK(differ == 0);
}

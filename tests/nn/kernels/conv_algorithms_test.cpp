// Every registered convolution algorithm (conv_algorithms<float>()) that applies on this CPU computes the
// output, weight, bias and input gradients within float rounding of float64 and of the reference
// (im2col + BLAS), at the shipped models' shapes and at odd ones: channels 1, 3, 7, 17 and 33, kernels 1, 3
// and 5, stride 2 with padding, batches of 1 and 65, fan-in up to 16,384. And Conv2d runs what it names:
// under each kernel set its results are bitwise those of choose_conv_algorithm() run directly. And each
// algorithm's input gradient is bitwise the same after a forward pass on an input with infinities.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <dtrain/nn/kernels/conv_algorithms.hpp>
#include <dtrain/nn/layers/conv2d.hpp>
#include <dtrain/nn/model.hpp>

#include "nn/gradcheck.hpp"
#include "nn/kernels/float_bound.hpp"
#include "nn/layers/conv_reference.hpp"

using dtrain::Conv2d;
using dtrain::ConvAlgorithm;
using dtrain::ConvProblem;
using dtrain::Model;
using dtrain::Rng;
using dtrain::Tensor;
using dtrain::detail::KernelSet;
using dtrain::test::ConvCase;
using dtrain::test::float_sum_bound;
using dtrain::test::kernel_sets_here;
using dtrain::test::relative_error;

namespace {

// One algorithm's four results on one problem.
struct ConvResults {
    std::vector<float> y, dw, db, dx;
};

ConvResults run_algorithm(ConvAlgorithm<float>& a, const ConvProblem& pr, const Tensor<float>& x,
                          const std::vector<float>& p, const Tensor<float>& gy) {
    ConvResults r;
    const std::size_t fan = pr.fan_in();
    r.y.assign(pr.batch * pr.out * pr.g.positions(), -7.0f);  // every element must be written
    r.dw.assign(pr.out * fan, 0.0f);
    r.db.assign(pr.out, 0.0f);
    r.dx.assign(x.size(), -7.0f);
    a.prepare(pr);
    a.forward(x.data(), p.data(), p.data() + pr.out * fan, r.y.data());
    a.backward_weights(x.data(), gy.data(), r.dw.data(), r.db.data());
    a.backward_data(gy.data(), p.data(), r.dx.data());
    return r;
}

// Conv2d `cc` on a batch of `n`: the float64 results once, then every algorithm that applies; counts the
// problems each algorithm ran in `ran`.
void check_every_algorithm(const ConvCase& cc, std::size_t n, std::map<std::string, int>& ran) {
    Rng rng(cc.c * 1000 + cc.o * 10 + n);
    const std::size_t fan = cc.c * cc.k[0] * cc.k[1], taps = cc.k[0] * cc.k[1];
    std::vector<float> p(cc.o * fan + cc.o);
    for (auto& v : p)
        v = float(rng.uniform(-1, 1));
    const ConvProblem pr{Conv2d<float>(cc.c, cc.o, cc.k, cc.s, cc.p).geometry(cc.h, cc.w), n, cc.o};
    const std::size_t pos = pr.g.positions();
    const Tensor<float> x = dtrain::test::random_tensor<float>({n, cc.c, cc.h, cc.w}, rng);
    const Tensor<float> gy = dtrain::test::random_tensor<float>({n, cc.o, pr.g.oh, pr.g.ow}, rng);
    const std::vector<double> pd(p.begin(), p.end());
    const Tensor<double> xd = x;
    const Tensor<double> y64 = dtrain::test::naive_conv(xd, pd.data(), pd.data() + cc.o * fan, cc);
    std::vector<double> g64;
    Tensor<double> dx64;
    dtrain::test::naive_conv_grads(xd, pd.data(), Tensor<double>(gy), cc, g64, dx64);
    const std::vector<double> dw64(g64.begin(), g64.begin() + std::ptrdiff_t(cc.o * fan)),
        db64(g64.begin() + std::ptrdiff_t(cc.o * fan), g64.end());
    dtrain::Im2colConv<float> reference;
    const ConvResults ref = run_algorithm(reference, pr, x, p, gy);
    for (const auto& entry : dtrain::conv_algorithms<float>()) {
        if (!entry.applies(pr, dtrain::test::full_cpu())) continue;
        ++ran[entry.name];
        const auto algorithm = entry.make();
        INFO("Conv2d(" << cc.c << ", " << cc.o << ", " << cc.k[0] << "x" << cc.k[1] << ", stride " << cc.s[0]
                       << ", padding " << cc.p[0] << ") on " << n << "x" << cc.h << "x" << cc.w << ": "
                       << algorithm->name());
        CHECK(algorithm->name() == entry.name);
        const ConvResults r = run_algorithm(*algorithm, pr, x, p, gy);
        CHECK(relative_error(r.y, y64) <= float_sum_bound(fan));
        CHECK(relative_error(r.dx, dx64) <= float_sum_bound(cc.o * taps));
        CHECK(relative_error(r.dw, dw64) <= float_sum_bound(n * pos));
        CHECK(relative_error(r.db, db64) <= float_sum_bound(n * pos));
        CHECK(relative_error(r.y, ref.y) <= 2 * float_sum_bound(fan));
        CHECK(relative_error(r.dx, ref.dx) <= 2 * float_sum_bound(cc.o * taps));
        CHECK(relative_error(r.dw, ref.dw) <= 2 * float_sum_bound(n * pos));
        CHECK(relative_error(r.db, ref.db) <= 2 * float_sum_bound(n * pos));
    }
}

}  // namespace

TEST_CASE("Every convolution algorithm: within float rounding of float64 and the reference",
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
        {1024, 16, 4, 4, {4, 4}, {1, 1}, {0, 0}},  // fan-in 16,384 (one output position)
        {1024, 8, 3, 3, {3, 3}, {1, 1}, {1, 1}},   // fan-in 9,216, padded
        {3, 130, 6, 6, {3, 3}, {1, 1}, {0, 0}},    // direct, its input gradient a sum over 130 channels
    };
    std::map<std::string, int> ran;
    for (const auto& cc : cases)
        for (const std::size_t n : {std::size_t(1), std::size_t(65)}) {
            if (n == 65 && cc.c * cc.o * cc.h * cc.w > 20000) continue;  // the float64 reference's time
            check_every_algorithm(cc, n, ran);
        }
    // Each algorithm this CPU can run met at least one of the shapes: none is left out of the test.
    const dtrain::KernelCpu cpu = dtrain::test::full_cpu();
    for (const auto& entry : dtrain::conv_algorithms<float>()) {
        const std::string name = entry.name;
        const bool runs_here = name.find("AVX-512") != std::string::npos ? cpu.avx512f
                               : name.find("AVX2") != std::string::npos  ? cpu.avx2_fma
                               : name == "oneDNN"                        ? cpu.onednn
                                                                         : true;
        INFO(name << (runs_here ? "" : " (not on this CPU)"));
        if (runs_here)
            CHECK(ran[name] > 0);
        else
            CHECK(ran[name] == 0);
    }
}

TEST_CASE("Conv2d runs the algorithm it names: bitwise the chosen algorithm's results, every kernel set",
          "[nn][conv2d][kernels]") {
    const ConvCase cases[] = {{1, 20, 28, 28, {5, 5}, {1, 1}, {0, 0}},
                              {20, 50, 12, 12, {5, 5}, {1, 1}, {0, 0}},
                              {3, 7, 8, 7, {3, 3}, {2, 2}, {1, 1}},
                              {4, 6, 9, 9, {3, 3}, {1, 1}, {0, 0}}};
    const KernelSet saved = dtrain::detail::kernel_set();
    for (const ConvCase& cc : cases)
        for (const KernelSet set : kernel_sets_here()) {
            dtrain::detail::kernel_set() = set;
            Rng rng(5);
            Model<float> m({cc.c, cc.h, cc.w}, 3);
            m.add(Conv2d<float>(cc.c, cc.o, cc.k, cc.s, cc.p));
            const std::vector<float> p(m.parameters().begin(), m.parameters().end());
            const Tensor<float> x = dtrain::test::random_tensor<float>({8, cc.c, cc.h, cc.w}, rng);
            const ConvProblem pr{Conv2d<float>(cc.c, cc.o, cc.k, cc.s, cc.p).geometry(cc.h, cc.w), 8, cc.o};
            const Tensor<float> gy = dtrain::test::random_tensor<float>({8, cc.o, pr.g.oh, pr.g.ow}, rng);
            const auto& entry = dtrain::choose_conv_algorithm<float>(pr);
            INFO("kernels " << dtrain::detail::kernel_set_name(set) << ": " << m.summary());
            CHECK(m.summary().find(entry.name) != std::string::npos);
            const auto algorithm = entry.make();
            const ConvResults r = run_algorithm(*algorithm, pr, x, p, gy);
            m.zero_grad();
            const Tensor<float>& y = m.forward(x);
            CHECK(std::equal(r.y.begin(), r.y.end(), y.begin()));
            const Tensor<float>& dx = m.backward(gy, true);
            CHECK(std::equal(r.dx.begin(), r.dx.end(), dx.begin()));
            const auto g = m.gradients();
            CHECK(std::equal(r.dw.begin(), r.dw.end(), g.begin()));
            CHECK(std::equal(r.db.begin(), r.db.end(), g.begin() + std::ptrdiff_t(r.dw.size())));
        }
    dtrain::detail::kernel_set() = saved;
}

TEST_CASE(
    "Every convolution algorithm: the input gradient does not depend on the input, even an infinite one",
    "[nn][conv2d][kernels]") {
    // dx depends on dy and w only. An infinite input leaves infinities and NaNs (0 * inf in padded channels)
    // in the scratch of the forward pass, which the backward passes reuse: none of it may reach dx.
    const ConvCase cases[] = {{33, 1, 6, 6, {1, 1}, {2, 2}, {0, 0}},  // a phase without taps: the scatter
                              {3, 7, 8, 7, {3, 3}, {2, 2}, {1, 1}},   // stride 2 with padding, 7 channels
                              {7, 17, 9, 8, {5, 5}, {1, 1}, {2, 2}},  // padded, 17 channels
                              {20, 50, 12, 12, {5, 5}, {1, 1}, {0, 0}}};
    for (const ConvCase& cc : cases) {
        Rng rng(11);
        const ConvProblem pr{Conv2d<float>(cc.c, cc.o, cc.k, cc.s, cc.p).geometry(cc.h, cc.w), 4, cc.o};
        std::vector<float> p(cc.o * pr.fan_in() + cc.o);
        for (auto& v : p)
            v = float(rng.uniform(-1, 1));
        const Tensor<float> x = dtrain::test::random_tensor<float>({4, cc.c, cc.h, cc.w}, rng);
        const Tensor<float> gy = dtrain::test::random_tensor<float>({4, cc.o, pr.g.oh, pr.g.ow}, rng);
        for (const auto& entry : dtrain::conv_algorithms<float>()) {
            if (!entry.applies(pr, dtrain::test::full_cpu())) continue;
            INFO("Conv2d(" << cc.c << ", " << cc.o << ", " << cc.k[0] << "x" << cc.k[1] << ", stride "
                           << cc.s[0] << ", padding " << cc.p[0] << "): " << entry.name);
            const auto finite = entry.make();
            const ConvResults a = run_algorithm(*finite, pr, x, p, gy);
            Tensor<float> xi = x;
            for (std::size_t i = 0; i < xi.size(); i += 5)
                xi.data()[i] = i % 2 == 0 ? std::numeric_limits<float>::infinity() : -7.0f;
            const auto infinite = entry.make();
            const ConvResults b = run_algorithm(*infinite, pr, xi, p, gy);
            CHECK(std::equal(a.dx.begin(), a.dx.end(), b.dx.begin()));
        }
    }
}

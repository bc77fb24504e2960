// Every registered Dense algorithm (dense_algorithms<float>()) that applies on this CPU computes the
// output, weight, bias and input gradients within float rounding of float64 and of the reference (BLAS),
// at the shipped models' shapes and at odd ones, fan-in up to 16,384, batches of 1 and 65; the weight
// gradient also written in parts of rows (as the gradient overlap asks) and added. And Dense runs what it
// names: under each kernel set bitwise the chosen algorithm's results.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include <dtrain/nn/kernels/dense_algorithms.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/model.hpp>

#include "nn/gradcheck.hpp"
#include "nn/kernels/float_bound.hpp"

using dtrain::Dense;
using dtrain::DenseAlgorithm;
using dtrain::DenseProblem;
using dtrain::Model;
using dtrain::Rng;
using dtrain::Tensor;
using dtrain::detail::KernelSet;
using dtrain::test::float_sum_bound;
using dtrain::test::kernel_sets_here;
using dtrain::test::relative_error;

namespace {

struct DenseResults {
    std::vector<float> y, dw, dx;
};

// The three products of `a`; the weight gradient as one call, or (parts) written over garbage in parts of
// 3 rows, last rows first, then added a second time: twice the gradient.
DenseResults run_algorithm(DenseAlgorithm<float>& a, const DenseProblem& pr, const Tensor<float>& x,
                           const std::vector<float>& p, const Tensor<float>& gy, bool parts = false) {
    DenseResults r;
    r.y.assign(pr.batch * pr.out, -7.0f);
    r.dw.assign(pr.out * pr.in, parts ? -7.0f : 0.0f);
    r.dx.assign(pr.batch * pr.in, -7.0f);
    a.prepare(pr);
    a.forward(x.data(), p.data(), p.data() + pr.out * pr.in, r.y.data());
    if (parts) {
        for (std::size_t hi = pr.out; hi > 0; hi = hi > 3 ? hi - 3 : 0)
            a.backward_weights(x.data(), gy.data(), hi > 3 ? hi - 3 : 0, hi, false, r.dw.data());
        a.backward_weights(x.data(), gy.data(), 0, pr.out, true, r.dw.data());
    } else {
        a.backward_weights(x.data(), gy.data(), 0, pr.out, true, r.dw.data());
    }
    a.backward_data(gy.data(), p.data(), r.dx.data());
    return r;
}

void check_every_algorithm(std::size_t in, std::size_t out, std::size_t n, std::map<std::string, int>& ran) {
    Rng rng(in + out + n);
    std::vector<float> p(out * in + out);  // W [out, in], then b
    for (auto& v : p)
        v = float(rng.uniform(-1, 1));
    const Tensor<float> x = dtrain::test::random_tensor<float>({n, in}, rng);
    const Tensor<float> gy = dtrain::test::random_tensor<float>({n, out}, rng);
    std::vector<double> y(n * out), dx(n * in, 0.0), dw(out * in, 0.0);
    for (std::size_t s = 0; s < n; ++s)
        for (std::size_t o = 0; o < out; ++o) {
            double acc = p[out * in + o];
            for (std::size_t i = 0; i < in; ++i) {
                acc += double(p[o * in + i]) * double(x(s, i));
                dx[s * in + i] += double(gy(s, o)) * double(p[o * in + i]);
                dw[o * in + i] += double(gy(s, o)) * double(x(s, i));
            }
            y[s * out + o] = acc;
        }
    std::vector<double> dw2(dw);
    for (double& v : dw2)
        v *= 2;
    const DenseProblem pr{n, in, out};
    dtrain::BlasDense<float> reference;
    const DenseResults ref = run_algorithm(reference, pr, x, p, gy);
    for (const auto& entry : dtrain::dense_algorithms<float>()) {
        if (!entry.applies(pr, dtrain::test::full_cpu())) continue;
        ++ran[entry.name];
        const auto algorithm = entry.make();
        INFO("Dense(" << in << ", " << out << ") on a batch of " << n << ": " << algorithm->name());
        CHECK(algorithm->name() == entry.name);
        const DenseResults r = run_algorithm(*algorithm, pr, x, p, gy);
        CHECK(relative_error(r.y, y) <= float_sum_bound(in));
        CHECK(relative_error(r.dx, dx) <= float_sum_bound(out));
        CHECK(relative_error(r.dw, dw) <= float_sum_bound(n));
        CHECK(relative_error(r.y, ref.y) <= 2 * float_sum_bound(in));
        CHECK(relative_error(r.dx, ref.dx) <= 2 * float_sum_bound(out));
        CHECK(relative_error(r.dw, ref.dw) <= 2 * float_sum_bound(n));
        const DenseResults twice = run_algorithm(*algorithm, pr, x, p, gy, true);
        CHECK(relative_error(twice.dw, dw2) <= float_sum_bound(n) + 1e-7);
    }
}

}  // namespace

TEST_CASE("Every Dense algorithm: within float rounding of float64 and the reference, fan-in up to 16,384",
          "[nn][dense][kernels]") {
    struct Case {
        std::size_t in, out;
    };
    const Case cases[] = {{784, 512}, {512, 256}, {256, 10},  {800, 500}, {4, 3},
                          {17, 33},   {33, 7},    {2304, 64}, {16384, 64}};
    std::map<std::string, int> ran;
    for (const Case& c : cases)
        for (const std::size_t n : {std::size_t(1), std::size_t(65)})
            check_every_algorithm(c.in, c.out, n, ran);
    const dtrain::KernelCpu cpu = dtrain::test::full_cpu();
    for (const auto& entry : dtrain::dense_algorithms<float>()) {
        const std::string name = entry.name;
        const bool runs_here = name.find("AVX-512") != std::string::npos ? cpu.avx512f
                               : name.find("AVX2") != std::string::npos  ? cpu.avx2_fma
                               : name == "oneDNN"                        ? cpu.onednn
                                                                         : true;
        INFO(name << (runs_here ? "" : " (not on this CPU)"));
        CHECK((ran[name] > 0) == runs_here);
    }
}

TEST_CASE("Dense runs the algorithm it names: bitwise the chosen algorithm's results, every kernel set",
          "[nn][dense][kernels]") {
    const KernelSet saved = dtrain::detail::kernel_set();
    for (const KernelSet set : kernel_sets_here()) {
        dtrain::detail::kernel_set() = set;
        Rng rng(9);
        Model<float> m({37}, 3);
        m.add(Dense<float>(37, 19));
        const std::vector<float> p(m.parameters().begin(), m.parameters().end());
        const Tensor<float> x = dtrain::test::random_tensor<float>({6, 37}, rng);
        const Tensor<float> gy = dtrain::test::random_tensor<float>({6, 19}, rng);
        const DenseProblem pr{6, 37, 19};
        const auto& entry = dtrain::choose_dense_algorithm<float>(pr);
        INFO("kernels " << dtrain::detail::kernel_set_name(set) << ": " << m.summary());
        CHECK(m.summary().find(entry.name) != std::string::npos);
        const auto algorithm = entry.make();
        const DenseResults r = run_algorithm(*algorithm, pr, x, p, gy);
        m.zero_grad();
        CHECK(std::equal(r.y.begin(), r.y.end(), m.forward(x).begin()));
        CHECK(std::equal(r.dx.begin(), r.dx.end(), m.backward(gy, true).begin()));
        CHECK(std::equal(r.dw.begin(), r.dw.end(), m.gradients().begin()));
    }
    dtrain::detail::kernel_set() = saved;
}

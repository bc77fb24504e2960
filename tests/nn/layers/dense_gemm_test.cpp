#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>
#include <vector>

#include <dtrain/core/rng.hpp>
#include <dtrain/nn/layers/detail/dense_gemm.hpp>
#include <dtrain/nn/layers/detail/dense_gemm_avx2.hpp>
#include <dtrain/nn/layers/detail/direct_conv.hpp>

#include "nn/layers/blocked_sum.hpp"
#include "support/test_utils.hpp"

#ifdef DTRAIN_X86_DISPATCH

using dtrain::Rng;
using dtrain::test::random_floats;

namespace {

// Relative RMS error of r against the double result e: ||r - e|| / ||e||.
double gemm_rel_rms(const std::vector<float>& r, const std::vector<double>& e) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < r.size(); ++i) {
        num += (double(r[i]) - e[i]) * (double(r[i]) - e[i]);
        den += e[i] * e[i];
    }
    return std::sqrt(num / den);
}

// One of the GEMM kernels Dense<float> runs, all with the same results: gemm_avx512 and gemm_avx2.
struct GemmKernel {
    const char* name;
    void (*gemm)(bool, std::size_t, std::size_t, std::size_t, const float*, std::size_t, std::size_t,
                 const float*, std::size_t, float*, std::size_t, dtrain::detail::GemmEpilogue);
    void (*forward)(std::size_t, std::size_t, std::size_t, const float*, const float*, const float*, float*,
                    float*, float*);
};

// The kernels this CPU runs (a warning names any it does not).
std::vector<GemmKernel> gemm_kernels_here() {
    std::vector<GemmKernel> k;
    if (dtrain::detail::cpu_has_avx512f())
        k.push_back({"gemm_avx512", &dtrain::detail::gemm_avx512, &dtrain::detail::dense_forward_avx512});
    else
        WARN("this CPU has no AVX-512F: gemm_avx512 not run");
    if (dtrain::detail::cpu_has_avx2_fma())
        k.push_back({"gemm_avx2", &dtrain::detail::gemm_avx2, &dtrain::detail::dense_forward_avx2});
    else
        WARN("this CPU has no AVX2 and FMA: gemm_avx2 not run (Dense<float> uses BLAS here)");
    return k;
}

}  // namespace

TEST_CASE(
    "gemm_avx512 and gemm_avx2: every element is the blocked sum of summation.hpp over k, in both "
    "layouts of A",
    "[nn][dense][avx512]") {
    // Row tiles of 6 with 1-5 rows left, strips of 64 columns (unmasked) and of 1-4 vectors with masked ends
    // (60 and 113 columns: 4 vectors, the last one partial), k = 0
    // (C = 0 or C unchanged), the MLP's shapes at batch 64, and k over several chains and partial sums
    // (ending inside a chain, on a chain's end, on a partial sum's end). Strides wider than the rows.
    struct Case {
        std::size_t m, n, k;
    };
    const std::vector<Case> cases = {
        {1, 1, 1},     {6, 64, 5},    {7, 65, 3},     {13, 100, 17}, {11, 15, 40}, {2, 33, 9},  {5, 48, 0},
        {64, 784, 64}, {512, 64, 37}, {64, 200, 300}, {4, 16, 1},    {3, 129, 2},  {12, 31, 8}, {7, 20, 2500},
        {2, 17, 1024}, {9, 70, 1152}, {1, 3, 2048},   {5, 60, 7},    {8, 113, 130}};
    for (const GemmKernel& g : gemm_kernels_here()) {
        Rng rng(41);
        for (const auto& cs : cases) {
            for (const bool at : {false, true})
                for (const bool acc : {false, true}) {
                    const std::size_t m = cs.m, n = cs.n, k = cs.k, ldb = n + 3, ldc = n + 5;
                    const std::size_t ars = at ? 1 : k, aks = at ? m : 1;
                    const auto a = random_floats(m * k + 1, rng), b = random_floats(k * ldb + 1, rng);
                    const auto c0 = random_floats(m * ldc, rng);
                    std::vector<float> c = c0;
                    g.gemm(acc, m, n, k, a.data(), ars, aks, b.data(), ldb, c.data(), ldc, {});
                    INFO(g.name << ": m=" << m << " n=" << n << " k=" << k << " A transposed=" << at
                                << " accumulate=" << acc);
                    std::size_t wrong = 0, touched = 0;
                    for (std::size_t i = 0; i < m; ++i) {
                        for (std::size_t j = 0; j < n; ++j) {
                            const float r = dtrain::test::blocked_fma_sum(
                                c0[i * ldc + j], acc, k, [&](std::size_t p, int q) {
                                    return q == 0 ? a[i * ars + p * aks] : b[p * ldb + j];
                                });
                            wrong += c[i * ldc + j] != r;
                        }
                        for (std::size_t j = n; j < ldc; ++j)
                            touched += c[i * ldc + j] != c0[i * ldc + j];
                    }
                    CHECK(wrong == 0);
                    CHECK(touched == 0);
                }
        }
    }
}

TEST_CASE(
    "gemm_avx512 and gemm_avx2: the epilogue adds each row's bias, then applies ReLU, once, to the "
    "stored value",
    "[nn][dense][avx512]") {
    // Row tiles with rows left, masked strips, k = 0, one chain, several chains, several partial sums (where
    // applying it to each partial sum's store would add the bias twice); about half the values negative.
    struct Case {
        std::size_t m, n, k;
    };
    const std::vector<Case> cases = {{7, 65, 3}, {13, 100, 300}, {5, 48, 0}, {9, 70, 2100}, {512, 64, 37}};
    for (const GemmKernel& g : gemm_kernels_here()) {
        Rng rng(47);
        for (const auto& cs : cases)
            for (const bool acc : {false, true})
                for (const bool relu : {false, true}) {
                    const std::size_t m = cs.m, n = cs.n, k = cs.k, ldc = n + 5;
                    const auto a = random_floats(m * k + 1, rng), b = random_floats(k * n + 1, rng);
                    const auto bias = random_floats(m, rng), c0 = random_floats(m * ldc, rng);
                    std::vector<float> plain = c0, fused = c0;
                    g.gemm(acc, m, n, k, a.data(), k, 1, b.data(), n, plain.data(), ldc, {});
                    g.gemm(acc, m, n, k, a.data(), k, 1, b.data(), n, fused.data(), ldc,
                           dtrain::detail::GemmEpilogue{bias.data(), relu});
                    INFO(g.name << ": m=" << m << " n=" << n << " k=" << k << " accumulate=" << acc
                                << " relu=" << relu);
                    std::size_t wrong = 0, zeros = 0, touched = 0;
                    for (std::size_t i = 0; i < m; ++i) {
                        for (std::size_t j = 0; j < n; ++j) {
                            const float x = plain[i * ldc + j] + bias[i], r = relu && x < 0.0f ? 0.0f : x;
                            wrong += fused[i * ldc + j] != r;
                            zeros += fused[i * ldc + j] == 0.0f;
                        }
                        for (std::size_t j = n; j < ldc; ++j)
                            touched += fused[i * ldc + j] != c0[i * ldc + j];
                    }
                    CHECK(wrong == 0);
                    CHECK(touched == 0);
                    CHECK((zeros > 0) == relu);  // ReLU met negative values
                }
    }
}

TEST_CASE("gemm_avx512: Dense 16384 -> 64 stays near the float64 result, where one chain of FMAs does not",
          "[nn][dense][avx512]") {
    if (!dtrain::detail::cpu_has_avx512f()) {
        WARN("this CPU has no AVX-512F: gemm_avx512 not run (Dense<float> uses BLAS here)");
        return;
    }
    // out^T [64, 64] = W [64, 16384] * x^T [16384, 64], as Dense<float>'s forward pass computes it
    const std::size_t m = 64, n = 64, k = 16384;
    Rng rng(43);
    const auto w = random_floats(m * k, rng), xt = random_floats(k * n, rng);
    std::vector<float> c(m * n), chain(m * n);
    std::vector<double> exact(m * n);
    dtrain::detail::gemm_avx512(false, m, n, k, w.data(), k, 1, xt.data(), n, c.data(), n);
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j) {
            float r = 0.0f;
            double e = 0.0;
            for (std::size_t p = 0; p < k; ++p) {
                r = std::fma(w[i * k + p], xt[p * n + j], r);
                e += double(w[i * k + p]) * double(xt[p * n + j]);
            }
            chain[i * n + j] = r;
            exact[i * n + j] = e;
        }
    const double err = gemm_rel_rms(c, exact), err_chain = gemm_rel_rms(chain, exact);
    INFO("relative RMS error: blocked " << err << ", one chain " << err_chain);
    CHECK(err < 1.0e-6);
    CHECK(err_chain > 1.0e-6);  // the bound tells the two apart
}

TEST_CASE(
    "dense_forward_avx512 and _avx2: a sample's output is bitwise the same alone, within a batch of 65 "
    "and on either kernel",
    "[nn][dense][avx512]") {
    // fan-in 2500: three partial sums, the last ending inside a chain; 70 outputs: strips of 64 and of 6
    const std::size_t n = 65, fi = 2500, fo = 70;
    Rng rng(44);
    const auto x = random_floats(n * fi, rng), w = random_floats(fo * fi, rng), bias = random_floats(fo, rng);
    std::vector<float> xt(fi * n), ot(fo * n), out(n * fo), one(fo), first;
    for (const GemmKernel& g : gemm_kernels_here()) {
        g.forward(n, fi, fo, x.data(), w.data(), bias.data(), xt.data(), ot.data(), out.data());
        if (first.empty()) first = out;
        INFO(g.name);
        CHECK(out == first);
        for (const std::size_t s : {std::size_t(0), std::size_t(7), std::size_t(64)}) {
            g.forward(1, fi, fo, x.data() + s * fi, w.data(), bias.data(), xt.data(), ot.data(), one.data());
            std::size_t different = 0;
            for (std::size_t o = 0; o < fo; ++o)
                different += one[o] != out[s * fo + o];
            INFO("sample " << s);
            CHECK(different == 0);
        }
    }
}

TEST_CASE(
    "transpose_avx512 and _avx2: exact transpose, with and without a bias per source row, in both loop "
    "orders",
    "[nn][dense][avx512]") {
    std::vector<std::pair<const char*, decltype(&dtrain::detail::transpose_avx2)>> transposes;
    if (dtrain::detail::cpu_has_avx512f())
        transposes.emplace_back("avx512", &dtrain::detail::transpose_avx512);
    if (dtrain::detail::cpu_has_avx2_fma()) transposes.emplace_back("avx2", &dtrain::detail::transpose_avx2);
    for (const auto& [name, transpose] : transposes) {
        Rng rng(42);
        const std::size_t shapes[][2] = {{1, 1},  {8, 8},  {64, 784}, {13, 21}, {9, 7},
                                         {16, 3}, {3, 16}, {512, 64}, {24, 40}, {40, 17}};
        // ldx a multiple of 1 KiB takes the other loop order (rows in panels of 16)
        for (const auto& sh : shapes)
            for (const bool kib_rows : {false, true})
                for (const bool with_bias : {false, true}) {
                    const std::size_t rows = sh[0], cols = sh[1], ldy = rows + 3,
                                      ldx = kib_rows ? (cols + 255) / 256 * 256 : cols + 2;
                    const auto x = random_floats(rows * ldx, rng), bias = random_floats(rows, rng);
                    const auto y0 = random_floats(cols * ldy, rng);
                    std::vector<float> y = y0;
                    transpose(rows, cols, x.data(), ldx, y.data(), ldy, with_bias ? bias.data() : nullptr);
                    INFO(name << ": " << rows << " x " << cols << " ldx=" << ldx << " bias=" << with_bias);
                    std::size_t wrong = 0, touched = 0;
                    for (std::size_t j = 0; j < cols; ++j) {
                        for (std::size_t i = 0; i < rows; ++i)
                            wrong +=
                                y[j * ldy + i] != (with_bias ? x[i * ldx + j] + bias[i] : x[i * ldx + j]);
                        for (std::size_t i = rows; i < ldy; ++i)
                            touched += y[j * ldy + i] != y0[j * ldy + i];
                    }
                    CHECK(wrong == 0);
                    CHECK(touched == 0);
                }
    }
}

#endif  // DTRAIN_X86_DISPATCH

TEST_CASE("gemm_avx512_available follows the CPU and the kernel set", "[nn][dense]") {
    using dtrain::detail::KernelSet;
    const KernelSet start = dtrain::detail::kernel_set();
    for (const KernelSet set : {KernelSet::native, KernelSet::avx2, KernelSet::reference}) {
        dtrain::detail::kernel_set() = set;
        INFO("kernel set " << dtrain::detail::kernel_set_name(set));
        CHECK(dtrain::detail::gemm_avx512_available() ==
              (set == KernelSet::native && dtrain::detail::cpu_has_avx512f()));
        CHECK(dtrain::detail::direct_conv_available() ==
              (set != KernelSet::reference && dtrain::detail::cpu_has_avx2_fma()));
    }
    dtrain::detail::kernel_set() = start;
}

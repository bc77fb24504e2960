// Gradient compression kernels, single process: fp16 encode / decode / sum (the scalar conversions against
// F16C), bf16 encode / decode / sum (the per-element WireFloat loops against the bulk loops), and top-k
// selection at ratio 0.01 (std::nth_element against the radix select), on n = 1.72 M values (about the
// Fashion-MNIST CNN's gradient) and 535818 (the MLP 784-512-256-10's). The variants of one kernel run
// interleaved, one call each per repetition, so they see the same machine noise; per variant the median of
// the repetitions in ns per element and GB/s (bytes read plus written), and the ratio to the kernel's first
// (old) variant.
//
//   ./build/benchmarks/compression/bench_compression [--reps 21]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <dtrain/comm/half.hpp>
#include <dtrain/comm/reduce_op.hpp>
#include <dtrain/core/rng.hpp>
#include <dtrain/distributed/compression.hpp>
#include <support/stats.hpp>

namespace {

using dtrain::bench::median;

namespace d = dtrain::detail;
using dtrain::BFloat16;
using dtrain::Half;

/// One way of running a kernel: its name, bytes moved per element and the call.
struct Variant {
    std::string kernel, name;
    double bytes_per_element;
    std::function<void()> run;
    std::vector<double> seconds = {};
};

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
    return "unknown";
}

/// w[i] = W(g[i]) for i < n: the per-element conversion the compressor used before the bulk ones.
template <class W>
void encode_each(const float* g, W* w, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
        w[i] = W(g[i]);
}

/// out[i] = float(w[i]) for i < n (see encode_each).
template <class W>
void decode_each(const W* w, float* out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
        out[i] = float(w[i]);
}

void bench(std::size_t n, int reps) {
    dtrain::Rng rng(7);
    std::vector<float> grad(n), out(n);
    for (float& g : grad)  // gradient-like: both signs over many binary orders of magnitude
        g = float(rng.uniform(-1.0, 1.0) * std::ldexp(1.0, -int(rng.below(16))));
    std::vector<std::uint16_t> h(n), h2(n), acc(n);
    std::vector<Half> wh(n), wh2(n);
    std::vector<BFloat16> wb(n), wb2(n);
    d::halves_from_floats(grad.data(), h.data(), n);
    d::bfloat16s_from_floats(grad.data(), h2.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
        wh[i] = wh2[i] = Half::from_bits(h[i]);
        wb[i] = wb2[i] = BFloat16::from_bits(h2[i]);
    }
    const std::size_t k = dtrain::topk_count(n, 0.01);
    std::vector<std::uint32_t> idx(n), picked(k);
    d::TopKSelector<float> selector(n);
    const float* g = grad.data();
    // The sums add the same array into `acc` again and again: values drift, but every path sees the same.
    std::vector<Variant> v = {
        {"fp16 encode", "scalar (old)", 6, [&] { encode_each(g, wh.data(), n); }},
        {"fp16 encode", "halves_from_floats_scalar", 6,
         [&] { d::halves_from_floats_scalar(g, h.data(), n); }},
        {"fp16 encode", "halves_from_floats (F16C)", 6, [&] { d::halves_from_floats(g, h.data(), n); }},
        {"fp16 decode", "scalar (old)", 6, [&] { decode_each(wh.data(), out.data(), n); }},
        {"fp16 decode", "floats_from_halves_scalar", 6,
         [&] { d::floats_from_halves_scalar(h.data(), out.data(), n); }},
        {"fp16 decode", "floats_from_halves (F16C)", 6,
         [&] { d::floats_from_halves(h.data(), out.data(), n); }},
        {"fp16 sum", "combine_into<Half> (old)", 6,
         [&] { d::combine_into<Half, d::Plus>(wh2.data(), wh.data(), n, d::Plus{}); }},
        {"fp16 sum", "add_halves_scalar", 6, [&] { d::add_halves_scalar(acc.data(), h.data(), n); }},
        {"fp16 sum", "add_halves (F16C)", 6, [&] { d::add_halves(acc.data(), h.data(), n); }},
        {"bf16 encode", "per element (old)", 6, [&] { encode_each(g, wb.data(), n); }},
        {"bf16 encode", "bfloat16s_from_floats", 6, [&] { d::bfloat16s_from_floats(g, h2.data(), n); }},
        {"bf16 decode", "per element (old)", 6, [&] { decode_each(wb.data(), out.data(), n); }},
        {"bf16 decode", "floats_from_bfloat16s", 6,
         [&] { d::floats_from_bfloat16s(h2.data(), out.data(), n); }},
        {"bf16 sum", "combine_into<BFloat16> (old)", 6,
         [&] { d::combine_into<BFloat16, d::Plus>(wb2.data(), wb.data(), n, d::Plus{}); }},
        {"bf16 sum", "add_bfloat16s", 6, [&] { d::add_bfloat16s(acc.data(), h2.data(), n); }},
        {"top-k 0.01", "nth_element (old)", 4, [&] { d::top_k_by_nth_element(g, n, k, idx.data()); }},
        {"top-k 0.01", "TopKSelector (radix)", 4, [&] { selector.select(g, n, k, picked.data()); }},
    };
    for (int r = 0; r < reps + 1; ++r)  // the first round warms up and is not counted
        for (Variant& x : v) {
            const auto t0 = std::chrono::steady_clock::now();
            x.run();
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (r > 0) x.seconds.push_back(s);
        }
    if (!std::equal(picked.begin(), picked.end(), idx.begin())) std::printf("top-k selections differ!\n");
    std::printf("\nn = %zu (top-k k = %zu), median of %d\n", n, k, reps);
    std::printf("%-12s %-28s %10s %8s %8s\n", "kernel", "variant", "ns/elem", "GB/s", "vs old");
    double base = 0.0;
    std::string kernel;
    for (const Variant& x : v) {
        const double s = median(x.seconds);
        if (x.kernel != kernel) base = s, kernel = x.kernel;
        std::printf("%-12s %-28s %10.3f %8.2f %7.2fx\n", x.kernel.c_str(), x.name.c_str(),
                    s / double(n) * 1e9, x.bytes_per_element * double(n) / s * 1e-9, base / s);
    }
}

}  // namespace

int main(int argc, char** argv) {
    int reps = 21;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = std::atoi(argv[++i]);
        } else {
            std::fprintf(stderr, "usage: bench_compression [--reps N]\n");
            return 2;
        }
    }
    std::printf("CPU: %s; F16C path: %s\n", cpu_model().c_str(),
#ifdef DTRAIN_HAS_F16C_PATH
                d::cpu_has_f16c() ? "yes" : "no (scalar)"
#else
                "not compiled"
#endif
    );
    for (std::size_t n :
         {std::size_t(1720000), std::size_t(784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10)})
        bench(n, std::max(reps, 1));
}

// Threads within a rank (nn/kernels/compute_threads.hpp): the pool runs every part once and passes on an
// exception; Conv2d and Dense split over 2 and 3 threads compute bitwise what they compute on one, for
// every native algorithm (direct, direct with BLAS weight gradient, AVX-512 GEMM, implicit GEMM with the
// input gradient as a convolution and as a scatter) and batches that do not divide evenly.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <dtrain/nn/kernels/compute_threads.hpp>
#include <dtrain/nn/layers/conv2d.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/flatten.hpp>
#include <dtrain/nn/model.hpp>

#include "nn/gradcheck.hpp"
#include "nn/layers/conv_reference.hpp"

using dtrain::Model;
using dtrain::Rng;
using dtrain::Tensor;
using dtrain::test::ConvCase;

namespace {

// Sets compute_threads() for a scope and restores it.
struct ScopedThreads {
    int saved = dtrain::compute_threads();
    explicit ScopedThreads(int t) { dtrain::compute_threads() = t; }
    ~ScopedThreads() { dtrain::compute_threads() = saved; }
};

// Output, input gradient and parameter gradients of one step of `m` on x with output gradient gy.
std::vector<float> step_results(Model<float>& m, const Tensor<float>& x, const Tensor<float>& gy) {
    m.zero_grad();
    const Tensor<float>& y = m.forward(x);
    std::vector<float> r(y.begin(), y.end());
    const Tensor<float>& dx = m.backward(gy, true);
    r.insert(r.end(), dx.begin(), dx.end());
    const auto g = m.gradients();
    r.insert(r.end(), g.begin(), g.end());
    return r;
}

}  // namespace

TEST_CASE(
    "ComputePool runs every part once, on at most compute_threads() threads, and passes on an exception",
    "[nn][kernels][threads]") {
    auto& pool = dtrain::detail::ComputePool::get();
    ScopedThreads three(3);
    for (const std::size_t n : {std::size_t(1), std::size_t(2), std::size_t(5), std::size_t(3)}) {
        std::vector<std::atomic<int>> hits(n);
        std::mutex m;
        std::set<std::thread::id> ids;
        for (int round = 0; round < 20; ++round)
            pool.run(n, [&](std::size_t i) {
                ++hits[i];
                std::lock_guard<std::mutex> lock(m);
                ids.insert(std::this_thread::get_id());
            });
        for (std::size_t i = 0; i < n; ++i)
            CHECK(hits[i] == 20);
        CHECK(ids.size() <= std::min<std::size_t>(n, 3));
    }
    {  // while the caller is busy with part 0, the workers take the others
        std::set<std::thread::id> ids;
        std::mutex m;
        pool.run(5, [&](std::size_t i) {
            if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
            std::lock_guard<std::mutex> lock(m);
            ids.insert(std::this_thread::get_id());
        });
        CHECK(ids.size() >= 2);
    }
    {  // one thread: every part on the caller
        ScopedThreads one(1);
        std::set<std::thread::id> ids;
        pool.run(4, [&](std::size_t) { ids.insert(std::this_thread::get_id()); });
        CHECK(ids == std::set<std::thread::id>{std::this_thread::get_id()});
    }
    CHECK_THROWS_WITH(pool.run(3,
                               [](std::size_t i) {
                                   if (i == 2) throw std::runtime_error("part 2 failed");
                               }),
                      "part 2 failed");
    std::atomic<int> after{0};
    pool.run(3, [&](std::size_t) { ++after; });  // still usable
    CHECK(after == 3);
    CHECK(dtrain::detail::batch_chunks(7, 3) == std::vector<std::size_t>{0, 3, 5, 7});
}

TEST_CASE("Conv2d and Dense on 2 and 3 threads: bitwise the one-thread results", "[nn][kernels][threads]") {
    const ConvCase cases[] = {
        {1, 20, 28, 28, {5, 5}, {1, 1}, {0, 0}},   // direct
        {20, 50, 12, 12, {5, 5}, {1, 1}, {0, 0}},  // AVX-512 GEMM, or direct with a BLAS weight gradient
        {16, 32, 8, 8, {3, 3}, {2, 2}, {1, 1}},    // implicit GEMM, input gradient scattered
        {32, 17, 4, 4, {3, 3}, {1, 1}, {1, 1}},    // implicit GEMM, input gradient as a convolution
    };
    for (const ConvCase& cc : cases)
        for (const std::size_t n : {std::size_t(7), std::size_t(64)}) {
            Rng rng(n + cc.c);
            Model<float> m({cc.c, cc.h, cc.w}, 3);
            m.add(dtrain::Conv2d<float>(cc.c, cc.o, cc.k, cc.s, cc.p)).add(dtrain::Flatten<float>());
            const auto out = m.output_shape();
            m.add(dtrain::Dense<float>(out[0], 50)).add(dtrain::Dense<float>(50, 10));
            const Tensor<float> x = dtrain::test::random_tensor<float>({n, cc.c, cc.h, cc.w}, rng);
            const Tensor<float> gy = dtrain::test::random_tensor<float>({n, 10}, rng);
            std::vector<float> one;
            {
                ScopedThreads t(1);
                one = step_results(m, x, gy);
            }
            for (const int threads : {2, 3}) {
                ScopedThreads t(threads);
                INFO(threads << " threads, batch " << n << ": " << m.summary());
                const std::vector<float> many = step_results(m, x, gy);
                CHECK(std::equal(one.begin(), one.end(), many.begin(), many.end()));
            }
        }
}

TEST_CASE("Dense's weight gradient reported in parts on 3 threads: bitwise the one-thread results",
          "[nn][kernels][threads]") {
    Rng rng(5);
    Model<float> m({64}, 3);
    m.add(dtrain::Dense<float>(64, 100)).add(dtrain::Dense<float>(100, 37));
    std::size_t reports = 0;
    m.set_partial_grad_hook([&](std::size_t, std::size_t, std::size_t) { ++reports; },
                            64 * 40);  // parts of 40 rows
    const Tensor<float> x = dtrain::test::random_tensor<float>({9, 64}, rng);
    const Tensor<float> gy = dtrain::test::random_tensor<float>({9, 37}, rng);
    std::vector<float> one;
    {
        ScopedThreads t(1);
        one = step_results(m, x, gy);
    }
    const std::size_t reports_one = reports;
    CHECK(reports_one > 3);  // the first Dense's 100 rows came in parts
    ScopedThreads t(3);
    const std::vector<float> many = step_results(m, x, gy);
    CHECK(reports == 2 * reports_one);
    CHECK(std::equal(one.begin(), one.end(), many.begin(), many.end()));
}

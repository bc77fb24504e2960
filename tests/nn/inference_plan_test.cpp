// Model::infer() (nn/inference_plan.hpp): bitwise the outputs of forward() in eval mode, for models whose
// runs of Dense layers it fuses and for those it runs layer by layer; what it leaves for backward().

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <vector>

#include <dtrain/nn/kernels/compute_threads.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/conv2d.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/dropout.hpp>
#include <dtrain/nn/layers/flatten.hpp>
#include <dtrain/nn/layers/pool2d.hpp>
#include <dtrain/nn/model.hpp>
#include <dtrain/nn/predict.hpp>

#include "support/test_utils.hpp"

using dtrain::Model;
using dtrain::Tensor;

namespace {

// Bitwise equality of two tensors of the same shape (NaN equal to itself).
template <class T>
bool same_bits(const Tensor<T>& a, const Tensor<T>& b) {
    return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), sizeof(T) * a.size()) == 0;
}

// forward() in eval mode and infer() on the same batch of n samples, bitwise; the model is left in training
// mode, which infer() must not need.
template <class T>
void check_infer_equals_forward(Model<T>& model, std::size_t n, dtrain::Rng& rng) {
    dtrain::Shape shape{n};
    shape.insert(shape.end(), model.input_shape().begin(), model.input_shape().end());
    const Tensor<T> x = dtrain::test::random_tensor<T>(shape, rng);
    model.eval();
    const Tensor<T> expected = model.forward(x);
    model.train();
    const Tensor<T>& got = model.infer(x);
    CHECK(same_bits(got, expected));
    CHECK(model.training());
}

// The MLP of the benchmarks, narrower, with widths that leave partial register tiles and vectors.
Model<float> mlp(std::size_t in, std::size_t h1, std::size_t h2, std::size_t out) {
    Model<float> m({in}, 5);
    m.add(dtrain::Dense<float>(in, h1)).add(dtrain::ReLU<float>());
    m.add(dtrain::Dense<float>(h1, h2)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(h2, out));
    return m;
}

// Dense runs GemmDense (its AVX-512 or its AVX2 GEMM) on one thread.
bool fuses() {
    return dtrain::kernel_cpu().avx2_fma && dtrain::compute_threads() == 1;
}

}  // namespace

TEST_CASE("Model::infer: bitwise forward() in eval mode, with and without fused Dense runs", "[nn][model]") {
    dtrain::Rng rng(29);
    SECTION("an MLP: one run over all its layers where Dense runs the AVX-512 or the AVX2 GEMM") {
        Model<float> m = mlp(37, 50, 33, 10);
        using Plan = dtrain::detail::InferencePlan<float>;
        dtrain::Sequential<float> seq("test");  // the model's layers (Model keeps its Sequential private)
        seq.add(std::make_unique<dtrain::Dense<float>>(37, 50));
        seq.add(std::make_unique<dtrain::ReLU<float>>());
        seq.add(std::make_unique<dtrain::Dense<float>>(50, 33));
        seq.add(std::make_unique<dtrain::ReLU<float>>());
        seq.add(std::make_unique<dtrain::Dense<float>>(33, 10));
        CHECK(Plan::dense_run_end(seq, 0, 64) == (fuses() ? 5 : 0));
        CHECK(Plan::dense_run_end(seq, 4, 64) == 4);  // a lone Dense: not fused
        for (std::size_t n : {1, 7, 64, 65})
            check_infer_equals_forward(m, n, rng);
    }
    SECTION("NaN through the bias and ReLU as the layers pass it") {
        Model<float> m = mlp(20, 17, 16, 3);
        auto& w0 = dynamic_cast<dtrain::Dense<float>&>(m.layer(0));
        w0.weight()(0, 3) =
            std::numeric_limits<float>::quiet_NaN();  // feature 0 of layer 0: NaN, ReLU keeps it
        check_infer_equals_forward(m, 9, rng);
    }
    SECTION("Dense runs without ReLU, a Dense last after ReLU, behind Flatten, around other layers") {
        Model<float> m({2, 6, 6}, 3);
        m.add(dtrain::Conv2d<float>(2, 3, 3)).add(dtrain::MaxPool2d<float>(2)).add(dtrain::Flatten<float>());
        m.add(dtrain::Dense<float>(12, 20)).add(dtrain::Dense<float>(20, 9)).add(dtrain::ReLU<float>());
        m.add(dtrain::Dropout<float>(0.5, 1)).add(dtrain::Dense<float>(9, 4)).add(dtrain::Sigmoid<float>());
        for (std::size_t n : {1, 16, 33})
            check_infer_equals_forward(m, n, rng);
    }
    SECTION(
        "ReLU + MaxPool2d pairs (one pass where the AVX-512 windows apply), back to back, and other pools") {
        // A pair right before the Dense (a later max would hide a pair's missing ReLU from the outputs), and
        // two pairs back to back, the second reading the first's output, then a pool that is not fused.
        Model<float> m({3, 21, 34}, 6);
        m.add(dtrain::Conv2d<float>(3, 4, 3)).add(dtrain::ReLU<float>()).add(dtrain::MaxPool2d<float>(2));
        m.add(dtrain::Flatten<float>()).add(dtrain::Dense<float>(576, 5));
        Model<float> m2({3, 21, 34}, 7);
        m2.add(dtrain::Conv2d<float>(3, 4, 3)).add(dtrain::ReLU<float>()).add(dtrain::MaxPool2d<float>(2));
        m2.add(dtrain::ReLU<float>()).add(dtrain::MaxPool2d<float>(2)).add(dtrain::MaxPool2d<float>(2, 1));
        m2.add(dtrain::Flatten<float>()).add(dtrain::Dense<float>(84, 5));
        using Plan = dtrain::detail::InferencePlan<float>;
        dtrain::Sequential<float> seq("test");
        seq.add(std::make_unique<dtrain::ReLU<float>>());
        seq.add(std::make_unique<dtrain::MaxPool2d<float>>(2));
        seq.add(std::make_unique<dtrain::MaxPool2d<float>>(2));
        seq.add(std::make_unique<dtrain::ReLU<float>>());
        seq.add(std::make_unique<dtrain::MaxPool2d<float>>(3, 2));
        CHECK((Plan::pool_after_relu(seq, 0) != nullptr) == dtrain::detail::max_pool_avx512_available());
        CHECK(Plan::pool_after_relu(seq, 1) == nullptr);  // not after a ReLU
        CHECK(Plan::pool_after_relu(seq, 3) == nullptr);  // 3 x 3 windows
        for (std::size_t n : {1, 5, 64}) {
            check_infer_equals_forward(m, n, rng);
            check_infer_equals_forward(m2, n, rng);
            Tensor<float> x = dtrain::test::random_tensor<float>({n, 3, 21, 34}, rng);
            x.data()[7] = std::numeric_limits<float>::quiet_NaN();
            m.eval();
            const Tensor<float> expected = m.forward(x);
            CHECK(same_bits(m.infer(x), expected));
            m.train();
        }
    }
    SECTION("the layer-by-layer path: double, and more than one compute thread") {
        Model<double> md({12}, 4);
        md.add(dtrain::Dense<double>(12, 8)).add(dtrain::ReLU<double>()).add(dtrain::Dense<double>(8, 2));
        check_infer_equals_forward(md, 5, rng);
        Model<float> m = mlp(40, 24, 18, 5);
        const int threads = dtrain::compute_threads();
        dtrain::compute_threads() = 2;
        check_infer_equals_forward(m, 64, rng);
        dtrain::compute_threads() = threads;
    }
}

TEST_CASE("Model::infer keeps nothing for backward(); predict() leaves the model's mode", "[nn][model]") {
    dtrain::Rng rng(31);
    Model<float> m = mlp(8, 6, 5, 3);
    const Tensor<float> x = dtrain::test::random_tensor<float>({4, 8}, rng);
    Tensor<float> g = dtrain::test::random_tensor<float>({4, 3}, rng);
    m.forward(x);
    m.infer(x);
    CHECK_THROWS_WITH(m.backward(g), Catch::Contains("call forward() first (infer() keeps nothing for it)"));
    m.forward(x);
    CHECK_NOTHROW(m.backward(g));
    CHECK_THROWS_WITH(m.infer(dtrain::test::random_tensor<float>({4, 7}, rng)),
                      Catch::Contains("Model::infer"));
    m.eval();
    const Tensor<float> y = dtrain::predict(m, x, 4);
    CHECK_FALSE(m.training());
    CHECK(same_bits(y, m.forward(x)));
}

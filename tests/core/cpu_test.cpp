#include <catch2/catch.hpp>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include <dtrain/core/cpu.hpp>
#include <dtrain/nn/losses/cross_entropy.hpp>
#include <dtrain/nn/zoo.hpp>
#include <dtrain/optim/adam.hpp>
#include <dtrain/optim/sgd.hpp>

using dtrain::Model;
using dtrain::Tensor;

namespace {

// Everything a training run leaves behind, as bytes: parameters, gradients, BatchNorm statistics, the
// optimizer's state and the last forward's output.
struct RunResult {
    std::vector<float> params, grads, state, opt_state, output;
};

// Three steps of `opt` on `m` (random data of `shape`, labels 0..9) and one forward in eval mode, with
// with_avx2's dispatch on or off.
template <class Opt>
RunResult train(Model<float> m, Opt opt, const dtrain::Shape& shape, bool dispatch) {
    dtrain::detail::avx2_dispatch_enabled() = dispatch;
    dtrain::Rng rng(41);
    Tensor<float> x = Tensor<float>::from_shape(shape);
    for (auto& v : x)
        v = float(rng.uniform(-1, 1));
    dtrain::Labels y = dtrain::Labels::from_shape({shape[0]});
    for (std::size_t i = 0; i < y.size(); ++i)
        y[i] = int(i % 10);
    dtrain::SoftmaxCrossEntropy<float> ce;
    Tensor<float> g;
    for (int step = 0; step < 3; ++step) {
        m.zero_grad();
        ce.compute(m.forward(x), y, g);
        m.backward(g);
        opt.step(m.parameters(), m.gradients());
    }
    m.eval();
    const Tensor<float>& out = m.forward(x);
    dtrain::detail::avx2_dispatch_enabled() = true;
    const auto vec = [](auto s) { return std::vector<float>(s.begin(), s.end()); };
    return {vec(m.parameters()), vec(m.gradients()), vec(m.state()), vec(opt.state()),
            std::vector<float>(out.begin(), out.end())};
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
    // (an empty vector's data() may be null, which memcmp must not get even for 0 bytes)
    return a.size() == b.size() &&
           (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace

TEST_CASE("with_avx2 runs its function once, whichever code it picks", "[core][cpu]") {
    for (bool dispatch : {true, false}) {
        dtrain::detail::avx2_dispatch_enabled() = dispatch;
        int calls = 0;
        std::vector<float> v(37, 1.5f);
        dtrain::detail::with_avx2([&] {
            ++calls;
            for (auto& x : v)
                x = x * 2.0f + 1.0f;
        });
        CHECK(calls == 1);
        CHECK(v[0] == 4.0f);
        CHECK(v[36] == 4.0f);
    }
    dtrain::detail::avx2_dispatch_enabled() = true;
}

TEST_CASE("with_avx2 changes no result: training with and without its AVX2 code is bitwise the same",
          "[core][cpu]") {
    // The SINGA CNN (direct convolutions, ReLU, max pooling, Dense), the Needle ResNet9 (implicit-GEMM
    // convolutions, BatchNorm, residual additions) and the MLP, with SGD (momentum, Nesterov, weight decay)
    // and Adam: every element-wise pass runs through with_avx2, the convolution kernels are the same
    // either way. On a CPU without AVX2 both runs take the baseline code (the test still checks that).
    INFO("cpu has AVX2 and FMA: " << dtrain::detail::cpu_has_avx2_fma());
    const auto sgd = [] {
        return dtrain::SGD<float>(
            dtrain::SGDOptions().lr(0.05).momentum(0.9).nesterov(true).weight_decay(1e-3));
    };
    const auto adam = [] { return dtrain::Adam<float>(dtrain::AdamOptions().lr(0.01).weight_decay(1e-3)); };
    struct Case {
        std::string name;
        Model<float> model;
        dtrain::Shape shape;
    };
    std::vector<Case> cases;
    cases.push_back({"singa_cnn", dtrain::zoo::singa_cnn<float>(3), {6, 1, 28, 28}});
    cases.push_back({"resnet9", dtrain::zoo::resnet9<float>(3), {6, 3, 32, 32}});
    cases.push_back({"mlp", dtrain::zoo::mlp<float>({784, 64, 10}, 3), {6, 784}});
    for (const auto& c : cases) {
        INFO(c.name);
        const RunResult a = train(c.model, sgd(), c.shape, true), b = train(c.model, sgd(), c.shape, false);
        CHECK(bitwise_equal(a.params, b.params));
        CHECK(bitwise_equal(a.grads, b.grads));
        CHECK(bitwise_equal(a.state, b.state));
        CHECK(bitwise_equal(a.opt_state, b.opt_state));
        CHECK(bitwise_equal(a.output, b.output));
        const RunResult p = train(c.model, adam(), c.shape, true), q = train(c.model, adam(), c.shape, false);
        CHECK(bitwise_equal(p.params, q.params));
        CHECK(bitwise_equal(p.opt_state, q.opt_state));
        // The runs changed the model (a comparison of two untouched models would prove nothing).
        CHECK_FALSE(bitwise_equal(
            a.params, std::vector<float>(c.model.parameters().begin(), c.model.parameters().end())));
    }
}

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <dtrain/nn/init.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/batchnorm.hpp>
#include <dtrain/nn/layers/conv2d.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/dropout.hpp>
#include <dtrain/nn/layers/flatten.hpp>
#include <dtrain/nn/layers/pool2d.hpp>
#include <dtrain/nn/losses/cross_entropy.hpp>
#include <dtrain/nn/model.hpp>

#include "nn/gradcheck.hpp"

using dtrain::Labels;
using dtrain::Model;
using dtrain::Rng;
using dtrain::Tensor;
using dtrain::test::contains;
using dtrain::test::error_message;
using dtrain::test::params_of;
using dtrain::test::random_tensor;

namespace {

// The SINGA MNIST CNN.
template <class T>
Model<T> singa_cnn(std::uint64_t seed) {
    Model<T> m({1, 28, 28}, seed);
    m.add(dtrain::Conv2d<T>(1, 20, 5))
        .add(dtrain::ReLU<T>())
        .add(dtrain::MaxPool2d<T>(2))
        .add(dtrain::Conv2d<T>(20, 50, 5))
        .add(dtrain::ReLU<T>())
        .add(dtrain::MaxPool2d<T>(2))
        .add(dtrain::Flatten<T>())
        .add(dtrain::Dense<T>(800, 500))
        .add(dtrain::ReLU<T>())
        .add(dtrain::Dense<T>(500, 10));
    return m;
}

// A small model exercising every kind of layer, including state and dropout.
Model<double> mixed_model(std::uint64_t seed) {
    Model<double> m({2, 6, 6}, seed);
    m.add(dtrain::Conv2d<double>(2, 4, 3, 1, 1))
        .add(dtrain::BatchNorm2d<double>(4))
        .add(dtrain::ReLU<double>())
        .add(dtrain::AvgPool2d<double>(2))
        .add(dtrain::Flatten<double>())
        .add(dtrain::Dropout<double>(0.25, 11))
        .add(dtrain::Dense<double>(36, 8))
        .add(dtrain::BatchNorm1d<double>(8))
        .add(dtrain::Tanh<double>())
        .add(dtrain::Dense<double>(8, 3));
    return m;
}

// Plain SGD: p -= lr * g over the flat buffers.
template <class T>
void sgd_steps(Model<T>& m, const Tensor<T>& x, const Labels& y, int steps, T lr) {
    dtrain::SoftmaxCrossEntropy<T> ce;
    Tensor<T> g;
    for (int s = 0; s < steps; ++s) {
        m.zero_grad();
        ce.compute(m.forward(x), y, g);
        m.backward(g);
        auto p = m.parameters();
        auto gr = m.gradients();
        for (std::size_t i = 0; i < p.size(); ++i)
            p[i] -= lr * gr[i];
    }
}

}  // namespace

TEST_CASE("Model: shapes propagate and summary() lists layers, shapes and parameter counts", "[nn][model]") {
    const Model<float> m = singa_cnn<float>(1);
    REQUIRE(m.num_layers() == 10);
    const std::vector<dtrain::Shape> expected = {{20, 24, 24}, {20, 24, 24}, {20, 12, 12}, {50, 8, 8},
                                                 {50, 8, 8},   {50, 4, 4},   {800},        {500},
                                                 {500},        {10}};
    for (std::size_t i = 0; i < expected.size(); ++i)
        CHECK(m.layer_output_shape(i) == expected[i]);
    const std::size_t total = (20 * 25 + 20) + (50 * 20 * 25 + 50) + (800 * 500 + 500) + (500 * 10 + 10);
    CHECK(m.num_parameters() == total);
    CHECK(m.parameter_ranges()[3].offset == 20 * 25 + 20);
    CHECK(m.parameter_ranges()[3].size == 50 * 20 * 25 + 50);
    const std::string s = m.summary();
    CHECK(contains(s, "Conv2d(1, 20, kernel=5)"));
    CHECK(contains(s, "Conv2d(20, 50, kernel=5)"));
    CHECK(contains(s, "MaxPool2d(kernel=2, stride=2)"));
    CHECK(contains(s, "Flatten"));
    CHECK(contains(s, "Dense(800, 500)"));
    CHECK(contains(s, "[batch, 1, 28, 28]"));
    CHECK(contains(s, "[batch, 20, 24, 24]"));
    CHECK(contains(s, "[batch, 50, 4, 4]"));
    CHECK(contains(s, "[batch, 800]"));
    CHECK(contains(s, std::to_string(50 * 20 * 25 + 50)));
    CHECK(contains(s, "Total parameters: " + std::to_string(total)));
    CHECK(contains(s, "non-trainable state: 0"));
    // The kernels each layer runs: they follow the CPU and DTRAIN_KERNELS (detail::kernel_set()).
    CHECK(contains(s, "Kernels of Conv2d(1, 20, kernel=5): "));
    CHECK(contains(s, "Kernels of Dense(800, 500): "));
    CHECK_FALSE(contains(s, "Kernels of Flatten"));
    if (dtrain::detail::kernel_set() == dtrain::detail::KernelSet::reference) {
        CHECK(contains(s, "Kernels of Conv2d(20, 50, kernel=5): im2col + BLAS\n"));
        CHECK(contains(s, "Kernels of Dense(800, 500): BLAS\n"));
    } else if (dtrain::detail::kernel_set() == dtrain::detail::KernelSet::onednn) {
        CHECK(contains(s, "Kernels of Conv2d(20, 50, kernel=5): oneDNN\n"));
        CHECK(contains(s, "Kernels of Dense(800, 500): oneDNN\n"));
    } else if (dtrain::detail::cpu_has_avx2_fma()) {
        CHECK(contains(s, "Kernels of Conv2d(1, 20, kernel=5): direct (AVX2)\n"));
    }
    const Model<double> mm = mixed_model(1);
    CHECK(contains(mm.summary(), "non-trainable state: " + std::to_string(2 * 4 + 2 * 8)));
    CHECK(contains(mm.summary(), "BatchNorm2d(4)"));
    CHECK(contains(mm.summary(), "Dropout(0.25)"));
}

TEST_CASE("Model: summary() sizes its columns so that long names and shapes stay two spaces apart",
          "[nn][model]") {
    Model<float> m({1000000, 1000, 1}, 1);  // shapes only: summary() runs no data
    m.add(dtrain::ReLU<float>());
    Model<float> cnn({1, 28, 28}, 1);
    cnn.add(dtrain::Conv2d<float>(1, 16, 3, 1, 1))
        .add(dtrain::MaxPool2d<float>(2))
        .add(dtrain::Flatten<float>());
    cnn.add(dtrain::Dense<float>(16 * 14 * 14, 10));
    for (const std::string& s : {m.summary(), cnn.summary()}) {
        INFO(s);
        std::vector<std::string> lines;
        std::istringstream in(s);
        for (std::string line; std::getline(in, line);)
            lines.push_back(line);
        REQUIRE(lines.size() >= 5);
        const std::string& header = lines[0];
        const std::size_t shape_col = header.find("Output shape");
        CHECK(lines[1] == std::string(header.size(), '-'));
        std::size_t rule = 2;  // the line of '=' under the last layer; the totals and kernels follow
        while (rule < lines.size() && lines[rule].compare(0, 1, "=") != 0)
            ++rule;
        REQUIRE(rule + 1 < lines.size());
        CHECK(lines[rule] == std::string(header.size(), '='));
        CHECK(lines[rule + 1].compare(0, 17, "Total parameters:") == 0);
        // Every row: name, at least two spaces, the shape at the header's column, at least two spaces, the
        // parameter count ending where the header ends.
        for (std::size_t k = 2; k < rule; ++k) {
            const std::string& row = lines[k];
            INFO(row);
            CHECK(row.size() == header.size());
            CHECK(row.compare(shape_col - 2, 3, "  [") == 0);
            const std::size_t shape_end = row.find(']', shape_col);
            REQUIRE(shape_end != std::string::npos);
            CHECK(row.compare(shape_end + 1, 2, "  ") == 0);
            CHECK(row.back() != ' ');
        }
    }
    CHECK(contains(cnn.summary(), "Conv2d(1, 16, kernel=3, padding=1)  "));
    CHECK(contains(m.summary(), "[batch, 1000000, 1000, 1]  "));
}

TEST_CASE("Model: a full forward/backward pass of the SINGA CNN has the right shapes", "[nn][model]") {
    Model<float> m = singa_cnn<float>(2);
    Rng rng(1);
    const Tensor<float> x = random_tensor<float>({3, 1, 28, 28}, rng, 0, 1);
    const Tensor<float>& y = m.forward(x);
    CHECK(y.shape() == std::vector<std::size_t>{3, 10});
    const Tensor<float>& dx = m.backward(random_tensor<float>({3, 10}, rng), true);
    CHECK(dx.shape() == x.shape());
    double gsum = 0;
    for (auto v : m.gradients())
        gsum += std::abs(v);
    CHECK(gsum > 0);
}

// The kernels' 64-byte loads stay within cache lines only where the buffers start on 64 bytes; with
// std::allocator a step's speed depended on where glibc happened to put each buffer.
TEST_CASE("Model: parameters, gradients, state, outputs and input gradients start on 64 bytes",
          "[nn][model]") {
    const auto on_64 = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; };
    Model<float> m({2, 6, 6}, 3);
    m.add(dtrain::Conv2d<float>(2, 4, 3, 1, 1))
        .add(dtrain::BatchNorm2d<float>(4))
        .add(dtrain::ReLU<float>())
        .add(dtrain::Flatten<float>())
        .add(dtrain::Dense<float>(144, 20));
    CHECK(on_64(m.parameters().data()));
    CHECK(on_64(m.gradients().data()));
    CHECK(on_64(m.state().data()));
    Rng rng(1);
    const Tensor<float> x = random_tensor<float>({5, 2, 6, 6}, rng);  // backward() reads it
    CHECK(on_64(m.forward(x).data()));
    CHECK(on_64(m.backward(random_tensor<float>({5, 20}, rng), true).data()));
    CHECK(on_64(m.infer(random_tensor<float>({3, 2, 6, 6}, rng)).data()));
    const Model<float> copy = m;
    CHECK(on_64(copy.parameters().data()));
}

TEST_CASE("Model: copy and move rebind the layers' views to the new buffers", "[nn][model][copy]") {
    Rng rng(3);
    const Tensor<double> x = random_tensor<double>({6, 2, 6, 6}, rng);
    const Labels y = {0, 1, 2, 0, 1, 2};
    Model<double> a = mixed_model(5);
    sgd_steps(a, x, y, 3, 0.05);
    const std::vector<double> a_params = params_of(a);
    const std::vector<double> a_state(a.state().begin(), a.state().end());
    a.eval();
    const Tensor<double> a_out = a.forward(x);
    a.train();

    Model<double> b(a);
    CHECK(b.parameters().data() != a.parameters().data());
    CHECK(b.state().data() != a.state().data());
    CHECK(params_of(b) == a_params);
    b.eval();
    CHECK(dtrain::test::max_rel_diff(b.forward(x), a_out) == 0.0);
    b.train();
    sgd_steps(b, x, y, 3, 0.05);
    CHECK(params_of(b) != a_params);
    CHECK(params_of(a) == a_params);
    CHECK(std::vector<double>(a.state().begin(), a.state().end()) == a_state);

    // Modifying the copy's parameters changes the copy's output only.
    a.eval();
    b.eval();
    const Tensor<double> b_out = b.forward(x);
    for (auto& v : b.parameters())
        v *= 1.5;
    CHECK(dtrain::test::max_rel_diff(b.forward(x), b_out) > 1e-6);
    CHECK(dtrain::test::max_rel_diff(a.forward(x), a_out) == 0.0);

    // Copy assignment.
    Model<double> c = mixed_model(9);
    c = a;
    c.eval();
    for (auto& v : c.parameters())
        v *= -1.0;
    CHECK(dtrain::test::max_rel_diff(a.forward(x), a_out) == 0.0);
    CHECK(dtrain::test::max_rel_diff(c.forward(x), a_out) > 1e-6);

    // Move construction and move assignment keep working views.
    Model<double> d(std::move(c));
    const Tensor<double> d_out = d.forward(x);
    d.parameters()[0] += 1.0;
    CHECK(dtrain::test::max_rel_diff(d.forward(x), d_out) > 1e-9);
    Model<double> e = mixed_model(1);
    e = std::move(d);
    e.eval();
    const Tensor<double> e_out = e.forward(x);
    e.parameters()[0] -= 1.0;
    CHECK(dtrain::test::max_rel_diff(e.forward(x), e_out) > 1e-9);
    CHECK(dtrain::test::max_rel_diff(a.forward(x), a_out) == 0.0);
}

TEST_CASE("Model: the same seed gives bitwise-identical parameters after training",
          "[nn][model][determinism]") {
    Rng rng(4);
    const Tensor<double> x = random_tensor<double>({6, 2, 6, 6}, rng);
    const Labels y = {2, 1, 0, 0, 1, 2};
    Model<double> a = mixed_model(21), b = mixed_model(21), c = mixed_model(22);
    CHECK(params_of(a) == params_of(b));
    CHECK(params_of(a) != params_of(c));
    sgd_steps(a, x, y, 5, 0.1);
    sgd_steps(b, x, y, 5, 0.1);
    CHECK(params_of(a) == params_of(b));
    CHECK(std::vector<double>(a.state().begin(), a.state().end()) ==
          std::vector<double>(b.state().begin(), b.state().end()));

    // Float CNN as well.
    Model<float> fa = singa_cnn<float>(7), fb = singa_cnn<float>(7);
    const Tensor<float> fx = random_tensor<float>({4, 1, 28, 28}, rng, 0, 1);
    const Labels fy = {1, 7, 3, 3};
    sgd_steps(fa, fx, fy, 2, 0.01f);
    sgd_steps(fb, fx, fy, 2, 0.01f);
    CHECK(params_of(fa) == params_of(fb));
}

TEST_CASE("Model: backward adds into the gradients and calls the hook last layer first", "[nn][model]") {
    Rng rng(5);
    Model<double> m({4}, 1);
    m.add(dtrain::Dense<double>(4, 5)).add(dtrain::Tanh<double>()).add(dtrain::Dense<double>(5, 2));
    const Tensor<double> x = random_tensor<double>({3, 4}, rng);
    const Tensor<double> g = random_tensor<double>({3, 2}, rng);
    std::vector<std::size_t> order;
    m.set_grad_ready_hook([&](std::size_t i) { order.push_back(i); });
    m.zero_grad();
    m.forward(x);
    m.backward(g);
    const std::vector<double> once(m.gradients().begin(), m.gradients().end());
    m.forward(x);
    m.backward(g);
    for (std::size_t i = 0; i < once.size(); ++i)
        CHECK(m.gradients()[i] == Approx(2 * once[i]));
    CHECK(order == std::vector<std::size_t>{2, 1, 0, 2, 1, 0});
    m.zero_grad();
    for (auto v : m.gradients())
        CHECK(v == 0.0);
}

// Gradients of one zero_grad(), forward(), backward() on `m`, starting from `stale` in the gradient buffer
// (what a previous step left there), with the partial-gradient hook in parts of `chunk` values (0: none).
template <class T>
std::vector<T> grads_after_zero_grad(Model<T> m, const Tensor<T>& x, const Tensor<T>& g, T stale,
                                     std::size_t chunk) {
    for (auto& v : m.gradients())
        v = stale;
    if (chunk > 0) m.set_partial_grad_hook([](std::size_t, std::size_t, std::size_t) {}, chunk);
    m.zero_grad();
    m.forward(x);
    m.backward(g);
    return {m.gradients().begin(), m.gradients().end()};
}

TEST_CASE("Model: zero_grad() is deferred to backward(), with bitwise the gradients of zeroing first",
          "[nn][model]") {
    // Dense (float and double, AVX-512 and BLAS paths, whole and in parts) writes its slice after
    // zero_grad(); Conv2d and BatchNorm do not, and have their slices zeroed by backward().
    Rng rng(8);
    auto check = [&](auto m, auto x, auto g) {
        using T = typename decltype(x)::value_type;
        // The reference: the buffer zeroed by hand, then backward() adding into it.
        Model<T> ref = m;
        for (auto& v : ref.gradients())
            v = T(0);
        ref.forward(x);
        ref.backward(g);
        const std::vector<T> want(ref.gradients().begin(), ref.gradients().end());
        for (const std::size_t chunk : {std::size_t(0), std::size_t(37)}) {
            for (const T stale : {T(1.5), std::numeric_limits<T>::quiet_NaN()}) {
                const std::vector<T> got = grads_after_zero_grad(m, x, g, stale, chunk);
                INFO("chunk " << chunk << " stale " << stale);
                CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(T)) == 0);
            }
        }
        // A second backward() adds to the first (to rounding: the sums continue from the first's values);
        // gradients() after zero_grad() reads zeros.
        Model<T> acc = m;
        acc.zero_grad();
        acc.forward(x);
        acc.backward(g);
        acc.forward(x);
        acc.backward(g);
        std::size_t far = 0;
        for (std::size_t i = 0; i < want.size(); ++i)
            far += std::abs(acc.gradients()[i] - 2 * want[i]) > T(1e-5) * (1 + std::abs(want[i]));
        CHECK(far == 0);
        std::size_t wrong = 0;
        acc.zero_grad();
        const Model<T> copy = acc;  // a copy keeps the deferred zeroing too
        for (auto v : acc.gradients())
            wrong += v != T(0);
        for (auto v : copy.gradients())
            wrong += v != T(0);
        CHECK(wrong == 0);
    };
    const dtrain::detail::KernelSet start = dtrain::detail::kernel_set();  // from DTRAIN_KERNELS
    for (const auto set : {start, dtrain::test::without_avx512(start)}) {
        dtrain::detail::kernel_set() = set;
        Model<float> f({2, 6, 6}, 3);
        f.add(dtrain::Conv2d<float>(2, 4, 3, 1, 1))
            .add(dtrain::BatchNorm2d<float>(4))
            .add(dtrain::ReLU<float>())
            .add(dtrain::Flatten<float>())
            .add(dtrain::Dense<float>(144, 20))
            .add(dtrain::ReLU<float>())
            .add(dtrain::Dense<float>(20, 3));
        f.train();
        check(f, random_tensor<float>({5, 2, 6, 6}, rng), random_tensor<float>({5, 3}, rng));
    }
    dtrain::detail::kernel_set() = start;
    Model<double> d = mixed_model(4);
    d.eval();  // no dropout masks: the same forward in each copy
    check(d, random_tensor<double>({4, 2, 6, 6}, rng), random_tensor<double>({4, 3}, rng));
}

TEST_CASE("Model: the partial-gradient hook gets Dense's gradient in parts, end of the slice first",
          "[nn][model]") {
    Rng rng(6);
    Model<double> m({7}, 1);
    m.add(dtrain::Dense<double>(7, 10)).add(dtrain::ReLU<double>()).add(dtrain::Dense<double>(10, 3));
    const Model<double> plain = m;
    const Tensor<double> x = random_tensor<double>({5, 7}, rng);
    const Tensor<double> g = random_tensor<double>({5, 3}, rng);
    struct Event {
        std::size_t layer, begin, end;  // end == 0: the grad-ready hook of `layer`
    };
    std::vector<Event> events;
    m.set_grad_ready_hook([&](std::size_t i) { events.push_back({i, 0, 0}); });
    m.set_partial_grad_hook(
        [&](std::size_t i, std::size_t b, std::size_t e) {
            events.push_back({i, b, e});
        },
        21);  // 21 values: Dense(7, 10) (80 values) in parts of 3 rows of 7
    m.zero_grad();
    m.forward(x);
    m.backward(g);
    // Dense(10, 3) has 33 values > 21: bias, then rows [0, 3) whole (3 rows of 10 > 21 -> 2 rows per part).
    std::vector<std::vector<std::size_t>> got;
    for (const auto& e : events)
        got.push_back({e.layer, e.begin, e.end});
    const std::vector<std::vector<std::size_t>> expected = {
        {2, 30, 33}, {2, 10, 30}, {2, 0, 10},  {2, 0, 0},  {1, 0, 0},              // Dense(10, 3), ReLU
        {0, 70, 80}, {0, 49, 70}, {0, 28, 49}, {0, 7, 28}, {0, 0, 7}, {0, 0, 0}};  // Dense(7, 10)
    CHECK(got == expected);
    // The same gradients as the whole computation (to rounding: the GEMM is split by rows).
    Model<double> ref = plain;
    ref.zero_grad();
    ref.forward(x);
    ref.backward(g);
    for (std::size_t i = 0; i < ref.gradients().size(); ++i)
        CHECK(m.gradients()[i] == Approx(ref.gradients()[i]).epsilon(1e-12));
    // Not copied with the model, and cleared by nullptr.
    Model<double> copy = m;
    events.clear();
    copy.forward(x);
    copy.backward(g);
    CHECK(events.empty());
    m.set_partial_grad_hook(nullptr, 0);
    m.forward(x);
    m.backward(g);
    CHECK(events.size() == 3);  // only the grad-ready hook, once per layer
    CHECK_THROWS_AS(m.set_partial_grad_hook([](std::size_t, std::size_t, std::size_t) {}, 0), dtrain::Error);
}

TEST_CASE("Model: errors name the component and the shapes", "[nn][model][errors]") {
    std::string msg = error_message([] {
        Model<float> m({4});
        Tensor<float> x = Tensor<float>::from_shape({2, 4});
        m.forward(x);
    });
    CHECK(contains(msg, "Model::forward"));
    CHECK(contains(msg, "no layers"));
    Model<float> m({4});
    m.add(dtrain::Dense<float>(4, 2));
    msg = error_message([&] { m.backward(Tensor<float>::from_shape({2, 2})); });
    CHECK(contains(msg, "forward"));
    msg = error_message([&] {
        Tensor<float> x = Tensor<float>::from_shape({2, 5});
        m.forward(x);
    });
    CHECK(contains(msg, "[batch, 4]"));
    CHECK(contains(msg, "[2, 5]"));
    Tensor<float> x = Tensor<float>::from_shape({2, 4});
    x.fill(1.0f);
    m.forward(x);
    msg = error_message([&] { m.backward(Tensor<float>::from_shape({2, 3})); });
    CHECK(contains(msg, "[2, 3]"));
    CHECK(contains(msg, "[2, 2]"));
    CHECK_THROWS_AS(Model<float>(dtrain::Shape{}), dtrain::Error);
    CHECK_THROWS_AS(Model<float>(dtrain::Shape{3, 0}), dtrain::Error);
    msg = error_message([&] { m.add(std::unique_ptr<dtrain::Layer<float>>()); });
    CHECK(contains(msg, "Model::add: null layer"));
    CHECK(m.num_layers() == 1);
    msg = error_message([&] { m.layer(1); });
    CHECK(contains(msg, "Model::layer: index 1 out of range (1 layers)"));
    CHECK_NOTHROW(m.layer(0));
}

TEST_CASE("init_weights: bounds and spread of the schemes", "[nn][init]") {
    Rng rng(6);
    std::vector<double> w(20000);
    dtrain::init_weights(w.data(), w.size(), dtrain::Init::GlorotUniform, 30, 20, rng);
    const double a = std::sqrt(6.0 / 50.0);
    double mx = 0, var = 0;
    for (double v : w)
        mx = std::max(mx, std::abs(v)), var += v * v;
    CHECK(mx <= a);
    CHECK(var / double(w.size()) == Approx(a * a / 3).epsilon(0.05));
    dtrain::init_weights(w.data(), w.size(), dtrain::Init::HeNormal, 50, 10, rng);
    var = 0;
    for (double v : w)
        var += v * v;
    CHECK(var / double(w.size()) == Approx(2.0 / 50).epsilon(0.05));
    CHECK_THROWS_AS(dtrain::init_weights(w.data(), w.size(), dtrain::Init::HeUniform, 0, 10, rng),
                    dtrain::Error);
}

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include <dtrain/nn/layer_fusion.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/batchnorm.hpp>
#include <dtrain/nn/layers/conv2d.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/detail/kernel_set.hpp>
#include <dtrain/nn/layers/flatten.hpp>
#include <dtrain/nn/layers/leaky_relu.hpp>
#include <dtrain/nn/layers/pool2d.hpp>
#include <dtrain/nn/layers/residual.hpp>
#include <dtrain/nn/model.hpp>
#include <dtrain/nn/sequential.hpp>

#include "support/test_utils.hpp"

using dtrain::BatchNorm;
using dtrain::BatchNorm1d;
using dtrain::BatchNorm2d;
using dtrain::Conv2d;
using dtrain::Dense;
using dtrain::Flatten;
using dtrain::Layer;
using dtrain::LeakyReLU;
using dtrain::MaxPool2d;
using dtrain::Model;
using dtrain::ReLU;
using dtrain::Residual;
using dtrain::Rng;
using dtrain::Sequential;
using dtrain::Tanh;
using dtrain::Tensor;
using dtrain::test::random_tensor;

namespace {

bool same_bits(const Tensor<float>& a, const Tensor<float>& b) {
    return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

// Random values with ties, signed zeros, NaN and infinities among them: the cases where ReLU's and max
// pooling's rules (NaN and -0.0 pass ReLU, NaN wins a window, the first maximum on ties) decide.
template <class S>
Tensor<float> awkward_tensor(const S& s, Rng& rng) {
    const std::vector<std::size_t> shape(s.begin(), s.end());
    Tensor<float> x = random_tensor<float>(shape, rng);
    for (auto& v : x) {
        const double u = rng.uniform();
        v = u < 0.03   ? std::numeric_limits<float>::quiet_NaN()
            : u < 0.06 ? std::numeric_limits<float>::infinity()
            : u < 0.09 ? -std::numeric_limits<float>::infinity()
            : u < 0.2  ? -0.0f
            : u < 0.3  ? 0.0f
            : u < 0.4  ? 0.5f
                       : v;
    }
    return x;
}

// Values of a few levels, signed zeros among them, on which a batch normalisation gives outputs of exactly
// 0 and -0.0 (beta 0, a centred channel), where ReLU's rules decide; one channel of `nan_channel` (if
// below C) holds a NaN, which makes its whole output NaN (ReLU passes NaN and its gradient).
template <class S>
Tensor<float> levels_tensor(const S& s, Rng& rng, std::size_t nan_channel) {
    const std::vector<std::size_t> shape(s.begin(), s.end());
    Tensor<float> x = random_tensor<float>(shape, rng);
    const float levels[] = {-1.0f, -0.5f, -0.0f, 0.0f, 0.5f, 1.0f};
    for (auto& v : x)
        if (rng.uniform() < 0.6) v = levels[std::size_t(rng.uniform() * 6) % 6];
    if (nan_channel < shape[1]) x[nan_channel * (x.size() / (shape[0] * shape[1]))] = std::nanf("");
    return x;
}

// A BatchNorm bound to buffers of its own: gamma, beta random (two channels' beta 0), gradients 0,
// running statistics 0 and 1.
template <std::size_t Spatial>
struct BoundBatchNorm {
    BatchNorm<float, Spatial> layer;
    std::vector<float> params, grads, state;
    BoundBatchNorm(std::size_t c, Rng& rng) : layer(c), params(2 * c), grads(2 * c, 0.0f), state(2 * c) {
        layer.bind(params.data(), grads.data(), state.data());
        layer.init_params(rng);
        for (std::size_t i = 0; i < 2 * c; ++i)
            params[i] = i < c       ? float(rng.uniform(0.5, 1.5))
                        : i < c + 2 ? 0.0f
                                    : float(rng.uniform(-0.3, 0.3));
    }
};

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(T) * a.size()) == 0;
}

// BatchNorm then ReLU run apart, and BatchNorm running both (FusesWithNext), from the same parameters:
// outputs, input gradients, parameter gradients and running statistics bitwise the same.
template <std::size_t Spatial>
void check_batchnorm_relu(const std::vector<std::size_t>& shape, bool training, bool need_grad_in, Rng& rng) {
    const Tensor<float> x = levels_tensor(shape, rng, training ? 1 : shape[1]);
    Rng init_a(3), init_b(3);
    BoundBatchNorm<Spatial> apart(shape[1], init_a), fused(shape[1], init_b);
    ReLU<float> relu;
    Tensor<float> n, y, y_fused, dn, dx, dx_fused;
    apart.layer.forward(x, n, training);
    relu.forward(n, y, training);
    fused.layer.forward_with_next(x, y_fused, training);
    CHECK(same_bits(y, y_fused));
    CHECK(same_bits(apart.state, fused.state));
    const Tensor<float> g = levels_tensor(y.shape(), rng, shape[1]);
    relu.backward(n, y, g, dn, true);
    apart.layer.backward(x, n, dn, dx, need_grad_in);
    fused.layer.backward_with_next(x, y_fused, g, dx_fused, need_grad_in);
    CHECK(same_bits(apart.grads, fused.grads));
    if (need_grad_in) CHECK(same_bits(dx, dx_fused));
    CHECK(dx_fused.size() == (need_grad_in ? x.size() : dx_fused.size()));
}

// The layers of `chain` (a Model or a Residual block) run one by one, never fused, in training: the
// activations (acts[0] = x) and the input gradients (grads[i] of layer i's input, from grads[L] = g; grads[0]
// only when `first_needs_grad`). The parameter gradients are added into the chain's slices.
struct Apart {
    std::vector<Tensor<float>> acts, grads;
};

template <class Chain>
Apart run_apart(Chain& chain, const Tensor<float>& x, const Tensor<float>& g, bool first_needs_grad) {
    const std::size_t n = chain.num_layers();
    Apart a{std::vector<Tensor<float>>(n + 1), std::vector<Tensor<float>>(n + 1)};
    a.acts[0] = x;
    for (std::size_t i = 0; i < n; ++i)
        chain.layer(i).forward(a.acts[i], a.acts[i + 1], true);
    a.grads[n] = g;
    for (std::size_t i = n; i-- > 0;)
        chain.layer(i).backward(a.acts[i], a.acts[i + 1], a.grads[i + 1], a.grads[i],
                                i > 0 || first_needs_grad);
    return a;
}

}  // namespace

TEST_CASE("MaxPool2d fuses only a ReLU, only on its AVX-512 windows", "[nn][fusion]") {
    using dtrain::detail::KernelSet;
    const KernelSet saved = dtrain::detail::kernel_set();
    const bool avx512 = dtrain::detail::max_pool_avx512_available();
    CHECK(MaxPool2d<float>(2).fuses_with(ReLU<float>()) == avx512);
    CHECK_FALSE(MaxPool2d<float>(2).fuses_with(LeakyReLU<float>(0.1)));
    CHECK_FALSE(MaxPool2d<float>(2).fuses_with(Tanh<float>()));
    CHECK_FALSE(MaxPool2d<float>(3).fuses_with(ReLU<float>()));     // 3 x 3 windows: the scalar loop
    CHECK_FALSE(MaxPool2d<float>(2, 1).fuses_with(ReLU<float>()));  // stride 1
    CHECK_FALSE(MaxPool2d<double>(2).fuses_with(ReLU<double>()));
    dtrain::detail::kernel_set() = KernelSet::reference;
    CHECK_FALSE(MaxPool2d<float>(2).fuses_with(ReLU<float>()));
    dtrain::detail::kernel_set() = saved;
}

TEST_CASE("MaxPool2d with a ReLU fused before it: bitwise the two layers' outputs and input gradient",
          "[nn][fusion]") {
    if (!MaxPool2d<float>(2).fuses_with(ReLU<float>())) {
        WARN("MaxPool2d fuses no ReLU here: this CPU has no AVX-512F, or DTRAIN_KERNELS is not native");
        return;
    }
    Rng rng(7);
    // Output rows of 1, 7 (the gradient's scatter path), 11, 16 and 33 windows; odd sizes leave a row or
    // column no window reads.
    for (auto [h, w] : {std::pair<std::size_t, std::size_t>{2, 2}, {6, 15}, {5, 23}, {8, 32}, {7, 67}}) {
        INFO("plane " << h << " x " << w);
        const Tensor<float> x = awkward_tensor(std::vector<std::size_t>{3, 2, h, w}, rng);
        ReLU<float> relu;
        MaxPool2d<float> apart(2), fused(2);
        Tensor<float> r, y, y_fused, dr, dx, dx_fused;
        relu.forward(x, r, true);
        apart.forward(r, y, true);
        fused.forward_with_previous(x, y_fused, true);
        CHECK(same_bits(y, y_fused));
        Tensor<float> g = awkward_tensor(y.shape(), rng);
        apart.backward(r, y, g, dr, true);
        relu.backward(x, r, dr, dx, true);
        dx_fused = Tensor<float>::from_shape(x.shape());
        dx_fused.fill(-1.5f);  // overwritten everywhere
        fused.backward_with_previous(x, y_fused, g, dx_fused);
        CHECK(same_bits(dx, dx_fused));
    }
}

TEST_CASE("Sequential runs a ReLU and the MaxPool2d after it as one: bitwise the layers one by one",
          "[nn][fusion][sequential]") {
    Rng rng(11);
    Model<float> model({3, 10, 9}, 5);  // odd width: a column no window reads
    model.add(Conv2d<float>(3, 4, 3))
        .add(ReLU<float>())
        .add(MaxPool2d<float>(2))
        .add(ReLU<float>())  // a ReLU after the pooling: not fused (nothing after it fuses)
        .add(Flatten<float>())
        .add(Dense<float>(4 * 4 * 3, 5));
    model.train();
    const Tensor<float> x = awkward_tensor(std::vector<std::size_t>{4, 3, 10, 9}, rng);
    model.zero_grad();
    const Tensor<float> y = model.forward(x);
    const Tensor<float> g =
        random_tensor<float>(std::vector<std::size_t>(y.shape().begin(), y.shape().end()), rng);
    const Tensor<float> dx = model.backward(g, true);
    const std::vector<float> grads(model.gradients().begin(), model.gradients().end());

    // The same layers one by one, never fused, on the model's own parameters.
    model.zero_grad();
    const Apart apart = run_apart(model, x, g, true);
    CHECK(same_bits(y, apart.acts.back()));
    CHECK(same_bits(dx, apart.grads[0]));
    CHECK(std::memcmp(grads.data(), model.gradients().data(), sizeof(float) * grads.size()) == 0);

    // The ReLU's output is kept only where no fusion took it.
    Sequential<float> seq;
    seq.add(std::make_unique<ReLU<float>>());
    seq.add(std::make_unique<MaxPool2d<float>>(2));
    const Tensor<float> z = awkward_tensor(std::vector<std::size_t>{2, 3, 4, 6}, rng);
    Tensor<float> dz;
    seq.forward(z, true);
    const bool fuses = MaxPool2d<float>(2).fuses_with(ReLU<float>());
    CHECK((seq.output(0).dimension() == 0) == fuses);
    CHECK(seq.output(1).shape() == std::vector<std::size_t>{2, 3, 2, 3});
    std::vector<std::size_t> done;
    dtrain::BackwardListener listener;
    listener.context = &done;
    listener.done = [](void* c, std::size_t i) { static_cast<std::vector<std::size_t>*>(c)->push_back(i); };
    seq.backward(z, random_tensor<float>({2, 3, 2, 3}, rng), dz, true, listener);
    CHECK(done == std::vector<std::size_t>{1, 0});  // every layer reported done, last first
    CHECK(dz.shape() == z.shape());
}

TEST_CASE("BatchNorm fuses a ReLU after it, and no other layer", "[nn][fusion]") {
    CHECK(BatchNorm2d<float>(3).fuses_with_next(ReLU<float>()));
    CHECK(BatchNorm1d<double>(3).fuses_with_next(ReLU<double>()));
    CHECK_FALSE(BatchNorm2d<float>(3).fuses_with_next(LeakyReLU<float>(0.1)));
    CHECK_FALSE(BatchNorm2d<float>(3).fuses_with_next(Tanh<float>()));
    CHECK_FALSE(BatchNorm2d<float>(3).fuses_with_next(BatchNorm2d<float>(3)));
}

TEST_CASE("BatchNorm with a ReLU fused after it: bitwise the two layers' outputs, gradients and statistics",
          "[nn][fusion]") {
    Rng rng(13);
    for (const bool training : {true, false})
        for (const bool need_grad_in : {true, false}) {
            INFO("training " << training << ", need_grad_in " << need_grad_in);
            // blocks of C x H x W: 63 and 5 values (taken whole), 648 (row by row), rows shorter than 8
            check_batchnorm_relu<2>({5, 7, 3, 3}, training, need_grad_in, rng);
            check_batchnorm_relu<2>({3, 8, 9, 9}, training, need_grad_in, rng);
            check_batchnorm_relu<2>({4, 1, 1, 5}, training, need_grad_in, rng);
            check_batchnorm_relu<0>({6, 33}, training, need_grad_in, rng);
            check_batchnorm_relu<0>({65, 700}, training, need_grad_in, rng);
        }
}

TEST_CASE("Sequential runs a BatchNorm and the ReLU after it as one: bitwise the layers one by one",
          "[nn][fusion][sequential]") {
    Rng rng(17);
    for (const bool first_needs_grad : {true, false}) {
        INFO("input gradient asked for: " << first_needs_grad);
        // A BatchNorm first (its pair's input gradient not asked for), one after a convolution, and one
        // whose ReLU is followed by a MaxPool2d (which then does not fuse that ReLU: it is the second of a
        // pair already).
        Model<float> model({3, 8, 8}, 9);
        model.add(BatchNorm2d<float>(3))
            .add(ReLU<float>())
            .add(Conv2d<float>(3, 4, 3, 1, 1))
            .add(BatchNorm2d<float>(4))
            .add(ReLU<float>())
            .add(MaxPool2d<float>(2))
            .add(Flatten<float>())
            .add(Dense<float>(4 * 4 * 4, 6))
            .add(BatchNorm1d<float>(6))
            .add(ReLU<float>());
        model.train();
        const Tensor<float> x = levels_tensor(std::vector<std::size_t>{5, 3, 8, 8}, rng, 3);
        const std::vector<float> state0(model.state().begin(), model.state().end());
        model.zero_grad();
        const Tensor<float> y = model.forward(x);
        const Tensor<float> g = levels_tensor(y.shape(), rng, 6);
        const Tensor<float> dx = model.backward(g, first_needs_grad);
        const std::vector<float> grads(model.gradients().begin(), model.gradients().end());
        const std::vector<float> state(model.state().begin(), model.state().end());
        CHECK(model.layer(0).name() == "BatchNorm2d(3)");

        // The same layers one by one, never fused, on the model's own parameters and first statistics.
        std::copy(state0.begin(), state0.end(), model.state().begin());
        model.zero_grad();
        Apart apart = run_apart(model, x, g, first_needs_grad);
        std::vector<Tensor<float>>& acts = apart.acts;
        CHECK(same_bits(y, acts.back()));
        if (first_needs_grad) CHECK(same_bits(dx, apart.grads[0]));
        CHECK(same_bits(grads, std::vector<float>(model.gradients().begin(), model.gradients().end())));
        CHECK(same_bits(state, std::vector<float>(model.state().begin(), model.state().end())));

        // infer() fuses the same pairs in eval mode: bitwise forward()'s eval output, and the layers'
        model.eval();
        const Tensor<float> y_eval = model.forward(x);
        CHECK(same_bits(y_eval, model.infer(x)));
        for (std::size_t i = 0; i < model.num_layers(); ++i)
            model.layer(i).forward(acts[i], acts[i + 1], false);
        CHECK(same_bits(y_eval, acts.back()));
    }
}

TEST_CASE("Sequential::runs_with_next() names the first layer of each pair it runs that way",
          "[nn][fusion][sequential]") {
    Sequential<float> seq;
    seq.add(std::make_unique<BatchNorm2d<float>>(3));
    seq.add(std::make_unique<ReLU<float>>());
    seq.add(std::make_unique<BatchNorm2d<float>>(3));
    seq.add(std::make_unique<Tanh<float>>());          // not a ReLU: not fused
    seq.add(std::make_unique<BatchNorm2d<float>>(3));  // last: nothing after it to fuse
    CHECK(seq.runs_with_next(0) == dynamic_cast<dtrain::FusesWithNext<float>*>(&seq.layer(0)));
    CHECK(seq.runs_with_next(0) != nullptr);
    for (std::size_t i = 1; i < seq.num_layers(); ++i) {
        INFO("layer " << i);
        CHECK(seq.runs_with_next(i) == nullptr);
    }
    CHECK_THROWS_WITH(seq.runs_with_next(5),
                      Catch::Contains("runs_with_next: index 5 out of range (5 layers)"));
}

TEST_CASE("A Residual block fuses its BatchNorm and ReLU pairs: bitwise its children one by one",
          "[nn][fusion][sequential]") {
    Rng rng(19);
    Model<float> model({4, 5, 5}, 3);
    model.add(Residual<float>()
                  .add(Conv2d<float>(4, 4, 3, 1, 1))
                  .add(BatchNorm2d<float>(4))
                  .add(ReLU<float>())
                  .add(Conv2d<float>(4, 4, 3, 1, 1))
                  .add(BatchNorm2d<float>(4))
                  .add(ReLU<float>()));
    model.train();
    const Tensor<float> x = levels_tensor(std::vector<std::size_t>{3, 4, 5, 5}, rng, 4);
    model.zero_grad();
    const Tensor<float> y = model.forward(x);
    const Tensor<float> g = levels_tensor(y.shape(), rng, 4);
    const Tensor<float> dx = model.backward(g, true);
    const std::vector<float> grads(model.gradients().begin(), model.gradients().end());

    // The children apart, on the block's parameters: f(x) + x and its gradients.
    auto& block = static_cast<Residual<float>&>(model.layer(0));
    model.zero_grad();
    Apart apart = run_apart(block, x, g, true);
    Tensor<float> sum = apart.acts.back();
    for (std::size_t i = 0; i < sum.size(); ++i)
        sum[i] += x[i];
    Tensor<float>& dx_apart = apart.grads[0];
    for (std::size_t i = 0; i < dx_apart.size(); ++i)
        dx_apart[i] += g[i];
    CHECK(same_bits(y, sum));
    CHECK(same_bits(dx, dx_apart));
    CHECK(same_bits(grads, std::vector<float>(model.gradients().begin(), model.gradients().end())));
}

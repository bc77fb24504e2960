#include <catch2/catch.hpp>

#include <cstddef>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include <dtrain/nn/layer_fusion.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/conv2d.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/detail/kernel_set.hpp>
#include <dtrain/nn/layers/flatten.hpp>
#include <dtrain/nn/layers/leaky_relu.hpp>
#include <dtrain/nn/layers/pool2d.hpp>
#include <dtrain/nn/model.hpp>
#include <dtrain/nn/sequential.hpp>

#include "support/test_utils.hpp"

using dtrain::Conv2d;
using dtrain::Dense;
using dtrain::Flatten;
using dtrain::Layer;
using dtrain::LeakyReLU;
using dtrain::MaxPool2d;
using dtrain::Model;
using dtrain::ReLU;
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
    std::vector<Tensor<float>> acts(model.num_layers() + 1), gin(model.num_layers() + 1);
    acts[0] = x;
    model.zero_grad();
    for (std::size_t i = 0; i < model.num_layers(); ++i)
        model.layer(i).forward(acts[i], acts[i + 1], true);
    gin[model.num_layers()] = g;
    for (std::size_t i = model.num_layers(); i-- > 0;)
        model.layer(i).backward(acts[i], acts[i + 1], gin[i + 1], gin[i], true);
    CHECK(same_bits(y, acts.back()));
    CHECK(same_bits(dx, gin[0]));
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

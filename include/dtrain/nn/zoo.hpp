#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/nn/init.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/batchnorm.hpp>
#include <dtrain/nn/layers/conv2d.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/flatten.hpp>
#include <dtrain/nn/layers/pool2d.hpp>
#include <dtrain/nn/layers/residual.hpp>
#include <dtrain/nn/model.hpp>

namespace dtrain::detail {

/// Appends Conv2d(in, out, kernel)-ReLU-MaxPool2d(2), the convolution stage of the LeNet-style CNNs.
template <class T>
void add_conv_relu_pool(Model<T>& m, std::size_t in, std::size_t out, std::size_t kernel) {
    m.add(Conv2d<T>(in, out, kernel)).add(ReLU<T>()).add(MaxPool2d<T>(2));
}

/// Appends Dense layers of the given widths (Dense(widths[0], widths[1]), ...) with ReLU between them and
/// none after the last.
template <class T>
void add_dense_relu(Model<T>& m, const std::vector<std::size_t>& widths) {
    for (std::size_t i = 0; i + 1 < widths.size(); ++i) {
        if (i > 0) m.add(ReLU<T>());
        m.add(Dense<T>(widths[i], widths[i + 1]));
    }
}

}  // namespace dtrain::detail

/// The networks of dtrain's source documents, ready-made (like torchvision's models): each returns a fresh
/// Model initialised from `seed`.
namespace dtrain::zoo {

/// The Apache SINGA tutorial's CNN for 1x28x28 images (MNIST, Fashion-MNIST):
/// Conv2d(1,20,5)-ReLU-MaxPool(2)-Conv2d(20,50,5)-ReLU-MaxPool(2)-Flatten-Dense(800,500)-ReLU-Dense(500,10);
/// 431,080 parameters.
template <class T = float>
Model<T> singa_cnn(std::uint64_t seed = 0) {
    Model<T> m({1, 28, 28}, seed);
    detail::add_conv_relu_pool(m, 1, 20, 5);
    detail::add_conv_relu_pool(m, 20, 50, 5);
    m.add(Flatten<T>());
    detail::add_dense_relu(m, {800, 500, 10});
    return m;
}

/// The CIFAR-10 CNN of the PyTorch tutorial, with wider convolutions, for 3x32x32 images:
/// Conv2d(3,64,5)-ReLU-MaxPool(2)-Conv2d(64,16,5)-ReLU-MaxPool(2)-Flatten-Dense(400,120)-ReLU-Dense(120,84)-
/// ReLU-Dense(84,10); 89,614 parameters.
template <class T = float>
Model<T> cifar_cnn(std::uint64_t seed = 0) {
    Model<T> m({3, 32, 32}, seed);
    detail::add_conv_relu_pool(m, 3, 64, 5);
    detail::add_conv_relu_pool(m, 64, 16, 5);
    m.add(Flatten<T>());
    detail::add_dense_relu(m, {400, 120, 84, 10});
    return m;
}

/// The ResNet9 of CMU 10-714's Needle framework (apps/models.py) for 3x32x32 images (CIFAR-10):
/// ConvBN(3,16,k7,s4)-ConvBN(16,32,k3,s2)-Residual(ConvBN(32,32,k3,s1)-ConvBN(32,32,k3,s1))-
/// ConvBN(32,64,k3,s2)-ConvBN(64,128,k3,s2)-Residual(ConvBN(128,128,k3,s1)-ConvBN(128,128,k3,s1))-
/// Flatten-Dense(128,128)-ReLU-Dense(128,10), where ConvBN(a,b,k,s) = Conv2d(a, b, k, stride s,
/// padding k/2, with bias)-BatchNorm2d(b)-ReLU. The feature maps shrink 32 -> 8 -> 4 -> 2 -> 1, so the
/// residual blocks run at [32, 4, 4] and [128, 1, 1]. 431,946 parameters and 1,120 BatchNorm state values
/// (Conv2d and Dense weights He uniform as Needle's kaiming_uniform; biases start at 0, where Needle's
/// start uniform).
template <class T = float>
Model<T> resnet9(std::uint64_t seed = 0) {
    // Appends ConvBN(a, b, k, s) to a Model or a Residual block.
    auto conv_bn = [](auto& seq, std::size_t a, std::size_t b, std::size_t k, std::size_t s) {
        seq.add(Conv2d<T>(a, b, k, s, k / 2)).add(BatchNorm2d<T>(b)).add(ReLU<T>());
    };
    Model<T> m({3, 32, 32}, seed);
    conv_bn(m, 3, 16, 7, 4);
    conv_bn(m, 16, 32, 3, 2);
    Residual<T> r1;
    conv_bn(r1, 32, 32, 3, 1);
    conv_bn(r1, 32, 32, 3, 1);
    m.add(std::move(r1));
    conv_bn(m, 32, 64, 3, 2);
    conv_bn(m, 64, 128, 3, 2);
    Residual<T> r2;
    conv_bn(r2, 128, 128, 3, 1);
    conv_bn(r2, 128, 128, 3, 1);
    m.add(std::move(r2));
    m.add(Flatten<T>())
        .add(Dense<T>(128, 128, Init::HeUniform))
        .add(ReLU<T>())
        .add(Dense<T>(128, 10, Init::HeUniform));
    return m;
}

/// A multi-layer perceptron with the given layer widths (at least an input and an output width), ReLU
/// between Dense layers and none after the last, e.g. mlp({784, 512, 256, 10}).
template <class T = float>
Model<T> mlp(const std::vector<std::size_t>& widths, std::uint64_t seed = 0) {
    DTRAIN_CHECK(widths.size() >= 2, "zoo::mlp: needs at least an input and an output width, got ",
                 widths.size(), " width(s)");
    Model<T> m({widths.front()}, seed);
    detail::add_dense_relu(m, widths);
    return m;
}

}  // namespace dtrain::zoo

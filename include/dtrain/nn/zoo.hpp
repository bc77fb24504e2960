#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/conv2d.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/flatten.hpp>
#include <dtrain/nn/layers/pool2d.hpp>
#include <dtrain/nn/model.hpp>

/// The networks of dtrain's source documents, ready-made (like torchvision's models): each returns a fresh
/// Model initialised from `seed`.
namespace dtrain::zoo {

/// The Apache SINGA tutorial's CNN for 1x28x28 images (MNIST, Fashion-MNIST):
/// Conv2d(1,20,5)-ReLU-MaxPool(2)-Conv2d(20,50,5)-ReLU-MaxPool(2)-Flatten-Dense(800,500)-ReLU-Dense(500,10);
/// 431,080 parameters.
template <class T = float>
Model<T> singa_cnn(std::uint64_t seed = 0) {
    Model<T> m({1, 28, 28}, seed);
    m.add(Conv2d<T>(1, 20, 5))
        .add(ReLU<T>())
        .add(MaxPool2d<T>(2))
        .add(Conv2d<T>(20, 50, 5))
        .add(ReLU<T>())
        .add(MaxPool2d<T>(2))
        .add(Flatten<T>())
        .add(Dense<T>(800, 500))
        .add(ReLU<T>())
        .add(Dense<T>(500, 10));
    return m;
}

/// The course report's CNN for 3x32x32 images (CIFAR-10): Conv2d(3,64,5)-ReLU-MaxPool(2)-Conv2d(64,16,5)-
/// ReLU-MaxPool(2)-Flatten-Dense(400,120)-ReLU-Dense(120,84)-ReLU-Dense(84,10); 89,614 parameters.
template <class T = float>
Model<T> cifar_cnn(std::uint64_t seed = 0) {
    Model<T> m({3, 32, 32}, seed);
    m.add(Conv2d<T>(3, 64, 5))
        .add(ReLU<T>())
        .add(MaxPool2d<T>(2))
        .add(Conv2d<T>(64, 16, 5))
        .add(ReLU<T>())
        .add(MaxPool2d<T>(2))
        .add(Flatten<T>())
        .add(Dense<T>(400, 120))
        .add(ReLU<T>())
        .add(Dense<T>(120, 84))
        .add(ReLU<T>())
        .add(Dense<T>(84, 10));
    return m;
}

/// A multi-layer perceptron with the given layer widths (at least an input and an output width), ReLU
/// between Dense layers and none after the last, e.g. mlp({784, 512, 256, 10}).
template <class T = float>
Model<T> mlp(const std::vector<std::size_t>& widths, std::uint64_t seed = 0) {
    DTRAIN_CHECK(widths.size() >= 2, "zoo::mlp: needs at least an input and an output width, got ",
                 widths.size(), " width(s)");
    Model<T> m({widths.front()}, seed);
    for (std::size_t i = 0; i + 1 < widths.size(); ++i) {
        if (i > 0) m.add(ReLU<T>());
        m.add(Dense<T>(widths[i], widths[i + 1]));
    }
    return m;
}

}  // namespace dtrain::zoo

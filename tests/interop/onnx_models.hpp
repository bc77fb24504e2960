#pragma once

// The models the ONNX tests export: the zoo's SINGA CNN, MLP and ResNet9, the Iris network with
// BatchNorm1d, and a small network with every other exported layer and non-square convolution settings.
// Every parameter and BatchNorm statistic is moved off its initial value by a seeded random amount, so
// that biases, scales, shifts and running statistics all take part in the comparison (onnx_cases checks
// that the outputs differ between samples, so that no model hides its layers behind dead ReLUs).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <dtrain/core/rng.hpp>
#include <dtrain/nn.hpp>

namespace dtrain::test {

/// A model to export, its name and the input batch to compare on.
struct OnnxCase {
    std::string name;
    Model<float> model;
    Tensor<float> input;
};

/// Sets the running statistics of every BatchNorm in `layer` (and in the children of a Residual): means
/// uniform in [-0.3, 0.3), variances uniform in [0.5, 1.5).
inline void perturb_statistics(Layer<float>& layer, Rng& rng) {
    auto set = [&](TensorView<float, 1> mean, TensorView<float, 1> var) {
        for (float& v : mean)
            v = float(rng.uniform(-0.3, 0.3));
        for (float& v : var)
            v = float(rng.uniform(0.5, 1.5));
    };
    if (auto* b = dynamic_cast<BatchNorm1d<float>*>(&layer)) set(b->running_mean(), b->running_var());
    if (auto* b = dynamic_cast<BatchNorm2d<float>*>(&layer)) set(b->running_mean(), b->running_var());
    if (auto* r = dynamic_cast<Residual<float>*>(&layer))
        for (std::size_t i = 0; i < r->num_layers(); ++i)
            perturb_statistics(r->layer(i), rng);
}

/// Adds seeded noise uniform in [-0.1, 0.1) to every parameter and sets the BatchNorm statistics as
/// perturb_statistics() does.
inline void perturb(Model<float>& m, std::uint64_t seed) {
    Rng rng(seed);
    for (float& p : m.parameters())
        p += float(rng.uniform(-0.1, 0.1));
    for (std::size_t i = 0; i < m.num_layers(); ++i)
        perturb_statistics(m.layer(i), rng);
}

/// The exported models, each with a batch of 3 samples uniform in [-1, 1).
inline std::vector<OnnxCase> onnx_cases() {
    std::vector<OnnxCase> cases;
    auto add = [&](std::string name, Model<float> m, std::uint64_t seed) {
        perturb(m, seed);
        Rng rng(seed + 100);
        std::vector<std::size_t> shape{3};
        shape.insert(shape.end(), m.input_shape().begin(), m.input_shape().end());
        Tensor<float> x = Tensor<float>::from_shape(shape);
        for (float& v : x)
            v = float(rng.uniform(-1.0, 1.0));
        cases.push_back({std::move(name), std::move(m), std::move(x)});
    };
    add("singa_cnn", zoo::singa_cnn<float>(1), 11);
    add("mlp", zoo::mlp<float>({20, 64, 32, 5}, 2), 12);
    add("resnet9", zoo::resnet9<float>(3), 13);

    Model<float> iris({4}, 4);
    iris.add(Dense<float>(4, 30)).add(BatchNorm1d<float>(30)).add(Sigmoid<float>());
    iris.add(Dense<float>(30, 20)).add(Tanh<float>()).add(Dense<float>(20, 3));
    add("iris_bn", std::move(iris), 14);

    Model<float> mixed({2, 9, 10}, 5);
    mixed.add(Conv2d<float>(2, 4, {3, 2}, {2, 1}, {1, 0})).add(BatchNorm2d<float>(4, 0.1, 1e-3));
    mixed.add(Sigmoid<float>()).add(AvgPool2d<float>(2, 1)).add(MaxPool2d<float>(3, 2));
    mixed.add(Flatten<float>()).add(Dropout<float>(0.5, 7)).add(Dense<float>(12, 6)).add(Tanh<float>());
    mixed.add(LeakyReLU<float>(0.2));
    mixed.add(Residual<float>().add(Dense<float>(6, 6)).add(BatchNorm1d<float>(6)).add(ReLU<float>()));
    mixed.add(Dense<float>(6, 3));
    add("mixed", std::move(mixed), 15);
    return cases;
}

}  // namespace dtrain::test

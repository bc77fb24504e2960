#pragma once

// The zoo models the benchmark programs time, chosen by name, with the settings every program uses for them
// (benchmarks/*; not part of the library).

#include <dtrain/nn/zoo.hpp>
#include <dtrain/optim/sgd.hpp>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace dtrain::bench {

/// Whether `name` is a model `zoo_model` builds: "cnn" (SINGA's CNN), "mlp" (784-512-256-10) or "resnet9".
inline bool is_zoo_model(const std::string& name) {
    return name == "cnn" || name == "mlp" || name == "resnet9";
}

/// The zoo model `name`, its weights drawn from `seed`; throws std::invalid_argument naming the known models.
template <class T>
Model<T> zoo_model(const std::string& name, std::uint64_t seed) {
    if (name == "cnn") return zoo::singa_cnn<T>(seed);
    if (name == "mlp") return zoo::mlp<T>({784, 512, 256, 10}, seed);
    if (name == "resnet9") return zoo::resnet9<T>(seed);
    throw std::invalid_argument("unknown model '" + name + "' (known: cnn, mlp, resnet9)");
}

/// The SGD settings of benchmarks/train/pytorch_train.py for the zoo model `name`.
inline SGDOptions zoo_sgd_options(const std::string& name) {
    if (name == "cnn") return SGDOptions().lr(0.005).momentum(0.9).weight_decay(1e-5);
    if (name == "mlp") return SGDOptions().lr(0.01).momentum(0.9);
    if (name == "resnet9") return SGDOptions().lr(0.01).momentum(0.9).weight_decay(1e-4);
    throw std::invalid_argument("unknown model '" + name + "' (known: cnn, mlp, resnet9)");
}

/// The batch the benchmarks time `name` at unless told otherwise: 128 for ResNet9, as in the Needle
/// data-parallel project (README, References 5), 64 for the others.
inline std::size_t zoo_default_batch(const std::string& name) {
    return name == "resnet9" ? 128 : 64;
}

}  // namespace dtrain::bench

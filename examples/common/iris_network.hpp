#pragma once

// The 4-30-20-3 Iris network of Zhao's Go and MPI pipelines (README, References 1), shared by iris_mlp (which
// trains and saves it) and iris_predict (which rebuilds it to load a saved model).

#include <cstdint>
#include <string>

#include <dtrain/dtrain.hpp>

namespace example {

/// Dense(4,30)-act-Dense(30,20)-act-Dense(20,3) with hidden activation `activation` ("relu", "tanh" or
/// "sigmoid"; anything else throws dtrain::Error naming it), initialised from `seed`.
inline dtrain::Model<float> iris_network(const std::string& activation, std::uint64_t seed = 0) {
    DTRAIN_CHECK(activation == "relu" || activation == "tanh" || activation == "sigmoid",
                 "unknown activation '", activation, "' (relu, tanh or sigmoid)");
    dtrain::Model<float> model({4}, seed);
    auto add_activation = [&] {
        if (activation == "sigmoid")
            model.add(dtrain::Sigmoid<float>());
        else if (activation == "tanh")
            model.add(dtrain::Tanh<float>());
        else
            model.add(dtrain::ReLU<float>());
    };
    model.add(dtrain::Dense<float>(4, 30));
    add_activation();
    model.add(dtrain::Dense<float>(30, 20));
    add_activation();
    model.add(dtrain::Dense<float>(20, 3));
    return model;
}

}  // namespace example

#pragma once

// Helpers shared by the asynchronous (parameter-server) tests: Iris, a small MLP, batching, evaluation.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <dtrain/core/rng.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/data/csv.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/losses/cross_entropy.hpp>
#include <dtrain/nn/metrics.hpp>
#include <dtrain/nn/model.hpp>

namespace dtrain::test {

/// Iris with every feature standardised (zero mean, unit variance).
struct Iris {
    Tensor<float> x;  // [150, 4]
    Labels y;         // [150]
};

/// Reads data/iris.csv from the source tree and standardises the features.
inline Iris load_iris() {
    Dataset d = read_csv(std::string(DTRAIN_SOURCE_DIR) + "/data/iris.csv");
    Iris out{d.features, d.labels};
    const std::size_t n = out.x.shape()[0], f = out.x.shape()[1];
    for (std::size_t j = 0; j < f; ++j) {
        double mean = 0.0, sq = 0.0;
        for (std::size_t i = 0; i < n; ++i)
            mean += out.x(i, j);
        mean /= double(n);
        for (std::size_t i = 0; i < n; ++i)
            sq += (out.x(i, j) - mean) * (out.x(i, j) - mean);
        const double sd = std::sqrt(sq / double(n));
        for (std::size_t i = 0; i < n; ++i)
            out.x(i, j) = float((out.x(i, j) - mean) / sd);
    }
    return out;
}

/// 4 -> hidden -> 3 MLP with ReLU, initialised from `seed`.
inline Model<float> make_mlp(std::uint64_t seed, std::size_t hidden = 16) {
    Model<float> m({4}, seed);
    m.add(Dense<float>(4, hidden)).add(ReLU<float>()).add(Dense<float>(hidden, 3));
    return m;
}

/// Copies the rows `idx[begin, end)` of (x, y) into (bx, by).
inline void gather_batch(const Iris& d, const std::vector<std::size_t>& idx, std::size_t begin,
                         std::size_t end, Tensor<float>& bx, Labels& by) {
    const std::size_t f = d.x.shape()[1], n = end - begin;
    bx = Tensor<float>::from_shape({n, f});
    by = Labels::from_shape({n});
    for (std::size_t r = 0; r < n; ++r) {
        for (std::size_t j = 0; j < f; ++j)
            bx(r, j) = d.x(idx[begin + r], j);
        by(r) = d.y(idx[begin + r]);
    }
}

/// A seeded permutation of [0, n).
inline std::vector<std::size_t> permutation(std::size_t n, std::uint64_t seed) {
    std::vector<std::size_t> p(n);
    for (std::size_t i = 0; i < n; ++i)
        p[i] = i;
    Rng rng(seed);
    shuffle(p.begin(), p.end(), rng);
    return p;
}

/// Fraction of Iris classified correctly by `model`.
inline double iris_accuracy(Model<float>& model, const Iris& d) {
    model.eval();
    const Tensor<float>& out = model.forward(d.x);
    const double acc = accuracy(out, d.y);
    model.train();
    return acc;
}

}  // namespace dtrain::test

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/losses/cross_entropy.hpp>
#include <dtrain/nn/metrics.hpp>
#include <dtrain/nn/model.hpp>

using dtrain::Labels;
using dtrain::Model;
using dtrain::Tensor;

namespace {

// Reads data/iris.csv: a header row, 4 numeric features, a species name; features are standardised.
void load_iris(Tensor<float>& x, Labels& y) {
    const std::string path = std::string(DTRAIN_SOURCE_DIR) + "/data/iris.csv";
    std::ifstream in(path);
    REQUIRE(in.good());
    std::string line;
    std::getline(in, line);
    std::vector<float> feats;
    std::vector<int> labels;
    std::map<std::string, int> classes;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        std::stringstream ss(line);
        std::string cell;
        for (int j = 0; j < 4; ++j) {
            std::getline(ss, cell, ',');
            feats.push_back(std::stof(cell));
        }
        std::getline(ss, cell);
        if (!cell.empty() && cell.back() == '\r') cell.pop_back();
        const auto it = classes.emplace(cell, int(classes.size())).first;
        labels.push_back(it->second);
    }
    const std::size_t n = labels.size();
    REQUIRE(n == 150);
    REQUIRE(classes.size() == 3);
    x = Tensor<float>::from_shape({n, 4});
    y = Labels::from_shape({n});
    for (std::size_t j = 0; j < 4; ++j) {
        double mean = 0, var = 0;
        for (std::size_t i = 0; i < n; ++i)
            mean += feats[i * 4 + j];
        mean /= double(n);
        for (std::size_t i = 0; i < n; ++i)
            var += std::pow(feats[i * 4 + j] - mean, 2);
        const double sd = std::sqrt(var / double(n));
        for (std::size_t i = 0; i < n; ++i)
            x(i, j) = float((feats[i * 4 + j] - mean) / sd);
    }
    for (std::size_t i = 0; i < n; ++i)
        y(i) = labels[i];
}

}  // namespace

TEST_CASE("End-to-end: a 4-16-3 MLP learns iris to >= 95% training accuracy with plain SGD",
          "[nn][train][iris]") {
    Tensor<float> x;
    Labels y;
    load_iris(x, y);
    Model<float> m({4}, 2024);
    m.add(dtrain::Dense<float>(4, 16)).add(dtrain::Tanh<float>()).add(dtrain::Dense<float>(16, 3));
    dtrain::SoftmaxCrossEntropy<float> ce;
    Tensor<float> g;
    m.eval();
    const double acc0 = dtrain::accuracy(m.forward(x), y);
    const float loss0 = ce.value(m.forward(x), y);
    m.train();
    float loss = 0;
    for (int epoch = 0; epoch < 500; ++epoch) {
        m.zero_grad();
        loss = ce.compute(m.forward(x), y, g);
        m.backward(g);
        auto p = m.parameters();
        auto gr = m.gradients();
        for (std::size_t i = 0; i < p.size(); ++i)
            p[i] -= 0.5f * gr[i];
    }
    m.eval();
    const double acc = dtrain::accuracy(m.forward(x), y);
    INFO("initial accuracy " << acc0 << " loss " << loss0 << ", final accuracy " << acc << " loss " << loss);
    CHECK(acc >= 0.95);
    CHECK(loss < 0.5f * loss0);
}

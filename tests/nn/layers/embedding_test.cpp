#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/embedding.hpp>
#include <dtrain/nn/layers/flatten.hpp>
#include <dtrain/nn/model.hpp>

#include "nn/gradcheck.hpp"

using dtrain::Embedding;
using dtrain::Model;
using dtrain::Rng;
using dtrain::Tensor;
using dtrain::test::contains;
using dtrain::test::error_message;

TEST_CASE("Embedding: rows of the table by id; backward adds each position's gradient to its id's row",
          "[nn][embedding]") {
    Model<double> m({3}, 1);  // 3 ids per sample
    m.add(Embedding<double>(5, 2));
    auto& e = dynamic_cast<Embedding<double>&>(m.layer(0));
    for (std::size_t r = 0; r < 5; ++r)
        for (std::size_t k = 0; k < 2; ++k)
            e.weight()(r, k) = double(10 * r + k);
    const Tensor<double> ids = {{4, 0, 4}, {2, 2, 1}};
    const Tensor<double>& y = m.forward(ids);
    REQUIRE(y.shape() == std::vector<std::size_t>{2, 3, 2});
    CHECK(y(0, 0, 0) == 40);
    CHECK(y(0, 0, 1) == 41);
    CHECK(y(0, 1, 1) == 1);
    CHECK(y(1, 2, 0) == 10);
    Tensor<double> g = Tensor<double>::from_shape({2, 3, 2});
    for (std::size_t i = 0; i < g.size(); ++i)
        g.data()[i] = double(i + 1);
    m.zero_grad();
    m.backward(g);
    const auto dw = m.gradients();
    // id 4 at (0,0) and (0,2): grads 1,2 and 5,6; id 2 at (1,0), (1,1): 7,8 and 9,10; id 1: 11,12; id 0: 3,4.
    CHECK(dw[4 * 2] == 6);
    CHECK(dw[4 * 2 + 1] == 8);
    CHECK(dw[2 * 2] == 16);
    CHECK(dw[1 * 2 + 1] == 12);
    CHECK(dw[0] == 3);
    CHECK(dw[3 * 2] == 0);  // id 3 is not in the batch
    // Initialised from N(0, 1): mean near 0, spread near 1 over a large table.
    Model<float> big({1}, 7);
    big.add(Embedding<float>(1000, 50));
    double sum = 0, sq = 0;
    for (float v : big.parameters()) {
        sum += v;
        sq += double(v) * v;
    }
    CHECK(std::abs(sum / 50000) < 0.03);
    CHECK(std::abs(sq / 50000 - 1) < 0.05);
}

TEST_CASE("Embedding: gradients of a model on top match finite differences", "[nn][embedding][grad]") {
    Rng rng(11);
    Model<double> m({4}, 3);
    m.add(Embedding<double>(6, 3)).add(dtrain::Flatten<double>()).add(dtrain::Dense<double>(12, 2));
    Tensor<double> ids = Tensor<double>::from_shape({3, 4});
    for (auto& v : ids)
        v = double(std::size_t(rng.uniform(0, 6)) % 6);
    const Tensor<double> y0 = m.forward(ids);
    Tensor<double> r = dtrain::test::random_tensor<double>({3, 2}, rng);
    m.zero_grad();
    m.forward(ids);
    m.backward(r);
    const std::vector<double> dp(m.gradients().begin(), m.gradients().end());
    auto p = m.parameters();
    double worst = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
        const double v = p[i];
        auto loss = [&] {
            const Tensor<double>& o = m.forward(ids);
            double s = 0;
            for (std::size_t k = 0; k < o.size(); ++k)
                s += o.data()[k] * r.data()[k];
            return s;
        };
        p[i] = v + 1e-6;
        const double lp = loss();
        p[i] = v - 1e-6;
        const double lm = loss();
        p[i] = v;
        worst = std::max(worst, std::abs((lp - lm) / 2e-6 - dp[i]));
    }
    CHECK(worst < 1e-6);
}

TEST_CASE("Embedding: ids that are not whole numbers in range, and wrong shapes, are errors naming them",
          "[nn][embedding]") {
    Model<float> m({2}, 1);
    m.add(Embedding<float>(3, 4));
    CHECK(contains(error_message([&] {
                       m.forward(Tensor<float>{{0, 3}});
                   }),
                   "Embedding(3, 4): id 3 at sample 0, position 1 is not a whole number in [0, 3)"));
    CHECK(contains(error_message([&] {
                       m.forward(Tensor<float>{{0, 1}, {1.5f, 0}});
                   }),
                   "id 1.5 at sample 1, position 0"));
    CHECK(contains(error_message([&] { m.forward(Tensor<float>{{-1, 0}}); }), "id -1 at sample 0"));
    const float nan = std::numeric_limits<float>::quiet_NaN();
    CHECK(contains(error_message([&] { m.forward(Tensor<float>{{nan, 0}}); }), "id nan at sample 0"));
    Model<float> img({2, 2}, 1);
    CHECK(contains(error_message([&] { img.add(Embedding<float>(3, 4)); }),
                   "expected ids of shape [batch, length] but got [batch, 2, 2]"));
    CHECK(contains(error_message([] { Embedding<float>(0, 4); }), "count and dim must be positive"));
    CHECK(
        contains(error_message([] { Embedding<float>(std::size_t(1) << 25, 1); }), "use Embedding<double>"));
}

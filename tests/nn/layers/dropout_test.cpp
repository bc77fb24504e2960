#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/dropout.hpp>
#include <dtrain/nn/model.hpp>

#include "nn/gradcheck.hpp"

using dtrain::Dropout;
using dtrain::Model;
using dtrain::Rng;
using dtrain::Tensor;
using dtrain::test::random_tensor;

TEST_CASE("Dropout: inverted scaling, drop rate, eval identity", "[nn][dropout]") {
    Rng rng(1);
    const Tensor<double> x = random_tensor<double>({50, 200}, rng, 0.5, 1.5);
    Dropout<double> d(0.3, 7);
    Tensor<double> y, g, gi;
    d.forward(x, y, true);
    std::size_t dropped = 0;
    bool scaled = true;
    for (std::size_t i = 0; i < x.size(); ++i) {
        if (y.data()[i] == 0.0)
            ++dropped;
        else
            scaled = scaled && std::abs(y.data()[i] - x.data()[i] / 0.7) < 1e-12;
    }
    CHECK(scaled);
    CHECK(double(dropped) / double(x.size()) == Approx(0.3).margin(0.02));
    // Backward uses the same mask.
    g = random_tensor<double>({50, 200}, rng);
    d.backward(x, y, g, gi, true);
    for (std::size_t i = 0; i < x.size(); ++i) {
        if (y.data()[i] == 0.0)
            CHECK(gi.data()[i] == 0.0);
        else if (std::abs(gi.data()[i] - g.data()[i] / 0.7) > 1e-12)
            FAIL("gradient not scaled like the output at " << i);
    }
    // Eval mode is the identity, forward and backward.
    d.forward(x, y, false);
    CHECK(dtrain::test::max_rel_diff(y, x) == 0.0);
    d.backward(x, y, g, gi, true);
    CHECK(dtrain::test::max_rel_diff(gi, g) == 0.0);
    CHECK(d.name() == "Dropout(0.3)");
    CHECK_THROWS_AS(Dropout<float>(1.0), dtrain::Error);
    CHECK_THROWS_AS(Dropout<float>(-0.1), dtrain::Error);
}

TEST_CASE("Dropout: the seed fixes the masks; a clone continues the same stream", "[nn][dropout]") {
    Rng rng(2);
    const Tensor<float> x = random_tensor<float>({8, 32}, rng, 1, 2);
    Dropout<float> a(0.5, 42), b(0.5, 42), c(0.5, 43);
    Tensor<float> ya, yb, yc;
    a.forward(x, ya, true);
    b.forward(x, yb, true);
    c.forward(x, yc, true);
    CHECK(dtrain::test::max_rel_diff(ya, yb) == 0.0);
    CHECK(dtrain::test::max_rel_diff(ya, yc) > 0.0);
    auto clone = a.clone();
    a.forward(x, ya, true);
    clone->forward(x, yb, true);
    CHECK(dtrain::test::max_rel_diff(ya, yb) == 0.0);
    // A new mask each step.
    b.forward(x, yc, true);
    CHECK(dtrain::test::max_rel_diff(ya, yc) == 0.0);
    a.forward(x, yb, true);
    CHECK(dtrain::test::max_rel_diff(ya, yb) > 0.0);
}

TEST_CASE("Dropout: gradients in train mode with a fixed mask", "[nn][dropout][grad]") {
    Rng rng(3);
    Model<double> m({6}, 1);
    m.add(dtrain::Dense<double>(6, 10)).add(Dropout<double>(0.4, 5)).add(dtrain::Dense<double>(10, 3));
    for (auto& v : m.parameters())
        v = rng.uniform(-1, 1);
    auto& drop = dynamic_cast<Dropout<double>&>(m.layer(1));
    const auto r = dtrain::test::check_model_gradients(m, random_tensor<double>({4, 6}, rng), rng,
                                                       [&] { drop.reseed(99); });
    CHECK(r.input_err < 1e-7);
    CHECK(r.param_err < 1e-7);
    CHECK(r.input_max > 1e-3);
    // The mask really drops something: some first-layer weight gradients are exactly zero.
    drop.reseed(99);
    Tensor<double> x = random_tensor<double>({1, 6}, rng);
    m.zero_grad();
    const Tensor<double> out = m.forward(x);
    m.backward(random_tensor<double>({1, 3}, rng));
    std::size_t zero_rows = 0;
    for (std::size_t o = 0; o < 10; ++o)
        zero_rows += m.gradients()[o * 6] == 0.0 ? 1 : 0;
    CHECK(zero_rows > 0);
    CHECK(zero_rows < 10);
}

TEST_CASE("Dropout: saved extra state restores the mask stream; too little state is an error",
          "[nn][dropout]") {
    Rng rng(3);
    const Tensor<float> x = random_tensor<float>({4, 16}, rng, 1, 2);
    Dropout<float> a(0.5, 42), b(0.5, 99);
    Tensor<float> ya, yb;
    a.forward(x, ya, true);  // advance a's stream
    std::vector<std::uint64_t> words;
    a.save_extra_state(words);
    CHECK(words.size() == Rng::state_words);
    dtrain::Span<const std::uint64_t> in(words.data(), words.size());
    b.load_extra_state(in);
    CHECK(in.empty());  // the cursor moved past b's words
    a.forward(x, ya, true);
    b.forward(x, yb, true);
    CHECK(dtrain::test::max_rel_diff(ya, yb) == 0.0);

    dtrain::Span<const std::uint64_t> short_in(words.data(), 3);
    CHECK_THROWS_WITH(b.load_extra_state(short_in),
                      Catch::Contains("Dropout(0.5): extra state needs 6 words, got 3"));
}

TEST_CASE("Model: extra_state() collects every layer's, set_extra_state() checks the count",
          "[nn][dropout]") {
    Model<float> m({4}, 1);
    m.add(Dropout<float>(0.2, 1)).add(dtrain::Dense<float>(4, 4)).add(Dropout<float>(0.3, 2));
    const auto words = m.extra_state();
    CHECK(words.size() == 2 * Rng::state_words);
    Model<float> other({4}, 1);
    other.add(Dropout<float>(0.2, 5)).add(dtrain::Dense<float>(4, 4)).add(Dropout<float>(0.3, 6));
    other.set_extra_state(dtrain::Span<const std::uint64_t>(words.data(), words.size()));
    CHECK(other.extra_state() == words);
    std::vector<std::uint64_t> longer = words;
    longer.push_back(0);
    CHECK_THROWS_WITH(other.set_extra_state(dtrain::Span<const std::uint64_t>(longer.data(), longer.size())),
                      Catch::Contains("1 words left over"));
}

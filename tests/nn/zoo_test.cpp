#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include <dtrain/nn/zoo.hpp>

TEST_CASE("zoo::singa_cnn has the SINGA tutorial's layers and PyTorch's parameter count", "[nn][zoo]") {
    auto m = dtrain::zoo::singa_cnn<float>(3);
    CHECK(m.num_layers() == 10);
    CHECK(m.num_parameters() == 431080);  // 520 + 25050 + 400500 + 5010
    CHECK(m.layer_output_shape(5) == dtrain::Shape{50, 4, 4});
    CHECK(m.output_shape() == dtrain::Shape{10});
    CHECK(m.layer(0).name().find("Conv2d(1, 20") == 0);
    // Equal seeds give equal initial parameters; different seeds differ.
    auto same = dtrain::zoo::singa_cnn<float>(3), other = dtrain::zoo::singa_cnn<float>(4);
    CHECK(std::equal(m.parameters().begin(), m.parameters().end(), same.parameters().begin()));
    CHECK_FALSE(std::equal(m.parameters().begin(), m.parameters().end(), other.parameters().begin()));
}

TEST_CASE("zoo::cifar_cnn is the CIFAR-10 benchmark project's network", "[nn][zoo]") {
    auto m = dtrain::zoo::cifar_cnn<float>();
    CHECK(m.input_shape() == dtrain::Shape{3, 32, 32});
    CHECK(m.num_parameters() == 89614);  // 4864 + 25616 + 48120 + 10164 + 850
    CHECK(m.layer_output_shape(6) == dtrain::Shape{400});
}

TEST_CASE("zoo::mlp puts ReLU between Dense layers and checks its widths", "[nn][zoo]") {
    auto m = dtrain::zoo::mlp<double>({784, 512, 256, 10});
    CHECK(m.num_layers() == 5);
    CHECK(m.num_parameters() == 535818);
    CHECK(m.layer(1).name() == "ReLU");
    CHECK(m.layer(4).name() == "Dense(256, 10)");
    CHECK_THROWS_WITH(dtrain::zoo::mlp<float>({4}),
                      Catch::Contains("zoo::mlp") && Catch::Contains("1 width"));
}

TEST_CASE("zoo::resnet9 is Needle's ResNet9 with two residual blocks", "[nn][zoo][residual]") {
    auto m = dtrain::zoo::resnet9<float>(5);
    CHECK(m.input_shape() == dtrain::Shape{3, 32, 32});
    CHECK(m.num_layers() == 18);  // 4 ConvBN (3 layers each), 2 Residual, Flatten, Dense, ReLU, Dense
    // ConvBN(a, b, k) = Conv2d (b*a*k*k + b) + BatchNorm2d (2b):
    // 2400 + 4704 + 2 * 9312 + 18624 + 74112 + 2 * 147840 + 16512 + 1290
    CHECK(m.num_parameters() == 431946);
    CHECK(m.state().size() == 1120);  // running mean and variance of 560 BatchNorm channels
    CHECK(m.layer_output_shape(2) == dtrain::Shape{16, 8, 8});
    CHECK(m.layer_output_shape(5) == dtrain::Shape{32, 4, 4});
    CHECK(m.layer(6).name().find("Residual(Conv2d(32, 32, kernel=3, padding=1), BatchNorm2d(32), ReLU") == 0);
    CHECK(m.parameter_ranges()[6].size == 18624);
    CHECK(m.layer_output_shape(12) == dtrain::Shape{128, 1, 1});
    CHECK(m.parameter_ranges()[13].size == 295680);
    CHECK(m.layer_output_shape(14) == dtrain::Shape{128});
    CHECK(m.output_shape() == dtrain::Shape{10});
    CHECK(m.layer(0).name() == "Conv2d(3, 16, kernel=7, stride=4, padding=3)");
    auto same = dtrain::zoo::resnet9<float>(5), other = dtrain::zoo::resnet9<float>(6);
    CHECK(std::equal(m.parameters().begin(), m.parameters().end(), same.parameters().begin()));
    CHECK_FALSE(std::equal(m.parameters().begin(), m.parameters().end(), other.parameters().begin()));
    // A training step on a small batch runs and gives finite outputs and gradients.
    dtrain::Rng rng(1);
    dtrain::Tensor<float> x = dtrain::Tensor<float>::from_shape({4, 3, 32, 32});
    for (auto& v : x)
        v = float(rng.uniform(-1, 1));
    const auto& out = m.forward(x);
    REQUIRE(out.shape()[1] == 10);
    for (auto v : out)
        CHECK(std::isfinite(v));
    dtrain::Tensor<float> g = dtrain::Tensor<float>::from_shape({4, 10});
    g.fill(0.1f);
    m.zero_grad();
    m.backward(g);
    double norm = 0.0;
    for (auto v : m.gradients())
        norm += double(v) * double(v);
    CHECK(std::isfinite(norm));
    CHECK(norm > 0.0);
}

#include <catch2/catch.hpp>

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

TEST_CASE("zoo::cifar_cnn is the course report's network", "[nn][zoo]") {
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

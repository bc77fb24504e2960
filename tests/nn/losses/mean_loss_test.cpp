// detail::mean_loss: the batch mean, returned even when it is not finite, and a non-finite loss never
// comes with an all-finite gradient.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include <dtrain/nn/losses/mean_loss.hpp>

using dtrain::Tensor;

TEST_CASE("mean_loss: the mean; a non-finite one with a finite gradient makes the gradient NaN",
          "[nn][loss][nonfinite]") {
    const double inf = std::numeric_limits<double>::infinity();
    Tensor<float> g = {{0.25f, -0.5f}};
    CHECK(dtrain::detail::mean_loss(3.0, 2, &g) == 1.5f);
    CHECK(g(0, 0) == 0.25f);
    // A finite double mean beyond float's range is an infinite float loss: the gradient becomes NaN.
    CHECK(dtrain::detail::mean_loss(1e39, 1, &g) == std::numeric_limits<float>::infinity());
    CHECK(std::isnan(g(0, 0)));
    CHECK(std::isnan(g(0, 1)));
    // A gradient that already holds a non-finite value is left as the loss wrote it (PyTorch's).
    g = {{0.25f, std::numeric_limits<float>::infinity()}};
    CHECK(std::isnan(dtrain::detail::mean_loss(std::nan(""), 2, &g)));
    CHECK(g(0, 0) == 0.25f);
    CHECK(std::isinf(g(0, 1)));
    // Without a gradient (value()): just the mean.
    CHECK(dtrain::detail::mean_loss<double>(-inf, 4) == -inf);
}

// NaN and infinity travel through the layers and losses the way they do in PyTorch: no layer turns a
// non-finite value into a finite one (issue: a NaN input used to train to garbage with a finite loss).
// The per-layer rules of ReLU, Sigmoid, Tanh, MaxPool2d and AvgPool2d are in their own tests; here the
// whole models, the layers whose rule is plain arithmetic, and the losses.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>

#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/batchnorm.hpp>
#include <dtrain/nn/layers/conv2d.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/dropout.hpp>
#include <dtrain/nn/layers/flatten.hpp>
#include <dtrain/nn/layers/pool2d.hpp>
#include <dtrain/nn/layers/residual.hpp>
#include <dtrain/nn/losses/cross_entropy.hpp>
#include <dtrain/nn/losses/mse.hpp>
#include <dtrain/nn/model.hpp>

#include "nn/gradcheck.hpp"

using dtrain::Labels;
using dtrain::Model;
using dtrain::Rng;
using dtrain::Tensor;
using dtrain::test::contains;
using dtrain::test::error_message;
using dtrain::test::random_tensor;

namespace {

const float nan_f = std::numeric_limits<float>::quiet_NaN();
const float inf_f = std::numeric_limits<float>::infinity();

// Number of NaN elements and of non-finite elements in row `r` of a [batch, ...] tensor.
template <class T>
std::pair<std::size_t, std::size_t> row_counts(const Tensor<T>& t, std::size_t r) {
    const std::size_t per = t.size() / t.shape()[0];
    std::size_t nans = 0, nonfinite = 0;
    for (std::size_t i = r * per; i < (r + 1) * per; ++i) {
        nans += std::isnan(t.data()[i]) ? 1 : 0;
        nonfinite += std::isfinite(t.data()[i]) ? 0 : 1;
    }
    return {nans, nonfinite};
}

// Runs `model` on a batch of 3 random samples whose sample 1 holds a NaN at flat position `pos`; checks
// that sample 1's logits are all NaN and the others finite, and that the cross-entropy returns a NaN loss
// (as PyTorch does) whose gradient is NaN in row 1 only, and that the backward pass carries the NaN into
// the parameters' gradients, where the distributed optimizers' check finds it.
void check_nan_reaches_loss(Model<float>& model, std::size_t pos) {
    Rng rng(5);
    Tensor<float> x = random_tensor<float>(dtrain::batch_shape(3, model.input_shape()), rng, 0.0, 1.0);
    x.data()[x.size() / 3 + pos] = nan_f;
    const Tensor<float> out = model.forward(x);
    CHECK(row_counts(out, 0).second == 0);
    CHECK(row_counts(out, 1).first == out.shape()[1]);
    CHECK(row_counts(out, 2).second == 0);
    dtrain::SoftmaxCrossEntropy<float> ce;
    Tensor<float> grad;
    float loss = 0.0f;
    CHECK_NOTHROW(loss = ce.compute(out, Labels{0, 1, 2}, grad));
    CHECK(std::isnan(loss));
    CHECK(row_counts(grad, 0).second == 0);
    CHECK(row_counts(grad, 1).first == grad.shape()[1]);
    CHECK(row_counts(grad, 2).second == 0);
    model.zero_grad();
    model.backward(grad);
    std::size_t nans = 0;
    for (float g : model.gradients())
        nans += std::isnan(g) ? 1 : 0;
    CHECK(nans > 0);
}

}  // namespace

TEST_CASE("Model: a NaN in one input sample makes the MLP's loss NaN", "[nn][model][nonfinite]") {
    // Before: ReLU mapped the NaN hidden row to 0, so the logits and the loss stayed finite.
    Model<float> mlp({6}, 3);
    mlp.add(dtrain::Dense<float>(6, 16)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(16, 3));
    check_nan_reaches_loss(mlp, 4);
}

TEST_CASE("Model: a NaN in one input sample makes the CNN's loss NaN", "[nn][model][nonfinite]") {
    // 1x1 convolutions keep the NaN at its pixel (3, 3), which is the last element of its 2x2 pooling
    // window: before, ReLU zeroed it and MaxPool2d skipped a NaN that was not first in its window.
    Model<float> cnn({1, 8, 8}, 3);
    cnn.add(dtrain::Conv2d<float>(1, 4, 1))
        .add(dtrain::ReLU<float>())
        .add(dtrain::MaxPool2d<float>(2))
        .add(dtrain::Conv2d<float>(4, 4, 3, 1, 1))
        .add(dtrain::ReLU<float>())
        .add(dtrain::MaxPool2d<float>(2))
        .add(dtrain::Flatten<float>())
        .add(dtrain::Dense<float>(16, 3));
    check_nan_reaches_loss(cnn, 3 * 8 + 3);
}

TEST_CASE("Dense and Conv2d: a NaN input reaches exactly the outputs that read it", "[nn][nonfinite]") {
    // Linear and conv2d are sums of products: NaN * w is NaN. Scratch buffers must not carry the NaN into
    // the next batch (the GEMMs overwrite with beta = 0).
    Model<float> dense({5}, 1);
    dense.add(dtrain::Dense<float>(5, 4));
    Rng rng(2);
    Tensor<float> x = random_tensor<float>({3, 5}, rng);
    const Tensor<float> clean = x;
    x(1, 2) = nan_f;
    Tensor<float> y = dense.forward(x);
    CHECK(row_counts(y, 0).second == 0);
    CHECK(row_counts(y, 1).first == 4);
    CHECK(row_counts(y, 2).second == 0);
    // dL/dW = g^T x: weight column 2 (input feature 2) is NaN in every row, the rest finite; dL/dx = g W
    // does not read x and stays finite.
    Tensor<float> g = Tensor<float>::from_shape({3, 4});
    g.fill(1.0f);
    dense.zero_grad();
    const Tensor<float> dx = dense.backward(g, true);
    for (std::size_t o = 0; o < 4; ++o)
        for (std::size_t i = 0; i < 5; ++i)
            CHECK(std::isnan(dense.gradients()[o * 5 + i]) == (i == 2));
    CHECK(row_counts(dx, 1).second == 0);
    y = dense.forward(clean);
    CHECK(row_counts(y, 1).second == 0);

    // Conv2d(1, 2, 3, padding 1): a NaN at pixel (2, 3) of sample 1 makes exactly the outputs whose 3x3
    // window covers it NaN, in both channels: rows 1-3, columns 2-4.
    Model<float> conv({1, 5, 6}, 1);
    conv.add(dtrain::Conv2d<float>(1, 2, 3, 1, 1));
    Tensor<float> xi = random_tensor<float>({2, 1, 5, 6}, rng);
    const Tensor<float> clean_i = xi;
    xi(1, 0, 2, 3) = nan_f;
    y = conv.forward(xi);
    CHECK(row_counts(y, 0).second == 0);
    for (std::size_t c = 0; c < 2; ++c)
        for (std::size_t i = 0; i < 5; ++i)
            for (std::size_t j = 0; j < 6; ++j)
                CHECK(std::isnan(y(1, c, i, j)) == (i >= 1 && i <= 3 && j >= 2 && j <= 4));
    y = conv.forward(clean_i);
    CHECK(row_counts(y, 1).second == 0);
}

TEST_CASE("BatchNorm, Dropout, Flatten and Residual propagate NaN and inf like PyTorch", "[nn][nonfinite]") {
    // batch_norm in training: a NaN in one sample makes its channel's batch mean and variance NaN, so the
    // whole channel is NaN for every sample (and its running statistics become NaN); other channels are
    // unaffected. An inf gives mean inf and variance NaN (inf - inf): the same.
    for (float bad : {nan_f, inf_f}) {
        Model<float> bn({3}, 1);
        bn.add(dtrain::BatchNorm1d<float>(3));
        Rng rng(4);
        Tensor<float> x = random_tensor<float>({4, 3}, rng);
        x(2, 1) = bad;
        const Tensor<float> y = bn.forward(x);
        for (std::size_t r = 0; r < 4; ++r) {
            CHECK(std::isfinite(y(r, 0)));
            CHECK(std::isnan(y(r, 1)));
            CHECK(std::isfinite(y(r, 2)));
        }
        CHECK(!std::isfinite(bn.state()[1]));  // running mean of channel 1: nan, or inf for an inf input
        CHECK(std::isnan(bn.state()[3 + 1]));  // running variance of channel 1
        CHECK(std::isfinite(bn.state()[0]));
    }
    // In eval mode (finite running statistics) only the element itself is NaN / inf.
    Model<float> bn({3}, 1);
    bn.add(dtrain::BatchNorm1d<float>(3));
    bn.eval();
    Tensor<float> xe = {{1.0f, nan_f, inf_f}, {0.5f, 0.5f, 0.5f}};
    Tensor<float> ye = bn.forward(xe);
    CHECK(std::isfinite(ye(0, 0)));
    CHECK(std::isnan(ye(0, 1)));
    CHECK(ye(0, 2) == inf_f);
    CHECK(row_counts(ye, 1).second == 0);

    // Dropout multiplies by its mask (0 or 1 / (1 - p)), as torch's dropout does: a dropped NaN stays NaN
    // (0 * nan = nan) and a dropped inf becomes NaN (0 * inf); the backward multiplies likewise.
    dtrain::Dropout<float> drop(0.5, 7);
    Tensor<float> xd = Tensor<float>::from_shape({4, 16}), yd, dd;
    xd.fill(nan_f);
    drop.forward(xd, yd, true);
    CHECK(row_counts(yd, 0).first + row_counts(yd, 3).first == 32);
    drop.backward(xd, yd, xd, dd, true);
    CHECK(row_counts(dd, 1).first == 16);
    xd.fill(inf_f);
    drop.forward(xd, yd, true);
    std::size_t dropped = 0, kept = 0;
    for (auto v : yd) {
        dropped += std::isnan(v) ? 1 : 0;
        kept += v == inf_f ? 1 : 0;
    }
    CHECK(dropped > 0);
    CHECK(kept > 0);
    CHECK(dropped + kept == 64);

    // Flatten copies; Residual adds f(x) + x: with f = ReLU, nan -> nan, inf -> inf, -inf -> 0 + -inf.
    dtrain::Flatten<float> flat;
    Tensor<float> xf = Tensor<float>::from_shape({1, 1, 1, 2}), yf;
    xf(0, 0, 0, 0) = nan_f, xf(0, 0, 0, 1) = -inf_f;
    flat.forward(xf, yf, true);
    CHECK(std::isnan(yf(0, 0)));
    CHECK(yf(0, 1) == -inf_f);
    Model<float> res({3}, 1);
    res.add(dtrain::Residual<float>().add(dtrain::ReLU<float>()));
    const Tensor<float> yr = res.forward(Tensor<float>({{nan_f, inf_f, -inf_f}}));
    CHECK(std::isnan(yr(0, 0)));
    CHECK(yr(0, 1) == inf_f);
    CHECK(yr(0, 2) == -inf_f);
}

TEST_CASE("Losses: a non-finite loss is returned like PyTorch's, with a non-finite gradient",
          "[nn][nonfinite]") {
    // log_softmax shifts by the row maximum: a NaN anywhere in the row (not only first, where the max
    // would pick it up) or a +inf (inf - inf = nan) makes the whole row's log-probabilities, hence its loss
    // and softmax gradient, NaN. The loss is returned (PyTorch returns nan; dtrain used to throw a
    // rank-local error that NonFinite::Skip could not skip). The other rows are untouched.
    dtrain::SoftmaxCrossEntropy<float> ce;
    Tensor<float> grad;
    for (float bad : {nan_f, inf_f}) {
        for (std::size_t pos : {0, 2}) {
            Tensor<float> z = {{0.5f, 1.0f, -1.0f}, {0.2f, -0.3f, 0.1f}, {1.0f, 2.0f, 3.0f}};
            z(1, pos) = bad;
            INFO("bad logit " << bad << " at column " << pos);
            CHECK(std::isnan(ce.compute(z, Labels{0, 1, 2}, grad)));
            CHECK(row_counts(grad, 0).second == 0);
            CHECK(row_counts(grad, 1).first == 3);
            CHECK(row_counts(grad, 2).second == 0);
            CHECK(std::isnan(ce.value(z, Labels{0, 1, 2})));
            // The same with one-hot targets.
            Tensor<float> t = Tensor<float>::from_shape({3, 3});
            t.fill(0.0f);
            t(0, 0) = t(1, 1) = t(2, 2) = 1.0f;
            CHECK(std::isnan(ce.compute(z, t, grad)));
            CHECK(row_counts(grad, 0).second == 0);
            CHECK(row_counts(grad, 1).first == 3);
        }
    }
    // A -inf logit is an ordinary zero probability, unless it is the label's: then the loss is +inf.
    // PyTorch's gradient stays finite there (softmax - one-hot); dtrain's is NaN, so the step cannot train on
    // silently.
    Tensor<float> z = {{0.5f, -inf_f, -1.0f}};
    CHECK(std::isfinite(ce.compute(z, Labels{0}, grad)));
    CHECK(grad(0, 1) == 0.0f);
    Tensor<float> z2 = {{0.5f, -inf_f, -1.0f}, {0.2f, 0.3f, 0.1f}};
    CHECK(ce.compute(z2, Labels{1, 0}, grad) == inf_f);
    CHECK(row_counts(grad, 0).first == 3);
    CHECK(row_counts(grad, 1).first == 3);
    CHECK(ce.value(z2, Labels{1, 0}) == inf_f);
    // A NaN or inf target: a NaN loss and a non-finite gradient element.
    for (float bad : {nan_f, inf_f}) {
        Tensor<float> t = {{1.0f, 0.0f, 0.0f}};
        t(0, 2) = bad;
        INFO("bad target " << bad);
        CHECK(!std::isfinite(ce.compute(Tensor<float>({{0.5f, 1.0f, -1.0f}}), t, grad)));
        CHECK(row_counts(grad, 0).second > 0);
    }

    // mse_loss: (out - target)^2, so a NaN or inf output or target gives that element a NaN or inf gradient
    // and the loss is non-finite; the other gradient elements are finite.
    dtrain::MeanSquaredError<float> mse;
    Tensor<float> out = {{0.5f, nan_f}, {inf_f, 0.0f}};
    CHECK(std::isnan(mse.compute(out, Labels{0, 1}, grad)));
    CHECK(std::isfinite(grad(0, 0)));
    CHECK(std::isnan(grad(0, 1)));
    CHECK(grad(1, 0) == inf_f);
    CHECK(std::isfinite(grad(1, 1)));
    Tensor<float> target = {{0.5f, 0.5f}, {0.0f, -inf_f}};
    CHECK(mse.compute(Tensor<float>({{0.5f, 0.5f}, {0.0f, 0.0f}}), target, grad) == inf_f);
    CHECK(grad(1, 1) == inf_f);
    CHECK(row_counts(grad, 0).second == 0);
    // A squared error beyond double's range with finite differences: the loss is +inf and the gradient,
    // finite in PyTorch, is NaN.
    dtrain::MeanSquaredError<double> mse_d;
    Tensor<double> gd;
    CHECK(std::isinf(mse_d.compute(Tensor<double>({{1e200, 0.0}}), Tensor<double>({{-1e200, 0.0}}), gd)));
    CHECK(std::isnan(gd(0, 0)));
    CHECK(std::isnan(gd(0, 1)));
}

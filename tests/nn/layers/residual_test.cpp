#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/batchnorm.hpp>
#include <dtrain/nn/layers/conv2d.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/dropout.hpp>
#include <dtrain/nn/layers/flatten.hpp>
#include <dtrain/nn/layers/residual.hpp>
#include <dtrain/nn/model.hpp>

#include "nn/gradcheck.hpp"

using dtrain::BatchNorm2d;
using dtrain::Conv2d;
using dtrain::Dense;
using dtrain::Model;
using dtrain::ReLU;
using dtrain::Residual;
using dtrain::Rng;
using dtrain::Tensor;
using dtrain::test::contains;
using dtrain::test::error_message;
using dtrain::test::params_of;
using dtrain::test::random_tensor;

namespace {

// f = Conv2d(c, c, 3, padding 1) - BatchNorm2d(c) - ReLU: ResNet9's ConvBN with the shape kept.
template <class T>
Residual<T> conv_bn_block(std::size_t c) {
    return Residual<T>().add(Conv2d<T>(c, c, 3, 1, 1)).add(BatchNorm2d<T>(c)).add(ReLU<T>());
}

// Random parameters (BatchNorm's gamma away from 0) and running statistics (variances > 0).
void randomize(Model<double>& m, Rng& rng) {
    for (auto& v : m.parameters())
        v = rng.uniform(-1.0, 1.0);
    for (auto& v : m.state())
        v = rng.uniform(0.2, 1.2);
}

// Copies parameters and state of `from` into `to` (same flat layout).
void copy_buffers(const Model<double>& from, Model<double>& to) {
    REQUIRE(from.num_parameters() == to.num_parameters());
    REQUIRE(from.state().size() == to.state().size());
    std::copy(from.parameters().begin(), from.parameters().end(), to.parameters().begin());
    std::copy(from.state().begin(), from.state().end(), to.state().begin());
}

std::vector<double> values(dtrain::Span<const double> s) {
    return std::vector<double>(s.begin(), s.end());
}

}  // namespace

TEST_CASE("Residual: gradients match finite differences (Conv2d-BatchNorm2d-ReLU, train and eval)",
          "[nn][residual][grad]") {
    Rng rng(5);
    for (bool training : {true, false}) {
        // A channel change inside f (2 -> 3 -> 2) and a layer on each side of the block.
        Model<double> m({2, 4, 4}, 1);
        m.add(Conv2d<double>(2, 2, 1))
            .add(Residual<double>()
                     .add(Conv2d<double>(2, 3, 3, 1, 1))
                     .add(BatchNorm2d<double>(3))
                     .add(ReLU<double>())
                     .add(Conv2d<double>(3, 2, 1)))
            .add(dtrain::Flatten<double>())
            .add(Dense<double>(32, 3));
        randomize(m, rng);
        if (!training) m.eval();
        const auto r = dtrain::test::check_model_gradients(m, random_tensor<double>({3, 2, 4, 4}, rng), rng);
        INFO("training=" << training);
        CHECK(r.input_err < 1e-6);
        CHECK(r.param_err < 1e-6);
        CHECK(r.input_max > 1e-3);
        CHECK(r.param_max > 1e-3);
    }
    // Nested blocks, with the block first in the model (its input gradient is the model's).
    Model<double> n({5}, 2);
    n.add(Residual<double>()
              .add(Dense<double>(5, 4))
              .add(ReLU<double>())
              .add(Dense<double>(4, 5))
              .add(Residual<double>().add(Dense<double>(5, 5)).add(dtrain::Tanh<double>())));
    randomize(n, rng);
    const auto r = dtrain::test::check_model_gradients(n, random_tensor<double>({4, 5}, rng), rng);
    CHECK(r.input_err < 1e-6);
    CHECK(r.param_err < 1e-6);
    CHECK(r.input_max > 1e-3);
}

TEST_CASE("Residual: forward is f(x) + x and backward adds the skip path, computed from the children",
          "[nn][residual]") {
    Rng rng(6);
    // The same children once inside a block and once directly in a model, from the same seed.
    Model<double> block({2, 5, 5}, 7), plain({2, 5, 5}, 7);
    block.add(conv_bn_block<double>(2));
    plain.add(Conv2d<double>(2, 2, 3, 1, 1)).add(BatchNorm2d<double>(2)).add(ReLU<double>());
    // The children draw from the model's generator as if they were added directly.
    CHECK(params_of(block) == params_of(plain));
    randomize(block, rng);
    copy_buffers(block, plain);

    const Tensor<double> x = random_tensor<double>({3, 2, 5, 5}, rng);
    const Tensor<double> y = block.forward(x);
    const Tensor<double> f = plain.forward(x);
    REQUIRE(y.shape() == x.shape());
    double max_diff = 0.0, max_f = 0.0;
    for (std::size_t k = 0; k < x.size(); ++k) {
        max_diff = std::max(max_diff, std::abs(y.data()[k] - (f.data()[k] + x.data()[k])));
        max_f = std::max(max_f, std::abs(f.data()[k]));
    }
    CHECK(max_diff < 1e-12);
    CHECK(max_f > 0.1);  // f is not trivially zero
    // BatchNorm's running statistics were updated in the block's state slice exactly as in the plain model.
    CHECK(values(block.state()) == values(plain.state()));

    // Backward: the same parameter gradients; the input gradient gains grad_out through the skip path.
    const Tensor<double> g = random_tensor<double>({3, 2, 5, 5}, rng);
    block.zero_grad();
    plain.zero_grad();
    const Tensor<double> dx = block.backward(g, true);
    const Tensor<double> df = plain.backward(g, true);
    for (std::size_t i = 0; i < block.num_parameters(); ++i)
        CHECK(block.gradients()[i] == Approx(plain.gradients()[i]).epsilon(1e-12).margin(1e-14));
    max_diff = 0.0;
    for (std::size_t k = 0; k < x.size(); ++k)
        max_diff = std::max(max_diff, std::abs(dx.data()[k] - (df.data()[k] + g.data()[k])));
    CHECK(max_diff < 1e-12);
    // backward() ADDS: a second pass doubles the gradients.
    const std::vector<double> once = values(block.gradients());
    block.forward(x);
    block.backward(g);
    for (std::size_t i = 0; i < once.size(); ++i)
        CHECK(block.gradients()[i] == Approx(2 * once[i]).margin(1e-14));
}

TEST_CASE("Residual: parameters and state live in the model's flat buffers, split among the children",
          "[nn][residual]") {
    Model<float> m({2, 4, 4}, 1);
    m.add(Conv2d<float>(2, 3, 1)).add(conv_bn_block<float>(3)).add(dtrain::Flatten<float>());
    m.add(Dense<float>(48, 2));
    auto& block = dynamic_cast<Residual<float>&>(m.layer(1));
    REQUIRE(block.num_layers() == 3);
    // Conv2d(2,3,1) 9 | block: Conv2d(3,3,3) 84, BatchNorm2d(3) 6, ReLU 0 | Flatten 0 | Dense(48,2) 98
    CHECK(block.num_params() == 84 + 6);
    CHECK(block.num_state() == 6);
    CHECK(m.num_parameters() == 9 + 84 + 6 + 98);
    CHECK(m.state().size() == 6);
    CHECK(m.parameter_ranges()[1].offset == 9);
    CHECK(m.parameter_ranges()[1].size == 90);
    CHECK(m.parameter_ranges()[3].offset == 99);
    CHECK(m.state_ranges()[1].offset == 0);
    CHECK(m.state_ranges()[1].size == 6);
    CHECK(block.parameter_ranges()[1].offset == 84);
    CHECK(block.parameter_ranges()[2].size == 0);
    CHECK(block.state_ranges()[1].size == 6);
    // The children's views point into the model's buffers at the block's offset plus their own.
    auto& conv = dynamic_cast<Conv2d<float>&>(block.layer(0));
    auto& bn = dynamic_cast<BatchNorm2d<float>&>(block.layer(1));
    CHECK(&conv.weight()(0, 0, 0, 0) == m.parameters().data() + 9);
    CHECK(&conv.bias()(0) == m.parameters().data() + 9 + 81);
    CHECK(&bn.gamma()(0) == m.parameters().data() + 9 + 84);
    CHECK(&bn.beta()(0) == m.parameters().data() + 9 + 87);
    CHECK(&bn.running_mean()(0) == m.state().data());
    CHECK(&bn.running_var()(0) == m.state().data() + 3);
    // BatchNorm's initial values arrived through the block's slices.
    CHECK(m.parameters()[9 + 84] == 1.0f);
    CHECK(m.state()[3] == 1.0f);
    CHECK(m.layer(1).name() == "Residual(Conv2d(3, 3, kernel=3, padding=1), BatchNorm2d(3), ReLU)");
    CHECK(contains(m.summary(), "Residual(Conv2d(3, 3"));
    // Two stateful children: each gets its own part of the block's state slice.
    Model<float> two({3, 2, 2}, 1);
    two.add(Residual<float>().add(BatchNorm2d<float>(3)).add(ReLU<float>()).add(BatchNorm2d<float>(3)));
    auto& b2 = dynamic_cast<Residual<float>&>(two.layer(0));
    CHECK(two.num_parameters() == 12);
    CHECK(two.state().size() == 12);
    CHECK(&dynamic_cast<BatchNorm2d<float>&>(b2.layer(2)).gamma()(0) == two.parameters().data() + 6);
    CHECK(&dynamic_cast<BatchNorm2d<float>&>(b2.layer(2)).running_mean()(0) == two.state().data() + 6);
    CHECK(two.state()[9] == 1.0f);  // the second running variance was initialised in place
    // The block cannot grow once its slice is fixed.
    const std::string msg = error_message([&] { block.add(ReLU<float>()); });
    CHECK(contains(msg, "Residual("));
    CHECK(contains(msg, "already part of a model"));
}

TEST_CASE("Residual: train mode updates BatchNorm's running statistics, eval mode uses them",
          "[nn][residual]") {
    Rng rng(8);
    Model<double> block({2, 3, 3}, 3), plain({2, 3, 3}, 3);
    block.add(conv_bn_block<double>(2));
    plain.add(Conv2d<double>(2, 2, 3, 1, 1)).add(BatchNorm2d<double>(2)).add(ReLU<double>());
    randomize(block, rng);
    copy_buffers(block, plain);
    const Tensor<double> x = random_tensor<double>({4, 2, 3, 3}, rng, 0.5, 2.5);

    const std::vector<double> before = values(block.state());
    block.forward(x);
    const std::vector<double> trained = values(block.state());
    CHECK(trained != before);  // moved towards the batch statistics

    block.eval();
    plain.eval();
    copy_buffers(block, plain);
    const Tensor<double> ye = block.forward(x);
    CHECK(values(block.state()) == trained);  // eval does not update them
    const Tensor<double> fe = plain.forward(x);
    for (std::size_t k = 0; k < x.size(); ++k)
        CHECK(ye.data()[k] == Approx(fe.data()[k] + x.data()[k]).margin(1e-12));
    // Eval output really depends on the statistics in the model's state buffer.
    block.state()[0] += 1.0;
    CHECK(dtrain::test::max_rel_diff(block.forward(x), ye) > 1e-3);
    // Eval forward works on a single sample (running statistics), training needs more than one value.
    const Tensor<double> one = random_tensor<double>({1, 2, 1, 1}, rng);
    Model<double> tiny({2, 1, 1}, 1);
    tiny.add(Residual<double>().add(BatchNorm2d<double>(2)));
    tiny.eval();
    CHECK_NOTHROW(tiny.forward(one));
    tiny.train();
    CHECK(contains(error_message([&] { tiny.forward(one); }), "more than one value"));
}

TEST_CASE("Residual: errors name the block and the shapes", "[nn][residual][errors]") {
    // f changes the channels.
    std::string msg = error_message([] {
        Model<float> m({2, 5, 5});
        m.add(Residual<float>().add(Conv2d<float>(2, 3, 3, 1, 1)));
    });
    CHECK(contains(msg, "Residual(Conv2d(2, 3, kernel=3, padding=1))"));
    CHECK(contains(msg, "[batch, 2, 5, 5]"));
    CHECK(contains(msg, "[batch, 3, 5, 5]"));
    CHECK(contains(msg, "keep the shape"));
    // f changes the spatial size.
    msg = error_message([] {
        Model<float> m({2, 5, 5});
        m.add(Residual<float>().add(Conv2d<float>(2, 2, 3)));
    });
    CHECK(contains(msg, "[batch, 2, 5, 5]"));
    CHECK(contains(msg, "[batch, 2, 3, 3]"));
    // A child that does not fit its input: the block, the child's index and the child's own message.
    msg = error_message([] {
        Model<float> m({2, 5, 5});
        m.add(Residual<float>().add(ReLU<float>()).add(Conv2d<float>(3, 2, 3, 1, 1)));
    });
    CHECK(contains(msg, "Residual(ReLU, Conv2d(3, 2"));
    CHECK(contains(msg, "layer 1"));
    CHECK(contains(msg, "[batch, 3, H, W]"));
    CHECK(contains(msg, "[batch, 2, 5, 5]"));
    // An empty block.
    msg = error_message([] {
        Model<float> m({4});
        m.add(Residual<float>());
    });
    CHECK(contains(msg, "no layers"));
    CHECK(contains(error_message([] { Residual<float>().add(std::unique_ptr<dtrain::Layer<float>>()); }),
                   "null layer"));
    // A block used outside a model on a batch whose shape f does not keep.
    Residual<float> r = Residual<float>().add(Conv2d<float>(1, 1, 3));
    Model<float> holder({1, 6, 6});
    CHECK_THROWS(holder.add(r));
    std::vector<float> p(r.num_params(), 0.1f), g(r.num_params(), 0.0f);
    r.bind(p.data(), g.data(), nullptr);
    Tensor<float> x = Tensor<float>::from_shape({2, 1, 6, 6}), y;
    msg = error_message([&] { r.forward(x, y, true); });
    CHECK(contains(msg, "[2, 1, 6, 6]"));
    CHECK(contains(msg, "[2, 1, 4, 4]"));
}

TEST_CASE("Residual: clone and Model copy/move give identical outputs and independent parameters",
          "[nn][residual][copy]") {
    Rng rng(9);
    Model<double> m({2, 4, 4}, 4);
    m.add(conv_bn_block<double>(2)).add(dtrain::Flatten<double>()).add(Dense<double>(32, 3));
    randomize(m, rng);
    const Tensor<double> x = random_tensor<double>({3, 2, 4, 4}, rng);
    const Tensor<double> g = random_tensor<double>({3, 3}, rng);
    m.eval();  // the running statistics do not move between the passes compared below
    const Tensor<double> y = m.forward(x);

    // clone(): an unbound block of the same configuration with its own children.
    std::unique_ptr<dtrain::Layer<double>> c = m.layer(0).clone();
    CHECK(c->name() == m.layer(0).name());
    CHECK(c->num_params() == m.layer(0).num_params());
    CHECK(c->num_state() == m.layer(0).num_state());
    Model<double> from_clone({2, 4, 4}, 99);
    from_clone.add(std::move(c)).add(dtrain::Flatten<double>()).add(Dense<double>(32, 3));
    from_clone.eval();
    CHECK(params_of(from_clone) != params_of(m));  // initialised from its own seed
    copy_buffers(m, from_clone);
    CHECK(dtrain::test::max_rel_diff(from_clone.forward(x), y) == 0.0);
    from_clone.parameters()[0] += 1.0;  // the first child's weight: m is untouched
    CHECK(dtrain::test::max_rel_diff(m.forward(x), y) == 0.0);

    // Copy: equal outputs, then independent parameters, gradients and views.
    Model<double> copy = m;
    CHECK(dtrain::test::max_rel_diff(copy.forward(x), y) == 0.0);
    auto& copy_conv = dynamic_cast<Conv2d<double>&>(dynamic_cast<Residual<double>&>(copy.layer(0)).layer(0));
    CHECK(&copy_conv.weight()(0, 0, 0, 0) == copy.parameters().data());
    m.zero_grad();
    copy.zero_grad();
    copy.forward(x);
    copy.backward(g);
    for (auto v : m.gradients())
        REQUIRE(v == 0.0);  // the copy's block wrote into the copy's gradients only
    const std::vector<double> copy_grads = values(copy.gradients());
    for (std::size_t i = 0; i < copy.num_parameters(); ++i)
        copy.parameters()[i] -= 0.1 * copy_grads[i];  // one SGD step on the copy
    CHECK(dtrain::test::max_rel_diff(m.forward(x), y) == 0.0);
    CHECK(dtrain::test::max_rel_diff(copy.forward(x), y) > 1e-6);
    copy.state()[0] += 1.0;  // the copy's running mean: m's eval output is untouched
    CHECK(dtrain::test::max_rel_diff(m.forward(x), y) == 0.0);

    // Copy assignment, move construction and move assignment keep the outputs and rebind the views.
    Model<double> assigned({1}, 0);
    assigned = m;
    CHECK(dtrain::test::max_rel_diff(assigned.forward(x), y) == 0.0);
    Model<double> moved(std::move(assigned));
    CHECK(dtrain::test::max_rel_diff(moved.forward(x), y) == 0.0);
    Model<double> move_assigned({1}, 0);
    move_assigned = std::move(moved);
    CHECK(dtrain::test::max_rel_diff(move_assigned.forward(x), y) == 0.0);
    auto& bn =
        dynamic_cast<BatchNorm2d<double>&>(dynamic_cast<Residual<double>&>(move_assigned.layer(0)).layer(1));
    CHECK(&bn.running_var()(0) == move_assigned.state().data() + 2);
    // Training the moved-to model changes its parameters and gradients only.
    move_assigned.train();
    move_assigned.zero_grad();
    move_assigned.forward(x);
    move_assigned.backward(g);
    for (auto v : m.gradients())
        CHECK(v == 0.0);
    CHECK(dtrain::test::max_rel_diff(m.forward(x), y) == 0.0);
}

TEST_CASE("Residual: partial gradient reports are forwarded with the children's offsets",
          "[nn][residual][overlap]") {
    Rng rng(10);
    Model<double> m({6}, 3);
    m.add(Dense<double>(6, 6))
        .add(Residual<double>()
                 .add(Dense<double>(6, 8))
                 .add(ReLU<double>())
                 .add(Dense<double>(8, 6)))  // 56 + 0 + 54 values
        .add(Dense<double>(6, 3));
    randomize(m, rng);
    Model<double> plain = m;
    const Tensor<double> x = random_tensor<double>({4, 6}, rng);
    const Tensor<double> g = random_tensor<double>({4, 3}, rng);
    struct Event {
        std::size_t layer, begin, end;
    };
    std::vector<Event> partial;
    std::vector<std::size_t> ready;
    m.set_grad_ready_hook([&](std::size_t i) { ready.push_back(i); });
    m.set_partial_grad_hook(
        [&](std::size_t i, std::size_t b, std::size_t e) {
            partial.push_back({i, b, e});
        },
        12);
    m.zero_grad();
    m.forward(x);
    m.backward(g);
    CHECK(ready == std::vector<std::size_t>{2, 1, 0});
    // The block's reports cover its slice [0, 110) once, as consecutive pieces from the end to the start,
    // and include the children's own smaller pieces (Dense(8, 6) reports 6 + 12 + ... values).
    std::size_t expect_end = 110, pieces = 0, smallest = 110;
    for (const auto& e : partial) {
        if (e.layer != 1) continue;
        CHECK(e.end == expect_end);
        CHECK(e.begin < e.end);
        expect_end = e.begin;
        smallest = std::min(smallest, e.end - e.begin);
        ++pieces;
    }
    CHECK(expect_end == 0);
    CHECK(pieces >= 4);
    CHECK(smallest < 54);
    CHECK(partial.front().layer == 2);  // Dense(6, 3) reports first, then the block, then Dense(6, 6)
    // The gradients are those of the undivided computation.
    plain.zero_grad();
    plain.forward(x);
    plain.backward(g);
    for (std::size_t i = 0; i < m.num_parameters(); ++i)
        CHECK(m.gradients()[i] == Approx(plain.gradients()[i]).epsilon(1e-12).margin(1e-14));
}

TEST_CASE("Residual: the children's extra state (Dropout's generator) is saved and restored in order",
          "[nn][residual][checkpoint]") {
    Rng rng(12);
    Model<double> m({6}, 1);
    m.add(Residual<double>().add(Dense<double>(6, 6)).add(dtrain::Dropout<double>(0.5, 3)))
        .add(dtrain::Dropout<double>(0.5, 4));
    const Tensor<double> x = random_tensor<double>({5, 6}, rng, 0.5, 1.5);
    m.forward(x);  // both generators move away from their seeds
    const std::vector<std::uint64_t> saved = m.extra_state();
    CHECK(saved.size() == 2 * Rng::state_words);  // the block's Dropout, then the model's
    const Tensor<double> y1 = m.forward(x);
    const Tensor<double> y2 = m.forward(x);
    CHECK(dtrain::test::max_rel_diff(y1, y2) > 1e-3);  // new masks
    m.set_extra_state(dtrain::Span<const std::uint64_t>(saved.data(), saved.size()));
    CHECK(dtrain::test::max_rel_diff(m.forward(x), y1) == 0.0);
    // The block's generator alone: restoring only the model's Dropout would not repeat y1.
    std::vector<std::uint64_t> swapped(saved.begin() + Rng::state_words, saved.end());
    swapped.insert(swapped.end(), saved.begin(), saved.begin() + Rng::state_words);
    m.set_extra_state(dtrain::Span<const std::uint64_t>(swapped.data(), swapped.size()));
    CHECK(dtrain::test::max_rel_diff(m.forward(x), y1) > 1e-3);
}

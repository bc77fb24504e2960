#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/batchnorm.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/dropout.hpp>
#include <dtrain/nn/sequential.hpp>

#include "nn/gradcheck.hpp"
#include "optim/alloc_counter.hpp"

using dtrain::BackwardListener;
using dtrain::BatchNorm1d;
using dtrain::Dense;
using dtrain::Dropout;
using dtrain::ReLU;
using dtrain::Rng;
using dtrain::Sequential;
using dtrain::Tanh;
using dtrain::Tensor;
using dtrain::test::contains;
using dtrain::test::error_message;
using dtrain::test::max_rel_diff;
using dtrain::test::random_tensor;

namespace {

// A sequence of the given layers.
template <class... L>
Sequential<double> sequence_of(L&&... layers) {
    Sequential<double> s;
    (s.add(std::make_unique<std::decay_t<L>>(std::forward<L>(layers))), ...);
    return s;
}

// A sequence with the flat buffers its owner (a Model) would hold, bound to them.
struct Owned {
    Sequential<double> seq;
    std::vector<double> params, grads, state;

    explicit Owned(Sequential<double> s)
        : seq(std::move(s)), params(seq.num_params()), grads(seq.num_params()), state(seq.num_state()) {
        seq.bind(params.data(), grads.data(), state.data());
    }
    // Bound as above, with random parameters (BatchNorm's gamma away from 0) and running variances > 0.
    Owned(Sequential<double> s, Rng& rng) : Owned(std::move(s)) {
        for (auto& v : params)
            v = rng.uniform(-1.0, 1.0);
        for (auto& v : state)
            v = rng.uniform(0.2, 1.2);
    }
};

// What a backward() listener saw: {layer, begin, end} for a partial report, {layer, 0, 0} for "done".
struct Recorder {
    struct Event {
        std::size_t layer, begin, end;
        bool done;
    };
    std::vector<Event> events;

    static void partial(void* self, std::size_t layer, std::size_t begin, std::size_t end) {
        static_cast<Recorder*>(self)->events.push_back({layer, begin, end, false});
    }
    static void done(void* self, std::size_t layer) {
        static_cast<Recorder*>(self)->events.push_back({layer, 0, 0, true});
    }
    BackwardListener listener(std::size_t chunk) { return BackwardListener{&partial, &done, this, chunk}; }
};

// Runs the sequence's layers one by one (forward, then backward last to first) without Sequential, on the
// same layer objects; returns every layer's output and the input gradient.
struct ByHand {
    std::vector<Tensor<double>> outs;
    Tensor<double> grad_in;
};
ByHand by_hand(Sequential<double>& s, const Tensor<double>& x, const Tensor<double>& grad_out,
               bool training) {
    ByHand r;
    r.outs.resize(s.num_layers());
    for (std::size_t i = 0; i < s.num_layers(); ++i)
        s.layer(i).forward(i == 0 ? x : r.outs[i - 1], r.outs[i], training);
    Tensor<double> g = grad_out;
    for (std::size_t i = s.num_layers(); i-- > 0;) {
        Tensor<double> gin;
        s.layer(i).backward(i == 0 ? x : r.outs[i - 1], r.outs[i], g, gin, true);
        g = gin;
    }
    r.grad_in = g;
    return r;
}

}  // namespace

TEST_CASE("Sequential: ranges follow each other, bind() hands every layer its part, init in order",
          "[nn][sequential]") {
    Owned o(sequence_of(Dense<double>(4, 5), Tanh<double>(), Dense<double>(5, 3), BatchNorm1d<double>(3)));
    const Sequential<double>& s = o.seq;
    REQUIRE(s.num_layers() == 4);
    CHECK(s.num_params() == 25 + 0 + 18 + 6);
    CHECK(s.num_state() == 6);
    const std::vector<std::vector<std::size_t>> params = {{0, 25}, {25, 0}, {25, 18}, {43, 6}};
    const std::vector<std::vector<std::size_t>> state = {{0, 0}, {0, 0}, {0, 0}, {0, 6}};
    for (std::size_t i = 0; i < 4; ++i) {
        CHECK(std::vector<std::size_t>{s.parameter_ranges()[i].offset, s.parameter_ranges()[i].size} ==
              params[i]);
        CHECK(std::vector<std::size_t>{s.state_ranges()[i].offset, s.state_ranges()[i].size} == state[i]);
    }
    auto& d0 = dynamic_cast<Dense<double>&>(o.seq.layer(0));
    auto& d2 = dynamic_cast<Dense<double>&>(o.seq.layer(2));
    auto& bn = dynamic_cast<BatchNorm1d<double>&>(o.seq.layer(3));
    CHECK(d0.weight().data() == o.params.data());
    CHECK(d2.weight().data() == o.params.data() + 25);
    CHECK(d2.bias().data() == o.params.data() + 25 + 15);
    CHECK(bn.gamma().data() == o.params.data() + 43);
    CHECK(bn.running_mean().data() == o.state.data());
    CHECK(bn.running_var().data() == o.state.data() + 3);

    // init_params() draws for layer 0, then layer 2, then sets BatchNorm: as separate layers would.
    Rng rng(7);
    o.seq.init_params(rng);
    std::vector<double> w0(25), w2(18);
    Dense<double> r0(4, 5), r2(5, 3);
    std::vector<double> g0(25), g2(18);
    r0.bind(w0.data(), g0.data(), nullptr);
    r2.bind(w2.data(), g2.data(), nullptr);
    Rng ref(7);
    r0.init_params(ref);
    r2.init_params(ref);
    CHECK(std::vector<double>(o.params.begin(), o.params.begin() + 25) == w0);
    CHECK(std::vector<double>(o.params.begin() + 25, o.params.begin() + 43) == w2);
    CHECK(o.params[43] == 1.0);  // gamma
    CHECK(o.state[5] == 1.0);    // running variance
}

TEST_CASE("Sequential: forward equals running the layers one by one; output(i) is layer i's output",
          "[nn][sequential]") {
    Rng rng(1);
    Owned o(sequence_of(Dense<double>(4, 6), ReLU<double>(), Dense<double>(6, 3), BatchNorm1d<double>(3),
                        Tanh<double>()),
            rng);
    const Tensor<double> x = random_tensor<double>({5, 4}, rng);
    const Tensor<double> g = random_tensor<double>({5, 3}, rng);
    const ByHand ref = by_hand(o.seq, x, g, false);
    const Tensor<double>& y = o.seq.forward(x, false);
    CHECK(&y == &o.seq.output(4));
    for (std::size_t i = 0; i < 5; ++i) {
        INFO("layer " << i);
        REQUIRE(o.seq.output(i).shape() == ref.outs[i].shape());
        CHECK(max_rel_diff(o.seq.output(i), ref.outs[i]) == 0.0);
    }
    CHECK(o.seq.output(1).shape() == std::vector<std::size_t>{5, 6});  // ReLU's, not Dense(6, 3)'s
}

TEST_CASE(
    "Sequential: backward runs last to first, reports parts inside the running layer's slice and "
    "equals back-propagation layer by layer",
    "[nn][sequential][overlap]") {
    Rng rng(2);
    Owned o(sequence_of(Dense<double>(6, 8), ReLU<double>(), Dense<double>(8, 5)),
            rng);  // 56 + 0 + 45 values
    Owned ref(o.seq);
    ref.params = o.params;
    const Tensor<double> x = random_tensor<double>({4, 6}, rng);
    const Tensor<double> g = random_tensor<double>({4, 5}, rng);
    const ByHand expected = by_hand(ref.seq, x, g, true);

    Recorder rec;
    Tensor<double> dx;
    o.seq.forward(x, true);
    o.seq.backward(x, g, dx, true, rec.listener(12));
    // Every event belongs to the running layer: its partial reports, then its "done", last layer first.
    std::size_t running = 2, done = 0;
    std::vector<std::vector<std::pair<std::size_t, std::size_t>>> parts(3);
    for (const auto& e : rec.events) {
        INFO("event of layer " << e.layer << (e.done ? " done" : " partial"));
        REQUIRE(e.layer == running);
        if (e.done) {
            ++done;
            if (running > 0) --running;
        } else {
            CHECK(e.begin < e.end);
            CHECK(e.end <= o.seq.parameter_ranges()[e.layer].size);
            parts[e.layer].push_back({e.begin, e.end});
        }
    }
    CHECK(done == 3);
    CHECK(rec.events.back().done);
    CHECK(rec.events.back().layer == 0);
    // Each Dense's parts cover its slice exactly once; ReLU has nothing to report.
    CHECK(parts[1].empty());
    for (std::size_t i : {std::size_t(0), std::size_t(2)}) {
        std::sort(parts[i].begin(), parts[i].end());
        std::size_t next = 0;
        for (const auto& p : parts[i]) {
            CHECK(p.first == next);
            next = p.second;
        }
        CHECK(next == o.seq.parameter_ranges()[i].size);
        CHECK(parts[i].size() >= 3);
    }
    // The gradients and dLoss/dx are those of the undivided computation.
    for (std::size_t k = 0; k < o.grads.size(); ++k)
        CHECK(o.grads[k] == Approx(ref.grads[k]).epsilon(1e-12).margin(1e-14));
    CHECK(max_rel_diff(dx, expected.grad_in) < 1e-12);

    // No partial reports without a chunk, or without a listener (the layers forget the last one).
    rec.events.clear();
    o.seq.forward(x, true);
    o.seq.backward(x, g, dx, true, rec.listener(0));
    REQUIRE(rec.events.size() == 3);
    CHECK((rec.events[0].layer == 2 && rec.events[1].layer == 1 && rec.events[2].layer == 0));
    CHECK((rec.events[0].done && rec.events[1].done && rec.events[2].done));
    rec.events.clear();
    o.seq.backward(x, g, dx, true, rec.listener(12));
    o.seq.backward(x, g, dx, true);
    CHECK(rec.events.size() > 3);  // the first pass only

    // Without need_grad_in, layer 0 leaves the caller's tensor alone.
    Tensor<double> untouched;
    o.seq.backward(x, g, untouched, false);
    CHECK(untouched.dimension() == 0);
}

TEST_CASE("Sequential: a copy is deep, unbound and independent; a move keeps the layers and bindings",
          "[nn][sequential][copy]") {
    Rng rng(3);
    Owned a(sequence_of(Dense<double>(3, 4), Tanh<double>(), Dense<double>(4, 2)), rng);
    const Tensor<double> x = random_tensor<double>({2, 3}, rng);
    const Tensor<double> g = random_tensor<double>({2, 2}, rng);
    const Tensor<double> y = a.seq.forward(x, true);

    Sequential<double> copy(a.seq);
    CHECK(copy.names() == a.seq.names());
    CHECK(copy.num_params() == a.seq.num_params());
    CHECK(copy.parameter_ranges()[2].offset == 16);
    for (std::size_t i = 0; i < 3; ++i)
        CHECK(&copy.layer(i) != &a.seq.layer(i));
    CHECK(dynamic_cast<Dense<double>&>(copy.layer(0)).weight().data() == nullptr);  // unbound
    CHECK(copy.output(2).dimension() == 0);                                         // no outputs yet

    Owned b(copy);
    b.params = a.params;
    CHECK(max_rel_diff(b.seq.forward(x, true), y) == 0.0);
    for (auto& v : b.params)
        v *= 2.0;
    CHECK(max_rel_diff(b.seq.forward(x, true), y) > 1e-6);
    CHECK(max_rel_diff(a.seq.forward(x, true), y) == 0.0);
    Tensor<double> dx;
    b.seq.backward(x, g, dx, true);
    for (double v : a.grads)
        CHECK(v == 0.0);  // the copy's layers wrote into the copy's gradients only

    // Copy assignment replaces the layers with clones.
    Sequential<double> assigned = sequence_of(ReLU<double>());
    assigned = a.seq;
    CHECK(assigned.names() == a.seq.names());
    CHECK(&assigned.layer(0) != &a.seq.layer(0));

    // Moves take the layers as they are, bound to a's buffers.
    const dtrain::Layer<double>* first = &a.seq.layer(0);
    Sequential<double> moved(std::move(a.seq));
    CHECK(&moved.layer(0) == first);
    CHECK(max_rel_diff(moved.forward(x, true), y) == 0.0);
    Sequential<double> move_assigned;
    move_assigned = std::move(moved);
    CHECK(&move_assigned.layer(0) == first);
    a.params[0] += 1.0;
    CHECK(max_rel_diff(move_assigned.forward(x, true), y) > 1e-9);
}

TEST_CASE("Sequential: reporting(i) is layer i's ReportsGradients, null for a layer that does not opt in",
          "[nn][sequential][overlap]") {
    Sequential<double> s = sequence_of(Dense<double>(3, 4), Tanh<double>(), Dense<double>(4, 2));
    CHECK(s.reporting(0) == dynamic_cast<dtrain::ReportsGradients*>(&s.layer(0)));
    CHECK(s.reporting(0) != nullptr);
    CHECK(s.reporting(1) == nullptr);
    CHECK(s.reporting(2) == dynamic_cast<dtrain::ReportsGradients*>(&s.layer(2)));
    CHECK(contains(error_message([&] { s.reporting(3); }), "Sequential::reporting: index 3 out of range"));

    // A copy finds its clones' interfaces; a move keeps the layers and so the pointers.
    const Sequential<double> copy(s);
    CHECK(copy.reporting(0) == dynamic_cast<const dtrain::ReportsGradients*>(&copy.layer(0)));
    CHECK(copy.reporting(0) != s.reporting(0));
    CHECK(copy.reporting(1) == nullptr);
    dtrain::ReportsGradients* last = s.reporting(2);
    const Sequential<double> moved(std::move(s));
    CHECK(moved.reporting(2) == last);
}

TEST_CASE("Sequential: extra state is saved and restored layer 0 first", "[nn][sequential][checkpoint]") {
    Rng rng(4);
    Owned o(sequence_of(Dense<double>(3, 6), Dropout<double>(0.5, 3), Dropout<double>(0.5, 4)), rng);
    const Tensor<double> x = random_tensor<double>({4, 3}, rng, 0.5, 1.5);
    o.seq.forward(x, true);  // both generators move away from their seeds
    std::vector<std::uint64_t> saved;
    o.seq.save_extra_state(saved);
    std::vector<std::uint64_t> in_order;
    o.seq.layer(1).save_extra_state(in_order);
    o.seq.layer(2).save_extra_state(in_order);
    CHECK(saved == in_order);
    CHECK(saved.size() == 2 * Rng::state_words);

    const Tensor<double> y1 = o.seq.forward(x, true);
    CHECK(max_rel_diff(o.seq.forward(x, true), y1) > 1e-3);  // new masks
    dtrain::Span<const std::uint64_t> words(saved.data(), saved.size());
    o.seq.load_extra_state(words);
    CHECK(words.empty());  // advanced past both layers' words
    CHECK(max_rel_diff(o.seq.forward(x, true), y1) == 0.0);

    dtrain::Span<const std::uint64_t> few(saved.data(), Rng::state_words + 1);
    CHECK(contains(error_message([&] { o.seq.load_extra_state(few); }), "Dropout(0.5)"));
}

TEST_CASE(
    "Sequential: output_shape() chains the layers and names the one that does not fit; errors name "
    "the owner",
    "[nn][sequential][errors]") {
    const Sequential<double> s = sequence_of(Dense<double>(4, 5), ReLU<double>(), Dense<double>(5, 3));
    CHECK(s.output_shape({4}, "Blk") == dtrain::Shape{3});
    CHECK(s.names() == "Dense(4, 5), ReLU, Dense(5, 3)");
    CHECK(Sequential<double>().output_shape({2, 7}, "Blk") == dtrain::Shape{2, 7});
    CHECK(Sequential<double>().names().empty());

    const Sequential<double> bad = sequence_of(Dense<double>(4, 5), Dense<double>(6, 2));
    std::string msg = error_message([&] { bad.output_shape({4}, "Blk"); });
    CHECK(contains(msg, "Blk: layer 1 of the block does not fit: Dense(6, 2)"));
    CHECK(contains(msg, "[batch, 5]"));
    msg = error_message([&] { bad.output_shape({3}, "Blk"); });
    CHECK(contains(msg, "Blk: layer 0 of the block does not fit: Dense(4, 5)"));

    Sequential<double> owned("Owner");
    CHECK(error_message([&] { owned.add(nullptr); }) == "Owner::add: null layer");
    CHECK(owned.num_layers() == 0);
    Tensor<double> x = Tensor<double>::from_shape({2, 4});
    CHECK(contains(error_message([&] { owned.forward(x, true); }), "Owner::forward: no layers"));
    owned.add(std::make_unique<ReLU<double>>());
    CHECK(error_message([&] { owned.layer(1); }) == "Owner::layer: index 1 out of range (1 layers)");
    CHECK(contains(error_message([&] { owned.output(1); }), "Owner::output: index 1 out of range"));
    CHECK_NOTHROW(owned.layer(0));
    CHECK(contains(error_message([] { Sequential<double>().add(nullptr); }), "Sequential::add"));
}

TEST_CASE("Sequential: forward and backward do not allocate once the batch shape is steady",
          "[nn][sequential][alloc]") {
    Rng rng(5);
    Owned o(sequence_of(Dense<double>(8, 32), ReLU<double>(), Dense<double>(32, 4)), rng);
    const Tensor<double> x = random_tensor<double>({5, 8}, rng);
    const Tensor<double> g = random_tensor<double>({5, 4}, rng);
    Tensor<double> dx;
    std::size_t events = 0;
    const BackwardListener listener{
        [](void* c, std::size_t, std::size_t, std::size_t) { ++*static_cast<std::size_t*>(c); },
        [](void* c, std::size_t) { ++*static_cast<std::size_t*>(c); }, &events, 16};
    std::size_t steady = 0;
    for (int step = 0; step < 4; ++step) {
        const std::size_t before = dtrain::test::allocation_count;
        o.seq.forward(x, true);
        o.seq.backward(x, g, dx, true, listener);
        if (step >= 1) steady += dtrain::test::allocation_count - before;
    }
    CHECK(events > 4 * 3);  // the listener was used (partial reports and every layer's "done")
    CHECK(steady == 0);
    // The counter does see allocations (so the check above can fail).
    const std::size_t before = dtrain::test::allocation_count;
    std::vector<double> probe(64);
    CHECK(dtrain::test::allocation_count > before);
}

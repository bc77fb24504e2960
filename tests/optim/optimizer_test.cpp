// The Optimizer concept's range form (optim/optimizer.hpp): step_range() over pieces + finish_step() is
// bitwise one step() for every dtrain optimizer and variant, and bad ranges are clear errors.
#include <catch2/catch.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include <dtrain/optim/adam.hpp>
#include <dtrain/optim/adamw.hpp>
#include <dtrain/optim/optimizer.hpp>
#include <dtrain/optim/sgd.hpp>
#include <optim/optim_test_utils.hpp>
#include <support/test_utils.hpp>

using dtrain::test::contains_all;
using dtrain::test::cspan_of;
using dtrain::test::error_message;
using dtrain::test::span_of;

namespace {

/// A model of the Optimizer concept without the range form.
struct WholeOnly {
    using value_type = float;
    void reset(std::size_t) {}
    void step(dtrain::Span<float>, dtrain::Span<const float>) {}
    dtrain::Span<float> state() { return {}; }
    std::size_t state_slots() const { return 0; }
    std::uint64_t steps() const { return 0; }
    void set_steps(std::uint64_t) {}
    double learning_rate() const { return 0.1; }
    void set_learning_rate(double) {}
};

static_assert(dtrain::is_optimizer_v<WholeOnly>);
static_assert(!dtrain::has_step_range_v<WholeOnly>);
static_assert(dtrain::has_step_range_v<dtrain::SGD<double>>);
static_assert(dtrain::has_step_range_v<dtrain::Adam<double>>);
static_assert(dtrain::has_step_range_v<dtrain::AdamW<double>>);

/// 1003 parameters and 4 steps of gradients, deterministic and of mixed sign.
std::vector<float> values(std::size_t n, int seed) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = float(((i * 37 + std::size_t(seed) * 101) % 199)) / 50.0f - 2.0f;
    return v;
}

/// Runs 4 steps of `whole` with step() and of a copy with step_range() over `cuts` (piece boundaries,
/// visited in the given order of pieces) + finish_step(); the parameters, state and step counts must be
/// bitwise identical after every step.
template <class Opt>
void check_ranges_equal_step(Opt whole, const std::vector<std::size_t>& cuts, bool reverse) {
    const std::size_t n = 1003;
    whole.reset(n);
    Opt pieces = whole;
    std::vector<float> pw = values(n, 0), pp = pw;
    for (int s = 1; s <= 4; ++s) {
        const std::vector<float> g = values(n, s);
        whole.step(span_of(pw), cspan_of(g));
        std::vector<std::size_t> order(cuts.size() - 1);
        for (std::size_t k = 0; k < order.size(); ++k)
            order[k] = reverse ? order.size() - 1 - k : k;
        for (std::size_t k : order) {
            const std::size_t a = cuts[k], b = cuts[k + 1];
            pieces.step_range(dtrain::Span<float>(pp.data() + a, b - a),
                              dtrain::Span<const float>(g.data() + a, b - a), a);
        }
        pieces.finish_step();
        CHECK(pw == pp);
        CHECK(std::vector<float>(whole.state().begin(), whole.state().end()) ==
              std::vector<float>(pieces.state().begin(), pieces.state().end()));
        CHECK(whole.steps() == pieces.steps());
    }
}

template <class Opt>
void check_all_cuts(const Opt& opt) {
    check_ranges_equal_step(opt, {0, 1003}, false);
    check_ranges_equal_step(opt, {0, 1, 512, 513, 1000, 1003}, false);
    check_ranges_equal_step(opt, {0, 64, 128, 700, 1003}, true);
    check_ranges_equal_step(opt, {0, 0, 500, 500, 1003}, true);  // empty pieces are no-ops
}

}  // namespace

TEST_CASE("step_range over pieces + finish_step is bitwise one step() for SGD variants", "[optim][range]") {
    using dtrain::SGD;
    using dtrain::SGDOptions;
    check_all_cuts(SGD<float>(0.1));
    check_all_cuts(SGD<float>(SGDOptions().lr(0.05).momentum(0.9)));
    check_all_cuts(SGD<float>(SGDOptions().lr(0.05).momentum(0.9).weight_decay(1e-3)));
    check_all_cuts(SGD<float>(SGDOptions().lr(0.05).momentum(0.8).nesterov(true).weight_decay(1e-4)));
    check_all_cuts(SGD<float>(SGDOptions().lr(0.05).momentum(0.5).dampening(0.3)));
    auto scheduled = SGD<float>(SGDOptions().lr(0.1).momentum(0.9));
    scheduled.set_schedule(dtrain::Schedule::step_decay(2, 0.5));
    check_all_cuts(scheduled);
}

TEST_CASE("step_range over pieces + finish_step is bitwise one step() for Adam and AdamW", "[optim][range]") {
    check_all_cuts(dtrain::Adam<float>(dtrain::AdamOptions().lr(0.01)));
    check_all_cuts(dtrain::Adam<float>(dtrain::AdamOptions().lr(0.01).weight_decay(1e-2)));
    check_all_cuts(dtrain::AdamW<float>(dtrain::AdamWOptions().lr(0.01)));
    check_all_cuts(dtrain::AdamW<float>(dtrain::AdamWOptions().lr(0.01).weight_decay(0.0)));
}

TEST_CASE("step_range rejects ranges outside reset(), mismatched sizes and an unsized state",
          "[optim][range]") {
    std::vector<float> p(10, 1.0f), g(10, 1.0f);
    dtrain::SGD<float> fresh(dtrain::SGDOptions().lr(0.1).momentum(0.9));
    CHECK(contains_all(error_message([&] { fresh.step_range(span_of(p), cspan_of(g), 0); }),
                       {"SGD::step_range", "reset("}));
    dtrain::Adam<float> adam(dtrain::AdamOptions().lr(0.1));
    adam.reset(10);
    CHECK(contains_all(error_message([&] { adam.step_range(span_of(p), cspan_of(g), 1); }),
                       {"Adam::step_range", "[1, 11)", "10 values"}));
    CHECK(contains_all(
        error_message([&] { adam.step_range(span_of(p), dtrain::Span<const float>(g.data(), 9), 0); }),
        {"Adam::step_range", "10 values", "9"}));
    const auto before = p;
    adam.step_range(dtrain::Span<float>(p.data(), 4), dtrain::Span<const float>(g.data(), 4), 6);
    CHECK(p != before);
    CHECK(adam.steps() == 0);
    adam.finish_step();
    CHECK(adam.steps() == 1);
}

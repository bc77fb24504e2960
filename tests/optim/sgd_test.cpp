#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <vector>

#include <dtrain/optim/sgd.hpp>
#include <optim/alloc_counter.hpp>
#include <optim/optim_test_utils.hpp>
#include <support/test_utils.hpp>

using dtrain::SGD;
using dtrain::SGDOptions;
using dtrain::test::contains_all;
using dtrain::test::cspan_of;
using dtrain::test::error_message;
using dtrain::test::grads3;
using dtrain::test::p0;
using dtrain::test::span_of;

static_assert(dtrain::is_optimizer_v<SGD<float>>);
static_assert(dtrain::is_optimizer_v<SGD<double>>);

namespace {

/// Runs `opt` for one parameter p = 1 and gradient 1 at every step; returns p after each of 3 steps.
template <class T>
std::vector<double> three_steps_unit(SGD<T> opt, double grad = 1.0) {
    std::vector<T> p{T(1)};
    const std::vector<T> g{T(grad)};
    std::vector<double> out;
    for (int s = 0; s < 3; ++s) {
        opt.step(span_of(p), cspan_of(g));
        out.push_back(double(p[0]));
    }
    return out;
}

/// PyTorch's SGD written out independently in double, with the momentum buffer "absent" before step 1.
std::vector<double> reference_sgd(std::vector<double> p, const std::vector<std::vector<double>>& grads,
                                  double lr, double momentum, double dampening, bool nesterov, double wd) {
    std::vector<double> buf;
    for (const auto& grad : grads) {
        std::vector<double> d = grad;
        for (std::size_t i = 0; i < p.size(); ++i)
            d[i] += wd * p[i];
        if (momentum != 0) {
            if (buf.empty()) {
                buf = d;
            } else {
                for (std::size_t i = 0; i < p.size(); ++i)
                    buf[i] = momentum * buf[i] + (1 - dampening) * d[i];
            }
            for (std::size_t i = 0; i < p.size(); ++i)
                d[i] = nesterov ? d[i] + momentum * buf[i] : buf[i];
        }
        for (std::size_t i = 0; i < p.size(); ++i)
            p[i] -= lr * d[i];
    }
    return p;
}

}  // namespace

TEST_CASE("SGD: three steps match hand-computed values", "[optim][sgd]") {
    // Each expectation derived by hand for p = 1, grad = 1, lr = 0.1.
    SECTION("plain") {
        const auto p = three_steps_unit(SGD<double>(0.1));
        CHECK(p[0] == Approx(0.9).epsilon(1e-14));
        CHECK(p[1] == Approx(0.8).epsilon(1e-14));
        CHECK(p[2] == Approx(0.7).epsilon(1e-14));
    }
    SECTION("momentum 0.9: buf = 1, 1.9, 2.71") {
        const auto p = three_steps_unit(SGD<double>(SGDOptions().lr(0.1).momentum(0.9)));
        CHECK(p[0] == Approx(0.9).epsilon(1e-14));
        CHECK(p[1] == Approx(0.71).epsilon(1e-14));
        CHECK(p[2] == Approx(0.439).epsilon(1e-14));
    }
    SECTION("nesterov: d = 1.9, 2.71, 3.439") {
        const auto p = three_steps_unit(SGD<double>(SGDOptions().lr(0.1).momentum(0.9).nesterov(true)));
        CHECK(p[0] == Approx(0.81).epsilon(1e-14));
        CHECK(p[1] == Approx(0.539).epsilon(1e-14));
        CHECK(p[2] == Approx(0.1951).epsilon(1e-13));
    }
    SECTION("dampening 0.5 (ignored on the first step): buf = 1, 1.4, 1.76") {
        const auto p = three_steps_unit(SGD<double>(SGDOptions().lr(0.1).momentum(0.9).dampening(0.5)));
        CHECK(p[0] == Approx(0.9).epsilon(1e-14));
        CHECK(p[1] == Approx(0.76).epsilon(1e-14));
        CHECK(p[2] == Approx(0.584).epsilon(1e-14));
    }
    SECTION("weight decay 0.1 alone, zero gradient: p *= 0.99 per step") {
        const auto p = three_steps_unit(SGD<double>(SGDOptions().lr(0.1).weight_decay(0.1)), 0.0);
        CHECK(p[0] == Approx(0.99).epsilon(1e-14));
        CHECK(p[1] == Approx(0.9801).epsilon(1e-14));
        CHECK(p[2] == Approx(0.970299).epsilon(1e-14));
    }
    SECTION("weight decay 0.1 + momentum 0.9: d = 1.1, 1.089, 1.06821") {
        const auto p = three_steps_unit(SGD<double>(SGDOptions().lr(0.1).momentum(0.9).weight_decay(0.1)));
        CHECK(p[0] == Approx(0.89).epsilon(1e-14));
        CHECK(p[1] == Approx(0.6821).epsilon(1e-14));
        CHECK(p[2] == Approx(0.388169).epsilon(1e-13));
    }
    SECTION("float gives the same values to float precision") {
        const auto p = three_steps_unit(SGD<float>(SGDOptions().lr(0.1).momentum(0.9).weight_decay(0.1)));
        CHECK(p[2] == Approx(0.388169).epsilon(1e-6));
    }
}

TEST_CASE("SGD: every option combination matches a reference loop on a vector", "[optim][sgd]") {
    struct Case {
        double momentum, dampening;
        bool nesterov;
        double wd;
    };
    const Case cases[] = {{0, 0, false, 0},      {0, 0, false, 1e-2},  {0.9, 0, false, 0},
                          {0.9, 0, false, 1e-2}, {0.8, 0.3, false, 0}, {0.8, 0.3, false, 0.05},
                          {0.9, 0, true, 0},     {0.9, 0, true, 1e-2}};
    for (const auto& c : cases) {
        CAPTURE(c.momentum, c.dampening, c.nesterov, c.wd);
        const auto opts = SGDOptions()
                              .lr(0.05)
                              .momentum(c.momentum)
                              .dampening(c.dampening)
                              .nesterov(c.nesterov)
                              .weight_decay(c.wd);
        const auto want = reference_sgd(p0, grads3, 0.05, c.momentum, c.dampening, c.nesterov, c.wd);
        SGD<double> d(opts);
        SGD<float> f(opts);
        auto pd = p0;
        auto pf = dtrain::test::cast_vec<float>(p0);
        for (const auto& g : grads3) {
            d.step(span_of(pd), cspan_of(g));
            const auto gf = dtrain::test::cast_vec<float>(g);
            f.step(span_of(pf), cspan_of(gf));
        }
        CHECK(dtrain::test::max_rel_diff(pd, want) < 1e-14);
        CHECK(dtrain::test::max_rel_diff(pf, want) < 1e-6);
        CHECK(d.steps() == 3);
    }
}

TEST_CASE("SGD: state layout, reset() and state_slots()", "[optim][sgd]") {
    SGD<float> plain(0.1f);
    CHECK(plain.state_slots() == 0);
    plain.reset(4);
    CHECK(plain.state().size() == 0);
    CHECK(plain.size() == 4);

    SGD<double> m(SGDOptions().lr(0.1).momentum(0.9).weight_decay(0.5));
    CHECK(m.state_slots() == 1);
    CHECK(m.state().size() == 0);  // nothing before reset() or step()
    m.reset(p0.size());
    REQUIRE(m.state().size() == p0.size());
    for (double v : m.state())
        CHECK(v == 0.0);
    auto p = p0;
    m.step(span_of(p), cspan_of(grads3[0]));
    // After the first step buf = grad + wd * p, in the parameter layout.
    for (std::size_t i = 0; i < p0.size(); ++i)
        CHECK(m.state()[i] == Approx(grads3[0][i] + 0.5 * p0[i]));
    m.step(span_of(p), cspan_of(grads3[1]));
    CHECK(m.steps() == 2);
    m.reset(p0.size());
    CHECK(m.steps() == 0);
    CHECK(m.state().size() == p0.size());
    for (double v : m.state())
        CHECK(v == 0.0);
    // After reset() the buffer is fresh again: the run repeats exactly.
    auto q = p0;
    SGD<double> fresh(m.options());
    auto r = p0;
    for (int s = 0; s < 2; ++s) {
        m.step(span_of(q), cspan_of(grads3[s]));
        fresh.step(span_of(r), cspan_of(grads3[s]));
    }
    CHECK(q == r);
}

TEST_CASE("SGD: a copy continues identically", "[optim][sgd]") {
    SGD<float> a(SGDOptions().lr(0.05).momentum(0.9).nesterov(true).weight_decay(1e-3));
    a.set_schedule(dtrain::Schedule::step_decay(2, 0.5));
    dtrain::test::check_copy_continues_identically(a);
}

TEST_CASE("SGD: learning_rate() follows the schedule inside a step loop", "[optim][sgd]") {
    SGD<double> opt(0.1);
    opt.set_schedule(dtrain::Schedule::warmup(2, dtrain::Schedule::step_decay(2, 0.5), 0.5));
    const double expected[] = {0.05, 0.075, 0.1, 0.1, 0.05, 0.05, 0.025};
    std::vector<double> p{1.0};
    const std::vector<double> g{1.0};
    for (double lr : expected) {
        CHECK(opt.learning_rate() == Approx(lr).epsilon(1e-14));
        const double before = p[0];
        opt.step(span_of(p), cspan_of(g));
        CHECK(before - p[0] == Approx(lr).epsilon(1e-12));  // the step used that rate
    }
    CHECK(opt.base_learning_rate() == 0.1);
    opt.set_learning_rate(0.2);
    CHECK(opt.learning_rate() == Approx(0.2 * 0.25).epsilon(1e-14));  // step 7: inner(5) = 0.25
    opt.set_steps(0);
    CHECK(opt.learning_rate() == Approx(0.1).epsilon(1e-14));
}

TEST_CASE("SGD: bad options and sizes throw dtrain::Error naming SGD and the value", "[optim][sgd]") {
    CHECK(contains_all(error_message([] { SGD<float>(-0.5); }), {"SGD", "learning rate", "-0.5"}));
    CHECK(contains_all(error_message([] { SGD<float>(SGDOptions().momentum(1.0)); }),
                       {"SGD", "momentum", "1"}));
    CHECK(contains_all(error_message([] { SGD<float>(SGDOptions().momentum(-0.1)); }),
                       {"SGD", "momentum", "-0.1"}));
    CHECK(contains_all(error_message([] { SGD<float>(SGDOptions().nesterov(true)); }),
                       {"SGD", "nesterov", "0"}));
    CHECK(contains_all(
        error_message([] { SGD<float>(SGDOptions().momentum(0.9).dampening(0.1).nesterov(true)); }),
        {"SGD", "nesterov", "0.1"}));
    CHECK(contains_all(error_message([] { SGD<float>(SGDOptions().dampening(1.5)); }),
                       {"SGD", "dampening", "1.5"}));
    CHECK(contains_all(error_message([] { SGD<float>(SGDOptions().weight_decay(-1e-4)); }),
                       {"SGD", "weight_decay", "-0.0001"}));
    CHECK(error_message([] { SGD<float>(SGDOptions().lr(0.005).momentum(0.9).weight_decay(1e-5)); }).empty());
    CHECK(error_message([] { SGD<float>(SGD<float>::Options().momentum(0.9).nesterov(true)); }).empty());

    SGD<float> opt(0.1);
    CHECK(contains_all(error_message([&] { opt.set_learning_rate(-2.0); }), {"SGD", "-2"}));
    CHECK(opt.base_learning_rate() == Approx(0.1));

    opt.reset(3);
    std::vector<float> p3(3, 1.f), g3(3, 1.f), p4(4, 1.f), g4(4, 1.f);
    CHECK(contains_all(error_message([&] { opt.step(span_of(p3), cspan_of(g4)); }), {"SGD::step", "3", "4"}));
    CHECK(contains_all(error_message([&] { opt.step(span_of(p4), cspan_of(g4)); }),
                       {"SGD::step", "4", "reset", "3"}));
    CHECK(p3 == std::vector<float>(3, 1.f));  // nothing was updated
    CHECK(opt.steps() == 0);
    CHECK(error_message([&] { opt.step(span_of(p3), cspan_of(g3)); }).empty());

    // A schedule that yields a negative rate is caught at the step.
    opt.set_schedule(dtrain::Schedule([](std::uint64_t) { return -1.0; }));
    CHECK(contains_all(error_message([&] { opt.step(span_of(p3), cspan_of(g3)); }), {"SGD::step", "-0.1"}));
}

TEST_CASE("SGD: the first step() sizes the state and keeps set_steps(); later steps do not allocate",
          "[optim][sgd]") {
    SGD<float> opt(SGDOptions().lr(0.01).momentum(0.9).weight_decay(1e-4));
    opt.set_steps(5);
    std::vector<float> p(1000, 1.f), g(1000, 0.5f);
    opt.step(span_of(p), cspan_of(g));
    CHECK(opt.size() == 1000);
    CHECK(opt.state().size() == 1000);
    CHECK(opt.steps() == 6);
    const std::size_t before = dtrain::test::allocation_count.load();
    for (int s = 0; s < 10; ++s)
        opt.step(span_of(p), cspan_of(g));
    CHECK(dtrain::test::allocation_count.load() == before);
    CHECK(opt.steps() == 16);
}

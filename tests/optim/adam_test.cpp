#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <vector>

#include <dtrain/optim/adam.hpp>
#include <optim/alloc_counter.hpp>
#include <optim/optim_test_utils.hpp>
#include <support/test_utils.hpp>

using dtrain::Adam;
using dtrain::AdamOptions;
using dtrain::test::contains_all;
using dtrain::test::cspan_of;
using dtrain::test::error_message;
using dtrain::test::grads3;
using dtrain::test::p0;
using dtrain::test::run_unit;
using dtrain::test::span_of;

static_assert(dtrain::is_optimizer_v<Adam<float>>);
static_assert(dtrain::is_optimizer_v<Adam<double>>);

TEST_CASE("Adam: three steps match hand-computed values", "[optim][adam]") {
    // Hand derivations for p = 1, lr = 0.1, betas (0.9, 0.999). With |g| = 1 at every step the
    // bias-corrected v_hat is exactly 1, so each update is lr * m_hat / (1 + 1e-8).
    SECTION("constant gradient: bias correction makes every step exactly lr") {
        const auto p = run_unit(Adam<double>(AdamOptions().lr(0.1)), {1, 1, 1});
        CHECK(p[0] == Approx(0.9).epsilon(1e-7));
        CHECK(p[1] == Approx(0.8).epsilon(1e-7));
        CHECK(p[2] == Approx(0.7).epsilon(1e-7));
    }
    SECTION("alternating gradient: m_hat = 1, -0.01/0.19, 0.091/0.271") {
        const auto p = run_unit(Adam<double>(AdamOptions().lr(0.1)), {1, -1, 1});
        CHECK(p[0] == Approx(0.9).epsilon(1e-7));
        CHECK(p[1] == Approx(0.9052631578947368).epsilon(1e-7));
        CHECK(p[2] == Approx(0.8716838221013789).epsilon(1e-7));
        const auto pf = run_unit(Adam<float>(AdamOptions().lr(0.1)), {1, -1, 1});
        CHECK(pf[2] == Approx(0.8716838221013789).epsilon(1e-6));
    }
    SECTION("L2 weight decay enters the gradient: zero gradient, wd 0.5 still moves p by lr") {
        // g = 0 + 0.5 * 1 = 0.5 on step 1, so m_hat / sqrt(v_hat) = 1 (decoupled decay would give 0.95).
        const auto p = run_unit(Adam<double>(AdamOptions().lr(0.1).weight_decay(0.5)), {0, 0, 0});
        CHECK(p[0] == Approx(0.9).epsilon(1e-7));
        // Step 2: g = 0.45, m = 0.09, v = 0.00045225
        //   -> p = 0.9 - 0.1 * (0.09/0.19) / sqrt(0.00045225/0.001999)
        CHECK(p[1] == Approx(0.9 - 0.1 * (0.09 / 0.19) / std::sqrt(0.00045225 / 0.001999)).epsilon(1e-7));
    }
    SECTION("first step moves every value by lr, whatever the gradient's scale") {
        Adam<double> opt(AdamOptions().lr(0.01));
        std::vector<double> p{0.0, 0.0, 0.0};
        const std::vector<double> g{1e-3, 2.0, -5.0};
        opt.step(span_of(p), cspan_of(g));
        CHECK(p[0] == Approx(-0.01).epsilon(1e-4));
        CHECK(p[1] == Approx(-0.01).epsilon(1e-7));
        CHECK(p[2] == Approx(0.01).epsilon(1e-7));
    }
}

TEST_CASE("Adam: matches a reference loop on a vector, with and without weight decay", "[optim][adam]") {
    for (double wd : {0.0, 1e-3, 0.1}) {
        for (auto betas : {std::pair<double, double>{0.9, 0.999}, std::pair<double, double>{0.5, 0.9}}) {
            CAPTURE(wd, betas.first, betas.second);
            const auto opts =
                AdamOptions().lr(0.01).betas(betas.first, betas.second).eps(1e-6).weight_decay(wd);
            const auto want = dtrain::test::reference_adam(p0, grads3, {0.01, 0.01, 0.01}, betas.first,
                                                           betas.second, 1e-6, wd, false);
            Adam<double> d(opts);
            Adam<float> f(opts);
            auto pd = p0;
            auto pf = dtrain::test::cast_vec<float>(p0);
            for (const auto& g : grads3) {
                d.step(span_of(pd), cspan_of(g));
                const auto gf = dtrain::test::cast_vec<float>(g);
                f.step(span_of(pf), cspan_of(gf));
            }
            CHECK(dtrain::test::max_rel_diff(pd, want) < 1e-12);
            CHECK(dtrain::test::max_rel_diff(pf, want) < 1e-6);
        }
    }
}

TEST_CASE("Adam: state layout (m then v), reset() zeroes it", "[optim][adam]") {
    Adam<double> opt(AdamOptions().lr(0.01).weight_decay(0.5));
    CHECK(opt.state_slots() == 2);
    opt.reset(p0.size());
    const std::size_t n = p0.size();
    REQUIRE(opt.state().size() == 2 * n);
    for (double v : opt.state())
        CHECK(v == 0.0);
    auto p = p0;
    opt.step(span_of(p), cspan_of(grads3[0]));
    for (std::size_t i = 0; i < n; ++i) {
        const double g = grads3[0][i] + 0.5 * p0[i];
        CHECK(opt.state()[i] == Approx(0.1 * g).epsilon(1e-12));            // slot 0: m
        CHECK(opt.state()[n + i] == Approx(0.001 * g * g).epsilon(1e-12));  // slot 1: v
    }
    opt.reset(n);
    CHECK(opt.steps() == 0);
    for (double v : opt.state())
        CHECK(v == 0.0);
    // After reset() the run repeats a fresh optimizer's exactly (bias correction restarts at t = 1).
    Adam<double> fresh(opt.options());
    auto q = p0, r = p0;
    for (const auto& g : grads3) {
        opt.step(span_of(q), cspan_of(g));
        fresh.step(span_of(r), cspan_of(g));
    }
    CHECK(q == r);
}

TEST_CASE("Adam: a copy continues identically", "[optim][adam]") {
    Adam<float> a(AdamOptions().lr(0.01).weight_decay(1e-3));
    a.set_schedule(dtrain::Schedule::cosine(10, 0.1));
    dtrain::test::check_copy_continues_identically(a);
}

TEST_CASE("Adam: the schedule sets each step's rate", "[optim][adam]") {
    Adam<double> opt(AdamOptions().lr(0.1));
    opt.set_schedule(dtrain::Schedule::warmup(2, dtrain::Schedule::cosine(2), 0.5));
    const double expected[] = {0.05, 0.075, 0.1, 0.05, 0.0};
    std::vector<double> p{1.0}, lrs;
    const std::vector<double> g{1.0};
    std::vector<std::vector<double>> grads;
    for (double lr : expected) {
        CHECK(opt.learning_rate() == Approx(lr).margin(1e-15));
        lrs.push_back(opt.learning_rate());
        grads.push_back(g);
        const double before = p[0];
        opt.step(span_of(p), cspan_of(g));
        CHECK(before - p[0] == Approx(lr).margin(1e-8));  // constant gradient: each step moves by its rate
    }
    CHECK(p[0] == Approx(dtrain::test::reference_adam({1.0}, grads, lrs, 0.9, 0.999, 1e-8, 0.0, false)[0]));
}

TEST_CASE("Adam: bad options and sizes throw dtrain::Error naming Adam and the value", "[optim][adam]") {
    CHECK(contains_all(error_message([] { Adam<float>(AdamOptions().lr(-1e-3)); }),
                       {"Adam", "learning rate", "-0.001"}));
    CHECK(contains_all(error_message([] { Adam<float>(AdamOptions().beta1(1.0)); }), {"Adam", "beta1", "1"}));
    CHECK(contains_all(error_message([] { Adam<float>(AdamOptions().beta2(-0.1)); }),
                       {"Adam", "beta2", "-0.1"}));
    CHECK(contains_all(error_message([] { Adam<float>(AdamOptions().betas(0.9, 1.5)); }),
                       {"Adam", "beta2", "1.5"}));
    CHECK(contains_all(error_message([] { Adam<float>(AdamOptions().eps(-1.0)); }), {"Adam", "eps", "-1"}));
    CHECK(contains_all(error_message([] { Adam<float>(AdamOptions().weight_decay(-0.25)); }),
                       {"Adam", "weight_decay", "-0.25"}));
    // PyTorch's Adam(lr=0.001, weight_decay=0.001).
    CHECK(error_message([] { Adam<float>(AdamOptions().lr(0.001).weight_decay(0.001)); }).empty());
    CHECK(AdamOptions().weight_decay() == 0.0);
    CHECK(AdamOptions().beta1() == 0.9);
    CHECK(AdamOptions().beta2() == 0.999);
    CHECK(AdamOptions().eps() == 1e-8);
    CHECK(Adam<float>().base_learning_rate() == 1e-3);

    Adam<float> opt;
    opt.reset(3);
    std::vector<float> p3(3, 1.f), g3(3, 1.f), p2(2, 1.f), g2(2, 1.f);
    CHECK(
        contains_all(error_message([&] { opt.step(span_of(p3), cspan_of(g2)); }), {"Adam::step", "3", "2"}));
    CHECK(contains_all(error_message([&] { opt.step(span_of(p2), cspan_of(g2)); }),
                       {"Adam::step", "2", "reset", "3"}));
    CHECK(opt.steps() == 0);
    CHECK(error_message([&] { opt.step(span_of(p3), cspan_of(g3)); }).empty());
}

TEST_CASE("Adam: steps after the first do not allocate", "[optim][adam]") {
    Adam<float> opt(AdamOptions().lr(1e-3).weight_decay(1e-4));
    std::vector<float> p(1000, 1.f), g(1000, 0.5f);
    opt.step(span_of(p), cspan_of(g));
    const std::size_t before = dtrain::test::allocation_count.load();
    for (int s = 0; s < 10; ++s)
        opt.step(span_of(p), cspan_of(g));
    CHECK(dtrain::test::allocation_count.load() == before);
    CHECK(opt.steps() == 11);
}

TEST_CASE("Adam: a long vector (several kernel blocks, odd length) matches the reference", "[optim][adam]") {
    const std::size_t n = 1283;  // > 2 blocks of 512, not a multiple of the SIMD width
    dtrain::Rng rng(7);
    std::vector<double> p(n);
    std::vector<std::vector<double>> grads(3, std::vector<double>(n));
    for (auto& x : p)
        x = rng.uniform(-2.0, 2.0);
    for (auto& g : grads)
        for (auto& x : g)
            x = rng.uniform(-1.0, 1.0);
    const auto want =
        dtrain::test::reference_adam(p, grads, {0.01, 0.01, 0.01}, 0.9, 0.999, 1e-8, 0.01, false);
    Adam<double> d(AdamOptions().lr(0.01).weight_decay(0.01));
    Adam<float> f(AdamOptions().lr(0.01).weight_decay(0.01));
    auto pd = p;
    auto pf = dtrain::test::cast_vec<float>(p);
    for (const auto& g : grads) {
        d.step(span_of(pd), cspan_of(g));
        const auto gf = dtrain::test::cast_vec<float>(g);
        f.step(span_of(pf), cspan_of(gf));
    }
    CHECK(dtrain::test::max_rel_diff(pd, want) < 1e-12);
    CHECK(dtrain::test::max_rel_diff(pf, want) < 1e-5);
}

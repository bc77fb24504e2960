#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

#include <dtrain/optim/adam.hpp>
#include <dtrain/optim/adamw.hpp>
#include <optim/alloc_counter.hpp>
#include <optim/optim_test_utils.hpp>
#include <support/test_utils.hpp>

using dtrain::AdamW;
using dtrain::AdamWOptions;
using dtrain::test::contains_all;
using dtrain::test::cspan_of;
using dtrain::test::error_message;
using dtrain::test::grads3;
using dtrain::test::p0;
using dtrain::test::run_unit;
using dtrain::test::span_of;

static_assert(dtrain::is_optimizer_v<AdamW<float>>);
static_assert(dtrain::is_optimizer_v<AdamW<double>>);

TEST_CASE("AdamW: three steps match hand-computed values", "[optim][adamw]") {
    SECTION("constant gradient, wd 0.1, lr 0.1: p = p * 0.99 - 0.1 each step") {
        const auto p = run_unit(AdamW<double>(AdamWOptions().lr(0.1).weight_decay(0.1)), {1, 1, 1});
        CHECK(p[0] == Approx(0.89).epsilon(1e-7));
        CHECK(p[1] == Approx(0.7811).epsilon(1e-7));
        CHECK(p[2] == Approx(0.673289).epsilon(1e-7));
        const auto pf = run_unit(AdamW<float>(AdamWOptions().lr(0.1).weight_decay(0.1)), {1, 1, 1});
        CHECK(pf[2] == Approx(0.673289).epsilon(1e-6));
    }
    SECTION("zero gradient: only the decoupled decay acts (Adam's L2 would move p by lr)") {
        const auto p = run_unit(AdamW<double>(AdamWOptions().lr(0.1).weight_decay(0.1)), {0, 0, 0});
        CHECK(p[0] == Approx(0.99).epsilon(1e-14));
        CHECK(p[1] == Approx(0.9801).epsilon(1e-14));
        CHECK(p[2] == Approx(0.970299).epsilon(1e-14));
    }
}

TEST_CASE("AdamW: matches a reference loop; with wd = 0 it is exactly Adam", "[optim][adamw]") {
    for (double wd : {0.0, 1e-2, 0.2}) {
        CAPTURE(wd);
        const auto opts = AdamWOptions().lr(0.02).betas(0.8, 0.99).eps(1e-7).weight_decay(wd);
        const auto want =
            dtrain::test::reference_adam(p0, grads3, {0.02, 0.02, 0.02}, 0.8, 0.99, 1e-7, wd, true);
        AdamW<double> d(opts);
        AdamW<float> f(opts);
        dtrain::Adam<float> a(dtrain::AdamOptions().lr(0.02).betas(0.8, 0.99).eps(1e-7));
        auto pd = p0;
        auto pf = dtrain::test::cast_vec<float>(p0);
        auto pa = pf;
        for (const auto& g : grads3) {
            d.step(span_of(pd), cspan_of(g));
            const auto gf = dtrain::test::cast_vec<float>(g);
            f.step(span_of(pf), cspan_of(gf));
            a.step(span_of(pa), cspan_of(gf));
        }
        CHECK(dtrain::test::max_rel_diff(pd, want) < 1e-12);
        CHECK(dtrain::test::max_rel_diff(pf, want) < 1e-6);
        if (wd == 0.0) {
            CHECK(pf == pa);
        } else {
            CHECK(pf != pa);
        }
    }
}

TEST_CASE("AdamW: the decay uses the scheduled rate", "[optim][adamw]") {
    AdamW<double> opt(AdamWOptions().lr(0.1).weight_decay(0.5));
    opt.set_schedule(dtrain::Schedule::step_decay(1, 0.5));  // rates 0.1, 0.05, 0.025
    std::vector<double> p{2.0};
    const std::vector<double> g{0.0};
    for (int s = 0; s < 3; ++s)
        opt.step(span_of(p), cspan_of(g));
    CHECK(p[0] == Approx(2.0 * (1 - 0.05) * (1 - 0.025) * (1 - 0.0125)).epsilon(1e-14));
    CHECK(opt.learning_rate() == Approx(0.0125).epsilon(1e-14));
}

TEST_CASE("AdamW: state layout, reset() and copies", "[optim][adamw]") {
    AdamW<float> a;
    CHECK(a.state_slots() == 2);
    CHECK(a.options().weight_decay() == 1e-2);  // PyTorch's AdamW default
    CHECK(a.base_learning_rate() == Approx(1e-3));
    const auto g0 = dtrain::test::cast_vec<float>(grads3[0]);
    const auto g1 = dtrain::test::cast_vec<float>(grads3[1]);
    auto pa = dtrain::test::cast_vec<float>(p0);
    a.step(span_of(pa), cspan_of(g0));
    const std::size_t n = p0.size();
    REQUIRE(a.state().size() == 2 * n);
    for (std::size_t i = 0; i < n; ++i) {
        CHECK(a.state()[i] ==
              Approx(0.1 * grads3[0][i]).epsilon(1e-6));  // decoupled: m sees the raw gradient
        CHECK(a.state()[n + i] == Approx(0.001 * grads3[0][i] * grads3[0][i]).epsilon(1e-5));
    }
    AdamW<float> b = a;
    auto pb = pa;
    a.step(span_of(pa), cspan_of(g1));
    b.step(span_of(pb), cspan_of(g1));
    CHECK(pa == pb);
    CHECK(std::vector<float>(a.state().begin(), a.state().end()) ==
          std::vector<float>(b.state().begin(), b.state().end()));
    b.reset(n);
    CHECK(b.steps() == 0);
    for (float v : b.state())
        CHECK(v == 0.0f);
    CHECK(a.steps() == 2);  // the original is unaffected
    CHECK(a.state()[0] != 0.0f);
}

TEST_CASE("AdamW: bad options and sizes throw dtrain::Error naming AdamW and the value", "[optim][adamw]") {
    CHECK(contains_all(error_message([] { AdamW<float>(AdamWOptions().lr(-0.5)); }), {"AdamW", "-0.5"}));
    CHECK(contains_all(error_message([] { AdamW<float>(AdamWOptions().beta1(-0.5)); }),
                       {"AdamW", "beta1", "-0.5"}));
    CHECK(contains_all(error_message([] { AdamW<float>(AdamWOptions().betas(0.9, 1.0)); }),
                       {"AdamW", "beta2", "1"}));
    CHECK(contains_all(error_message([] { AdamW<float>(AdamWOptions().weight_decay(-1.0)); }),
                       {"AdamW", "weight_decay", "-1"}));
    AdamW<double> opt;
    std::vector<double> p(4, 1.0), g(5, 1.0);
    CHECK(contains_all(error_message([&] { opt.step(span_of(p), cspan_of(g)); }), {"AdamW::step", "4", "5"}));
}

TEST_CASE("AdamW: steps after the first do not allocate", "[optim][adamw]") {
    AdamW<float> opt;
    std::vector<float> p(1000, 1.f), g(1000, 0.5f);
    opt.step(span_of(p), cspan_of(g));
    const std::size_t before = dtrain::test::allocation_count.load();
    for (int s = 0; s < 10; ++s)
        opt.step(span_of(p), cspan_of(g));
    CHECK(dtrain::test::allocation_count.load() == before);
}

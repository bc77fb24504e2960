#include <catch2/catch.hpp>

#include <cstdint>

#include <dtrain/optim/schedule.hpp>
#include <optim/optim_test_utils.hpp>

using dtrain::Schedule;
using dtrain::test::contains_all;
using dtrain::test::error_message;

TEST_CASE("Schedule: the default and constant() schedules are 1 everywhere", "[optim][schedule]") {
    const Schedule d, c = Schedule::constant();
    for (std::uint64_t s : {0ull, 1ull, 7ull, 1000000ull}) {
        CHECK(d(s) == 1.0);
        CHECK(c(s) == 1.0);
    }
}

TEST_CASE("Schedule: step_decay multiplies by gamma at every boundary", "[optim][schedule]") {
    const Schedule s = Schedule::step_decay(3, 0.5);
    CHECK(s(0) == 1.0);
    CHECK(s(2) == 1.0);  // last step before the first boundary
    CHECK(s(3) == 0.5);  // first boundary
    CHECK(s(5) == 0.5);
    CHECK(s(6) == 0.25);   // second boundary
    CHECK(s(9) == 0.125);  // third boundary
    const Schedule t = Schedule::step_decay(1, 0.1);
    CHECK(t(2) == Approx(0.01).epsilon(1e-15));
}

TEST_CASE("Schedule: cosine goes from 1 to min_factor over T steps and stays there", "[optim][schedule]") {
    const Schedule s = Schedule::cosine(10, 0.1);
    CHECK(s(0) == Approx(1.0).epsilon(1e-15));
    CHECK(s(1) == Approx(0.9779754323328192).epsilon(1e-14));  // 0.1 + 0.9 * (1 + cos(pi/10)) / 2
    CHECK(s(5) == Approx(0.55).epsilon(1e-14));                // midpoint: halfway between 1 and 0.1
    CHECK(s(10) == Approx(0.1).epsilon(1e-15));
    CHECK(s(11) == Approx(0.1).epsilon(1e-15));
    CHECK(s(1000) == Approx(0.1).epsilon(1e-15));
    const Schedule z = Schedule::cosine(4);
    CHECK(z(2) == Approx(0.5).epsilon(1e-14));
    CHECK(z(4) == 0.0);
    // Monotone non-increasing.
    for (std::uint64_t i = 0; i < 12; ++i)
        CHECK(s(i + 1) <= s(i));
}

TEST_CASE("Schedule: warmup ramps linearly from start_factor, then delegates to the inner schedule",
          "[optim][schedule]") {
    const Schedule s = Schedule::warmup(4, Schedule::step_decay(2, 0.1), 0.2);
    CHECK(s(0) == Approx(0.2).epsilon(1e-15));
    CHECK(s(1) == Approx(0.4).epsilon(1e-15));
    CHECK(s(2) == Approx(0.6).epsilon(1e-15));
    CHECK(s(3) == Approx(0.8).epsilon(1e-15));
    CHECK(s(4) == 1.0);                          // inner(0)
    CHECK(s(5) == 1.0);                          // inner(1)
    CHECK(s(6) == Approx(0.1).epsilon(1e-15));   // inner(2): the inner step count starts at 4
    CHECK(s(8) == Approx(0.01).epsilon(1e-14));  // inner(4)

    const Schedule c = Schedule::warmup(3, Schedule::cosine(4), 0.5);
    CHECK(c(0) == 0.5);
    CHECK(c(3) == Approx(1.0).epsilon(1e-15));
    CHECK(c(5) == Approx(0.5).epsilon(1e-14));  // cosine midpoint
    CHECK(c(7) == 0.0);                         // cosine end

    // No warm-up steps: the inner schedule itself.
    const Schedule n = Schedule::warmup(0, Schedule::step_decay(1, 0.5), 0.1);
    CHECK(n(0) == 1.0);
    CHECK(n(1) == 0.5);

    // Warm-ups nest like any schedule.
    const Schedule w2 = Schedule::warmup(2, Schedule::warmup(2, Schedule(), 0.5), 0.5);
    CHECK(w2(1) == 0.75);
    CHECK(w2(2) == 0.5);
    CHECK(w2(3) == 0.75);
    CHECK(w2(4) == 1.0);
}

TEST_CASE("Schedule: a custom function and copies", "[optim][schedule]") {
    const Schedule s([](std::uint64_t step) { return 1.0 / double(step + 1); });
    CHECK(s(0) == 1.0);
    CHECK(s(3) == 0.25);
    const Schedule copy = s;
    CHECK(copy(1) == 0.5);
    CHECK(Schedule(Schedule::Function())(5) == 1.0);  // empty function = constant
}

TEST_CASE("scaled_lr and a Goyal-style warm-up", "[optim][schedule]") {
    CHECK(dtrain::scaled_lr(0.1, 1) == 0.1);
    CHECK(dtrain::scaled_lr(0.1, 4) == Approx(0.4).epsilon(1e-15));
    const double lr = dtrain::scaled_lr(0.1, 4);
    const Schedule s = Schedule::warmup(5, Schedule(), 1.0 / 4);
    CHECK(lr * s(0) == Approx(0.1).epsilon(1e-15));  // starts at the single-process rate
    CHECK(lr * s(5) == Approx(0.4).epsilon(1e-15));  // ends at the scaled rate
    CHECK(contains_all(error_message([] { dtrain::scaled_lr(0.1, 0); }), {"scaled_lr", "world_size", "0"}));
    CHECK(contains_all(error_message([] { dtrain::scaled_lr(-0.1, 2); }), {"scaled_lr", "-0.1"}));
}

TEST_CASE("Schedule: bad arguments throw dtrain::Error naming the factory and value", "[optim][schedule]") {
    CHECK(contains_all(error_message([] { Schedule::step_decay(0, 0.5); }), {"Schedule::step_decay", "0"}));
    CHECK(
        contains_all(error_message([] { Schedule::step_decay(2, -0.5); }), {"Schedule::step_decay", "-0.5"}));
    CHECK(contains_all(error_message([] { Schedule::cosine(0); }), {"Schedule::cosine", "0"}));
    CHECK(contains_all(error_message([] { Schedule::cosine(10, 1.5); }), {"Schedule::cosine", "1.5"}));
    CHECK(
        contains_all(error_message([] { Schedule::warmup(3, Schedule(), 0.0); }), {"Schedule::warmup", "0"}));
    CHECK(contains_all(error_message([] { Schedule::warmup(3, Schedule(), -2.0); }),
                       {"Schedule::warmup", "-2"}));
    CHECK(error_message([] { Schedule::warmup(3, Schedule::cosine(5, 0.0), 1.0); }).empty());
}

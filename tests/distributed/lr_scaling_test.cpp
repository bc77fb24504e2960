#include <catch2/catch.hpp>

#include <dtrain/distributed/lr_scaling.hpp>
#include <dtrain/optim/sgd.hpp>

TEST_CASE("linear_scaling_warmup ramps from the single-process rate to the scaled rate", "[dist][lr]") {
    const auto s = dtrain::linear_scaling_warmup(4, 10);
    CHECK(s(0) == Approx(0.25));
    CHECK(s(5) == Approx(0.25 + 0.75 * 0.5));
    CHECK(s(10) == Approx(1.0));
    CHECK(s(1000) == Approx(1.0));
    CHECK(dtrain::linear_scaling_warmup(1, 10)(0) == Approx(1.0));
    CHECK_THROWS_WITH(dtrain::linear_scaling_warmup(0, 10), Catch::Contains("world_size must be >= 1"));
}

TEST_CASE("apply_linear_scaling composes with the optimizer's schedule", "[dist][lr]") {
    dtrain::SGD<float> sgd(0.1);
    sgd.set_schedule(dtrain::Schedule::step_decay(5, 0.5));
    dtrain::apply_linear_scaling(sgd, 8, 4);
    CHECK(sgd.base_learning_rate() == Approx(0.8));
    sgd.set_steps(0);
    CHECK(sgd.learning_rate() == Approx(0.1));  // starts at the single-process rate
    sgd.set_steps(2);
    CHECK(sgd.learning_rate() == Approx(0.8 * (0.125 + 0.875 * 0.5)));
    sgd.set_steps(4);
    CHECK(sgd.learning_rate() == Approx(0.8));  // warm-up done, inner schedule at its step 0
    sgd.set_steps(4 + 5);
    CHECK(sgd.learning_rate() == Approx(0.4));  // inner step decay after 5 more steps
}

// The synchronous DistOptimizer's backward-pass state machine (BackwardPasses) driven directly, without
// MPI: pass counting against accumulation_steps, which pass reports final suffixes, and the launches.
#include <catch2/catch.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/distributed/detail/backward_passes.hpp>
#include <support/test_utils.hpp>

using dtrain::detail::BackwardPasses;

namespace {

// A model of three layers over a buffer of 30 values: layer i at offset 10 * i.
void backward(BackwardPasses& p, std::vector<std::size_t>& launched) {
    for (std::size_t layer = 3; layer-- > 0;)
        p.layer_ready(layer, 10 * layer, [&](std::size_t from) { launched.push_back(from); });
}

std::string message(BackwardPasses& p) {
    return dtrain::test::error_message([&] {
        std::vector<std::size_t> ignored;
        backward(p, ignored);
    });
}

}  // namespace

TEST_CASE("BackwardPasses: only the last pass of a step launches, from the final suffix, not at layer 0",
          "[dist][sync][passes]") {
    BackwardPasses p(/*accumulation_steps=*/2, /*overlap=*/true, 30);
    std::vector<std::size_t> launched;
    backward(p, launched);
    CHECK(launched.empty());  // first of two passes: nothing to reduce yet
    CHECK(p.passes() == 1);
    backward(p, launched);
    CHECK(launched == std::vector<std::size_t>{20, 10});  // layers 2 and 1; layer 0 is left to step()
    CHECK(p.ready_from() == 0);
    CHECK(p.passes() == 2);
    CHECK_NOTHROW(p.check_step("step"));
    p.end_step();
    CHECK(p.passes() == 0);
}

TEST_CASE("BackwardPasses: without overlap nothing launches", "[dist][sync][passes]") {
    BackwardPasses p(1, /*overlap=*/false, 30);
    std::vector<std::size_t> launched;
    p.partial_ready(20, 5, 10, [&](std::size_t from) { launched.push_back(from); });
    backward(p, launched);
    CHECK(launched.empty());
    CHECK(p.passes() == 1);
}

TEST_CASE("BackwardPasses: partial gradients extend the final suffix only when contiguous",
          "[dist][sync][passes]") {
    BackwardPasses p(1, true, 30);
    std::vector<std::size_t> launched;
    auto launch = [&](std::size_t from) { launched.push_back(from); };
    p.partial_ready(20, 5, 10, launch);  // layer 2's end: [25, 30) extends the (empty) suffix
    p.partial_ready(20, 0, 3, launch);   // [20, 23) leaves a gap: ignored
    p.partial_ready(20, 0, 5, launch);   // [20, 25)
    CHECK(launched == std::vector<std::size_t>{25, 20});
    p.layer_ready(2, 20, launch);
    p.layer_ready(1, 10, launch);
    CHECK(launched == std::vector<std::size_t>{25, 20, 20, 10});
    p.layer_ready(0, 0, launch);
    CHECK(launched.size() == 4);
    CHECK(p.passes() == 1);
}

TEST_CASE("BackwardPasses: one pass too many throws at its first gradient, a step with too few throws",
          "[dist][sync][passes]") {
    BackwardPasses p(1, true, 30);
    CHECK(message(p).empty());
    CHECK_THAT(message(p),
               Catch::Contains("backward pass 2 since the last step, but accumulation_steps is 1"));
    CHECK(p.passes() == 1);
    p.restart();
    CHECK(p.passes() == 0);
    CHECK_THROWS_WITH(p.check_step("DistOptimizer::step"),
                      Catch::Contains("DistOptimizer::step: 0 backward passes since the last step, but "
                                      "accumulation_steps is 1"));
}

TEST_CASE("BackwardPasses: restart forgets a pass in progress", "[dist][sync][passes]") {
    BackwardPasses p(1, true, 30);
    std::vector<std::size_t> launched;
    p.layer_ready(2, 20, [&](std::size_t from) { launched.push_back(from); });
    p.restart();  // zero_grad() in the middle of a backward pass
    backward(p, launched);
    CHECK(launched == std::vector<std::size_t>{20, 20, 10});
    CHECK(p.passes() == 1);
}

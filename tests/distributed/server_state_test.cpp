// The parameter server's state machine (ServerState) driven directly, without MPI: the staleness bound,
// averaged rounds, the end of a run, and protocol violations.
#include <catch2/catch.hpp>

#include <cstdint>

#include <dtrain/distributed/async/server_state.hpp>
#include <dtrain/distributed/options.hpp>

using dtrain::detail::ServerState;

TEST_CASE("ServerState: a worker more than `staleness` steps ahead of the slowest waits for it",
          "[dist][async][server]") {
    ServerState s(2, /*staleness=*/1, /*averaging=*/false);
    CHECK(s.gradient(0, 0, 0, 0) == 0);  // worker 0, step 0
    s.updated();
    CHECK(s.may_reply(0));  // clock 1 vs slowest 0: gap 1 <= 1
    CHECK(s.replied(0) == 1);
    s.delivered(0);
    CHECK(s.gradient(0, 1, 0, 0) == 0);  // no update since its read
    s.updated();
    CHECK_FALSE(s.may_reply(0));  // clock 2 vs slowest 0: gap 2 > 1
    CHECK(s.withhold(0));
    CHECK_FALSE(s.withhold(0));          // counted once per reply
    CHECK(s.gradient(1, 0, 1, 0) == 2);  // worker 1 read version 0, two updates ago
    s.updated();
    CHECK(s.worker(1).clock == 1);
    CHECK(s.may_reply(0));  // the slowest is at 1 now
    CHECK(s.may_reply(1));
    CHECK(s.replied(0) == 1);
    CHECK(s.replied(1) == 0);
    CHECK(s.worker(0).read_version == 3);
    CHECK(s.worker(1).read_version == 3);
    CHECK(s.gradient(1, 1, 1, 0) == 0);
}

TEST_CASE("ServerState: the delay counts the updates since the worker's read", "[dist][async][server]") {
    ServerState s(2, dtrain::unbounded_staleness, false);
    s.gradient(0, 0, 0, 0);
    s.updated();
    s.replied(0);
    s.gradient(1, 0, 1, 0);  // worker 1 still has version 0
    s.updated();
    s.replied(1);
    CHECK(s.gradient(0, 1, 0, 0) == 1);  // worker 1's update came after worker 0's read
}

TEST_CASE("ServerState: an averaged round is ready when every unfinished worker waits",
          "[dist][async][server]") {
    ServerState s(3, 0, /*averaging=*/true);
    CHECK_FALSE(s.round_ready());
    s.gradient(2, 0, 0, 0);
    CHECK(s.worker(2).held_slot == 0);
    CHECK_FALSE(s.round_ready());
    s.gradient(0, 0, 2, 0);
    CHECK_FALSE(s.round_ready());
    s.gradient(1, 0, 1, 0);
    CHECK(s.round_ready());
    for (std::size_t w = 0; w < 3; ++w)
        s.replied(w);
    CHECK(s.worker(1).held_slot == -1);
    CHECK_FALSE(s.round_ready());
    s.done(1, 1, 0);  // worker 1 stops after one step: rounds go on without it
    s.gradient(0, 1, 0, 0);
    CHECK_FALSE(s.round_ready());
    s.gradient(2, 1, 1, 0);
    CHECK(s.round_ready());
}

TEST_CASE("ServerState: the run ends when every worker is done and every reply delivered",
          "[dist][async][server]") {
    ServerState s(2, dtrain::unbounded_staleness, false);
    s.gradient(0, 0, 0, 0);
    s.replied(0);
    s.done(1, 0, 0);
    CHECK(s.active() == 1);
    CHECK(s.slowest() == 1);  // worker 1 is done: only worker 0 counts
    CHECK_FALSE(s.finished());
    s.done(0, 1, 0);
    CHECK_FALSE(s.finished());  // the reply to worker 0 is still in flight
    s.delivered(0);
    CHECK(s.finished());
    s.start_run();
    CHECK(s.active() == 2);
    CHECK(s.worker(0).clock == 0);
}

TEST_CASE("ServerState rejects protocol violations with the master, worker and clocks",
          "[dist][async][server]") {
    ServerState s(2, dtrain::unbounded_staleness, false);
    CHECK_THROWS_WITH(s.gradient(0, 1, 0, 3),
                      Catch::Contains("master 3 got step 1 from worker 0 whose clock is 0 (protocol error)"));
    s.gradient(0, 0, 0, 3);
    CHECK_THROWS_WITH(s.gradient(0, 1, 0, 3), Catch::Contains("which waits for its reply"));
    CHECK_THROWS_WITH(s.done(0, 1, 3), Catch::Contains("got 'done' after 1 steps from worker 0"));
    s.replied(0);
    CHECK_THROWS_WITH(s.done(0, 5, 3), Catch::Contains("whose clock is 1"));
    s.done(0, 1, 3);
    CHECK_THROWS_WITH(s.gradient(0, 1, 0, 3), Catch::Contains("and which is done"));
    CHECK_THROWS_WITH(s.gradient(7, 0, 0, 3),
                      Catch::Contains("got a message from worker 7, but there are 2"));
}

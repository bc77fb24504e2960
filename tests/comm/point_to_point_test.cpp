// detail::PointToPoint, the base Ring and Naive share: the tag sequence, test() and wait() with their scratch
// leases, copy and move. A probe policy over a message-free state machine checks the base itself; Ring and
// Naive check that requests advanced in a different order on each rank never take each other's messages.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <dtrain/comm.hpp>
#include <dtrain/comm/detail/point_to_point.hpp>
#include <support/test_utils.hpp>

namespace {

using dtrain::Span;

/// A state machine without messages that completes at its `steps`-th progress() call.
class CountdownOp {
public:
    CountdownOp() noexcept = default;
    explicit CountdownOp(int steps) noexcept : left_(steps), active_(true) {}
    bool active() const noexcept { return active_; }
    bool progress() noexcept {
        if (active_ && --left_ <= 0) active_ = false;
        return !active_;
    }
    void wait() noexcept {
        while (!progress()) {
        }
    }
    void drain() noexcept { wait(); }

private:
    int left_ = 0;
    bool active_ = false;
};

/// A policy on the shared base that records the tags its operations were started on and exposes the base's
/// protected tag members.
class Probe : public dtrain::detail::PointToPoint<Probe, CountdownOp> {
    using Base = dtrain::detail::PointToPoint<Probe, CountdownOp>;

public:
    static constexpr const char* policy_name = "Probe";
    explicit Probe(MPI_Comm comm) : Base(comm) {}
    using Base::blocking_tag;
    using Base::next_tag;
    using Base::tag_range;

    std::vector<int> tags;  ///< the tag of every start(), in order
    int steps = 1;          ///< progress() calls each operation takes

private:
    friend Base;
    template <class T>
    Request start(Span<T>, int tag, dtrain::ReduceOp) {
        tags.push_back(tag);
        Request r;
        r.scratch() = lease(64);
        r.op() = CountdownOp(steps);
        return r;
    }
};

float value(int rank, std::size_t i) {
    return float((rank + 1) * 1000 + int(i % 997));  // integers: sums are exact in any order
}

std::vector<float> filled(int rank, std::size_t n) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = value(rank, i);
    return v;
}

bool is_sum(const std::vector<float>& v, int p) {
    for (std::size_t i = 0; i < v.size(); ++i) {
        float want = 0;
        for (int r = 0; r < p; ++r)
            want += value(r, i);
        if (v[i] != want) return false;
    }
    return true;
}

/// Calls comm.test(request) for about a millisecond.
template <class Comm>
void poll(Comm& comm, typename Comm::Request& request) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
    while (std::chrono::steady_clock::now() < until)
        comm.test(request);
}

}  // namespace

static_assert(!std::is_constructible_v<dtrain::detail::PointToPoint<Probe, CountdownOp>, MPI_Comm>,
              "the base is not a policy of its own");
static_assert(std::is_nothrow_move_constructible_v<dtrain::Ring> &&
              std::is_nothrow_move_assignable_v<dtrain::Ring>);
static_assert(std::is_nothrow_move_constructible_v<dtrain::Naive> &&
              std::is_nothrow_move_assignable_v<dtrain::Naive>);
static_assert(std::is_copy_constructible_v<dtrain::Ring> && std::is_copy_assignable_v<dtrain::Ring>);
static_assert(std::is_copy_constructible_v<dtrain::Naive> && std::is_copy_assignable_v<dtrain::Naive>);

TEST_CASE("tags: blocking calls on blocking_tag, nonblocking ones on 1..tag_range in turn, wrapping to 1",
          "[comm]") {
    Probe p(MPI_COMM_WORLD);
    float x = 1.0f;
    const Span<float> s(&x, 1);
    p.allreduce_sum(s);
    auto r1 = p.iallreduce_sum(s);
    auto r2 = p.iallreduce_sum(s);
    p.allreduce_sum(s);  // takes no tag of the sequence
    auto r3 = p.iallreduce_sum(s);
    CHECK(p.tags == std::vector<int>{Probe::blocking_tag, 1, 2, Probe::blocking_tag, 3});

    // Two whole cycles from there: every tag is valid in MPI (at least 32767 is guaranteed), none is the
    // blocking tag, and they come in turn (tag_range, then 1 again).
    bool valid = true, never_blocking = true, in_turn = true;
    for (std::uint64_t k = 3; k < 2 * Probe::tag_range + 3; ++k) {
        const int tag = p.next_tag();
        valid = valid && tag >= 1 && tag <= 32767;
        never_blocking = never_blocking && tag != Probe::blocking_tag;
        in_turn = in_turn && tag == int(1 + k % Probe::tag_range);
    }
    CHECK(valid);
    CHECK(never_blocking);
    CHECK(in_turn);
    void* ub = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(p.mpi_comm(), MPI_TAG_UB, &ub, &flag);
    REQUIRE(flag);
    CHECK(std::uint64_t(*static_cast<int*>(ub)) >= Probe::tag_range);
}

TEST_CASE("test() and wait(): an inactive request is complete; scratch returns when a request completes",
          "[comm]") {
    Probe p(MPI_COMM_WORLD);
    float x = 1.0f;
    const Span<float> s(&x, 1);
    Probe::Request idle;
    CHECK_FALSE(idle.active());
    CHECK(p.test(idle));
    p.wait(idle);
    CHECK(p.scratch_buffers() == 0);

    p.steps = 3;
    auto a = p.iallreduce_sum(s);
    CHECK(p.scratch_buffers() == 1);
    CHECK_FALSE(p.test(a));
    auto b = p.iallreduce_sum(s);  // a still holds its buffer
    CHECK(p.scratch_buffers() == 2);
    CHECK_FALSE(p.test(a));
    CHECK(p.test(a));  // done: its buffer is back although `a` lives on
    CHECK_FALSE(a.active());
    CHECK(p.test(a));  // and stays complete
    auto c = p.iallreduce_sum(s);
    CHECK(p.scratch_buffers() == 2);
    p.wait(b);  // b's buffer is back
    auto d = p.iallreduce_sum(s);
    CHECK(p.scratch_buffers() == 2);
    p.wait(c);
    p.wait(d);
    p.allreduce_sum(s);
    CHECK(p.scratch_buffers() == 2);
}

TEST_CASE("copies are independent communicators with their own pool and tags; moves carry them over",
          "[comm]") {
    Probe a(MPI_COMM_WORLD);
    float x = 1.0f;
    const Span<float> s(&x, 1);
    auto r = a.iallreduce_sum(s);  // tag 1, one buffer
    a.wait(r);

    Probe b(a);
    int cmp = MPI_UNEQUAL;
    MPI_Comm_compare(a.mpi_comm(), b.mpi_comm(), &cmp);
    CHECK(cmp == MPI_CONGRUENT);  // same ranks, another communicator
    CHECK(b.scratch_buffers() == 0);
    CHECK(b.next_tag() == 1);
    CHECK(a.next_tag() == 2);
    auto rb = b.iallreduce_sum(s);  // from b's own pool
    CHECK(b.scratch_buffers() == 1);
    CHECK(a.scratch_buffers() == 1);
    b.wait(rb);

    // A pending request survives a move of its policy; the pool and the sequence move along.
    auto pending = a.iallreduce_sum(s);  // tag 3
    Probe c(std::move(a));
    CHECK(a.mpi_comm() == MPI_COMM_NULL);
    CHECK(a.scratch_buffers() == 0);
    CHECK(c.scratch_buffers() == 1);
    CHECK(c.next_tag() == 4);
    c.wait(pending);
    auto again = c.iallreduce_sum(s);  // tag 5, reuses the buffer `pending` returned
    CHECK(c.scratch_buffers() == 1);
    c.wait(again);

    // Copy assignment duplicates and starts afresh; move assignment steals.
    const MPI_Comm handle = c.mpi_comm();
    b = c;
    CHECK(b.mpi_comm() != handle);
    MPI_Comm_compare(b.mpi_comm(), handle, &cmp);
    CHECK(cmp == MPI_CONGRUENT);
    CHECK(b.scratch_buffers() == 0);
    CHECK(b.next_tag() == 1);
    b = std::move(c);
    CHECK(b.mpi_comm() == handle);
    CHECK(c.mpi_comm() == MPI_COMM_NULL);
    CHECK(b.scratch_buffers() == 1);
    CHECK(b.next_tag() == 6);
    b.barrier();
}

TEST_CASE(
    "Ring and Naive: requests advanced in a different order on each rank, with a blocking call among "
    "them, each get their own messages",
    "[comm]") {
    auto run = [](auto comm, const std::string& label) {
        const int rank = comm.rank(), p = comm.size();
        std::vector<float> a = filled(rank, 4001), b = filled(rank, 3001), c = filled(rank, 2003),
                           d = filled(rank, 1009);
        auto ra = comm.iallreduce_sum(Span<float>(a.data(), a.size()));
        auto rb = comm.iallreduce_sum(Span<float>(b.data(), b.size()));
        // Even ranks move `a` on as far as it goes alone, odd ranks `b`: the ranks then post the next
        // messages of the two requests and of the blocking call below in different orders.
        poll(comm, rank % 2 == 0 ? ra : rb);
        comm.allreduce_sum(Span<float>(c.data(), c.size()));
        auto rd = comm.iallreduce_sum(Span<float>(d.data(), d.size()));
        poll(comm, rank % 2 == 0 ? rd : ra);
        comm.wait(rb);
        comm.wait(rd);
        comm.wait(ra);
        INFO(label);
        CHECK(dtrain::test::all_ranks(is_sum(a, p) && is_sum(b, p) && is_sum(c, p) && is_sum(d, p)));
    };
    run(dtrain::Ring(MPI_COMM_WORLD, {4 * sizeof(float), 1}), "Ring, 4-float segments, window 1");
    run(dtrain::Ring(MPI_COMM_WORLD, {64 * sizeof(float), 3}), "Ring, 64-float segments, window 3");
    run(dtrain::Naive(MPI_COMM_WORLD), "Naive");
}

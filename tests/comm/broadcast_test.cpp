// Broadcast from every root for the three policies, communicator ownership (duplicate, copy, move), the
// Communicator concept and error messages.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <dtrain/comm.hpp>
#include <support/test_utils.hpp>

namespace {

using dtrain::Span;

/// Root `root`'s payload: distinct per root and index, with bit patterns that rounding would change.
template <class T>
std::vector<T> payload(int root, std::size_t n) {
    std::vector<T> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = T(1.0 / (3.0 + double(i)) + double(root) * 0.1234567);
    return v;
}

template <class Comm, class T>
void check_broadcast(Comm& comm, std::size_t n, const std::string& label) {
    for (int root = 0; root < comm.size(); ++root) {
        std::vector<T> v = comm.rank() == root ? payload<T>(root, n) : std::vector<T>(n, T(-7));
        comm.broadcast(Span<T>(v.data(), v.size()), root);
        const std::vector<T> want = payload<T>(root, n);
        INFO(label << " n=" << n << " root=" << root);
        CHECK(dtrain::test::all_ranks(n == 0 || std::memcmp(v.data(), want.data(), n * sizeof(T)) == 0));
    }
}

template <class Comm>
void check_all_lengths(Comm& comm, const std::string& label) {
    const std::size_t p = std::size_t(comm.size());
    for (std::size_t n : {std::size_t(0), std::size_t(1), p + 1, std::size_t(4097), std::size_t(300001)}) {
        check_broadcast<Comm, float>(comm, n, label);
    }
    check_broadcast<Comm, double>(comm, 1001, label + " double");
    check_broadcast<Comm, std::int64_t>(comm, 33, label + " int64");
}

}  // namespace

static_assert(dtrain::is_communicator_v<dtrain::Collective>);
static_assert(dtrain::is_communicator_v<dtrain::Ring>);
static_assert(dtrain::is_communicator_v<dtrain::Naive>);
static_assert(!dtrain::is_communicator_v<int>);
static_assert(std::is_move_constructible_v<dtrain::Ring::Request> &&
              !std::is_copy_constructible_v<dtrain::Ring::Request>);
static_assert(std::is_move_constructible_v<dtrain::Naive::Request> &&
              !std::is_copy_constructible_v<dtrain::Naive::Request>);
static_assert(std::is_move_constructible_v<dtrain::Collective::Request> &&
              !std::is_copy_constructible_v<dtrain::Collective::Request>);

TEST_CASE("broadcast delivers root's exact values from every root", "[comm]") {
    dtrain::Collective collective(MPI_COMM_WORLD);
    dtrain::Naive naive(MPI_COMM_WORLD);
    dtrain::Ring ring(MPI_COMM_WORLD);
    dtrain::Ring ring_small(MPI_COMM_WORLD, {12, 3});  // 3-float segments, chain pipelining
    check_all_lengths(collective, "Collective");
    check_all_lengths(naive, "Naive");
    check_all_lengths(ring, "Ring");
    check_broadcast<dtrain::Ring, float>(ring_small, 1001, "Ring 12 B segments");
}

TEST_CASE("policies work on an MPI_ERRORS_RETURN duplicate; copy duplicates, move steals", "[comm]") {
    auto check_policy = [](auto make, const std::string& label) {
        INFO(label);
        auto a = make();
        int cmp = MPI_UNEQUAL;
        MPI_Comm_compare(a.mpi_comm(), MPI_COMM_WORLD, &cmp);
        CHECK(cmp == MPI_CONGRUENT);  // same ranks, different communicator
        MPI_Errhandler eh;
        MPI_Comm_get_errhandler(a.mpi_comm(), &eh);
        CHECK(eh == MPI_ERRORS_RETURN);
        MPI_Errhandler_free(&eh);
        CHECK(a.rank() == dtrain::test::world_rank());
        CHECK(a.size() == dtrain::test::world_size());

        auto b = a;  // copy: a new duplicate
        CHECK(b.mpi_comm() != a.mpi_comm());
        MPI_Comm_compare(a.mpi_comm(), b.mpi_comm(), &cmp);
        CHECK(cmp == MPI_CONGRUENT);
        const MPI_Comm handle = a.mpi_comm();
        auto c = std::move(a);  // move: the same handle
        CHECK(c.mpi_comm() == handle);
        CHECK(a.mpi_comm() == MPI_COMM_NULL);
        b = std::move(c);  // b frees its own duplicate and takes c's
        CHECK(b.mpi_comm() == handle);
        float x = float(b.rank() + 1);
        b.allreduce_sum(Span<float>(&x, 1));
        CHECK(x == float(b.size() * (b.size() + 1) / 2));
        b.barrier();
    };
    int world_size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    check_policy([] { return dtrain::Collective(MPI_COMM_WORLD); }, "Collective");
    check_policy([] { return dtrain::Naive(MPI_COMM_WORLD); }, "Naive");
    check_policy([] { return dtrain::Ring(MPI_COMM_WORLD); }, "Ring");
    // MPI_COMM_WORLD itself is untouched: not freed (still answers, with all its ranks) and still with its
    // default error handler (MPI_ERRORS_RETURN went on the duplicates only).
    int size = -1;
    CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size) == MPI_SUCCESS);
    CHECK(size == world_size);
    MPI_Errhandler world_eh;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &world_eh);
    CHECK(world_eh == MPI_ERRORS_ARE_FATAL);
    MPI_Errhandler_free(&world_eh);
}

TEST_CASE("policies on a split communicator reduce within their group only", "[comm]") {
    const int r = dtrain::test::world_rank();
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, r % 2, r, &half);
    {
        dtrain::Ring ring(half);
        dtrain::Naive naive(half);
        float a = 1.0f, b = float(r);
        ring.allreduce_sum(Span<float>(&a, 1));
        naive.allreduce_sum(Span<float>(&b, 1));
        const int p = dtrain::test::world_size();
        const int members = (p + 1 - r % 2) / 2;
        float want_b = 0;
        for (int q = r % 2; q < p; q += 2)
            want_b += float(q);
        CHECK(a == float(members));
        CHECK(b == want_b);
    }
    MPI_Comm_free(&half);
}

TEST_CASE("errors name the call: invalid roots and options", "[comm]") {
    dtrain::Collective collective(MPI_COMM_WORLD);
    dtrain::Ring ring(MPI_COMM_WORLD);
    dtrain::Naive naive(MPI_COMM_WORLD);
    float x = 1.0f;
    const int bad_root = dtrain::test::world_size() + 5;
    const std::string size = std::to_string(dtrain::test::world_size());
    CHECK_THROWS_WITH(collective.broadcast(Span<float>(&x, 1), bad_root),
                      Catch::Contains("Collective::broadcast: root " + std::to_string(bad_root) +
                                      " is not a rank of a communicator of size " + size));
    CHECK_THROWS_WITH(ring.broadcast(Span<float>(&x, 1), bad_root),
                      Catch::Contains("Ring::broadcast: root " + std::to_string(bad_root) +
                                      " is not a rank of a communicator of size " + size));
    CHECK_THROWS_WITH(
        naive.broadcast(Span<float>(&x, 1), -1),
        Catch::Contains("Naive::broadcast: root -1 is not a rank of a communicator of size " + size));
    CHECK_THROWS_WITH(dtrain::Ring(MPI_COMM_WORLD, {0, 17}),
                      Catch::Contains("Ring: window must be in 0..16"));
    CHECK_THROWS_WITH(dtrain::Collective(MPI_COMM_NULL), Catch::Contains("MPI_COMM_NULL"));
    // The communicators still work after the failed calls.
    collective.allreduce_sum(Span<float>(&x, 1));
    CHECK(x == float(dtrain::test::world_size()));
}

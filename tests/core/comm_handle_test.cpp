// detail::CommHandle: the duplicate it owns (congruent with the given communicator, errors returned as
// dtrain::Error), copies that duplicate again, moves that steal, and detail::mpi_count's limit.
#include <catch2/catch.hpp>

#include <climits>
#include <cstddef>
#include <utility>

#include <mpi.h>

#include <dtrain/core/comm_handle.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/span.hpp>

using dtrain::detail::CommHandle;

namespace {
int compare(MPI_Comm a, MPI_Comm b) {
    int result = 0;
    MPI_Comm_compare(a, b, &result);
    return result;
}
}  // namespace

TEST_CASE("CommHandle owns a congruent duplicate whose MPI errors are returned") {
    CommHandle h(MPI_COMM_WORLD);
    CHECK(h.get() != MPI_COMM_WORLD);
    CHECK(compare(h.get(), MPI_COMM_WORLD) == MPI_CONGRUENT);
    CHECK(h.rank() == dtrain::world_rank());
    CHECK(h.size() == dtrain::world_size());
    MPI_Errhandler handler;
    MPI_Comm_get_errhandler(h.get(), &handler);
    CHECK(handler == MPI_ERRORS_RETURN);
    MPI_Errhandler_free(&handler);
    // A bad root on the duplicate is an error code, so DTRAIN_MPI_CHECK throws instead of aborting the job.
    int value = 0;
    CHECK_THROWS_AS(DTRAIN_MPI_CHECK(MPI_Bcast(&value, 1, MPI_INT, h.size() + 5, h.get())), dtrain::Error);
}

TEST_CASE("CommHandle copies duplicate again and moves steal") {
    CommHandle a(MPI_COMM_WORLD);
    CommHandle b(a);  // collective: every rank copies
    CHECK(b.get() != a.get());
    CHECK(compare(a.get(), b.get()) == MPI_CONGRUENT);
    const MPI_Comm owned = b.get();
    CommHandle c(std::move(b));
    CHECK(c.get() == owned);
    CHECK(b.get() == MPI_COMM_NULL);  // NOLINT(bugprone-use-after-move): moved-from state is specified
    CommHandle d;
    CHECK(d.get() == MPI_COMM_NULL);
    d = c;  // copy assignment duplicates
    CHECK(d.get() != c.get());
    CHECK(compare(d.get(), c.get()) == MPI_CONGRUENT);
    d = std::move(c);
    CHECK(d.get() == owned);
}

TEST_CASE("CommHandle refuses MPI_COMM_NULL and mpi_count refuses more than INT_MAX elements") {
    CHECK_THROWS_WITH(CommHandle(MPI_COMM_NULL), Catch::Contains("given MPI_COMM_NULL"));
    float x = 0.0f;
    CHECK(dtrain::detail::mpi_count(dtrain::Span<float>(&x, 1), "test") == 1);
    const std::size_t too_many = std::size_t(INT_MAX) + 1;
    CHECK_THROWS_WITH(dtrain::detail::mpi_count(dtrain::Span<float>(&x, too_many), "test"),
                      Catch::Contains("test: 2147483648 elements exceed MPI's int count limit"));
}

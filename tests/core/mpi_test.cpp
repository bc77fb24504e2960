#include <catch2/catch.hpp>

#include <string>

#include <dtrain/core/mpi.hpp>
#include <support/test_utils.hpp>

TEST_CASE("mpi_type maps C++ types to MPI datatypes", "[core][mpi]") {
    CHECK(dtrain::mpi_type<float>() == MPI_FLOAT);
    CHECK(dtrain::mpi_type<double>() == MPI_DOUBLE);
    CHECK(dtrain::mpi_type<std::int32_t>() == MPI_INT32_T);
    CHECK(dtrain::mpi_type<std::uint64_t>() == MPI_UINT64_T);
}

TEST_CASE("DTRAIN_MPI_CHECK throws with the call's name and MPI's error string", "[core][mpi]") {
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    float x = 1.0f;
    const std::string what = dtrain::test::error_message([&] {
        DTRAIN_MPI_CHECK(MPI_Bcast(&x, 1, MPI_FLOAT, 9999, comm));  // invalid root
    });
    CHECK(what.find("MPI_Bcast") != std::string::npos);
    CHECK(what.find("failed") != std::string::npos);
    CHECK(what.size() > std::string("MPI_Bcast(&x, 1, MPI_FLOAT, 9999, comm) failed: ").size());
    MPI_Comm_free(&comm);
}

TEST_CASE("all_ranks combines a condition over ranks", "[core][mpi]") {
    const int rank = dtrain::test::world_rank();
    CHECK(dtrain::test::all_ranks(rank >= 0));
    CHECK_FALSE(dtrain::test::all_ranks(false));
    CHECK_FALSE(dtrain::test::all_ranks(rank != 0));  // false on rank 0 only: AND, not OR
    CHECK(dtrain::test::all_ranks(rank != 0, MPI_COMM_SELF) == (rank != 0));  // over the given communicator
}

TEST_CASE("comm_rank and comm_size match MPI and accept any communicator", "[core][mpi]") {
    int r = -1, s = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    CHECK(dtrain::world_rank() == r);
    CHECK(dtrain::world_size() == s);
    CHECK(dtrain::comm_rank(MPI_COMM_SELF) == 0);
    CHECK(dtrain::comm_size(MPI_COMM_SELF) == 1);
}

// detail::node_comm and node_local_size (core/node.hpp): on one machine every rank shares the node, so the
// node-local communicator holds all ranks in their order; it is owned (CommHandle::adopt) with MPI errors
// returned. CommHandle::adopt refuses MPI_COMM_NULL.
#include <catch2/catch.hpp>

#include <mpi.h>

#include <dtrain/core/comm_handle.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/node.hpp>

TEST_CASE("node_comm holds the ranks on this node in their order, with MPI errors returned") {
    const dtrain::detail::CommHandle local = dtrain::detail::node_comm(MPI_COMM_WORLD);
    REQUIRE(local.get() != MPI_COMM_NULL);
    CHECK(local.get() != MPI_COMM_WORLD);
    CHECK(local.rank() == dtrain::world_rank());
    CHECK(local.size() == dtrain::world_size());
    int value = 0;  // a bad root is an error code on it, so DTRAIN_MPI_CHECK throws instead of aborting
    CHECK_THROWS_AS(DTRAIN_MPI_CHECK(MPI_Bcast(&value, 1, MPI_INT, local.size() + 5, local.get())),
                    dtrain::Error);
    CHECK(dtrain::detail::node_local_size(MPI_COMM_WORLD) == dtrain::world_size());
    CHECK(dtrain::detail::node_local_size(MPI_COMM_SELF) == 1);
}

TEST_CASE("CommHandle::adopt refuses MPI_COMM_NULL") {
    CHECK_THROWS_WITH(dtrain::detail::CommHandle::adopt(MPI_COMM_NULL),
                      Catch::Contains("given MPI_COMM_NULL"));
}

#pragma once

/// @file
/// The ranks that share this rank's node (MPI_COMM_TYPE_SHARED: the MPI runtime's node, the ranks that can
/// share memory), for Environment's local rank, Ring's choice of network defaults and the progress thread's
/// CPUs per rank; internals in dtrain::detail.

#include <mpi.h>

#include <dtrain/core/comm_handle.hpp>
#include <dtrain/core/mpi.hpp>

namespace dtrain::detail {

/// The ranks of `comm` on this rank's node, as an owned communicator (MPI_Comm_split_type with
/// MPI_COMM_TYPE_SHARED; ranks in the order of `comm`; MPI errors on it are returned). Collective over
/// `comm`; requires MPI to be initialised and `comm` valid. Throws dtrain::Error when MPI fails.
inline CommHandle node_comm(MPI_Comm comm) {
    MPI_Comm local = MPI_COMM_NULL;
    DTRAIN_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local));
    return CommHandle::adopt(local);
}

/// Number of ranks of `comm` on this rank's node (see node_comm). Collective over `comm`.
inline int node_local_size(MPI_Comm comm) {
    return node_comm(comm).size();
}

}  // namespace dtrain::detail

#pragma once

/// @file
/// CommHandle: the one RAII owner of an MPI resource in dtrain, a duplicated (or adopted) communicator whose
/// errors return (used by the communicator policies, the Async policy and core/node.hpp; internals in
/// dtrain::detail).

#include <climits>
#include <cstddef>
#include <utility>

#include <mpi.h>

#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/operation.hpp>
#include <dtrain/core/span.hpp>

namespace dtrain::detail {

/// Owns one duplicate of an MPI communicator with MPI_ERRORS_RETURN set, so MPI failures on it reach
/// DTRAIN_MPI_CHECK as dtrain::Error instead of aborting. Copying duplicates again (a new, independent
/// communicator; collective over its ranks), moving steals the handle. The communicator given to the
/// constructor (for example MPI_COMM_WORLD) is never freed; only the duplicate is.
class CommHandle {
public:
    /// An empty handle (MPI_COMM_NULL).
    CommHandle() noexcept = default;

    /// Duplicates `comm` (collective over `comm`). Requires MPI to be initialised and `comm` valid.
    explicit CommHandle(MPI_Comm comm) {
        DTRAIN_CHECK(comm != MPI_COMM_NULL, "dtrain communicator: given MPI_COMM_NULL");
        OperationScope op("MPI_Comm_dup of a dtrain communicator", comm);
        MPI_Comm dup = MPI_COMM_NULL;
        DTRAIN_MPI_CHECK(MPI_Comm_dup(comm, &dup));
        *this = adopt(dup);
    }

    /// Takes over `comm`, a communicator the caller created for it (e.g. with MPI_Comm_split_type) and
    /// no longer frees itself: sets MPI_ERRORS_RETURN on it and frees it with the handle (also when this
    /// throws). Not collective. Requires a valid communicator other than MPI_COMM_NULL and the predefined
    /// ones (MPI_COMM_WORLD, MPI_COMM_SELF).
    static CommHandle adopt(MPI_Comm comm) {
        DTRAIN_CHECK(comm != MPI_COMM_NULL, "dtrain communicator: given MPI_COMM_NULL");
        CommHandle h;
        h.comm_ = comm;
        DTRAIN_MPI_CHECK(MPI_Comm_set_errhandler(h.comm_, MPI_ERRORS_RETURN));
        DTRAIN_MPI_CHECK(MPI_Comm_rank(h.comm_, &h.rank_));
        DTRAIN_MPI_CHECK(MPI_Comm_size(h.comm_, &h.size_));
        return h;
    }

    /// Duplicates other's communicator (collective over its ranks).
    CommHandle(const CommHandle& other) : CommHandle() {
        if (other.comm_ != MPI_COMM_NULL) *this = CommHandle(other.comm_);
    }

    /// Steals other's communicator; other becomes empty.
    CommHandle(CommHandle&& other) noexcept
        : comm_(std::exchange(other.comm_, MPI_COMM_NULL)), rank_(other.rank_), size_(other.size_) {}

    /// Copy-and-swap assignment: duplicates for lvalues, steals for rvalues.
    CommHandle& operator=(CommHandle other) noexcept {
        std::swap(comm_, other.comm_);
        std::swap(rank_, other.rank_);
        std::swap(size_, other.size_);
        return *this;
    }

    /// Frees the duplicate (if any and if MPI is still running).
    ~CommHandle() { reset(); }

    /// The owned communicator (MPI_COMM_NULL when empty).
    MPI_Comm get() const noexcept { return comm_; }
    /// This rank in the communicator.
    int rank() const noexcept { return rank_; }
    /// Number of ranks in the communicator.
    int size() const noexcept { return size_; }

private:
    void reset() noexcept {
        if (comm_ == MPI_COMM_NULL) return;
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Comm_free(&comm_);
        comm_ = MPI_COMM_NULL;
    }

    MPI_Comm comm_ = MPI_COMM_NULL;
    int rank_ = 0;
    int size_ = 1;
};

/// The element count of `data` as the int MPI wants; throws dtrain::Error naming `what` when it does not fit.
template <class T>
int mpi_count(Span<T> data, const char* what) {
    DTRAIN_CHECK(data.size() <= static_cast<std::size_t>(INT_MAX), what, ": ", data.size(),
                 " elements exceed MPI's int count limit ", INT_MAX);
    return static_cast<int>(data.size());
}

}  // namespace dtrain::detail

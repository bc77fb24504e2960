#pragma once

#include <cstddef>
#include <cstring>

#include <mpi.h>

#include <dtrain/comm/communicator.hpp>
#include <dtrain/comm/detail/point_to_point.hpp>
#include <dtrain/comm/detail/scratch_pool.hpp>
#include <dtrain/comm/reduce_op.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/operation.hpp>
#include <dtrain/core/span.hpp>

namespace dtrain {

namespace detail {

/// One naive all-reduce as a state machine: every rank sends its whole buffer to every other rank and
/// receives every other rank's buffer (all MPI_Isend/MPI_Irecv posted at once), then reduces in rank order
/// ((x0 op x1) op ...) op x(p-1) with the same function on the same bytes, so every rank computes the
/// bitwise-identical result (for every ReduceOp, NaN included). The scratch buffer holds
/// the MPI requests followed by one n-element slot per source rank.
class NaiveAllreduceOp {
public:
    /// An inactive operation.
    NaiveAllreduceOp() noexcept = default;

    /// Posts every message. `scratch` must hold scratch_bytes(size, n * elem_bytes) bytes.
    NaiveAllreduceOp(MPI_Comm comm, MPI_Datatype type, int tag, int rank, int size, unsigned char* data,
                     std::size_t elem_bytes, std::size_t n, ReduceFn reduce, unsigned char* scratch)
        : data_(data),
          bytes_(n * elem_bytes),
          n_(n),
          rank_(rank),
          size_(size),
          reduce_(reduce),
          reqs_(reinterpret_cast<MPI_Request*>(scratch)),
          slots_(scratch + requests_bytes(size)) {
        active_ = true;
        nreq_ = 0;
        for (int i = 1; i < size; ++i) {  // receive from everyone first, then send
            const int q = (rank + i) % size;
            DTRAIN_MPI_CHECK(MPI_Irecv(slot(q), static_cast<int>(n), type, q, tag, comm, &reqs_[nreq_]));
            ++nreq_;
        }
        for (int i = 1; i < size; ++i) {
            const int q = (rank + size - i) % size;
            DTRAIN_MPI_CHECK(MPI_Isend(data, static_cast<int>(n), type, q, tag, comm, &reqs_[nreq_]));
            ++nreq_;
        }
    }

    /// Bytes of scratch a `size`-rank operation on `bytes` bytes needs.
    static std::size_t scratch_bytes(int size, std::size_t bytes) noexcept {
        return requests_bytes(size) + std::size_t(size) * round_up(bytes);
    }

    /// True while the operation has not completed.
    bool active() const noexcept { return active_; }

    /// Completes what arrived without blocking; once everything arrived, reduces in rank order. True when
    /// done.
    bool progress() {
        if (!active_) return true;
        int flag = 0;
        DTRAIN_MPI_CHECK(MPI_Testall(nreq_, reqs_, &flag, MPI_STATUSES_IGNORE));
        if (!flag) return false;
        finish();
        return true;
    }

    /// Blocks until every message completed, then reduces.
    void wait() {
        if (!active_) return;
        DTRAIN_MPI_CHECK(MPI_Waitall(nreq_, reqs_, MPI_STATUSES_IGNORE));
        finish();
    }

    /// Completes every posted message quietly (used when a pending request is destroyed).
    void drain() noexcept {
        if (!active_) return;
        MPI_Waitall(nreq_, reqs_, MPI_STATUSES_IGNORE);
        active_ = false;
    }

private:
    static std::size_t round_up(std::size_t b) noexcept {
        const std::size_t a = alignof(std::max_align_t);
        return (b + a - 1) / a * a;
    }
    static std::size_t requests_bytes(int size) noexcept {
        return round_up(2 * std::size_t(size > 0 ? size - 1 : 0) * sizeof(MPI_Request));
    }
    unsigned char* slot(int q) const noexcept { return slots_ + std::size_t(q) * round_up(bytes_); }

    void finish() noexcept {
        // Reduce x0, x1, ... in rank order: rank 0 accumulates in its buffer, the others in slot 0.
        unsigned char* acc = rank_ == 0 ? data_ : slot(0);
        for (int q = 1; q < size_; ++q)
            reduce_(acc, q == rank_ ? data_ : slot(q), n_);
        if (rank_ != 0 && bytes_ > 0) std::memcpy(data_, acc, bytes_);
        active_ = false;
    }

    unsigned char* data_ = nullptr;
    std::size_t bytes_ = 0, n_ = 0;
    int rank_ = 0, size_ = 1;
    ReduceFn reduce_ = nullptr;
    MPI_Request* reqs_ = nullptr;
    unsigned char* slots_ = nullptr;
    int nreq_ = 0;
    bool active_ = false;
};

}  // namespace detail

/// The baseline communicator policy: every rank sends its whole buffer to every other rank (nonblocking
/// MPI_Isend/MPI_Irecv) and reduces the p buffers locally in rank order, so all ranks get a bitwise-identical
/// result for every ReduceOp. Each rank sends and receives (p-1) times the buffer: simple, latency-friendly
/// for tiny buffers, bandwidth-poor for large ones. broadcast sends root's buffer to every rank directly.
///
/// rank(), size(), mpi_comm(), allreduce(), allreduce_sum(), iallreduce(), iallreduce_sum(), test(), wait(),
/// barrier(), scratch_buffers(), collective_checks() and set_collective_checks() come from
/// detail::PointToPoint, shared with Ring. Blocking calls (allreduce, allreduce_sum, broadcast) first check
/// that every rank makes the same call and throw dtrain::Error on every rank otherwise (PointToPoint;
/// DTRAIN_CHECK_COLLECTIVES=0 or set_collective_checks(false) turns that off). Works on a duplicate of the
/// given communicator with MPI_ERRORS_RETURN (MPI failures throw dtrain::Error). Copying duplicates the
/// communicator (collective), moving steals it. Scratch (p buffers) comes from a reused pool. Not
/// thread-safe: calls on one Naive and on its requests must be serialised (one thread, or a mutex). All ranks
/// must call collective operations in the same order.
class Naive : public detail::PointToPoint<Naive, detail::NaiveAllreduceOp> {
    using Base = detail::PointToPoint<Naive, detail::NaiveAllreduceOp>;

public:
    /// Handle of one nonblocking naive all-reduce. Move-only. Destroying a pending request waits for its
    /// messages (without reducing); requests must complete before their Naive is destroyed.
    using Request = Base::Request;
    /// The policy's name in messages.
    static constexpr const char* policy_name = "Naive";

    /// Uses a duplicate of `comm` (collective over `comm`); requires MPI to be initialised.
    explicit Naive(MPI_Comm comm = MPI_COMM_WORLD) : Base(comm) {}

    /// Every rank ends with root's `data`: root sends it to each rank directly. Requires the same length,
    /// element type and root on all ranks (checked unless collective_checks() is off: dtrain::Error on every
    /// rank); throws dtrain::Error when root is not in 0..size()-1.
    template <class T>
    void broadcast(Span<T> data, int root) {
        OperationScope scope(policy_name, "broadcast", mpi_comm());
        verify_broadcast(data, root);
        detail::check_root("Naive::broadcast", root, size());
        const int count = detail::mpi_count(data, "Naive::broadcast");
        if (size() == 1) return;
        if (rank() != root) {
            DTRAIN_MPI_CHECK(MPI_Recv(data.data(), count, mpi_type<T>(), root, blocking_tag, mpi_comm(),
                                      MPI_STATUS_IGNORE));
            return;
        }
        detail::ScratchLease reqs = lease(std::size_t(size()) * sizeof(MPI_Request));
        auto* rq = reinterpret_cast<MPI_Request*>(reqs.data());
        int k = 0;
        for (int q = 0; q < size(); ++q) {
            if (q == root) continue;
            DTRAIN_MPI_CHECK(
                MPI_Isend(data.data(), count, mpi_type<T>(), q, blocking_tag, mpi_comm(), &rq[k]));
            ++k;
        }
        DTRAIN_MPI_CHECK(MPI_Waitall(k, rq, MPI_STATUSES_IGNORE));
    }

private:
    friend Base;

    /// Starts the naive all-reduce of `data` with `op` on `tag`, posting all its messages (PointToPoint's
    /// contract).
    template <class T>
    Request start(Span<T> data, int tag, ReduceOp op) {
        const int count = detail::mpi_count(data, "Naive::allreduce");
        const detail::ReduceFn reduce = detail::reduce_fn<T>(op);
        Request r;
        if (size() == 1 || count == 0) return r;
        const std::size_t bytes = data.size() * sizeof(T);
        r.scratch() = lease(detail::NaiveAllreduceOp::scratch_bytes(size(), bytes));
        r.op() = detail::NaiveAllreduceOp(mpi_comm(), mpi_type<T>(), tag, rank(), size(),
                                          reinterpret_cast<unsigned char*>(data.data()), sizeof(T),
                                          data.size(), reduce, r.scratch().data());
        return r;
    }
};

static_assert(has_reduce_ops_v<Naive>, "Naive must provide allreduce(data, op) and iallreduce(data, op)");
static_assert(is_communicator_v<Naive>, "Naive must model the Communicator concept");
static_assert(has_half_sums_v<Naive>, "Naive must sum Half and BFloat16 in float");

}  // namespace dtrain

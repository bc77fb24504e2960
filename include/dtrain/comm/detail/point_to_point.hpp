#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include <mpi.h>

#include <dtrain/comm/detail/call_check.hpp>
#include <dtrain/comm/detail/pooled_request.hpp>
#include <dtrain/comm/detail/scratch_pool.hpp>
#include <dtrain/comm/reduce_op.hpp>
#include <dtrain/core/comm_handle.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/operation.hpp>
#include <dtrain/core/span.hpp>

namespace dtrain::detail {

/// Everything the point-to-point communicator policies (Ring, Naive) share, so that they hold only their
/// algorithms: the duplicated communicator, the scratch pool, copy and move, rank()/size()/mpi_comm(), the
/// blocking and nonblocking all-reduce entry points (allreduce, iallreduce and their Sum forms) with their
/// tags, test(), wait(), barrier(), scratch_buffers() and the check that every rank makes the same blocking
/// call (collective_checks(), set_collective_checks(), verify_broadcast() for the policies' broadcast).
///
/// A CRTP base. `Op` is the all-reduce state machine held by a Request (PooledRequest<Op>): default-
/// constructed inactive, progress() advances it without blocking and is true once done, wait() blocks until
/// done, drain() and active() as PooledRequest requires. `Derived` provides, as a private member with this
/// base as friend, `template <class T> Request start(Span<T> data, int tag, ReduceOp op)`: checks `data`,
/// leases its scratch with lease(), posts the operation's first messages on `tag` and returns the request
/// (inactive when there is nothing to send); the result must be bitwise identical on every rank for every
/// op. CRTP rather than a virtual base or a member object: allreduce and iallreduce are templates over the
/// element type, so they cannot call a virtual start(), and a member would make every policy forward the
/// ten public members again; the call is resolved at compile time (no indirection on the hot path) and Ring
/// and Naive stay distinct types with distinct Requests. The base is not usable on its own: its
/// constructors, assignments and destructor are protected.
///
/// Tags: blocking operations (allreduce, allreduce_sum, the policies' broadcast) use blocking_tag; each
/// nonblocking request takes the next tag of 1..tag_range in turn, so up to tag_range requests in flight
/// together never share a tag with each other or with a blocking call. Copying duplicates the communicator
/// (collective over its ranks) and starts a fresh scratch pool and tag sequence; moving steals the
/// communicator, the pool (leases of pending requests keep it alive) and the sequence. Not thread-safe (see
/// the policies).
///
/// Blocking calls (allreduce, allreduce_sum and, through verify_broadcast(), broadcast) first compare every
/// rank's call (length, element type, reduce operation, root) with one all-reduce of a few words and throw
/// dtrain::Error on every rank naming the ranks that differ, unless set_collective_checks(false) or
/// DTRAIN_CHECK_COLLECTIVES=0 turned that off. Nonblocking requests are not checked per call: a check there
/// would have to block and would end their overlap with computation.
template <class Derived, class Op>
class PointToPoint {
public:
    /// Handle of one nonblocking all-reduce: the operation plus the lease of its scratch. Move-only.
    using Request = PooledRequest<Op>;
    /// Sums Span<Half> and Span<BFloat16> with fp32 accumulation (reduce_fn of their float arithmetic).
    static constexpr bool half_float_sums = true;

    /// This rank.
    int rank() const noexcept { return comm_.rank(); }
    /// Number of ranks.
    int size() const noexcept { return comm_.size(); }
    /// The duplicated communicator this policy works on (MPI_COMM_NULL once moved from).
    MPI_Comm mpi_comm() const noexcept { return comm_.get(); }

    /// In-place element-wise reduction with `op` over all ranks (ReduceOp documents Max/Min with NaN and
    /// integer overflow), on blocking_tag; bitwise identical on every rank. Requires equal lengths on all
    /// ranks and the same op on all ranks.
    template <class T>
    void allreduce(Span<T> data, ReduceOp op) {
        run_blocking(data, op, "allreduce");
    }

    /// allreduce(data, ReduceOp::Sum): the same operation under its own name in messages.
    template <class T>
    void allreduce_sum(Span<T> data) {
        run_blocking(data, ReduceOp::Sum, "allreduce_sum");
    }

    /// Starts an in-place reduction with `op` on the next nonblocking tag; `data` must not be touched until
    /// test() returned true or wait() returned. Several requests may be in flight; all ranks must start
    /// them in the same order with the same ops.
    template <class T>
    Request iallreduce(Span<T> data, ReduceOp op) {
        return derived().start(data, next_tag(), op);
    }

    /// iallreduce(data, ReduceOp::Sum).
    template <class T>
    Request iallreduce_sum(Span<T> data) {
        return derived().start(data, next_tag(), ReduceOp::Sum);
    }

    /// Advances `request` without blocking; true once it has completed (also for an inactive request), and
    /// then its scratch is back in the pool.
    bool test(Request& request) {
        const bool done = request.op().progress();
        if (done) request.scratch().reset();
        return done;
    }

    /// Blocks until `request` has completed, then returns its scratch to the pool.
    void wait(Request& request) {
        OperationScope scope(Derived::policy_name, "wait", comm_.get());
        request.op().wait();
        request.scratch().reset();
    }

    /// Synchronises all ranks (MPI_Barrier).
    void barrier() {
        OperationScope scope(Derived::policy_name, "barrier", comm_.get());
        DTRAIN_MPI_CHECK(MPI_Barrier(comm_.get()));
    }

    /// Number of scratch buffers allocated so far (they are reused; for tests and diagnostics).
    std::size_t scratch_buffers() const noexcept { return pool_ ? pool_->buffers() : 0; }

    /// True when blocking calls check that every rank makes the same call (see the class comment).
    bool collective_checks() const noexcept { return check_.on(); }

    /// Turns those checks on or off. Collective: every rank must pass the same value (dtrain::Error on every
    /// rank otherwise, and the setting stays).
    void set_collective_checks(bool on) { check_.set(on, Derived::policy_name); }

protected:
    /// The tag of blocking operations.
    static constexpr int blocking_tag = 0;
    /// Number of nonblocking tags, 1..tag_range (MPI guarantees tags up to at least 32767).
    static constexpr std::uint64_t tag_range = 32766;

    /// Uses a duplicate of `comm` (collective over `comm`); requires MPI to be initialised. Checks blocking
    /// calls unless DTRAIN_CHECK_COLLECTIVES is 0 or off; throws dtrain::Error on every rank when that
    /// variable differs between ranks or is not one of 0, 1, on, off.
    explicit PointToPoint(MPI_Comm comm)
        : comm_(comm), pool_(std::make_shared<ScratchPool>()), check_(Derived::policy_name, comm_.get()) {}
    /// Duplicates other's communicator (collective) with a fresh scratch pool and tag sequence, and the same
    /// checks setting.
    PointToPoint(const PointToPoint& other)
        : comm_(other.comm_), pool_(std::make_shared<ScratchPool>()), check_(other.check_) {}
    /// Steals other's communicator, scratch pool and tag sequence.
    PointToPoint(PointToPoint&& other) noexcept = default;
    /// Copy assignment: duplicates first, so a failure leaves this unchanged; frees the old communicator.
    PointToPoint& operator=(const PointToPoint& other) { return take(PointToPoint(other)); }
    /// Move assignment: steals other's state and frees the old communicator at once.
    PointToPoint& operator=(PointToPoint&& other) noexcept { return take(std::move(other)); }
    /// Frees the duplicated communicator (requests must have completed).
    ~PointToPoint() = default;

    /// The next nonblocking tag: 1, 2, ..., tag_range, 1, ... (never blocking_tag).
    int next_tag() noexcept { return 1 + static_cast<int>(sequence_++ % tag_range); }

    /// A lease of at least `bytes` bytes of scratch from this policy's pool (empty when bytes is 0).
    ScratchLease lease(std::size_t bytes) { return ScratchLease(pool_, bytes); }

    /// For the policies' broadcast, before it checks `root` or moves data: throws dtrain::Error on every
    /// rank when the ranks pass different lengths, element types or roots (unless the checks are off).
    /// Collective.
    template <class T>
    void verify_broadcast(Span<T> data, int root) const {
        check_.verify(broadcast_signature<T>(data.size(), root), Derived::policy_name, "broadcast");
    }

private:
    Derived& derived() noexcept { return static_cast<Derived&>(*this); }

    /// One blocking all-reduce on blocking_tag, named `what` in messages.
    template <class T>
    void run_blocking(Span<T> data, ReduceOp op, const char* what) {
        OperationScope scope(Derived::policy_name, what, comm_.get());
        check_.verify(allreduce_signature<T>(data.size(), op), Derived::policy_name, what);
        Request r = derived().start(data, blocking_tag, op);
        wait(r);
    }

    /// Swaps in `other`'s state; the old state is released when `other` goes out of scope.
    PointToPoint& take(PointToPoint other) noexcept {
        std::swap(comm_, other.comm_);
        std::swap(pool_, other.pool_);
        std::swap(sequence_, other.sequence_);
        std::swap(check_, other.check_);
        return *this;
    }

    CommHandle comm_;
    std::shared_ptr<ScratchPool> pool_;
    std::uint64_t sequence_ = 0;
    CallCheck check_;
};

}  // namespace dtrain::detail

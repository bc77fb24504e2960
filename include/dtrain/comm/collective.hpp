#pragma once

#include <cstddef>
#include <utility>

#include <mpi.h>

#include <dtrain/comm/communicator.hpp>
#include <dtrain/comm/detail/call_check.hpp>
#include <dtrain/comm/reduce_op.hpp>
#include <dtrain/core/comm_handle.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/operation.hpp>
#include <dtrain/core/span.hpp>

namespace dtrain {

/// Communicator policy that delegates to the MPI library's collectives: MPI_Bcast, in-place MPI_Allreduce
/// (MPI_SUM, MPI_MAX, MPI_MIN or MPI_PROD: detail::mpi_op_for) and MPI_Iallreduce for the nonblocking form.
/// Models the Communicator concept (see comm/communicator.hpp) with its reduce operations. Works on a
/// duplicate of the given communicator with MPI_ERRORS_RETURN, so MPI failures throw dtrain::Error naming the
/// call. Copying duplicates the communicator again (collective), moving steals it. The MPI library's
/// reduction order is its own; MPICH returns bitwise-identical results on every rank. What MPI_MAX and
/// MPI_MIN do with NaN is the MPI library's (MPI leaves it unspecified; Ring and Naive propagate NaN, see
/// ReduceOp). Sums of Half and BFloat16 (half_float_sums) run through dtrain's own commutative MPI
/// operations on MPI_UINT16_T, which add in float and round each partial sum once.
///
/// Blocking calls (broadcast, allreduce, allreduce_sum) first check that every rank makes the same call
/// with the same length, element type, reduce operation and root (one all-reduce of a few words), and
/// throw dtrain::Error on every rank naming the ranks that differ; set_collective_checks(false) or
/// DTRAIN_CHECK_COLLECTIVES=0 skips that (benchmarks/allreduce/README.md gives the cost). Nonblocking
/// requests are not checked per call: a check there would have to block and would end their overlap with
/// computation (DistOptimizer checks its bucket plan once at construction instead).
class Collective {
public:
    /// Handle of one nonblocking all-reduce started by iallreduce or iallreduce_sum. Move-only. Destroying
    /// a request that has not completed waits for it (errors are then swallowed); it must complete before
    /// the Collective that started it is destroyed.
    class Request {
    public:
        /// An inactive request (test() is immediately true).
        Request() noexcept = default;
        Request(const Request&) = delete;
        Request& operator=(const Request&) = delete;
        /// Takes over other's operation; other becomes inactive.
        Request(Request&& other) noexcept : req_(std::exchange(other.req_, MPI_REQUEST_NULL)) {}
        /// Completes this request's operation (if any), then takes over other's.
        Request& operator=(Request&& other) noexcept {
            if (this != &other) {
                finish_quietly();
                req_ = std::exchange(other.req_, MPI_REQUEST_NULL);
            }
            return *this;
        }
        /// Waits for a pending operation so its buffer is never left in flight.
        ~Request() { finish_quietly(); }
        /// True while the operation has not completed.
        bool active() const noexcept { return req_ != MPI_REQUEST_NULL; }

    private:
        friend class Collective;
        void finish_quietly() noexcept {
            if (req_ == MPI_REQUEST_NULL) return;
            int finalized = 0;
            MPI_Finalized(&finalized);
            if (!finalized) MPI_Wait(&req_, MPI_STATUS_IGNORE);
            req_ = MPI_REQUEST_NULL;
        }
        MPI_Request req_ = MPI_REQUEST_NULL;
    };

    /// Uses a duplicate of `comm` (collective over `comm`); requires MPI to be initialised. Checks blocking
    /// calls unless DTRAIN_CHECK_COLLECTIVES is 0 or off; throws dtrain::Error on every rank when that
    /// variable differs between ranks or is not one of 0, 1, on, off.
    explicit Collective(MPI_Comm comm = MPI_COMM_WORLD) : comm_(comm), check_(policy_name, comm_.get()) {}

    /// The policy's name in messages.
    static constexpr const char* policy_name = "Collective";
    /// Sums Span<Half> and Span<BFloat16> with fp32 accumulation (see comm/communicator.hpp).
    static constexpr bool half_float_sums = true;

    /// This rank.
    int rank() const noexcept { return comm_.rank(); }
    /// Number of ranks.
    int size() const noexcept { return comm_.size(); }
    /// The duplicated communicator this policy works on.
    MPI_Comm mpi_comm() const noexcept { return comm_.get(); }

    /// Every rank ends with root's `data` (MPI_Bcast). Requires the same length, element type and root on
    /// all ranks (checked unless collective_checks() is off) and 0 <= root < size(); throws dtrain::Error
    /// otherwise.
    template <class T>
    void broadcast(Span<T> data, int root) {
        OperationScope scope(policy_name, "broadcast", comm_.get());
        check_.verify(detail::broadcast_signature<T>(data.size(), root), policy_name, "broadcast");
        detail::check_root("Collective::broadcast", root, size());
        const int count = detail::mpi_count(data, "Collective::broadcast");
        DTRAIN_MPI_CHECK(MPI_Bcast(data.data(), count, mpi_type<T>(), root, comm_.get()));
    }

    /// In-place element-wise reduction with `op` over all ranks (MPI_Allreduce with MPI_IN_PLACE and
    /// detail::mpi_op_for<T>(op)). Requires the same length, element type and op on all ranks (checked
    /// unless collective_checks() is off: dtrain::Error on every rank).
    template <class T>
    void allreduce(Span<T> data, ReduceOp op) {
        run_blocking(data, op, "allreduce");
    }

    /// allreduce(data, ReduceOp::Sum): MPI_Allreduce with MPI_SUM.
    template <class T>
    void allreduce_sum(Span<T> data) {
        run_blocking(data, ReduceOp::Sum, "allreduce_sum");
    }

    /// Starts an in-place reduction with `op` over all ranks (MPI_Iallreduce); `data` must not be touched
    /// until test() returned true or wait() returned. All ranks must start their requests in the same order
    /// with the same ops.
    template <class T>
    Request iallreduce(Span<T> data, ReduceOp op) {
        return start(data, op, "Collective::iallreduce");
    }

    /// iallreduce(data, ReduceOp::Sum).
    template <class T>
    Request iallreduce_sum(Span<T> data) {
        return start(data, ReduceOp::Sum, "Collective::iallreduce_sum");
    }

    /// Advances `request`; true once it has completed (also for an inactive request).
    bool test(Request& request) {
        if (request.req_ == MPI_REQUEST_NULL) return true;
        int done = 0;
        DTRAIN_MPI_CHECK(MPI_Test(&request.req_, &done, MPI_STATUS_IGNORE));
        return done != 0;
    }

    /// Blocks until `request` has completed.
    void wait(Request& request) {
        if (request.req_ == MPI_REQUEST_NULL) return;
        OperationScope scope(policy_name, "wait", comm_.get());
        DTRAIN_MPI_CHECK(MPI_Wait(&request.req_, MPI_STATUS_IGNORE));
    }

    /// Synchronises all ranks (MPI_Barrier).
    void barrier() {
        OperationScope scope(policy_name, "barrier", comm_.get());
        DTRAIN_MPI_CHECK(MPI_Barrier(comm_.get()));
    }

    /// True when blocking calls check that every rank makes the same call (see the class comment).
    bool collective_checks() const noexcept { return check_.on(); }

    /// Turns those checks on or off. Collective: every rank must pass the same value (dtrain::Error on every
    /// rank otherwise, and the setting stays).
    void set_collective_checks(bool on) { check_.set(on, policy_name); }

private:
    /// One blocking MPI_Allreduce, named `what` in messages.
    template <class T>
    void run_blocking(Span<T> data, ReduceOp op, const char* what) {
        OperationScope scope(policy_name, what, comm_.get());
        check_.verify(detail::allreduce_signature<T>(data.size(), op), policy_name, what);
        const int count = detail::mpi_count(data, "Collective::allreduce");
        const MPI_Op mop = detail::mpi_op_for<T>(op);
        DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data.data(), count, mpi_type<T>(), mop, comm_.get()));
    }

    /// Starts one MPI_Iallreduce; `who` names the call in errors.
    template <class T>
    Request start(Span<T> data, ReduceOp op, const char* who) {
        const int count = detail::mpi_count(data, who);
        const MPI_Op mop = detail::mpi_op_for<T>(op);
        Request r;
        DTRAIN_MPI_CHECK(
            MPI_Iallreduce(MPI_IN_PLACE, data.data(), count, mpi_type<T>(), mop, comm_.get(), &r.req_));
        return r;
    }

    detail::CommHandle comm_;
    detail::CallCheck check_;
};

static_assert(has_reduce_ops_v<Collective>,
              "Collective must provide allreduce(data, op) and iallreduce(data, op)");
static_assert(is_communicator_v<Collective>, "Collective must model the Communicator concept");
static_assert(has_half_sums_v<Collective>, "Collective must sum Half and BFloat16 in float");

}  // namespace dtrain

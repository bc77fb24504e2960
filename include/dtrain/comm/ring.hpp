#pragma once

#include <algorithm>
#include <cstddef>

#include <mpi.h>

#include <dtrain/comm/communicator.hpp>
#include <dtrain/comm/detail/point_to_point.hpp>
#include <dtrain/comm/detail/ring_op.hpp>
#include <dtrain/comm/detail/scratch_pool.hpp>
#include <dtrain/comm/reduce_op.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/node.hpp>
#include <dtrain/core/operation.hpp>
#include <dtrain/core/span.hpp>

namespace dtrain {

/// Tuning of the Ring communicator. Zero means the default (Ring::segment_elems, Ring::window).
struct RingOptions {
    /// Bytes per pipelined segment (rounded down to whole elements, at least one element).
    std::size_t segment_bytes = 0;
    /// Messages kept in flight per direction, 1..16.
    int window = 0;
};

/// Communicator policy built on point-to-point messages only (MPI_Isend/MPI_Irecv/MPI_Test).
///
/// allreduce (any ReduceOp; allreduce_sum is its Sum) is the bandwidth-optimal ring all-reduce: a
/// reduce-scatter then an all-gather, 2(p-1) steps in which every rank sends 2(p-1)/p of the buffer. It is
/// pipelined: chunks are cut into segments that stream around the ring with several messages in flight, and
/// the reduction of one segment overlaps the arrival of the next. Every chunk is reduced on one rank and
/// copied to the others, so the result is bitwise identical on all ranks, for every op (also with NaN: see
/// ReduceOp). Works for any length (also 0 or fewer elements than ranks) and any p. broadcast is a pipelined
/// chain from the root. iallreduce (and iallreduce_sum) returns a Request that test() advances and wait()
/// completes; several may be in flight at once (each gets its own tag). Receive scratch comes from a pool
/// that is reused, so steady-state calls do not allocate.
///
/// rank(), size(), mpi_comm(), allreduce(), allreduce_sum(), iallreduce(), iallreduce_sum(), test(), wait(),
/// barrier(), scratch_buffers(), collective_checks() and set_collective_checks() come from
/// detail::PointToPoint, shared with Naive. Blocking calls (allreduce, allreduce_sum, broadcast) first check
/// that every rank makes the same call and throw dtrain::Error on every rank otherwise (PointToPoint;
/// DTRAIN_CHECK_COLLECTIVES=0 or set_collective_checks(false) turns that off). Works on a duplicate of the
/// given communicator with MPI_ERRORS_RETURN (MPI failures throw dtrain::Error). Copying duplicates the
/// communicator (collective), moving steals it. Not thread-safe: calls on one Ring and on its requests must
/// be serialised (one thread, or a mutex). All ranks must call the collective operations in the same order.
class Ring : public detail::PointToPoint<Ring, detail::RingAllreduceOp> {
    using Base = detail::PointToPoint<Ring, detail::RingAllreduceOp>;

public:
    /// Handle of one nonblocking ring all-reduce. Move-only. Destroying a request that has not completed
    /// completes it first (errors are then swallowed); requests must complete before their Ring is destroyed.
    using Request = Base::Request;
    /// The policy's name in messages.
    static constexpr const char* policy_name = "Ring";

    /// Uses a duplicate of `comm` (collective over `comm`) tuned by `options`; requires MPI to be
    /// initialised. Throws dtrain::Error for a window outside 0..16.
    explicit Ring(MPI_Comm comm = MPI_COMM_WORLD, RingOptions options = {})
        : Base(comm), options_(options), crosses_nodes_(crosses_nodes(mpi_comm())) {
        DTRAIN_CHECK(options.window >= 0 && options.window <= detail::ring_max_window,
                     "Ring: window must be in 0..", detail::ring_max_window, ", got ", options.window);
    }

    /// True when some rank's successor in the ring is on another node (MPI_COMM_TYPE_SHARED): then the
    /// defaults are those of a network (segment_elems, window).
    bool crosses_nodes() const noexcept { return crosses_nodes_; }

    /// The tuning this Ring was built with.
    const RingOptions& options() const noexcept { return options_; }

    /// Every rank ends with root's `data`, sent down a pipelined chain root -> root+1 -> ... in segments.
    /// Requires the same length, element type and root on all ranks (checked unless collective_checks() is
    /// off: dtrain::Error on every rank); throws dtrain::Error when root is not in 0..size()-1.
    template <class T>
    void broadcast(Span<T> data, int root) {
        OperationScope scope(policy_name, "broadcast", mpi_comm());
        verify_broadcast(data, root);
        detail::check_root("Ring::broadcast", root, size());
        detail::mpi_count(data, "Ring::broadcast");
        const int p = size();
        if (p == 1 || data.empty()) return;
        const int v = (rank() - root + p) % p;  // position in the chain
        const int prev = (rank() - 1 + p) % p, next = (rank() + 1) % p;
        const std::size_t seg = segment_elems(data.size(), sizeof(T));
        const int in_flight = window();
        const std::size_t nseg = (data.size() + seg - 1) / seg;
        const bool receives = v > 0, sends = v < p - 1;
        MPI_Request rreq[detail::ring_max_window], sreq[detail::ring_max_window];
        std::size_t r_post = receives ? 0 : nseg, r_done = r_post, s_post = 0, s_done = 0;
        detail::Backoff backoff;
        auto piece = [&](std::size_t k) { return std::min(seg, data.size() - k * seg); };
        while (r_done < nseg || (sends && s_done < nseg)) {
            while (r_post < nseg && r_post - r_done < std::size_t(in_flight)) {
                DTRAIN_MPI_CHECK(MPI_Irecv(data.data() + r_post * seg, static_cast<int>(piece(r_post)),
                                           mpi_type<T>(), prev, blocking_tag, mpi_comm(),
                                           &rreq[r_post % in_flight]));
                ++r_post;
            }
            while (sends && s_post < r_done && s_post - s_done < std::size_t(in_flight)) {
                DTRAIN_MPI_CHECK(MPI_Isend(data.data() + s_post * seg, static_cast<int>(piece(s_post)),
                                           mpi_type<T>(), next, blocking_tag, mpi_comm(),
                                           &sreq[s_post % in_flight]));
                ++s_post;
            }
            int rflag = 0, sflag = 0;
            if (r_done < r_post) {
                DTRAIN_MPI_CHECK(MPI_Test(&rreq[r_done % in_flight], &rflag, MPI_STATUS_IGNORE));
                if (rflag) ++r_done;
            }
            if (s_done < s_post) {
                DTRAIN_MPI_CHECK(MPI_Test(&sreq[s_done % in_flight], &sflag, MPI_STATUS_IGNORE));
                if (sflag) ++s_done;
            }
            if (!rflag && !sflag) backoff.pause();
        }
    }

    /// Segment length in elements for pieces of `piece_elems` elements of `elem_bytes` bytes (the chunk of
    /// one rank for allreduce_sum, the whole buffer for broadcast): the option if set, else whole pieces up
    /// to 512 KiB (per-message overhead dominates small buffers) and 512 KiB segments beyond (they stay
    /// cache-resident between arrival and reduction); across nodes whole pieces up to 16 MiB (over TCP each
    /// message pays its own rendezvous, and one message per chunk ran fastest:
    /// benchmarks/allreduce/README.md, "Tuning").
    std::size_t segment_elems(std::size_t piece_elems, std::size_t elem_bytes) const noexcept {
        const std::size_t seg_bytes = options_.segment_bytes > 0 ? options_.segment_bytes
                                      : crosses_nodes_           ? network_segment_bytes
                                                                 : auto_segment_bytes;
        return std::clamp<std::size_t>(seg_bytes / elem_bytes, 1, std::max<std::size_t>(piece_elems, 1));
    }

    /// Messages kept in flight per direction by allreduce_sum and broadcast: the option if set, else 4 (the
    /// same for every buffer size), 1 across nodes (benchmarks/allreduce/README.md, "Tuning").
    int window() const noexcept {
        return options_.window > 0 ? options_.window : crosses_nodes_ ? network_window : auto_window;
    }

private:
    friend Base;

    static constexpr std::size_t auto_segment_bytes = std::size_t(512) << 10;
    static constexpr int auto_window = 4;
    static constexpr std::size_t network_segment_bytes = std::size_t(16) << 20;
    static constexpr int network_window = 1;

    // Whether some rank's successor (rank + 1 mod size) is outside its MPI_COMM_TYPE_SHARED node; the same
    // answer on every rank (senders and receivers must agree on the segments). Collective over `comm`.
    static bool crosses_nodes(MPI_Comm comm) {
        int rank = 0, size = 1;
        DTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank));
        DTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size));
        if (size == 1) return false;
        const detail::CommHandle local = detail::node_comm(comm);
        MPI_Group all = MPI_GROUP_NULL, mine = MPI_GROUP_NULL;
        const int next = (rank + 1) % size;
        int there = MPI_UNDEFINED, rc = MPI_Comm_group(comm, &all);
        if (rc == MPI_SUCCESS) rc = MPI_Comm_group(local.get(), &mine);
        if (rc == MPI_SUCCESS) rc = MPI_Group_translate_ranks(all, 1, &next, mine, &there);
        if (all != MPI_GROUP_NULL) MPI_Group_free(&all);
        if (mine != MPI_GROUP_NULL) MPI_Group_free(&mine);
        DTRAIN_MPI_CHECK(rc);
        int off = there == MPI_UNDEFINED ? 1 : 0, any = 0;
        DTRAIN_MPI_CHECK(MPI_Allreduce(&off, &any, 1, MPI_INT, MPI_LOR, comm));
        return any != 0;
    }

    /// Starts the ring all-reduce of `data` with `op` on `tag` and posts its first messages (PointToPoint's
    /// contract).
    template <class T>
    Request start(Span<T> data, int tag, ReduceOp op) {
        detail::mpi_count(data, "Ring::allreduce");
        const detail::ReduceFn reduce = detail::reduce_fn<T>(op);
        Request r;
        if (size() == 1 || data.empty()) return r;
        detail::RingAllreduceOp::Config c;
        c.comm = mpi_comm();
        c.type = mpi_type<T>();
        c.tag = tag;
        c.rank = rank();
        c.size = size();
        c.data = reinterpret_cast<unsigned char*>(data.data());
        c.elem_bytes = sizeof(T);
        c.n = data.size();
        const std::size_t chunk = (data.size() + std::size_t(size()) - 1) / std::size_t(size());
        c.seg = segment_elems(chunk, sizeof(T));
        c.window = window();
        c.reduce = reduce;
        r.scratch() = lease(std::size_t(c.window) * c.seg * sizeof(T));
        c.scratch = r.scratch().data();
        r.op() = detail::RingAllreduceOp(c);
        r.op().progress();  // post the first messages right away
        return r;
    }

    RingOptions options_;
    bool crosses_nodes_ = false;
};

static_assert(has_reduce_ops_v<Ring>, "Ring must provide allreduce(data, op) and iallreduce(data, op)");
static_assert(is_communicator_v<Ring>, "Ring must model the Communicator concept");
static_assert(has_half_sums_v<Ring>, "Ring must sum Half and BFloat16 in float");

}  // namespace dtrain

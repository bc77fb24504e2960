#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <thread>

#include <mpi.h>

#include <dtrain/comm/reduce_op.hpp>
#include <dtrain/core/mpi.hpp>

namespace dtrain::detail {

/// Busy-wait helper for polling loops: spins, and every 256th call yields the core so that ranks
/// oversubscribing a core (more ranks than cores) can run, without giving the core away on every poll when
/// the machine is busy with other work.
class Backoff {
public:
    /// Called once per unsuccessful poll.
    void pause() noexcept {
        if (++spins_ % 256 == 0) std::this_thread::yield();
    }

private:
    unsigned spins_ = 0;
};

/// The most point-to-point messages a ring operation keeps in flight per direction.
inline constexpr int ring_max_window = 16;

/// One pipelined ring all-reduce as a state machine over MPI_Isend/MPI_Irecv/MPI_Test, type-erased so one
/// Request type serves every element type.
///
/// The buffer of n elements is cut into p chunks (sizes differ by at most one, some may be empty) and every
/// chunk into segments of `seg` elements. Steps 0..p-2 reduce-scatter: rank r sends chunk r-s to r+1 and
/// reduces chunk r-s-1 arriving from r-1 into its buffer (Config::reduce: own = combine(own, arrived)).
/// Steps p-1..2p-3 all-gather: rank r forwards the fully reduced chunk it owns (or last received) and
/// receives the next one directly into its buffer. The chunk
/// sent at step s+1 is the chunk received at step s, so segment k can move on as soon as segment k of the
/// previous step has arrived (and been reduced): segments stream through the ring and the reduction of one
/// segment overlaps the transfer of the next. Up to `window` receives and `window` sends are in flight.
/// Every chunk's final value is computed on one rank and copied to the others, so all ranks end bitwise
/// identical.
class RingAllreduceOp {
public:
    /// Everything the operation needs; `scratch` holds window * seg elements.
    struct Config {
        MPI_Comm comm = MPI_COMM_NULL;
        MPI_Datatype type = MPI_DATATYPE_NULL;
        int tag = 0;
        int rank = 0;
        int size = 1;
        unsigned char* data = nullptr;
        std::size_t elem_bytes = 0;
        std::size_t n = 0;
        std::size_t seg = 1;
        int window = 1;
        ReduceFn reduce = nullptr;
        unsigned char* scratch = nullptr;
    };

    /// An inactive operation.
    RingAllreduceOp() noexcept = default;

    /// Prepares the operation; nothing is posted until the first progress().
    explicit RingAllreduceOp(const Config& c) noexcept : c_(c) {
        c_.window = std::clamp(c_.window, 1, ring_max_window);
        c_.seg = std::max<std::size_t>(c_.seg, 1);
        steps_ = c_.size > 1 ? 2 * (c_.size - 1) : 0;
        base_ = c_.n / static_cast<std::size_t>(c_.size);
        rem_ = c_.n % static_cast<std::size_t>(c_.size);
        for (Cursor* cur : {&send_post_, &send_done_, &recv_post_, &recv_done_})
            normalise(*cur);
        active_ = true;
    }

    /// True while the operation has not completed.
    bool active() const noexcept { return active_; }

    /// Posts whatever is ready and completes whatever arrived, without blocking. True once everything is
    /// done (the buffer then holds the result). Throws dtrain::Error when an MPI call fails.
    bool progress() {
        if (!active_) return true;
        bool moved = true;
        while (moved) {
            moved = false;
            // Completed receives first: they unlock sends.
            while (recv_done_.step < steps_ && recv_done_.count < recv_post_.count) {
                MPI_Request& rq = rreq_[recv_done_.count % c_.window];
                int flag = 0;
                DTRAIN_MPI_CHECK(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE));
                if (!flag) break;
                if (recv_done_.step < c_.size - 1) {
                    std::size_t off = 0, len = 0;
                    segment(recv_chunk(recv_done_.step), recv_done_.seg, off, len);
                    c_.reduce(c_.data + off * c_.elem_bytes, slot(recv_done_.count), len);
                }
                advance(recv_done_);
                moved = true;
            }
            while (send_done_.step < steps_ && send_done_.count < send_post_.count) {
                MPI_Request& rq = sreq_[send_done_.count % c_.window];
                int flag = 0;
                DTRAIN_MPI_CHECK(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE));
                if (!flag) break;
                advance(send_done_);
                moved = true;
            }
            // Post receives: reduce-scatter ones land in a free scratch slot, all-gather ones directly in the
            // buffer once the earlier send out of that region has completed.
            while (recv_post_.step < steps_ &&
                   recv_post_.count - recv_done_.count < std::uint64_t(c_.window)) {
                const int s = recv_post_.step;
                if (s >= c_.size - 1 && !before(s - (c_.size - 1), recv_post_.seg, send_done_)) break;
                std::size_t off = 0, len = 0;
                segment(recv_chunk(s), recv_post_.seg, off, len);
                void* dst = s < c_.size - 1 ? static_cast<void*>(slot(recv_post_.count))
                                            : static_cast<void*>(c_.data + off * c_.elem_bytes);
                DTRAIN_MPI_CHECK(MPI_Irecv(dst, static_cast<int>(len), c_.type, left(), c_.tag, c_.comm,
                                           &rreq_[recv_post_.count % c_.window]));
                advance(recv_post_);
                moved = true;
            }
            // Post sends whose segment is final for this step (own data at step 0, else received and
            // reduced).
            while (send_post_.step < steps_ &&
                   send_post_.count - send_done_.count < std::uint64_t(c_.window)) {
                const int s = send_post_.step;
                if (s > 0 && !before(s - 1, send_post_.seg, recv_done_)) break;
                std::size_t off = 0, len = 0;
                segment(send_chunk(s), send_post_.seg, off, len);
                DTRAIN_MPI_CHECK(MPI_Isend(c_.data + off * c_.elem_bytes, static_cast<int>(len), c_.type,
                                           right(), c_.tag, c_.comm, &sreq_[send_post_.count % c_.window]));
                advance(send_post_);
                moved = true;
            }
        }
        if (recv_done_.step >= steps_ && send_done_.step >= steps_) active_ = false;
        return !active_;
    }

    /// Blocks until the operation has completed, polling progress() with a Backoff between unsuccessful
    /// polls. Throws dtrain::Error when an MPI call fails.
    void wait() {
        Backoff backoff;
        while (!progress())
            backoff.pause();
    }

    /// Completes every posted message quietly (used when a pending request is destroyed).
    void drain() noexcept {
        try {
            wait();
        } catch (...) {
            active_ = false;
        }
    }

private:
    /// A position in the message sequence of one direction: step, segment within the step's chunk, and the
    /// running message count (indexes the request and scratch slots).
    struct Cursor {
        int step = 0;
        std::size_t seg = 0;
        std::uint64_t count = 0;
    };

    int mod(long long v) const noexcept {
        const long long p = c_.size;
        return static_cast<int>(((v % p) + p) % p);
    }
    int left() const noexcept { return mod(c_.rank - 1); }
    int right() const noexcept { return mod(c_.rank + 1); }

    /// Chunk sent at step s: r-s while reduce-scattering, then r+1-t at all-gather step t = s-(p-1).
    int send_chunk(int s) const noexcept {
        return s < c_.size - 1 ? mod(c_.rank - s) : mod(c_.rank + 1 - (s - (c_.size - 1)));
    }
    /// Chunk received at step s: the one sent at step s+1.
    int recv_chunk(int s) const noexcept { return send_chunk(s + 1); }

    std::size_t chunk_len(int c) const noexcept { return base_ + (std::size_t(c) < rem_ ? 1 : 0); }
    std::size_t chunk_off(int c) const noexcept {
        return std::size_t(c) * base_ + std::min<std::size_t>(c, rem_);
    }
    std::size_t segments(int c) const noexcept { return (chunk_len(c) + c_.seg - 1) / c_.seg; }
    void segment(int c, std::size_t k, std::size_t& off, std::size_t& len) const noexcept {
        off = chunk_off(c) + k * c_.seg;
        len = std::min(c_.seg, chunk_len(c) - k * c_.seg);
    }

    /// Skips steps whose chunk has no segments (send and receive directions share segment counts shifted by
    /// one step, so the send cursor uses send chunks and the receive cursors the receive chunks).
    void normalise(Cursor& cur) const noexcept {
        const bool is_send = (&cur == &send_post_ || &cur == &send_done_);
        while (cur.step < steps_ &&
               cur.seg >= segments(is_send ? send_chunk(cur.step) : recv_chunk(cur.step))) {
            ++cur.step;
            cur.seg = 0;
        }
    }
    void advance(Cursor& cur) noexcept {
        ++cur.seg;
        ++cur.count;
        normalise(cur);
    }
    /// True when message (step, seg) lies strictly before cursor `cur`, i.e. it has been handled.
    static bool before(int step, std::size_t seg, const Cursor& cur) noexcept {
        return step < cur.step || (step == cur.step && seg < cur.seg);
    }
    unsigned char* slot(std::uint64_t count) const noexcept {
        return c_.scratch + std::size_t(count % std::uint64_t(c_.window)) * c_.seg * c_.elem_bytes;
    }

    Config c_;
    int steps_ = 0;
    std::size_t base_ = 0, rem_ = 0;
    Cursor send_post_, send_done_, recv_post_, recv_done_;
    MPI_Request sreq_[ring_max_window] = {};
    MPI_Request rreq_[ring_max_window] = {};
    bool active_ = false;
};

}  // namespace dtrain::detail

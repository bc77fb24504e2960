#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include <dtrain/core/span.hpp>
#include <dtrain/distributed/bucket.hpp>
#include <dtrain/util/timeline.hpp>

namespace dtrain {

/// The state of one round of gradient-bucket reductions (one optimizer step) of the synchronous
/// DistOptimizer: which buckets have started their nonblocking all-reduce, which are known to be complete,
/// and their requests. Buckets start in order (bucket 0 holds the last layers, whose gradients are final
/// first), so "started" is the prefix [0, launched()) and "known complete" a prefix of that plus flags.
/// It knows no layers and no model: it moves ranges of one flat gradient buffer through `Comm`.
///
/// Not thread-safe: DistOptimizer serialises the calls of its main thread and of its progress thread with
/// one mutex. Nothing allocates after construction (requests live in pre-sized slots); the communicator's
/// own scratch is sized by prewarm().
///
/// @tparam Comm any type with `Request`, `Request iallreduce_sum(Span<T>)`, `bool test(Request&)` and
///         `void wait(Request&)` (every Communicator; tests drive it with a fake one).
/// @tparam T the gradient element type.
template <class Comm, class T>
class BucketSchedule {
public:
    /// A schedule for `buckets` (in reduction order, e.g. from make_buckets()).
    explicit BucketSchedule(std::vector<Bucket> buckets = {})
        : buckets_(std::move(buckets)),
          requests_(buckets_.size()),
          done_(buckets_.size(), 0),
          started_us_(buckets_.size(), 0),
          finished_us_(buckets_.size(), 0) {}

    /// The buckets, in reduction order.
    const std::vector<Bucket>& buckets() const noexcept { return buckets_; }
    /// Number of buckets.
    std::size_t size() const noexcept { return buckets_.size(); }
    /// Buckets [0, launched()) have started their reduction in this round.
    std::size_t launched() const noexcept { return launched_; }
    /// True while a started reduction is not known to be complete (what a progress thread polls).
    bool outstanding() const noexcept { return first_pending_ < launched_; }

    /// Starts the reduction of the next bucket on its range of `grads` (the whole flat gradient buffer).
    /// Requires launched() < size().
    void launch_next(Comm& comm, Span<T> grads) {
        const std::size_t b = launched_++;
        started_us_[b] = timeline().now_us();
        requests_[b].emplace(comm.iallreduce_sum(grads.subspan(buckets_[b].offset, buckets_[b].size)));
    }

    /// Starts, in order, every bucket not started yet that lies inside [from, end of the buffer): the
    /// gradients there are final. Returns true when it started any.
    bool launch_ready(Comm& comm, Span<T> grads, std::size_t from) {
        const std::size_t before = launched_;
        while (launched_ < buckets_.size() && buckets_[launched_].offset >= from)
            launch_next(comm, grads);
        return launched_ != before;
    }

    /// Starts buckets until at least min(count, size()) have started. Returns true when it started any.
    bool launch_until(Comm& comm, Span<T> grads, std::size_t count) {
        const std::size_t before = launched_;
        while (launched_ < count && launched_ < buckets_.size())
            launch_next(comm, grads);
        return launched_ != before;
    }

    /// Advances the started reductions without blocking and records those that completed.
    void poll(Comm& comm) {
        for (std::size_t b = first_pending_; b < launched_; ++b) {
            if (!done_[b] && comm.test(*requests_[b])) {
                done_[b] = 1;
                finished_us_[b] = timeline().now_us();
            }
        }
        while (first_pending_ < launched_ && done_[first_pending_])
            ++first_pending_;
    }

    /// Completes bucket b's started reduction (waiting unless poll() saw it finish), records it on the
    /// timeline and releases its request. Requires b < launched().
    void complete(Comm& comm, std::size_t b) {
        if (!done_[b]) {
            comm.wait(*requests_[b]);
            finished_us_[b] = timeline().now_us();
            done_[b] = 1;
        }
        timeline().complete("allreduce", "comm", started_us_[b], finished_us_[b], "bucket", std::int64_t(b));
        requests_[b].reset();
    }

    /// Completes every started reduction (their results are not used) and ends the round.
    void drain(Comm& comm) {
        for (std::size_t b = 0; b < launched_; ++b) {
            if (!done_[b]) comm.wait(*requests_[b]);
            requests_[b].reset();
        }
        end_round();
    }

    /// Forgets the round: no bucket is started. Requires every started one to be completed.
    void end_round() noexcept {
        std::fill(done_.begin(), done_.end(), char(0));
        launched_ = 0;
        first_pending_ = 0;
    }

    /// Sizes the communicator's reusable resources (the scratch of Ring and Naive) for every bucket in
    /// flight at once, the most a round can have, by one nonblocking reduction of every bucket of a zero
    /// buffer of `n` values: which buckets overlap in time depends on timing, and steady-state steps must not
    /// allocate. Collective; call it outside a round.
    void prewarm(Comm& comm, std::size_t n) {
        std::vector<T> zeros(n, T(0));
        std::vector<std::optional<typename Comm::Request>> reqs(buckets_.size());
        for (std::size_t b = 0; b < buckets_.size(); ++b)
            reqs[b].emplace(
                comm.iallreduce_sum(Span<T>(zeros.data() + buckets_[b].offset, buckets_[b].size)));
        for (auto& r : reqs)
            comm.wait(*r);
    }

private:
    std::vector<Bucket> buckets_;
    std::vector<std::optional<typename Comm::Request>> requests_;
    std::vector<char> done_;                 // bucket's reduction is known complete
    std::vector<std::int64_t> started_us_;   // timeline: when each bucket's reduction started
    std::vector<std::int64_t> finished_us_;  // timeline: when it was seen complete
    std::size_t launched_ = 0;               // buckets [0, launched_) started in this round
    std::size_t first_pending_ = 0;          // first started bucket not known to be complete
};

}  // namespace dtrain

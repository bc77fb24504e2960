#pragma once

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include <mpi.h>

#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/operation.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/distributed/async/protocol.hpp>
#include <dtrain/distributed/async/server_state.hpp>

namespace dtrain::detail {

/// The master's side of the parameter-server protocol: receives gradient shards from any worker (one
/// posted MPI_ANY_SOURCE receive per worker), lets a ServerState decide, applies the optimizer to its shard
/// of the parameters and sends the fresh shard back. Every buffer is allocated at construction.
///
/// @tparam Opt the optimizer (its state is sized for this master's shard).
template <class Opt>
class ParameterServer {
    using T = typename Opt::value_type;

public:
    /// Called by master 0 for every gradient it receives.
    using Callback = std::function<void(const AsyncStepInfo&)>;

    /// The server of rank `rank` of `comm` (a master), whose first `masters` ranks are masters and the other
    /// `workers` ranks workers, owning `shard_size` parameters.
    ParameterServer(MPI_Comm comm, int rank, int masters, int workers, std::size_t shard_size,
                    std::uint64_t staleness, bool averaging)
        : comm_(comm),
          rank_(rank),
          masters_(masters),
          len_(shard_size),
          state_(std::size_t(workers), staleness, averaging),
          recv_(std::size_t(workers), std::vector<T>(header_elems<T> + shard_size, T(0))),
          replies_(std::size_t(workers), std::vector<T>(shard_size, T(0))),
          reqs_(2 * std::size_t(workers) + 2, MPI_REQUEST_NULL),
          stop_reqs_(std::size_t(workers), MPI_REQUEST_NULL),
          stop_sent_(std::size_t(workers), 0) {
        DTRAIN_CHECK(recv_.empty() || recv_[0].size() * sizeof(T) <= std::size_t(INT_MAX),
                     "DistOptimizer<Async>: a shard of ", shard_size, " values exceeds MPI's int count");
    }

    /// Serves one run: until every worker is done and every reply delivered, applies `opt` to `shard` (this
    /// master's parameters) for each gradient (or averaged round) and replies as the ServerState decides.
    /// Counts into `stats`; master 0 calls `callback` (if set) per gradient with times from `start`.
    void serve(Span<T> shard, Opt& opt, AsyncStats& stats, const Callback& callback, double start) {
        const std::size_t w = state_.workers();
        state_.start_run();
        std::fill(stop_sent_.begin(), stop_sent_.end(), char(0));
        double delay_sum = 0.0;
        OperationScope op("DistOptimizer<Async> master: serving the workers", comm_);
        for (std::size_t i = 0; i < w; ++i)
            post_gradient_receive(i);
        post_done_receive();
        if (rank_ == 0) post_failed_receive();
        while (!state_.finished()) {
            int index = MPI_UNDEFINED;
            MPI_Status status;
            const double t0 = async_now();
            DTRAIN_MPI_CHECK(MPI_Waitany(int(reqs_.size()), reqs_.data(), &index, &status));
            stats.wait_seconds += async_now() - t0;
            OperationScope::progress();
            DTRAIN_CHECK(index != MPI_UNDEFINED, "DistOptimizer<Async>: master ", rank_,
                         " has nothing to wait for (protocol error)");
            if (std::size_t(index) == failed_index()) {
                stop_workers();
                post_failed_receive();
                continue;
            }
            const std::size_t i = std::size_t(index), worker = std::size_t(status.MPI_SOURCE - masters_);
            if (i < w) {
                AsyncGradHeader h;
                std::memcpy(&h, recv_[i].data(), sizeof h);
                const std::uint64_t delay = state_.gradient(worker, h.step, int(i), rank_);
                ++stats.gradients;
                stats.max_delay = std::max(stats.max_delay, delay);
                delay_sum += double(delay);
                if (callback)
                    callback(AsyncStepInfo{int(worker), h.step, h.loss, h.samples,
                                           state_.worker(worker).clock - state_.slowest(), delay,
                                           async_now() - start});
                if (!state_.averaging()) {
                    opt.set_steps(h.schedule_step);  // the rate and bias correction of the worker's step
                    apply(shard, opt, stats, recv_[i].data() + header_elems<T>);
                    post_gradient_receive(i);
                }
            } else if (i == w) {
                state_.done(worker, done_steps_, rank_);
                if (state_.active() > 0) post_done_receive();
            } else {
                state_.delivered(i - w - 1);
                continue;
            }
            if (state_.averaging())
                complete_round(shard, opt, stats);
            else
                release(shard, stats);
        }
        cancel_receives();
        DTRAIN_MPI_CHECK(MPI_Waitall(int(w), stop_reqs_.data(), MPI_STATUSES_IGNORE));
        if (stats.gradients > 0) stats.mean_delay = delay_sum / double(stats.gradients);
    }

    /// Master 0: per worker, 1 when this run sent it a Stop (it must receive it), else 0.
    const std::vector<char>& stop_sent() const noexcept { return stop_sent_; }

private:
    std::size_t failed_index() const noexcept { return 2 * state_.workers() + 1; }
    MPI_Request& done_request() { return reqs_[state_.workers()]; }
    MPI_Request& reply_request(std::size_t w) { return reqs_[state_.workers() + 1 + w]; }

    void post_gradient_receive(std::size_t i) {
        DTRAIN_MPI_CHECK(MPI_Irecv(recv_[i].data(), int(recv_[i].size() * sizeof(T)), MPI_BYTE,
                                   MPI_ANY_SOURCE, tag(AsyncTag::Gradient), comm_, &reqs_[i]));
    }

    void post_failed_receive() {
        DTRAIN_MPI_CHECK(MPI_Irecv(&failed_word_, 1, MPI_INT, MPI_ANY_SOURCE, tag(AsyncTag::Failed), comm_,
                                   &reqs_[failed_index()]));
    }

    // Master 0, when a worker's loop failed: tells every worker still training to stop (once each).
    void stop_workers() {
        for (std::size_t v = 0; v < state_.workers(); ++v) {
            if (state_.worker(v).done || stop_sent_[v]) continue;
            stop_sent_[v] = 1;
            DTRAIN_MPI_CHECK(MPI_Isend(&stop_word_, 1, MPI_INT, masters_ + int(v), tag(AsyncTag::Stop), comm_,
                                       &stop_reqs_[v]));
        }
    }

    void post_done_receive() {
        DTRAIN_MPI_CHECK(MPI_Irecv(&done_steps_, 1, MPI_UINT64_T, MPI_ANY_SOURCE, tag(AsyncTag::Done), comm_,
                                   &done_request()));
    }

    void apply(Span<T> shard, Opt& opt, AsyncStats& stats, const T* grad) {
        if (len_ > 0) opt.step(shard, Span<const T>(grad, len_));
        state_.updated();
        ++stats.updates;
    }

    // Averaged round: once every unfinished worker's gradient is in, sums them in worker order (so the
    // result does not depend on arrival order), averages, applies one update and replies to all of them.
    void complete_round(Span<T> shard, Opt& opt, AsyncStats& stats) {
        if (!state_.round_ready()) return;
        T* acc = nullptr;
        std::size_t count = 0;
        std::uint64_t schedule_step = 0;
        for (std::size_t v = 0; v < state_.workers(); ++v) {
            if (!state_.worker(v).waiting) continue;
            T* g = recv_[std::size_t(state_.worker(v).held_slot)].data() + header_elems<T>;
            AsyncGradHeader h;
            std::memcpy(&h, recv_[std::size_t(state_.worker(v).held_slot)].data(), sizeof h);
            schedule_step = std::max(schedule_step, h.schedule_step);
            ++count;
            if (acc == nullptr)
                acc = g;
            else
                for (std::size_t j = 0; j < len_; ++j)
                    acc[j] += g[j];
        }
        if (count > 1)
            for (std::size_t j = 0; j < len_; ++j)
                acc[j] *= T(1) / T(count);
        opt.set_steps(schedule_step);
        apply(shard, opt, stats, acc);
        for (std::size_t v = 0; v < state_.workers(); ++v) {
            if (!state_.worker(v).waiting) continue;
            post_gradient_receive(std::size_t(state_.worker(v).held_slot));
            reply(v, shard, stats);
        }
    }

    // Stale synchronous parallel: replies to every waiting worker within the staleness bound.
    void release(Span<T> shard, AsyncStats& stats) {
        for (std::size_t v = 0; v < state_.workers(); ++v) {
            if (state_.may_reply(v))
                reply(v, shard, stats);
            else if (state_.worker(v).waiting && state_.withhold(v))
                ++stats.withheld;
        }
    }

    void reply(std::size_t w, Span<T> shard, AsyncStats& stats) {
        if (state_.worker(w).reply_in_flight)
            DTRAIN_MPI_CHECK(MPI_Wait(&reply_request(w), MPI_STATUS_IGNORE));
        std::copy(shard.begin(), shard.end(), replies_[w].begin());
        DTRAIN_MPI_CHECK(MPI_Isend(replies_[w].data(), int(len_), mpi_type<T>(), masters_ + int(w),
                                   tag(AsyncTag::Parameters), comm_, &reply_request(w)));
        stats.max_staleness = std::max(stats.max_staleness, state_.replied(w));
    }

    // Every worker is done: no gradient can arrive any more, so the posted receives are cancelled.
    void cancel_receives() {
        if (reqs_[failed_index()] != MPI_REQUEST_NULL) {  // master 0: no failure report came (any more)
            DTRAIN_MPI_CHECK(MPI_Cancel(&reqs_[failed_index()]));
            DTRAIN_MPI_CHECK(MPI_Wait(&reqs_[failed_index()], MPI_STATUS_IGNORE));
        }
        for (std::size_t i = 0; i < state_.workers(); ++i) {
            if (reqs_[i] == MPI_REQUEST_NULL) continue;
            DTRAIN_MPI_CHECK(MPI_Cancel(&reqs_[i]));
            MPI_Status status;
            DTRAIN_MPI_CHECK(MPI_Wait(&reqs_[i], &status));
            int cancelled = 0;
            DTRAIN_MPI_CHECK(MPI_Test_cancelled(&status, &cancelled));
            DTRAIN_CHECK(cancelled, "DistOptimizer<Async>: master ", rank_,
                         " received a gradient after every worker finished (protocol error)");
        }
    }

    MPI_Comm comm_;
    int rank_, masters_;
    std::size_t len_;
    ServerState state_;
    std::vector<std::vector<T>> recv_;     // posted gradient receives (header + shard), any worker
    std::vector<std::vector<T>> replies_;  // per worker: the shard sent back (kept until delivered)
    std::vector<MPI_Request> reqs_;        // [0, W) receives, W 'done', W + 1 + w replies, 2W + 1 'failed'
    std::vector<MPI_Request> stop_reqs_;   // master 0: the Stop sent to each worker
    std::vector<char> stop_sent_;
    std::uint64_t done_steps_ = 0;
    int failed_word_ = 0, stop_word_ = 0;
};

}  // namespace dtrain::detail

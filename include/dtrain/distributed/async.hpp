#pragma once

/// @file
/// The asynchronous (parameter-server) communicator policy: DistOptimizer<Async, Opt>.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <mpi.h>

#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/distributed/options.hpp>
#include <dtrain/distributed/sharding.hpp>
#include <dtrain/nn/model.hpp>
#include <dtrain/optim/optimizer.hpp>

#if __has_include(<dtrain/distributed/dist_optimizer.hpp>)
#include <dtrain/distributed/dist_optimizer.hpp>
#endif

namespace dtrain {

/// Policy tag selecting asynchronous parameter-server training in DistOptimizer<Async, Opt>: ranks
/// 0..masters-1 hold shards of the parameters and run the optimizer, the other ranks are workers.
struct Async {};

/// Distributed optimizer: wraps a local optimizer `Opt` and a communicator policy `Comm` (Collective,
/// Ring, Naive or Async) behind one API; see the policy headers.
template <class Comm, class Opt>
class DistOptimizer;

/// What master 0 (rank 0) learns about one gradient it receives; see DistOptimizer<Async, Opt>::set_step_callback.
struct AsyncStepInfo {
    /// Worker index (0 .. num_workers() - 1) that sent the gradient.
    int worker = 0;
    /// The worker's step number (0-based) of this gradient.
    std::uint64_t step = 0;
    /// Loss the worker passed to report() before this step (NaN when it reported none).
    double loss = std::numeric_limits<double>::quiet_NaN();
    /// Samples the worker passed to report() before this step (0 when none).
    std::uint64_t samples = 0;
    /// The worker's clock (steps sent) minus the slowest unfinished worker's clock when the gradient arrived.
    std::uint64_t clock_gap = 0;
    /// Updates applied to master 0's shard between the worker's read of it and this gradient's arrival.
    std::uint64_t delay = 0;
    /// Seconds since run() started on rank 0.
    double seconds = 0.0;
};

/// Counters of one rank's part in the last run() of DistOptimizer<Async, Opt>.
struct AsyncStats {
    /// Master: gradient shards received. Worker: steps (gradient sends) performed.
    std::uint64_t gradients = 0;
    /// Master: optimizer steps applied to its shard (fewer than gradients when rounds are averaged).
    std::uint64_t updates = 0;
    /// Master: largest clock gap (worker clock minus slowest unfinished worker's clock) at a reply; <= staleness.
    std::uint64_t max_staleness = 0;
    /// Master: largest number of updates between a worker's read of the shard and its gradient's arrival.
    std::uint64_t max_delay = 0;
    /// Master: mean of those delays.
    double mean_delay = 0.0;
    /// Master: replies held back by the staleness bound.
    std::uint64_t withheld = 0;
    /// Worker: seconds spent in step() waiting for the masters. Master: seconds waiting for messages.
    double wait_seconds = 0.0;
    /// Wall-clock seconds of run() on this rank, including the final assembly.
    double seconds = 0.0;
};

namespace detail {

/// Header of a gradient message (followed by the gradient shard).
struct AsyncGradHeader {
    std::uint64_t step;
    std::uint64_t samples;
    double loss;
};

/// Message tags of the parameter-server protocol (on a communicator private to one DistOptimizer).
enum AsyncTag : int { async_tag_grad = 71, async_tag_params = 72, async_tag_done = 73 };

/// Owns a duplicated communicator and frees it on destruction (also when a constructor throws).
struct AsyncCommHandle {
    MPI_Comm comm = MPI_COMM_NULL;
    AsyncCommHandle() = default;
    AsyncCommHandle(const AsyncCommHandle&) = delete;
    AsyncCommHandle& operator=(const AsyncCommHandle&) = delete;
    ~AsyncCommHandle() {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (comm != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm);
    }
};

/// Seconds on a monotonic clock.
inline double async_now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace detail

/// Asynchronous data-parallel training with parameter servers (the Go report's Send/Recv design and the
/// assignment's multi-master design), with a Stale-Synchronous-Parallel staleness bound.
///
/// Roles: ranks 0 .. M-1 (M = options.masters) are masters, ranks M .. size-1 are the W = size - M workers
/// (worker_rank() = rank - M). The flat parameter buffer and the optimizer state are sharded over the
/// masters in contiguous ranges (options.sharding: balanced by size, or whole layers); master m owns
/// shards()[m] and its copy of `Opt` is reset to that shard's size. The optimizer runs on masters only.
///
/// The user program is the same as for the synchronous policies:
/// ```
/// DistOptimizer<Async, SGD<float>> opt(model, SGD<float>(0.1), options);
/// opt.run([&] {                              // runs on workers only
///     auto shard = sampler(opt.worker_rank(), opt.num_workers());
///     for (epoch...) for (batch...) {
///         opt.zero_grad(); model.forward(x); loss...; model.backward(g);
///         opt.report(loss, batch_size);      // optional: per-step metrics for rank 0
///         opt.step();                        // send gradient shards, receive fresh shards
///     }
/// });                                        // masters serve inside run() until every worker is done
/// // rank 0 now holds the final parameters (every rank with options.gather_to_all)
/// ```
/// Worker loop: for each step, step() sends master m the gradient slice shards()[m] (with the step number
/// and the reported loss), receives the fresh slice straight into the model's parameters, all masters
/// concurrently (nonblocking point-to-point), and returns when every slice arrived. When the loop returns
/// the worker sends each master a 'done' message with its step count. Workers may run different numbers of
/// steps. Master loop (inside run()): wait for ANY worker's gradient (MPI_ANY_SOURCE, one posted receive per
/// worker), apply the optimizer to the shard, and send the fresh shard back to that worker, unless that
/// worker is more than `options.staleness` steps ahead of the slowest unfinished worker: then the reply is
/// withheld until the slowest catches up. With staleness 0 or options.average_rounds (the Go report's
/// variant) the master instead collects one gradient from every unfinished worker, sums them in worker
/// order, averages, applies ONE update and replies to all: bulk-synchronous training equal to synchronous
/// averaging. Masters leave the loop once every worker is done and every reply was delivered; outstanding
/// receives are cancelled, so no request is left pending. Then (collectively) the shards are gathered into
/// rank 0's model (every rank's with gather_to_all) and the workers' non-trainable state (BatchNorm
/// statistics) is averaged into rank 0's.
///
/// Initial model: the constructor broadcasts the parameters and state from options.root, exactly as the
/// synchronous policies do, so a seed gives the same initial model under every policy; each master takes
/// its slice of root's optimizer state (when root's optimizer was reset to the full size) and its step count.
///
/// Gradient accumulation (as in the synchronous policies): with accumulation_steps = k, call zero_grad(),
/// then model.backward() k times, then step() once; step() sends the mean of the k accumulated gradients
/// (do not divide the loss by k yourself) and throws unless exactly k backward passes ran since the last
/// step() or zero_grad(). The constructor installs the model's grad-ready hook to count them (replacing
/// any hook the user set; the destructor removes it), so a DistOptimizer must not be copied or moved.
///
/// Errors: a communicator with fewer than M + 1 ranks, M < 1, or ranks disagreeing on the parameter layout
/// or options throw dtrain::Error on every rank from the constructor, before any training. An exception
/// from the worker loop does not hang the others: that worker leaves cleanly, run() completes everywhere
/// and then throws on every rank.
///
/// @tparam Opt a model of the Optimizer concept (see optim/optimizer.hpp).
template <class Opt>
class DistOptimizer<Async, Opt> {
    static_assert(is_optimizer_v<Opt>, "DistOptimizer<Async, Opt>: Opt must model the Optimizer concept");

public:
    /// Element type of parameters and gradients.
    using value_type = typename Opt::value_type;

private:
    using T = value_type;
    using Header = detail::AsyncGradHeader;
    static constexpr std::size_t header_elems_ = (sizeof(Header) + sizeof(T) - 1) / sizeof(T);

public:
    /// Collective over `comm`. Checks that every rank has the same parameter layout and options and that
    /// there are at least options.masters + 1 ranks (throwing dtrain::Error on every rank otherwise), plans
    /// the shards, broadcasts parameters, state and optimizer state from options.root and allocates every
    /// buffer the training steps use. `model` must outlive this object.
    DistOptimizer(Model<T>& model, Opt opt, DistOptions options = {}, MPI_Comm comm = MPI_COMM_WORLD)
        : model_(&model), opt_(std::move(opt)), options_(options) {
        DTRAIN_MPI_CHECK(MPI_Comm_dup(comm, &comm_.comm));
        DTRAIN_MPI_CHECK(MPI_Comm_set_errhandler(comm_.comm, MPI_ERRORS_RETURN));
        DTRAIN_MPI_CHECK(MPI_Comm_rank(comm_.comm, &rank_));
        DTRAIN_MPI_CHECK(MPI_Comm_size(comm_.comm, &size_));
        check_consistency();
        masters_ = options_.masters;
        workers_ = size_ - masters_;
        shards_ = plan_shards(model, std::size_t(masters_), options_.sharding);
        averaging_ = options_.staleness == 0 || options_.average_rounds;

        DTRAIN_MPI_CHECK(
            MPI_Comm_split(comm_.comm, is_worker() ? 0 : MPI_UNDEFINED, rank_, &worker_comm_.comm));
        broadcast_initial_state();
        allocate();
        model_->set_grad_ready_hook([this](std::size_t layer) {
            if (layer == 0) ++passes_;
        });
    }

    DistOptimizer(const DistOptimizer&) = delete;
    DistOptimizer& operator=(const DistOptimizer&) = delete;

    /// Removes the model's grad-ready hook.
    ~DistOptimizer() { model_->set_grad_ready_hook(nullptr); }

    /// Sets the model's gradients to zero and restarts the count of backward passes of this step.
    void zero_grad() {
        model_->zero_grad();
        passes_ = 0;
    }

    /// Attaches `loss` and `samples` (the batch size) to the next gradient message, for rank 0's per-step
    /// metrics (set_step_callback). Optional; Async only. Workers only.
    void report(double loss, std::size_t samples) {
        loss_ = loss;
        samples_ = std::uint64_t(samples);
    }

    /// Worker, inside run(), after accumulation_steps backward passes: sends each master its gradient
    /// slice (divided by accumulation_steps) with the step number, and receives the fresh parameter slice
    /// straight into the model, all masters concurrently; returns when the model holds the fresh
    /// parameters. Throws dtrain::Error when called on a master, outside run(), or after a number of
    /// backward passes other than accumulation_steps.
    void step() {
        DTRAIN_CHECK(is_worker() && in_run_,
                     "DistOptimizer<Async>::step: call it in the worker loop given to "
                     "run(); rank ",
                     rank_, is_worker() ? " is outside run()" : " is a master");
        DTRAIN_CHECK(passes_ == options_.accumulation_steps, "DistOptimizer<Async>::step: ", passes_,
                     " backward passes since the last step, but accumulation_steps is ",
                     options_.accumulation_steps, "; call step() once after every ",
                     options_.accumulation_steps, " model.backward() calls");
        passes_ = 0;
        const T scale = T(1) / T(options_.accumulation_steps);
        const Header h{step_, samples_, loss_};
        Span<T> params = model_->parameters();
        Span<const T> grads = model_->gradients();
        for (int m = 0; m < masters_; ++m) {
            const Range r = shards_[std::size_t(m)];
            std::vector<T>& buf = send_bufs_[std::size_t(m)];
            std::memcpy(buf.data(), &h, sizeof(Header));
            T* g = buf.data() + header_elems_;
            if (options_.accumulation_steps == 1)
                std::copy(grads.begin() + r.offset, grads.begin() + r.offset + r.size, g);
            else
                for (std::size_t i = 0; i < r.size; ++i)
                    g[i] = grads[r.offset + i] * scale;
            DTRAIN_MPI_CHECK(MPI_Irecv(params.data() + r.offset, int(r.size), mpi_type<T>(), m,
                                       detail::async_tag_params, comm_.comm, &reqs_[2 * std::size_t(m)]));
            DTRAIN_MPI_CHECK(MPI_Isend(buf.data(), int(buf.size() * sizeof(T)), MPI_BYTE, m,
                                       detail::async_tag_grad, comm_.comm, &reqs_[2 * std::size_t(m) + 1]));
        }
        const double t0 = detail::async_now();
        DTRAIN_MPI_CHECK(MPI_Waitall(2 * masters_, reqs_.data(), MPI_STATUSES_IGNORE));
        stats_.wait_seconds += detail::async_now() - t0;
        ++step_;
        ++stats_.gradients;
        loss_ = std::numeric_limits<double>::quiet_NaN();
        samples_ = 0;
    }

    /// Collective over all ranks. Workers call `worker_loop()` (which calls zero_grad/backward/step) and
    /// then tell the masters they are done; masters serve gradients until every worker is done. Then the
    /// final parameters are gathered into rank 0's model (every rank's with gather_to_all) and the
    /// workers' mean non-trainable state into rank 0's. May be called again to train further (workers
    /// first receive the current parameters). Throws on every rank when the loop threw on any worker.
    template <class Fn>
    void run(Fn&& worker_loop) {
        DTRAIN_CHECK(!in_run_, "DistOptimizer<Async>::run: run() is not reentrant");
        const double t0 = detail::async_now();
        stats_ = AsyncStats{};
        start_ = t0;
        if (!params_synced_) share_parameters(false);
        int failed = 0;
        std::exception_ptr error;
        if (is_worker()) {
            in_run_ = true;
            step_ = 0;
            passes_ = 0;
            try {
                worker_loop();
            } catch (...) {
                error = std::current_exception();
                failed = 1;
            }
            in_run_ = false;
            send_done();
        } else {
            serve();
        }
        finish(failed, error);
        stats_.seconds = detail::async_now() - t0;
    }

    /// Installs a callback that rank 0 (master 0) calls for every gradient it receives during run(), with
    /// the worker, its step, reported loss and samples and the observed staleness. Ignored on other ranks.
    /// The callback runs inside the serve loop: keep it short.
    void set_step_callback(std::function<void(const AsyncStepInfo&)> callback) {
        callback_ = std::move(callback);
    }

    /// True on workers (ranks >= masters).
    bool is_worker() const { return rank_ >= masters_; }
    /// True on masters (ranks < masters).
    bool is_master() const { return rank_ < masters_; }
    /// This worker's index in [0, num_workers()), or -1 on a master.
    int worker_rank() const { return is_worker() ? rank_ - masters_ : -1; }
    /// Number of workers W = size() - masters.
    int num_workers() const { return workers_; }
    /// Number of masters M.
    int num_masters() const { return masters_; }
    /// This rank in the communicator.
    int rank() const { return rank_; }
    /// Number of ranks in the communicator.
    int size() const { return size_; }
    /// A communicator of the workers only (MPI_COMM_NULL on masters), for metrics.
    MPI_Comm worker_comm() const { return worker_comm_.comm; }
    /// The private communicator (a duplicate of the one given) the protocol runs on.
    MPI_Comm mpi_comm() const { return comm_.comm; }
    /// The wrapped optimizer; on a master its state covers that master's shard only.
    Opt& optimizer() { return opt_; }
    /// The model.
    Model<T>& model() { return *model_; }
    /// Range of the flat parameter buffer owned by each master, in master order.
    const std::vector<Range>& shards() const { return shards_; }
    /// This master's range (an empty range on workers).
    Range shard() const { return is_master() ? shards_[std::size_t(rank_)] : Range{}; }
    /// Counters of this rank's part in the last run().
    const AsyncStats& stats() const { return stats_; }
    /// The options in use.
    const DistOptions& options() const { return options_; }

    /// Sum of `x` over the workers (collective over the workers; call it on workers only, e.g. per epoch,
    /// from a point every worker reaches).
    double global_sum(double x) {
        DTRAIN_CHECK(is_worker(), "DistOptimizer<Async>::global_sum: rank ", rank_,
                     " is a master; call it from the worker loop");
        double out = 0.0;
        DTRAIN_MPI_CHECK(MPI_Allreduce(&x, &out, 1, MPI_DOUBLE, MPI_SUM, worker_comm_.comm));
        return out;
    }

    /// Mean of `x` over the workers (same rules as global_sum).
    double global_mean(double x) { return global_sum(x) / double(workers_); }

private:
    // ---- construction -------------------------------------------------------------------------------

    void check_consistency() {
        const auto& pr = model_->parameter_ranges();
        const auto& sr = model_->state_ranges();
        std::uint64_t layout = 1469598103934665603ULL;  // FNV-1a over the layer layout
        auto mix = [&layout](std::uint64_t v) {
            layout ^= v;
            layout *= 1099511628211ULL;
        };
        for (std::size_t i = 0; i < pr.size(); ++i) {
            mix(pr[i].size);
            mix(sr[i].size);
        }
        const std::uint64_t local[] = {std::uint64_t(model_->num_parameters()),
                                       std::uint64_t(model_->state().size()),
                                       layout,
                                       std::uint64_t(std::int64_t(options_.masters)),
                                       options_.staleness,
                                       std::uint64_t(options_.sharding),
                                       std::uint64_t(options_.average_rounds),
                                       std::uint64_t(options_.gather_to_all),
                                       std::uint64_t(std::int64_t(options_.root)),
                                       std::uint64_t(options_.accumulation_steps)};
        constexpr int k = int(sizeof(local) / sizeof(local[0]));
        std::uint64_t both[2 * k], reduced[2 * k];
        for (int i = 0; i < k; ++i) {
            both[i] = local[i];
            both[k + i] = ~local[i];  // max of ~x is ~min of x
        }
        DTRAIN_MPI_CHECK(MPI_Allreduce(both, reduced, 2 * k, MPI_UINT64_T, MPI_MAX, comm_.comm));
        const char* what[] = {"parameter count",        "state size",
                              "layer layout",           "options.masters",
                              "options.staleness",      "options.sharding",
                              "options.average_rounds", "options.gather_to_all",
                              "options.root",           "options.accumulation_steps"};
        for (int i = 0; i < k; ++i) {
            const std::uint64_t hi = reduced[i], lo = ~reduced[k + i];
            DTRAIN_CHECK(hi == lo, "DistOptimizer<Async>: ranks disagree on the ", what[i], " (from ", lo,
                         " to ", hi, " across ranks; this rank has ", local[i], ")");
        }
        const int m = options_.masters;
        DTRAIN_CHECK(m >= 1, "DistOptimizer<Async>: options.masters must be at least 1, got ", m);
        DTRAIN_CHECK(size_ >= m + 1, "DistOptimizer<Async>: ", m, " master(s) need at least ", m + 1,
                     " ranks (at least one worker), but the communicator has ", size_, " rank(s)");
        DTRAIN_CHECK(options_.root >= 0 && options_.root < size_, "DistOptimizer<Async>: options.root ",
                     options_.root, " is not a rank of the communicator of size ", size_);
        DTRAIN_CHECK(options_.accumulation_steps >= 1,
                     "DistOptimizer<Async>: options.accumulation_steps must be at least 1, got ",
                     options_.accumulation_steps);
        for (std::size_t i = 0; i + 1 < pr.size(); ++i)
            DTRAIN_CHECK(pr[i].offset + pr[i].size == pr[i + 1].offset,
                         "DistOptimizer<Async>: parameter ranges are not contiguous");
    }

    void broadcast_initial_state() {
        const int root = options_.root;
        Span<T> params = model_->parameters();
        DTRAIN_MPI_CHECK(MPI_Bcast(params.data(), int(params.size()), mpi_type<T>(), root, comm_.comm));
        Span<T> state = model_->state();
        if (!state.empty())
            DTRAIN_MPI_CHECK(MPI_Bcast(state.data(), int(state.size()), mpi_type<T>(), root, comm_.comm));
        params_synced_ = true;

        // Optimizer: step count, and root's state sliced per master when root has full-size state.
        const std::size_t n = params.size();
        const std::size_t slots = opt_.state_slots();
        std::uint64_t head[2] = {opt_.steps(), 0};
        std::vector<T> full;
        if (rank_ == root && slots > 0 && opt_.state().size() == slots * n) {
            head[1] = 1;
            full.assign(opt_.state().begin(), opt_.state().end());
        }
        DTRAIN_MPI_CHECK(MPI_Bcast(head, 2, MPI_UINT64_T, root, comm_.comm));
        if (is_master()) {
            opt_.reset(shard().size);
            opt_.set_steps(head[0]);
        }
        if (head[1] == 0) return;
        auto slice = [&](int m, T* dst) {
            const Range r = shards_[std::size_t(m)];
            for (std::size_t k = 0; k < slots; ++k)
                std::copy(full.begin() + std::ptrdiff_t(k * n + r.offset),
                          full.begin() + std::ptrdiff_t(k * n + r.offset + r.size), dst + k * r.size);
        };
        if (rank_ == root) {
            std::vector<T> packed;
            for (int m = 0; m < masters_; ++m) {
                const std::size_t len = slots * shards_[std::size_t(m)].size;
                if (m == rank_) {
                    slice(m, opt_.state().data());
                    continue;
                }
                packed.resize(len);
                slice(m, packed.data());
                DTRAIN_MPI_CHECK(MPI_Send(packed.data(), int(len), mpi_type<T>(), m, detail::async_tag_params,
                                          comm_.comm));
            }
        } else if (is_master()) {
            DTRAIN_MPI_CHECK(MPI_Recv(opt_.state().data(), int(slots * shard().size), mpi_type<T>(), root,
                                      detail::async_tag_params, comm_.comm, MPI_STATUS_IGNORE));
        }
    }

    void allocate() {
        const std::size_t n = model_->num_parameters();
        counts_.assign(std::size_t(size_), 0);
        displs_.assign(std::size_t(size_), 0);
        for (int m = 0; m < masters_; ++m) {
            counts_[std::size_t(m)] = int(shards_[std::size_t(m)].size);
            displs_[std::size_t(m)] = int(shards_[std::size_t(m)].offset);
        }
        DTRAIN_CHECK(n <= std::size_t(std::numeric_limits<int>::max()), "DistOptimizer<Async>: ", n,
                     " parameters exceed MPI's int count");
        if (is_worker()) {
            send_bufs_.resize(std::size_t(masters_));
            for (int m = 0; m < masters_; ++m)
                send_bufs_[std::size_t(m)].assign(header_elems_ + shards_[std::size_t(m)].size, T(0));
            reqs_.assign(2 * std::size_t(masters_), MPI_REQUEST_NULL);
        } else {
            const std::size_t w = std::size_t(workers_), len = shard().size;
            recv_bufs_.assign(w, std::vector<T>(header_elems_ + len, T(0)));
            reply_bufs_.assign(w, std::vector<T>(len, T(0)));
            reqs_.assign(2 * w + 1, MPI_REQUEST_NULL);
            clock_.assign(w, 0);
            read_version_.assign(w, 0);
            held_.assign(w, -1);
            done_.assign(w, 0);
            waiting_.assign(w, 0);
            counted_.assign(w, 0);
            in_flight_.assign(w, 0);
        }
        if (!model_->state().empty()) zeros_.assign(model_->state().size(), T(0));
    }

    // ---- workers ------------------------------------------------------------------------------------

    void send_done() {
        std::uint64_t steps = step_;
        for (int m = 0; m < masters_; ++m)
            DTRAIN_MPI_CHECK(MPI_Isend(&steps, 1, MPI_UINT64_T, m, detail::async_tag_done, comm_.comm,
                                       &reqs_[std::size_t(m)]));
        DTRAIN_MPI_CHECK(MPI_Waitall(masters_, reqs_.data(), MPI_STATUSES_IGNORE));
    }

    // ---- masters ------------------------------------------------------------------------------------

    MPI_Request& grad_req(std::size_t i) { return reqs_[i]; }
    MPI_Request& done_req() { return reqs_[std::size_t(workers_)]; }
    MPI_Request& reply_req(std::size_t w) { return reqs_[std::size_t(workers_) + 1 + w]; }

    void post_grad_recv(std::size_t i) {
        std::vector<T>& buf = recv_bufs_[i];
        DTRAIN_MPI_CHECK(MPI_Irecv(buf.data(), int(buf.size() * sizeof(T)), MPI_BYTE, MPI_ANY_SOURCE,
                                   detail::async_tag_grad, comm_.comm, &grad_req(i)));
    }

    void post_done_recv() {
        DTRAIN_MPI_CHECK(MPI_Irecv(&done_steps_, 1, MPI_UINT64_T, MPI_ANY_SOURCE, detail::async_tag_done,
                                   comm_.comm, &done_req()));
    }

    void serve() {
        const std::size_t w = std::size_t(workers_);
        std::fill(clock_.begin(), clock_.end(), 0);
        std::fill(read_version_.begin(), read_version_.end(), 0);
        std::fill(held_.begin(), held_.end(), -1);
        std::fill(done_.begin(), done_.end(), 0);
        std::fill(waiting_.begin(), waiting_.end(), 0);
        std::fill(counted_.begin(), counted_.end(), 0);
        std::fill(in_flight_.begin(), in_flight_.end(), 0);
        version_ = 0;
        active_ = workers_;
        delay_sum_ = 0.0;
        for (std::size_t i = 0; i < w; ++i)
            post_grad_recv(i);
        post_done_recv();
        while (active_ > 0 ||
               std::any_of(in_flight_.begin(), in_flight_.end(), [](char c) { return c != 0; })) {
            int index = MPI_UNDEFINED;
            MPI_Status status;
            const double t0 = detail::async_now();
            DTRAIN_MPI_CHECK(MPI_Waitany(int(reqs_.size()), reqs_.data(), &index, &status));
            stats_.wait_seconds += detail::async_now() - t0;
            DTRAIN_CHECK(index != MPI_UNDEFINED, "DistOptimizer<Async>: master ", rank_,
                         " has nothing to wait for (protocol error)");
            const std::size_t i = std::size_t(index);
            if (i < w)
                on_gradient(i, status.MPI_SOURCE - masters_);
            else if (i == w)
                on_done(status.MPI_SOURCE - masters_);
            else
                in_flight_[i - w - 1] = 0;  // a reply was delivered
        }
        // Every worker is done: no gradient can arrive any more. Cancel the posted receives.
        for (std::size_t i = 0; i < w; ++i) {
            if (grad_req(i) == MPI_REQUEST_NULL) continue;
            DTRAIN_MPI_CHECK(MPI_Cancel(&grad_req(i)));
            MPI_Status status;
            DTRAIN_MPI_CHECK(MPI_Wait(&grad_req(i), &status));
            int cancelled = 0;
            DTRAIN_MPI_CHECK(MPI_Test_cancelled(&status, &cancelled));
            DTRAIN_CHECK(cancelled, "DistOptimizer<Async>: master ", rank_,
                         " received a gradient after every worker finished (protocol error)");
        }
        if (stats_.gradients > 0) stats_.mean_delay = delay_sum_ / double(stats_.gradients);
    }

    std::uint64_t slowest_clock() const {
        std::uint64_t m = std::numeric_limits<std::uint64_t>::max();
        for (std::size_t v = 0; v < clock_.size(); ++v)
            if (!done_[v]) m = std::min(m, clock_[v]);
        return m;
    }

    void on_gradient(std::size_t i, int worker) {
        DTRAIN_CHECK(worker >= 0 && worker < workers_, "DistOptimizer<Async>: gradient from rank ",
                     worker + masters_, " which is not a worker");
        const std::size_t w = std::size_t(worker);
        Header h;
        std::memcpy(&h, recv_bufs_[i].data(), sizeof(Header));
        DTRAIN_CHECK(!done_[w] && !waiting_[w] && h.step == clock_[w], "DistOptimizer<Async>: master ", rank_,
                     " got step ", h.step, " from worker ", w, " whose clock is ", clock_[w],
                     " (protocol error)");
        ++clock_[w];
        ++stats_.gradients;
        const std::uint64_t delay = version_ - read_version_[w];
        stats_.max_delay = std::max(stats_.max_delay, delay);
        delay_sum_ += double(delay);
        if (rank_ == 0 && callback_) {
            AsyncStepInfo info;
            info.worker = worker;
            info.step = h.step;
            info.loss = h.loss;
            info.samples = h.samples;
            info.clock_gap = clock_[w] - slowest_clock();
            info.delay = delay;
            info.seconds = detail::async_now() - start_;
            callback_(info);
        }
        waiting_[w] = 1;
        if (averaging_) {
            held_[w] = int(i);  // keep the buffer until the round is complete
            complete_round();
        } else {
            apply(recv_bufs_[i].data() + header_elems_);
            post_grad_recv(i);
            release();
        }
    }

    void on_done(int worker) {
        DTRAIN_CHECK(worker >= 0 && worker < workers_, "DistOptimizer<Async>: 'done' from rank ",
                     worker + masters_, " which is not a worker");
        const std::size_t w = std::size_t(worker);
        DTRAIN_CHECK(!done_[w] && !waiting_[w] && done_steps_ == clock_[w], "DistOptimizer<Async>: master ",
                     rank_, " got 'done' after ", done_steps_, " steps from worker ", w, " whose clock is ",
                     clock_[w], " (protocol error)");
        done_[w] = 1;
        if (--active_ > 0) post_done_recv();
        if (averaging_)
            complete_round();
        else
            release();
    }

    void apply(const T* grad) {
        const Range r = shard();
        if (r.size > 0)
            opt_.step(model_->parameters().subspan(r.offset, r.size), Span<const T>(grad, r.size));
        ++version_;
        ++stats_.updates;
    }

    // Bulk-synchronous round: when every unfinished worker has sent its gradient, average them (summed in
    // worker order, so the result does not depend on arrival order), apply one update, reply to all.
    void complete_round() {
        std::size_t count = 0;
        for (std::size_t v = 0; v < clock_.size(); ++v) {
            if (done_[v]) continue;
            if (!waiting_[v]) return;
            ++count;
        }
        if (count == 0) return;
        const std::size_t len = shard().size;
        T* acc = nullptr;
        for (std::size_t v = 0; v < clock_.size(); ++v) {
            if (!waiting_[v]) continue;
            T* g = recv_bufs_[std::size_t(held_[v])].data() + header_elems_;
            if (acc == nullptr)
                acc = g;
            else
                for (std::size_t j = 0; j < len; ++j)
                    acc[j] += g[j];
        }
        if (count > 1) {
            const T scale = T(1) / T(count);
            for (std::size_t j = 0; j < len; ++j)
                acc[j] *= scale;
        }
        apply(acc);
        for (std::size_t v = 0; v < clock_.size(); ++v) {
            if (!waiting_[v]) continue;
            post_grad_recv(std::size_t(held_[v]));
            held_[v] = -1;
            reply(v);
        }
    }

    // Stale synchronous parallel: reply to every waiting worker at most `staleness` steps ahead of the
    // slowest unfinished worker; the others stay withheld until it catches up.
    void release() {
        const std::uint64_t slowest = slowest_clock();
        for (std::size_t v = 0; v < clock_.size(); ++v) {
            if (!waiting_[v]) continue;
            if (clock_[v] - slowest <= options_.staleness) {
                reply(v);
            } else if (!counted_[v]) {
                counted_[v] = 1;
                ++stats_.withheld;
            }
        }
    }

    void reply(std::size_t w) {
        if (in_flight_[w]) DTRAIN_MPI_CHECK(MPI_Wait(&reply_req(w), MPI_STATUS_IGNORE));
        const Range r = shard();
        const T* p = model_->parameters().data() + r.offset;
        std::copy(p, p + r.size, reply_bufs_[w].begin());
        DTRAIN_MPI_CHECK(MPI_Isend(reply_bufs_[w].data(), int(r.size), mpi_type<T>(), masters_ + int(w),
                                   detail::async_tag_params, comm_.comm, &reply_req(w)));
        in_flight_[w] = 1;
        waiting_[w] = 0;
        counted_[w] = 0;
        read_version_[w] = version_;
        const std::uint64_t slowest = slowest_clock();
        stats_.max_staleness = std::max(stats_.max_staleness, clock_[w] - std::min(slowest, clock_[w]));
    }

    // ---- both ---------------------------------------------------------------------------------------

    // Every rank gets the parameters the masters hold (gather_to_all) or only rank 0 does.
    void share_parameters(bool root_only) {
        T* p = model_->parameters().data();
        const MPI_Datatype t = mpi_type<T>();
        if (!root_only) {
            DTRAIN_MPI_CHECK(
                MPI_Allgatherv(MPI_IN_PLACE, 0, t, p, counts_.data(), displs_.data(), t, comm_.comm));
            params_synced_ = true;
        } else if (rank_ == 0) {
            DTRAIN_MPI_CHECK(
                MPI_Gatherv(MPI_IN_PLACE, 0, t, p, counts_.data(), displs_.data(), t, 0, comm_.comm));
        } else {
            const Range r = shard();
            DTRAIN_MPI_CHECK(
                MPI_Gatherv(p + r.offset, int(r.size), t, nullptr, nullptr, nullptr, t, 0, comm_.comm));
        }
    }

    void finish(int failed, const std::exception_ptr& error) {
        int flag = failed ? rank_ + 1 : 0, worst = 0;
        DTRAIN_MPI_CHECK(MPI_Allreduce(&flag, &worst, 1, MPI_INT, MPI_MAX, comm_.comm));
        params_synced_ = false;
        share_parameters(!options_.gather_to_all);
        Span<T> state = model_->state();
        if (!state.empty()) {
            const MPI_Datatype t = mpi_type<T>();
            const T* contribution = is_worker() ? state.data() : zeros_.data();
            if (options_.gather_to_all) {
                if (!is_worker()) std::fill(state.begin(), state.end(), T(0));
                DTRAIN_MPI_CHECK(
                    MPI_Allreduce(MPI_IN_PLACE, state.data(), int(state.size()), t, MPI_SUM, comm_.comm));
            } else if (rank_ == 0) {
                std::fill(state.begin(), state.end(), T(0));
                DTRAIN_MPI_CHECK(
                    MPI_Reduce(MPI_IN_PLACE, state.data(), int(state.size()), t, MPI_SUM, 0, comm_.comm));
            } else {
                DTRAIN_MPI_CHECK(
                    MPI_Reduce(contribution, nullptr, int(state.size()), t, MPI_SUM, 0, comm_.comm));
            }
            if (options_.gather_to_all || rank_ == 0)
                for (auto& v : state)
                    v /= T(workers_);
        }
        if (error) std::rethrow_exception(error);
        DTRAIN_CHECK(worst == 0, "DistOptimizer<Async>::run: the worker loop threw on rank ", worst - 1);
    }

    Model<T>* model_;
    Opt opt_;
    DistOptions options_;
    detail::AsyncCommHandle comm_;
    detail::AsyncCommHandle worker_comm_;
    int rank_ = 0, size_ = 1, masters_ = 1, workers_ = 0;
    std::vector<Range> shards_;
    std::vector<int> counts_, displs_;
    bool averaging_ = false;
    bool params_synced_ = false;
    bool in_run_ = false;
    std::function<void(const AsyncStepInfo&)> callback_;
    AsyncStats stats_;
    double start_ = 0.0;
    std::vector<MPI_Request> reqs_;
    std::vector<T> zeros_;
    // worker
    std::vector<std::vector<T>> send_bufs_;
    std::uint64_t step_ = 0;
    std::size_t passes_ = 0;
    double loss_ = std::numeric_limits<double>::quiet_NaN();
    std::uint64_t samples_ = 0;
    // master
    std::vector<std::vector<T>> recv_bufs_, reply_bufs_;
    std::vector<std::uint64_t> clock_, read_version_;
    std::vector<int> held_;
    std::vector<char> done_, waiting_, counted_, in_flight_;
    std::uint64_t version_ = 0;
    std::uint64_t done_steps_ = 0;
    int active_ = 0;
    double delay_sum_ = 0.0;
};

}  // namespace dtrain

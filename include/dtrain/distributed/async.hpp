#pragma once

/// @file
/// The asynchronous (parameter-server) policy: DistOptimizer<Async, Opt>, a facade over async/: the protocol
/// (protocol.hpp), the master's role (parameter_server.hpp with its state machine in server_state.hpp), the
/// worker's role (worker.hpp) and the final gather (final_gather.hpp).

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <mpi.h>

#include <dtrain/core/comm_handle.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/distributed/async/final_gather.hpp>
#include <dtrain/distributed/async/parameter_server.hpp>
#include <dtrain/distributed/async/protocol.hpp>
#include <dtrain/distributed/async/worker.hpp>
#include <dtrain/distributed/detail/backward_passes.hpp>
#include <dtrain/distributed/detail/construction_checks.hpp>
#include <dtrain/distributed/detail/initial_state.hpp>
#include <dtrain/distributed/detail/nonfinite.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/distributed/options.hpp>
#include <dtrain/distributed/report.hpp>
#include <dtrain/distributed/sharding.hpp>
#include <dtrain/nn/model.hpp>
#include <dtrain/optim/adam.hpp>
#include <dtrain/optim/adamw.hpp>
#include <dtrain/optim/optimizer.hpp>
#include <dtrain/optim/sgd.hpp>

namespace dtrain {

/// Asynchronous data-parallel training with parameter servers (a Send/Recv master-worker design with one or
/// several masters, each owning a shard) and a Stale-Synchronous-Parallel staleness bound, behind the
/// interface of the synchronous DistOptimizer (the same training loop runs under every policy).
///
/// Roles: ranks 0 .. M-1 (M = options.masters) are masters, the W = size - M others workers (worker_rank()
/// = rank - M). Master m owns the contiguous range shards()[m] of the parameters and of the optimizer state
/// (options.sharding) and runs the optimizer on it.
///
/// run(loop): workers run `loop`; each step() sends every master its gradient slice (with the step number
/// and what report() recorded) and receives the fresh slice straight into the model, all masters
/// concurrently; workers may run different numbers of steps. Masters serve inside run(): they apply each
/// gradient as it arrives and reply unless its worker is more than options.staleness steps ahead of the
/// slowest unfinished worker (then the reply waits). With staleness 0 or options.average_rounds a master
/// averages one gradient of every unfinished worker (summed in worker order) into ONE update and replies to
/// all: bulk-synchronous training equal to synchronous averaging. Afterwards run() gathers the shards and
/// the workers' mean non-trainable state into rank 0's model (every rank's with gather_to_all).
///
/// As in the synchronous policies (so a seed gives the same initial model under every policy), the
/// constructor broadcasts parameters and state from options.root (each master takes its slice of root's
/// optimizer state, when root holds state for the whole model, and its step count), and step() sends the
/// mean of the accumulation_steps gradients. Learning-rate schedules advance once per WORKER step, i.e. once
/// per global round of W gradients as in a synchronous run over the same global batch: the gradient of a
/// worker's n-th step (its optimizer's steps(), so its optimizer().learning_rate() is the rate its next
/// gradient gets) is applied with the rate and the bias correction of step n; a master's
/// optimizer().steps() counts up to the last gradient it applied.
///
/// Errors: fewer than M + 1 ranks, M < 1, or ranks that differ in model, optimizer or options throw
/// dtrain::Error on every rank from the constructor. An exception from one worker's loop does not hang the
/// others: that worker leaves cleanly, run() completes everywhere and then throws on every rank. Not
/// copyable or movable (the model's hook refers to it).
///
/// @tparam Opt a model of the Optimizer concept (see optim/optimizer.hpp).
template <class Opt>
class DistOptimizer<Async, Opt> {
    static_assert(is_optimizer_v<Opt>, "DistOptimizer<Async, Opt>: Opt must model the Optimizer concept");

public:
    /// Element type of parameters and gradients.
    using value_type = typename Opt::value_type;
    /// The local optimizer type.
    using optimizer_type = Opt;
    /// The options type.
    using options_type = AsyncOptions;

private:
    using T = value_type;

public:
    /// Collective over `comm` (see the class comment); `model` must outlive this object.
    DistOptimizer(Model<T>& model, Opt opt, AsyncOptions options = {}, MPI_Comm comm = MPI_COMM_WORLD)
        : model_(&model),
          opt_(std::move(opt)),
          options_(options),
          comm_(detail::check_same_policy(comm, "Async", "DistOptimizer<Async>")) {
        OperationScope op("DistOptimizer<Async> constructor", comm_.get(), detail::no_step,
                          options_.stall_timeout);
        detail::check_same_setup(model, opt_, options_, "DistOptimizer<Async>", comm_.get());
        const int m = options_.masters, size = comm_.size();
        detail::check_options(options_, size);
        shards_ = plan_shards(model, std::size_t(m), options_.sharding);
        std::vector<Range> owned = shards_;  // the masters own their shards, the workers nothing
        owned.resize(static_cast<std::size_t>(size));
        gather_ = detail::AsyncFinalGather<T>(shards_, size, model.state().size());
        MPI_Comm split = MPI_COMM_NULL;
        DTRAIN_MPI_CHECK(MPI_Comm_split(comm_.get(), is_worker() ? 0 : MPI_UNDEFINED, rank(), &split));
        if (split != MPI_COMM_NULL) {
            worker_comm_ = detail::CommHandle(split);
            MPI_Comm_free(&split);
        }
        detail::share_initial_state(model, opt_, owned, options_.root, comm_.get());
        if (is_worker())
            worker_.emplace(comm_.get(), shards_);
        else
            server_.emplace(comm_.get(), rank(), m, size - m, shard().size, options_.staleness,
                            options_.staleness == 0 || options_.average_rounds);
        model_->set_grad_ready_hook([this](std::size_t layer) {
            if (layer == 0) ++passes_;
        });
    }

    /// Rejects, with a sentence instead of "no matching function", a model of another element type than
    /// the optimizer's.
    template <class U, class... Rest, class = std::enable_if_t<!std::is_same_v<U, T>>>
    DistOptimizer(Model<U>&, Opt, Rest&&...) {
        static_assert(std::is_same_v<U, T>,
                      "dtrain::DistOptimizer: the optimizer's value_type must be the model's element type "
                      "(e.g. Adam<float> with Model<float>, not Adam<double>)");
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

    /// Records this step's batch-mean `loss` over `samples` samples into reported() and attaches them to the
    /// next gradient message, for master 0's step callback. Optional. Workers only.
    void report(double loss, std::size_t samples) noexcept {
        reported_.add(loss, double(samples));
        loss_ = loss;
        samples_ = std::uint64_t(samples);
    }

    /// Worker, inside run(), after accumulation_steps backward passes: sends each master its gradient slice
    /// (divided by accumulation_steps) and receives the fresh parameter slice straight into the model.
    /// Throws dtrain::Error on a master, outside run(), or after another number of backward passes.
    void step() {
        DTRAIN_CHECK(is_worker() && in_run_,
                     "DistOptimizer<Async>::step: call it in the worker loop given to run(); rank ", rank(),
                     is_worker() ? " is outside run()" : " is a master");
        detail::check_step_passes("DistOptimizer<Async>::step", passes_, options_.accumulation_steps);
        passes_ = 0;
        OperationScope op("DistOptimizer<Async>::step", comm_.get(), step_, options_.stall_timeout);
        const detail::AsyncGradHeader h{step_, samples_, loss_, opt_.steps()};
        using Outcome = typename detail::AsyncWorker<T>::Outcome;
        const Outcome o =
            worker_->step(model_->gradients(), model_->parameters(), T(1) / T(options_.accumulation_steps), h,
                          stats_.wait_seconds, options_.nonfinite != NonFinite::Ignore);
        if (o == Outcome::Stopped) {
            stopped_ = true;
            throw Error(detail::concat("DistOptimizer<Async>::step: worker ", worker_rank(),
                                       " stops because another worker's loop failed"));
        }
        if (o == Outcome::NonFinite) {
            loss_ = std::numeric_limits<double>::quiet_NaN();
            samples_ = 0;
            if (options_.nonfinite == NonFinite::Skip) {
                ++skipped_;
                return;
            }
            throw Error(detail::async_nonfinite_message(*model_, worker_rank(), step_));
        }
        opt_.set_steps(opt_.steps() + 1);  // the masters applied it with the rate of this step
        ++step_;
        ++stats_.gradients;
        loss_ = std::numeric_limits<double>::quiet_NaN();
        samples_ = 0;
    }

    /// Collective over all ranks. Workers call `worker_loop()` and then tell the masters they are done;
    /// masters serve until every worker is done. Then the final parameters are gathered into rank 0's model
    /// (every rank's with gather_to_all) and the workers' mean non-trainable state into rank 0's. May be
    /// called again to train further. Throws on every rank when the loop threw on any worker.
    template <class Fn>
    void run(Fn&& worker_loop) {
        DTRAIN_CHECK(!in_run_, "DistOptimizer<Async>::run: run() is not reentrant");
        const double t0 = detail::async_now();
        stats_ = AsyncStats{};
        if (!params_synced_) {  // a second run() without gather_to_all: every rank needs the parameters
            OperationScope op("DistOptimizer<Async>::run (share parameters)", comm_.get(), detail::no_step,
                              options_.stall_timeout);
            share_parameters(false);
        }
        std::exception_ptr error;
        if (is_worker()) {
            in_run_ = true;
            step_ = 0;
            passes_ = 0;
            stopped_ = false;
            worker_->start_run();
            try {
                worker_loop();
            } catch (...) {
                error = std::current_exception();
            }
            in_run_ = false;
            OperationScope op("DistOptimizer<Async>::run (end)", comm_.get(), step_, options_.stall_timeout);
            if (error && !stopped_) worker_->send_failed();  // master 0 stops the others right away
            worker_->send_done(step_);
        } else {
            const Range r = shard();
            server_->serve(model_->parameters().subspan(r.offset, r.size), opt_, stats_,
                           rank() == 0 ? callback_ : nullptr, t0);
        }
        finish(error);
        stats_.seconds = detail::async_now() - t0;
    }

    /// Installs a callback that rank 0 (master 0) calls for every gradient it receives during run(), with
    /// the worker, its step, reported loss and samples and the observed staleness. Ignored on other ranks.
    /// It runs inside the serve loop: keep it short.
    void set_step_callback(std::function<void(const AsyncStepInfo&)> callback) {
        callback_ = std::move(callback);
    }

    /// True on a worker while it runs the loop given to run().
    bool in_run() const noexcept { return in_run_; }
    /// True on workers (ranks >= masters).
    bool is_worker() const noexcept { return rank() >= options_.masters; }
    /// True on masters (ranks < masters).
    bool is_master() const noexcept { return !is_worker(); }
    /// This worker's index in [0, num_workers()), or -1 on a master.
    int worker_rank() const noexcept { return is_worker() ? rank() - options_.masters : -1; }
    /// Number of workers W = size() - masters.
    int num_workers() const noexcept { return size() - options_.masters; }
    /// Number of masters M.
    int num_masters() const noexcept { return options_.masters; }
    /// This rank in the communicator.
    int rank() const noexcept { return comm_.rank(); }
    /// Number of ranks in the communicator.
    int size() const noexcept { return comm_.size(); }
    /// A communicator of the workers only (MPI_COMM_NULL on masters), for metrics.
    MPI_Comm worker_comm() const noexcept { return worker_comm_.get(); }
    /// The private communicator (a duplicate of the one given) the protocol runs on.
    MPI_Comm mpi_comm() const noexcept { return comm_.get(); }
    /// The wrapped optimizer; on a master its state covers that master's shard only.
    Opt& optimizer() noexcept { return opt_; }
    /// The model.
    Model<T>& model() noexcept { return *model_; }
    /// Range of the flat parameter buffer owned by each master, in master order.
    const std::vector<Range>& shards() const noexcept { return shards_; }
    /// This master's range (an empty range on workers).
    Range shard() const noexcept { return is_master() ? shards_[std::size_t(rank())] : Range{}; }
    /// Counters of this rank's part in the last run().
    const AsyncStats& stats() const noexcept { return stats_; }
    /// The options in use.
    const AsyncOptions& options() const noexcept { return options_; }
    /// This worker's reports since the last reset_report().
    const Reported& reported() const noexcept { return reported_; }
    /// Steps skipped because their gradient was not finite (options.nonfinite = NonFinite::Skip).
    std::uint64_t skipped_steps() const noexcept { return skipped_; }
    /// Clears reported().
    void reset_report() noexcept { reported_ = Reported{}; }

    /// Sum of `x` over the workers (collective over the workers; call it on workers only, e.g. per epoch).
    double global_sum(double x) {
        DTRAIN_CHECK(is_worker(), "DistOptimizer<Async>::global_sum: rank ", rank(),
                     " is a master; call it from the worker loop");
        OperationScope op("DistOptimizer<Async>::global_sum", worker_comm_.get(), detail::no_step,
                          options_.stall_timeout);
        return detail::allreduce_value(x, MPI_SUM, worker_comm_.get());
    }
    /// Mean of `x` over the workers (same rules as global_sum).
    double global_mean(double x) { return global_sum(x) / double(num_workers()); }

private:
    // Every rank gets the parameters the masters hold or only rank 0 does.
    void share_parameters(bool root_only) {
        gather_.parameters(model_->parameters().data(), !root_only, rank(), shard(), comm_.get());
        if (!root_only) params_synced_ = true;
    }

    // After the loop: agree on the first worker whose loop failed (not merely stopped) and its message,
    // assemble the parameters and the mean state, then rethrow.
    void finish(const std::exception_ptr& error) {
        OperationScope op("DistOptimizer<Async>::run (end)", comm_.get(), detail::no_step,
                          options_.stall_timeout);
        const bool origin = error && !stopped_;
        const int first = detail::allreduce_value(origin ? rank() : size(), MPI_MIN, comm_.get());
        std::vector<char> stop_sent(static_cast<std::size_t>(num_workers()), 0);
        if (first < size()) {
            if (rank() == 0) stop_sent = server_->stop_sent();
            DTRAIN_MPI_CHECK(MPI_Bcast(stop_sent.data(), num_workers(), MPI_CHAR, 0, comm_.get()));
            if (rank() == first) first_message_ = detail::exception_message(error);
            detail::broadcast_string(first_message_, first, comm_.get());
        }
        if (is_worker()) worker_->end_run(stop_sent[std::size_t(worker_rank())] != 0);
        params_synced_ = false;
        share_parameters(!options_.gather_to_all);
        gather_.mean_state(model_->state(), options_.gather_to_all, is_worker(), rank(), num_workers(),
                           comm_.get());
        if (first == size()) return;
        if (rank() == first) std::rethrow_exception(error);
        throw Error(detail::concat("DistOptimizer<Async>::run: the worker loop threw on rank ", first, ": ",
                                   first_message_));
    }

    Model<T>* model_;
    Opt opt_;
    AsyncOptions options_;
    detail::CommHandle comm_;
    detail::CommHandle worker_comm_;
    std::vector<Range> shards_;
    std::optional<detail::AsyncWorker<T>> worker_;        // on workers
    std::optional<detail::ParameterServer<Opt>> server_;  // on masters
    detail::AsyncFinalGather<T> gather_;
    std::function<void(const AsyncStepInfo&)> callback_;
    AsyncStats stats_;
    Reported reported_;
    bool params_synced_ = true;
    bool stopped_ = false;  // this worker's loop ended because master 0 said stop
    std::uint64_t skipped_ = 0;
    std::string first_message_;
    bool in_run_ = false;
    std::uint64_t step_ = 0;
    std::size_t passes_ = 0;
    double loss_ = std::numeric_limits<double>::quiet_NaN();
    std::uint64_t samples_ = 0;
};

DTRAIN_PRECOMPILED_INSTANCE(class DistOptimizer<Async, SGD<float>>)  // (core/precompiled.hpp)
DTRAIN_PRECOMPILED_INSTANCE(class DistOptimizer<Async, Adam<float>>)
DTRAIN_PRECOMPILED_INSTANCE(class DistOptimizer<Async, AdamW<float>>)

}  // namespace dtrain

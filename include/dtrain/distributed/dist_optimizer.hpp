#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <mpi.h>

#include <dtrain/comm/communicator.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/hash.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/node.hpp>
#include <dtrain/core/operation.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/distributed/bucket.hpp>
#include <dtrain/distributed/comm_hook.hpp>
#include <dtrain/distributed/compression_hook.hpp>
#include <dtrain/distributed/detail/backward_passes.hpp>
#include <dtrain/distributed/detail/construction_checks.hpp>
#include <dtrain/distributed/detail/hooked_comm.hpp>
#include <dtrain/distributed/detail/initial_state.hpp>
#include <dtrain/distributed/detail/nonfinite.hpp>
#include <dtrain/distributed/detail/reduction_round.hpp>
#include <dtrain/distributed/detail/state_sync.hpp>
#include <dtrain/distributed/options.hpp>
#include <dtrain/distributed/progress_thread.hpp>
#include <dtrain/distributed/report.hpp>
#include <dtrain/nn/model.hpp>
#include <dtrain/optim/optimizer.hpp>
#include <dtrain/util/timeline.hpp>

namespace dtrain {

/// Data-parallel training: wraps a local optimizer `Opt` (SGD, Adam, or any model of the Optimizer concept,
/// optim/optimizer.hpp) and a communicator policy `Comm` (Collective, Ring, Naive, or any model of the
/// Communicator concept, comm/communicator.hpp). This primary template implements the SYNCHRONOUS policies:
/// every rank is a worker; step() averages the gradients over all ranks and applies the local optimizer, so
/// all ranks hold bitwise-identical parameters after every step. DistOptimizer<Async, Opt>
/// (distributed/async.hpp) has the same interface, so one training loop, `opt.run([&] { ... opt.zero_grad();
/// model.backward(...); opt.step(); ... })` as in the README's 20-line program, runs under every policy.
///
/// Gradients are reduced in buckets of about options.bucket_bytes, last layer first (make_buckets()). With
/// options.overlap (default) a bucket's nonblocking reduction starts during backward() as soon as its
/// gradients are final (the constructor installs the model's grad-ready hook and, with bucket_bytes > 0, its
/// partial-gradient hook, replacing the user's), a BucketSchedule keeps the round and a ProgressThread
/// advances it while the main thread computes (see progress_thread_enabled()); with an optimizer that has
/// the range form (has_step_range_v), step() then updates bucket by bucket while the next reduction is in
/// flight, bitwise one Opt::step(). Without overlap, step() reduces the buckets one after the other.
///
/// Each bucket is summed by the communication hook (comm_hook.hpp): the one options.compression selects
/// (CompressionHook: the plain all-reduce; fp16 or bf16 with fp32 accumulation, or top-k with error
/// feedback, at every rank count), or one installed by register_comm_hook(). Its sum is averaged and checked.
///
/// Gradient accumulation (options.accumulation_steps = k, DDP's no_sync): k backward passes, then one
/// step(), which divides by size() * k; it throws dtrain::Error after another number of passes. Model state
/// (BatchNorm statistics) follows options.state_sync after every step. With one rank, k = 1 and the plain
/// all-reduce nothing is communicated or scaled; nothing allocates in step() after the first. Not copyable
/// or movable (the model's hooks refer to it); must not outlive the model.
///
/// @tparam Comm a communicator policy (is_communicator_v<Comm>).
/// @tparam Opt a local optimizer (is_optimizer_v<Opt>) whose value_type is the model's element type.
template <class Comm, class Opt>
class DistOptimizer {
    static_assert(is_communicator_v<Comm>,
                  "dtrain::DistOptimizer<Comm, Opt>: Comm must model the Communicator concept (see "
                  "comm/communicator.hpp) or have its own DistOptimizer specialisation (like Async)");
    static_assert(is_optimizer_v<Opt>,
                  "dtrain::DistOptimizer<Comm, Opt>: Opt must model the Optimizer concept (see "
                  "optim/optimizer.hpp)");

public:
    /// Element type of parameters and gradients.
    using value_type = typename Opt::value_type;
    /// The communicator policy.
    using comm_type = Comm;
    /// The local optimizer type.
    using optimizer_type = Opt;
    /// The options type.
    using options_type = SyncOptions;

    /// Collective over `comm`. Checks that every rank has the same model (layers, sizes), optimizer (kind,
    /// hyper-parameters, state slots) and options, otherwise throws dtrain::Error on EVERY rank naming the
    /// first difference ("layer 3 is Dense(4, 8) (40 parameters) on rank 0 but Dense(4, 9) ... on rank 1");
    /// also throws when accumulation_steps is 0 or root is not a rank. Then broadcasts from options.root
    /// the parameters, model state and optimizer state and step count (the optimizer is reset() to the
    /// model's size first unless root's already holds state of that size, e.g. restored from a checkpoint),
    /// and builds the gradient buckets.
    DistOptimizer(Model<value_type>& model, Opt opt, SyncOptions options = {}, MPI_Comm comm = MPI_COMM_WORLD)
        : model_(model),
          opt_(std::move(opt)),
          options_(options),
          comm_(detail::check_same_policy(comm, detail::comm_policy_name<Comm>::get(), "DistOptimizer")),
          round_(comm_, hook_, model_) {
        OperationScope op("DistOptimizer constructor", comm_.mpi_comm(), detail::no_step,
                          options_.stall_timeout);
        detail::check_same_setup(model_, opt_, options_, "DistOptimizer", comm_.mpi_comm());
        detail::check_options(options_, comm_.size());
        // Every later call is fixed by the model and options just compared, so the communicator's
        // per-call agreement check would only cost time (collective: every rank gets here).
        if constexpr (has_collective_checks_v<Comm>) comm_.set_collective_checks(false);
        const Range whole{0, model_.num_parameters()};
        detail::share_initial_state(model_, opt_, std::vector<Range>(std::size_t(comm_.size()), whole),
                                    options_.root, comm_.mpi_comm());

        round_.set_buckets(
            make_buckets(model_.parameter_ranges(), options_.bucket_bytes, sizeof(value_type)));
        const double denom = double(comm_.size()) * double(options_.accumulation_steps);
        scale_ = value_type(1.0 / denom);
        const bool overlapping = options_.overlap && comm_.size() > 1;
        const bool progress = overlapping && round_.schedule().size() > 1 &&
                              progress_thread_enabled(detail::node_local_size(comm_.mpi_comm()));
        hook_.install(CompressionHook<value_type>(options_.compression, options_.topk_ratio),
                      round_.schedule().buckets(), model_.num_parameters(), comm_, overlapping);
        passes_ = detail::BackwardPasses(options_.accumulation_steps, overlapping, model_.num_parameters());
        // Large layers report their gradient in quarters of a bucket, so a bucket (or a piece of a split
        // layer) can start its reduction before the layer's backward() has finished.
        const std::size_t chunk =
            overlapping && options_.bucket_bytes > 0
                ? std::max<std::size_t>(1, options_.bucket_bytes / sizeof(value_type) / 4)
                : 0;
        // Nothing below throws before the hooks are in place, except starting the thread (undone then).
        detail::hook_backward_passes(model_, passes_, chunk,
                                     [this](std::size_t from) { round_.launch_ready(from); });
        if (progress) {
            try {
                round_.start_progress();
            } catch (...) {
                remove_hooks();
                throw;
            }
        }
    }

    /// Rejects, with a sentence instead of "no matching function", a model of another element type than
    /// the optimizer's.
    template <class U, class... Rest, class = std::enable_if_t<!std::is_same_v<U, value_type>>>
    DistOptimizer(Model<U>&, Opt, Rest&&...) {
        static_assert(std::is_same_v<U, value_type>,
                      "dtrain::DistOptimizer: the optimizer's value_type must be the model's element type "
                      "(e.g. Adam<float> with Model<float>, not Adam<double>)");
    }

    DistOptimizer(const DistOptimizer&) = delete;
    DistOptimizer& operator=(const DistOptimizer&) = delete;

    /// Stops the progress thread and removes the model's hooks; reductions still in flight are completed by
    /// their requests' destructors (as the communicator defines).
    ~DistOptimizer() {
        round_.progress().stop();
        remove_hooks();
    }

    /// Zeroes the model's gradients and restarts the backward-pass count; completes (and discards)
    /// reductions that a previous backward() started without a step().
    void zero_grad() {
        OperationScope op("DistOptimizer::zero_grad", comm_.mpi_comm(), opt_.steps(), options_.stall_timeout);
        round_.drain();
        model_.zero_grad();
        passes_.restart();
    }

    /// Records this step's batch-mean `loss` over `samples` samples into reported() (per-epoch metrics; the
    /// same under every policy). Optional.
    void report(double loss, std::size_t samples) noexcept { reported_.add(loss, double(samples)); }

    /// After accumulation_steps backward passes: averages the gradients over all ranks (completing the
    /// reductions started during backward, reducing the rest), applies the local optimizer and syncs the
    /// model state (see the class comment). Throws dtrain::Error after another number of backward passes.
    void step() {
        passes_.check_step("DistOptimizer::step");
        OperationScope op("DistOptimizer::step", comm_.mpi_comm(), opt_.steps(), options_.stall_timeout);
        Span<value_type> grads = model_.gradients(), params = model_.parameters();
        const bool multi = comm_.size() > 1, reduce = multi || !hook_.plain();
        auto w = round_.wire();
        typename Round::Schedule& schedule = round_.schedule();
        std::unique_lock<std::mutex> lock(round_.mutex());
        round_.progress().rethrow_error();
        // Pipelined updates cannot be taken back, so skipping non-finite steps checks every bucket first.
        const bool pipelined =
            has_step_range_v<Opt> && multi && options_.overlap && options_.nonfinite != NonFinite::Skip;
        const bool check = options_.nonfinite != NonFinite::Ignore;
        std::size_t bad = schedule.size();  // first bucket holding a NaN or an infinity
        for (std::size_t b = 0; b < schedule.size(); ++b) {
            const Bucket& k = schedule.buckets()[b];
            Span<value_type> g = grads.subspan(k.offset, k.size);
            if (pipelined) {  // keep the next bucket's reduction in flight while this one is updated
                if (schedule.launch_until(w, grads, b + 2)) round_.progress().notify();
            }
            if (multi && b < schedule.launched()) {
                schedule.complete(w, b);
                hook_->finish(GradBucket<value_type>{g, b, k});
            } else if (reduce) {
                TimelineScope scope("allreduce", "comm", "bucket", std::int64_t(b));
                hook_->reduce(comm_, GradBucket<value_type>{g, b, k});
            }
            if (!pipelined) {
                if (!detail::scale_and_check(g.data(), g.size(), scale_, check) && bad == schedule.size())
                    bad = b;
                continue;
            }
            lock.unlock();
            if (!detail::scale_and_check(g.data(), g.size(), scale_, check))
                nonfinite(k);  // identical on every rank
            if constexpr (has_step_range_v<Opt>) {
                TimelineScope scope("optimizer step", "optim", "bucket", std::int64_t(b));
                opt_.step_range(params.subspan(k.offset, k.size), Span<const value_type>(g.data(), g.size()),
                                k.offset);
            }
            lock.lock();
            round_.progress().rethrow_error();
        }
        schedule.end_round();
        lock.unlock();
        passes_.end_step();
        if constexpr (has_step_range_v<Opt>) {
            if (pipelined) opt_.finish_step();
        }
        if (!pipelined && bad < schedule.size()) {
            if (options_.nonfinite == NonFinite::Stop) nonfinite(schedule.buckets()[bad]);
            ++skipped_;  // the hook's state (top-k residuals) stays that of the last applied step
        } else {
            if (!pipelined) {
                TimelineScope scope("optimizer step", "optim");
                opt_.step(params, Span<const value_type>(grads.data(), grads.size()));
            }
            hook_->commit();
        }
        if (multi) detail::sync_model_state(comm_, model_.state(), options_.state_sync, options_.root);
    }

    /// Runs `worker_loop()` (every rank is a worker for the synchronous policies), then checks collectively
    /// that every rank holds bitwise-identical parameters, throwing dtrain::Error on every rank otherwise.
    template <class Fn>
    void run(Fn&& worker_loop) {
        std::forward<Fn>(worker_loop)();
        OperationScope op("DistOptimizer::run (end)", comm_.mpi_comm(), opt_.steps(), options_.stall_timeout);
        round_.drain();
        auto p = model_.parameters();
        DTRAIN_CHECK(
            detail::same_everywhere(detail::fnv1a(p.data(), p.size() * sizeof(value_type)), comm_.mpi_comm()),
            "DistOptimizer::run: the parameters differ across ranks after training");
    }

    /// Always true: every rank is a worker.
    bool is_worker() const noexcept { return true; }
    /// This rank among the workers (= rank()).
    int worker_rank() const noexcept { return comm_.rank(); }
    /// Number of workers (= size()).
    int num_workers() const noexcept { return comm_.size(); }
    /// This rank in the communicator.
    int rank() const noexcept { return comm_.rank(); }
    /// Number of ranks.
    int size() const noexcept { return comm_.size(); }
    /// The communicator of the workers (all ranks), for metrics.
    MPI_Comm worker_comm() const noexcept { return comm_.mpi_comm(); }
    /// The communicator policy.
    Comm& comm() noexcept { return comm_; }
    /// The local optimizer.
    Opt& optimizer() noexcept { return opt_; }
    /// The wrapped model.
    Model<value_type>& model() noexcept { return model_; }
    /// The options.
    const SyncOptions& options() const noexcept { return options_; }
    /// The gradient buckets, in reduction order (bucket 0 holds the last layers).
    const std::vector<Bucket>& buckets() const noexcept { return round_.schedule().buckets(); }
    /// The built-in hook's compressor with its top-k residuals (an idle None one under another hook type).
    GradientCompressor<value_type>& compressor() noexcept { return hook_.compressor(); }
    /// The hook if it is a Hook (CompressionHook<value_type> unless another was registered), else nullptr.
    template <class Hook>
    Hook* comm_hook() noexcept {
        return hook_.template get<Hook>();
    }
    /// The hook's describe(), which checkpoints store and compare ("none", "fp16", "topk(ratio=0.01)", ...).
    std::string comm_hook_description() const { return hook_->describe(); }
    /// This rank's state of the hook (top-k residuals; empty for a stateless one), saved by checkpoints.
    Span<value_type> comm_hook_state() { return hook_->state(); }

    /// Replaces the communication hook that sums each bucket (is_comm_hook_v, comm_hook.hpp) and returns it;
    /// overlap, averaging and the non-finite check stay. Collective, between steps: throws dtrain::Error on
    /// every rank after a backward pass without a step, or when describe() differs across ranks.
    template <class Hook>
    Hook& register_comm_hook(Hook hook) {
        return hook_.replace(std::move(hook), passes_.passes() + round_.schedule().launched(), options_,
                             opt_.steps(), round_.mutex(), round_.schedule().buckets(),
                             model_.num_parameters(), comm_);
    }
    /// True if this DistOptimizer runs a progress thread (see the class comment).
    bool progress_thread() const noexcept { return round_.progress().running(); }
    /// This rank's reports since the last reset_report().
    const Reported& reported() const noexcept { return reported_; }
    /// Steps skipped because their gradient was not finite (options.nonfinite = NonFinite::Skip).
    std::uint64_t skipped_steps() const noexcept { return skipped_; }
    /// Clears reported() (e.g. at the start of an epoch).
    void reset_report() noexcept { reported_ = Reported{}; }

    /// Sum of `x` over all workers (e.g. a loss or a count of correct predictions). Collective.
    double global_sum(double x) {
        OperationScope op("DistOptimizer::global_sum", comm_.mpi_comm(), detail::no_step,
                          options_.stall_timeout);
        return detail::allreduce_value(x, MPI_SUM, comm_.mpi_comm());
    }
    /// Mean of `x` over all workers. Collective.
    double global_mean(double x) { return global_sum(x) / double(comm_.size()); }

private:
    using Round = detail::ReductionRound<Comm, value_type>;

    void remove_hooks() noexcept {
        model_.set_grad_ready_hook(nullptr);
        model_.set_partial_grad_hook(nullptr, 0);
    }

    // Throws the error of a non-finite gradient in bucket `k`, naming the step, the value and the layer.
    [[noreturn]] void nonfinite(const Bucket& k) {
        throw Error(detail::nonfinite_step_message(model_, k.offset, k.size, opt_.steps(), comm_.size(),
                                                   hook_->nonfinite_hint()));
    }

    Model<value_type>& model_;
    Opt opt_;
    SyncOptions options_;
    Comm comm_;
    detail::BackwardPasses passes_;
    detail::CommHookSlot<Comm, value_type> hook_;  // declared before the requests on its wire buffers
    Round round_;  // the buckets' reductions and the progress thread, declared after the hook they run
    Reported reported_;
    value_type scale_ = value_type(1);  // 1 / (size() * accumulation_steps)
    std::uint64_t skipped_ = 0;
};

}  // namespace dtrain

#include <dtrain/distributed/precompiled_optimizers.hpp>  // its instances of dtrain::precompiled

#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <mpi.h>
#if defined(__linux__)
#include <sched.h>
#endif

#include <dtrain/comm/communicator.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/distributed/bucket.hpp>
#include <dtrain/distributed/options.hpp>
#include <dtrain/nn/model.hpp>
#include <dtrain/optim/optimizer.hpp>
#include <dtrain/util/timeline.hpp>

namespace dtrain {

namespace detail {

/// FNV-1a hash of `n` bytes, continuing from `h`.
inline std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h = 14695981039346656037ull) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

/// Hash of a model's layer layout (every layer's parameter and state range).
template <class T>
std::uint64_t layout_hash(const Model<T>& model) {
    std::uint64_t h = fnv1a(nullptr, 0);
    for (const auto* v : {&model.parameter_ranges(), &model.state_ranges()}) {
        for (const Range& r : *v) {
            const std::uint64_t a[2] = {r.offset, r.size};
            h = fnv1a(a, sizeof a, h);
        }
    }
    return h;
}

/// Sum of `x` over the ranks of `comm` (MPI_Allreduce of one double). Collective.
inline double allreduce_double(double x, MPI_Comm comm) {
    double r = 0.0;
    DTRAIN_MPI_CHECK(MPI_Allreduce(&x, &r, 1, MPI_DOUBLE, MPI_SUM, comm));
    return r;
}

/// Interval between two test() calls of DistOptimizer's progress thread.
inline constexpr int progress_poll_us = 20;

/// Number of CPUs this process may run on (its affinity mask on Linux, else the hardware's count; >= 1).
inline int available_cpus() {
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
#endif
    return std::max(1, int(std::thread::hardware_concurrency()));
}

/// Whether DistOptimizer starts its progress thread, from the environment variable DTRAIN_PROGRESS_THREAD:
/// "1" = yes, "0" = no, unset or "auto" = only when this process may use at least two CPUs per rank on its
/// node (`local_ranks` = ranks sharing the node), so the thread has a CPU of its own instead of taking
/// time from the computation it should overlap with. Always no unless MPI provides MPI_THREAD_MULTIPLE
/// (the thread calls MPI while the main thread may, too). Throws dtrain::Error on another value.
inline bool progress_thread_enabled(int local_ranks) {
    const char* env = std::getenv("DTRAIN_PROGRESS_THREAD");
    const std::string mode = env != nullptr ? env : "auto";
    DTRAIN_CHECK(mode == "0" || mode == "1" || mode == "auto",
                 "DistOptimizer: DTRAIN_PROGRESS_THREAD must be 0, 1 or auto, got '", mode, "'");
    int provided = MPI_THREAD_SINGLE;
    DTRAIN_MPI_CHECK(MPI_Query_thread(&provided));
    if (provided != MPI_THREAD_MULTIPLE || mode == "0") return false;
    return mode == "1" || available_cpus() >= 2 * local_ranks;
}

/// Number of ranks of `comm` on this rank's node (MPI_Comm_split_type with MPI_COMM_TYPE_SHARED).
/// Collective.
inline int node_local_size(MPI_Comm comm) {
    MPI_Comm local = MPI_COMM_NULL;
    DTRAIN_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local));
    int n = 1;
    const int rc = MPI_Comm_size(local, &n);
    MPI_Comm_free(&local);
    DTRAIN_MPI_CHECK(rc);
    return n;
}

}  // namespace detail

/// Data-parallel training: wraps a local optimizer `Opt` (SGD, Adam, or any model of the Optimizer concept,
/// see optim/optimizer.hpp) and a communicator policy `Comm` (Collective, Ring, Naive, or any model of the
/// Communicator concept, see comm/communicator.hpp). This primary template implements the SYNCHRONOUS
/// policies: every rank is a worker; step() averages the gradients over all ranks and then applies the
/// local optimizer to the whole flat parameter buffer, so all ranks hold bitwise-identical parameters after
/// every step. Policies that are not communicators (the asynchronous parameter server) specialise
/// DistOptimizer; the primary template rejects them with a static_assert.
///
/// The training loop (the same for every policy):
///
///     dtrain::DistOptimizer<dtrain::Ring, dtrain::SGD<float>> opt(model, dtrain::SGD<float>(...), options);
///     opt.run([&] {
///         for (...) {
///             opt.zero_grad();
///             for (k = 0; k < options.accumulation_steps; ++k) {   // usually 1
///                 model.forward(x_k); loss.compute(out, y_k, grad); model.backward(grad);
///             }
///             opt.step();
///         }
///     });
///
/// Gradient bucketing: gradients are reduced in buckets of about options.bucket_bytes built from whole
/// layers, last layer first, a layer larger than a bucket split into pieces of its own (see make_buckets());
/// each bucket is one contiguous range of the flat gradient buffer and costs ONE reduction call.
///
/// Overlap (options.overlap, default on): the constructor installs the model's grad-ready hook (replacing
/// any hook the user set). During backward(), as soon as every layer of a bucket is final, the bucket's
/// nonblocking reduction is started (Comm::iallreduce_sum); buckets that become final only at layer 0
/// (nothing left to overlap with) are left to step(). Outstanding
/// reductions are advanced by test() at every later hook call and, because MPI libraries such as MPICH only
/// move data inside MPI calls, by a progress thread that test()s them every few microseconds while the main
/// thread computes (started when there is more than one rank and bucket, MPI provides MPI_THREAD_MULTIPLE,
/// and either the node has at least two CPUs per rank or DTRAIN_PROGRESS_THREAD=1; DTRAIN_PROGRESS_THREAD=0
/// never starts it, see detail::progress_thread_enabled(); it sleeps while nothing is outstanding; on a
/// node with one CPU per rank it would only take time from the computation it should overlap with).
/// When `Opt` has the range form of the Optimizer concept (has_step_range_v: SGD, Adam, AdamW), step()
/// then also overlaps the optimizer with communication: bucket by bucket, it waits for the
/// bucket's reduction, starts the next bucket's if backward() did not, and updates the bucket's parameters
/// with Opt::step_range() while that next reduction is in flight (make_buckets() splits layers larger than
/// a bucket into pieces, so even a model whose largest layer is first gets a pipeline); the result is
/// bitwise that of one Opt::step(). Otherwise step() waits for every reduction, reducing the buckets not
/// yet started with the blocking call, then calls Opt::step(). Without overlap, step() reduces the buckets
/// one after the other with blocking calls, then calls Opt::step().
///
/// Gradient accumulation (options.accumulation_steps = k, PyTorch DDP's no_sync, Horovod's
/// backward_passes_per_step): call model.backward() k times (gradients add up locally, no communication),
/// then step() ONCE. Only the k-th backward pass starts reductions. step() divides the summed gradients by
/// size() * k, so with the usual batch-MEAN loss on each micro-batch the update equals one step on the
/// global batch of size() * k * batch samples: do NOT divide the loss by k yourself. step() throws
/// dtrain::Error unless exactly k backward passes ran since the last step() or zero_grad().
///
/// Non-trainable state (BatchNorm running statistics) is kept consistent at every step according to
/// options.state_sync: broadcast from options.root (default, like DDP's broadcast_buffers), averaged, or
/// left alone.
///
/// With one rank and k = 1 nothing is communicated or scaled: step() is the local optimizer's step.
/// Nothing allocates inside step() after the first one (given a communicator and optimizer that do not).
/// A DistOptimizer must not be copied or moved (the model's hook refers to it) and must not outlive the
/// model.
///
/// @tparam Comm a communicator policy (is_communicator_v<Comm>).
/// @tparam Opt a local optimizer (is_optimizer_v<Opt>); its value_type is the model's element type.
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

    /// Collective over `comm`. Checks that every rank has the same model layout (parameter and state
    /// counts, number of layers, per-layer ranges), the same optimizer state slots and the same options;
    /// otherwise throws dtrain::Error on EVERY rank naming rank 0's and the first differing rank's values.
    /// Then broadcasts from options.root the parameters, the model state and the optimizer's state and
    /// step count (the optimizer is reset() to the model's size first unless it already holds state of
    /// that size, e.g. restored from a checkpoint), and builds the gradient buckets. Also throws when
    /// accumulation_steps is 0 or root is not a rank.
    DistOptimizer(Model<value_type>& model, Opt opt, DistOptions options = {}, MPI_Comm comm = MPI_COMM_WORLD)
        : model_(model), opt_(std::move(opt)), options_(options), comm_(comm) {
        check_consistency();
        DTRAIN_CHECK(options_.accumulation_steps >= 1, "DistOptimizer: accumulation_steps must be >= 1, got ",
                     options_.accumulation_steps);
        detail::check_root("DistOptimizer", options_.root, comm_.size());
        broadcast_initial_state();

        buckets_ = make_buckets(model_.parameter_ranges(), options_.bucket_bytes, sizeof(value_type));
        requests_.resize(buckets_.size());
        done_.assign(buckets_.size(), 0);
        started_us_.assign(buckets_.size(), 0);
        finished_us_.assign(buckets_.size(), 0);
        const double denom = double(comm_.size()) * double(options_.accumulation_steps);
        scale_ = value_type(1.0 / denom);
        need_scale_ = denom != 1.0;
        const bool overlapping = options_.overlap && comm_.size() > 1;
        const bool progress = overlapping && buckets_.size() > 1 &&
                              detail::progress_thread_enabled(detail::node_local_size(comm_.mpi_comm()));
        if (overlapping) prewarm();
        // Nothing below throws before the hooks are in place, except starting the thread (undone then).
        model_.set_grad_ready_hook([this](std::size_t layer) { on_grad_ready(layer); });
        if (overlapping && options_.bucket_bytes > 0) {
            // Large layers report their gradient in quarters of a bucket, so a bucket (or a piece of a
            // split layer) can start its reduction before the layer's backward() has finished.
            const std::size_t chunk =
                std::max<std::size_t>(1, options_.bucket_bytes / sizeof(value_type) / 4);
            model_.set_partial_grad_hook([this](std::size_t layer, std::size_t begin,
                                                std::size_t end) { on_partial_grad(layer, begin, end); },
                                         chunk);
        }
        if (progress) {
            try {
                progress_ = std::thread([this] { progress_loop(); });
            } catch (...) {
                model_.set_grad_ready_hook(nullptr);
                model_.set_partial_grad_hook(nullptr, 0);
                throw;
            }
        }
    }

    DistOptimizer(const DistOptimizer&) = delete;
    DistOptimizer& operator=(const DistOptimizer&) = delete;
    DistOptimizer(DistOptimizer&&) = delete;
    DistOptimizer& operator=(DistOptimizer&&) = delete;

    /// Removes the model's grad-ready hook. Reductions still in flight are completed by the requests'
    /// destructors (as the communicator defines).
    ~DistOptimizer() {
        model_.set_grad_ready_hook(nullptr);
        model_.set_partial_grad_hook(nullptr, 0);
        if (progress_.joinable()) {
            {
                std::lock_guard<std::mutex> lock(mutex_);
                stop_ = true;
            }
            wake_.notify_one();
            progress_.join();
        }
    }

    /// Sets the model's gradients to zero and restarts the count of backward passes of this step. If the
    /// last backward pass of a step already started reductions (step() was not called), they are completed
    /// first and their result discarded. Collective in that case.
    void zero_grad() {
        drain();
        model_.zero_grad();
        passes_ = 0;
        in_pass_ = false;
    }

    /// One synchronous step: completes the reduction of every gradient bucket (waiting for those started
    /// during backward(), reducing the others now), divides the gradients by size() * accumulation_steps,
    /// applies the local optimizer to the whole parameter buffer (bucket by bucket, pipelined with the
    /// reductions, with overlap and an optimizer with the range form) and synchronises the model state.
    /// Requires exactly accumulation_steps backward passes since the last step() or zero_grad() (throws
    /// dtrain::Error otherwise, before communicating). Collective.
    void step() {
        DTRAIN_CHECK(passes_ == options_.accumulation_steps, "DistOptimizer::step: ", passes_,
                     " backward passes since the last step, but accumulation_steps is ",
                     options_.accumulation_steps, "; call step() once after every ",
                     options_.accumulation_steps, " model.backward() calls");
        Span<value_type> grads = model_.gradients();
        const bool multi = comm_.size() > 1;
        std::unique_lock<std::mutex> lock(mutex_);
        rethrow_progress_error();
        if constexpr (has_step_range_v<Opt>) {
            if (multi && options_.overlap) {
                step_pipelined(lock);
                lock.unlock();
                passes_ = 0;
                sync_state();
                return;
            }
        }
        for (std::size_t b = 0; b < buckets_.size(); ++b) {
            Span<value_type> g = grads.subspan(buckets_[b].offset, buckets_[b].size);
            if (multi) {
                if (b < launched_) {
                    complete(b);
                } else {
                    TimelineScope scope("allreduce", "comm", "bucket", std::int64_t(b));
                    comm_.allreduce_sum(g);
                }
            }
            scale(g);
        }
        end_round();
        lock.unlock();
        passes_ = 0;
        {
            TimelineScope scope("optimizer step", "optim");
            opt_.step(model_.parameters(), Span<const value_type>(grads.data(), grads.size()));
        }
        if (multi) sync_state();
    }

    /// Runs `worker_loop()` (every rank is a worker for the synchronous policies), then checks collectively
    /// that every rank holds bitwise-identical parameters, throwing dtrain::Error on every rank otherwise.
    template <class Fn>
    void run(Fn&& worker_loop) {
        std::forward<Fn>(worker_loop)();
        drain();
        auto p = model_.parameters();
        const std::uint64_t h = detail::fnv1a(p.data(), p.size() * sizeof(value_type));
        std::uint64_t mine[2] = {h, ~h}, all[2] = {0, 0};
        DTRAIN_MPI_CHECK(MPI_Allreduce(mine, all, 2, MPI_UINT64_T, MPI_MIN, comm_.mpi_comm()));
        DTRAIN_CHECK(all[0] == ~all[1],
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
    const DistOptions& options() const noexcept { return options_; }
    /// The gradient buckets, in reduction order (bucket 0 holds the last layers).
    const std::vector<Bucket>& buckets() const noexcept { return buckets_; }
    /// True if this DistOptimizer runs a progress thread (more than one rank and bucket, overlap, MPI
    /// provides MPI_THREAD_MULTIPLE, and DTRAIN_PROGRESS_THREAD=1 or, unset, enough CPUs per rank; see
    /// detail::progress_thread_enabled()).
    bool progress_thread() const noexcept { return progress_.joinable(); }

    /// Sum of `x` over all workers (e.g. a loss or a count of correct predictions). Collective.
    double global_sum(double x) { return detail::allreduce_double(x, comm_.mpi_comm()); }
    /// Mean of `x` over all workers. Collective.
    double global_mean(double x) { return global_sum(x) / double(comm_.size()); }

private:
    // The first gradient event of a backward pass: checks the pass count and decides whether this pass
    // (the last of the step) starts reductions.
    void begin_pass() {
        DTRAIN_CHECK(passes_ < options_.accumulation_steps, "DistOptimizer: backward pass ", passes_ + 1,
                     " since the last step, but accumulation_steps is ", options_.accumulation_steps,
                     "; call step() once after every ", options_.accumulation_steps,
                     " model.backward() calls");
        in_pass_ = true;
        communicating_ = options_.overlap && comm_.size() > 1 && passes_ + 1 == options_.accumulation_steps;
        ready_from_ = model_.num_parameters();
    }

    // Called by Model::backward() after layer `layer`'s gradients are final (last layer first).
    void on_grad_ready(std::size_t layer) {
        if (!in_pass_) begin_pass();
        // Buckets that become ready at layer 0 have no computation left to overlap with: step() reduces
        // them (pipelined with the optimizer, or with the often faster blocking call).
        if (communicating_) mark_ready(model_.parameter_ranges()[layer].offset, layer > 0);
        if (layer == 0) {
            ++passes_;
            in_pass_ = false;
            communicating_ = false;
        }
    }

    // Called by a layer's backward() with values [begin, end) of its slice final (end of the slice first).
    void on_partial_grad(std::size_t layer, std::size_t begin, std::size_t end) {
        if (!in_pass_) begin_pass();
        if (!communicating_) return;
        const std::size_t offset = model_.parameter_ranges()[layer].offset;
        if (offset + end == ready_from_) mark_ready(offset + begin, true);  // extends the final suffix
    }

    // Everything from `from` to the end of the flat gradient buffer is final: starts (if `launch_now`) the
    // reductions of the buckets inside it that have not started yet.
    void mark_ready(std::size_t from, bool launch_now) {
        ready_from_ = std::min(ready_from_, from);
        if (!launch_now) return;
        std::unique_lock<std::mutex> lock(mutex_);
        rethrow_progress_error();
        poll();
        const std::size_t before = launched_;
        while (launched_ < buckets_.size() && buckets_[launched_].offset >= ready_from_)
            launch(launched_++);
        if (launched_ != before) {
            lock.unlock();
            wake_.notify_one();
        }
    }

    // Sizes the communicator's reusable resources (the scratch buffers of Ring and Naive) for every bucket in
    // flight at once, the most that backward() and step() can have, by one nonblocking reduction of every
    // bucket of a zero buffer: which buckets overlap in time depends on timing, and steady-state steps must
    // never allocate. Collective.
    void prewarm() {
        std::vector<value_type> zeros(model_.num_parameters(), value_type(0));
        std::vector<std::optional<typename Comm::Request>> reqs(buckets_.size());
        for (std::size_t b = 0; b < buckets_.size(); ++b)
            reqs[b].emplace(
                comm_.iallreduce_sum(Span<value_type>(zeros.data() + buckets_[b].offset, buckets_[b].size)));
        for (auto& r : reqs)
            comm_.wait(*r);
    }

    // Divides reduced gradients by size() * accumulation_steps (nothing to do when that is 1).
    void scale(Span<value_type> g) const noexcept {
        if (!need_scale_) return;
        const value_type s = scale_;
        value_type* p = g.data();
        for (std::size_t i = 0, n = g.size(); i < n; ++i)
            p[i] *= s;
    }

    // Starts bucket b's nonblocking reduction; requires mutex_. The caller advances launched_.
    void launch(std::size_t b) {
        const Bucket& k = buckets_[b];
        started_us_[b] = timeline().now_us();
        requests_[b].emplace(comm_.iallreduce_sum(model_.gradients().subspan(k.offset, k.size)));
    }

    // step() with overlap and an optimizer with the range form: bucket by bucket, keeps the next bucket's
    // reduction in flight (starting it if backward() did not) while this bucket is waited for, scaled and
    // updated with step_range() outside the lock, so the progress thread advances the next reduction
    // meanwhile. Requires mutex_ (held through `lock`, released and re-acquired around each update).
    void step_pipelined(std::unique_lock<std::mutex>& lock) {
        Span<value_type> params = model_.parameters();
        Span<value_type> grads = model_.gradients();
        const std::size_t nb = buckets_.size();
        for (std::size_t b = 0; b < nb; ++b) {
            const std::size_t want = std::min(nb, b + 2);
            if (launched_ < want) {
                while (launched_ < want)
                    launch(launched_++);
                wake_.notify_one();
            }
            complete(b);
            lock.unlock();
            const Bucket& k = buckets_[b];
            Span<value_type> g = grads.subspan(k.offset, k.size);
            scale(g);
            {
                TimelineScope scope("optimizer step", "optim", "bucket", std::int64_t(b));
                opt_.step_range(params.subspan(k.offset, k.size), Span<const value_type>(g.data(), g.size()),
                                k.offset);
            }
            lock.lock();
            rethrow_progress_error();
        }
        opt_.finish_step();
        end_round();
    }

    // Completes bucket b's started reduction (waiting unless poll() already saw it finish), records it on
    // the timeline and releases its request; poll() skips it from now on. Requires mutex_.
    void complete(std::size_t b) {
        if (!done_[b]) {
            comm_.wait(*requests_[b]);
            finished_us_[b] = timeline().now_us();
            done_[b] = 1;
        }
        timeline().complete("allreduce", "comm", started_us_[b], finished_us_[b], "bucket", std::int64_t(b));
        requests_[b].reset();
    }

    // Forgets the reductions of the round just completed or drained; requires mutex_.
    void end_round() {
        std::fill(done_.begin(), done_.end(), char(0));
        launched_ = 0;
        first_pending_ = 0;
    }

    // Advances the outstanding reductions; requires mutex_.
    void poll() {
        for (std::size_t b = first_pending_; b < launched_; ++b) {
            if (!done_[b] && comm_.test(*requests_[b])) {
                done_[b] = 1;
                finished_us_[b] = timeline().now_us();
            }
        }
        while (first_pending_ < launched_ && done_[first_pending_])
            ++first_pending_;
    }

    // Rethrows (once) an exception the progress thread caught; requires mutex_.
    void rethrow_progress_error() {
        if (progress_error_) std::rethrow_exception(std::exchange(progress_error_, nullptr));
    }

    // The progress thread: while reductions are outstanding, test() them every few microseconds so they
    // advance while the main thread computes the remaining layers' gradients.
    void progress_loop() {
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            wake_.wait(lock, [this] { return stop_ || (first_pending_ < launched_ && !progress_error_); });
            if (stop_) return;
            try {
                poll();
            } catch (...) {
                progress_error_ = std::current_exception();
                continue;
            }
            if (first_pending_ < launched_) {
                lock.unlock();
                std::this_thread::sleep_for(std::chrono::microseconds(detail::progress_poll_us));
                lock.lock();
            }
        }
    }

    // Completes the reductions started during backward() (used when they will not be consumed by step()).
    void drain() {
        std::lock_guard<std::mutex> lock(mutex_);
        for (std::size_t b = 0; b < launched_; ++b) {
            if (!done_[b]) comm_.wait(*requests_[b]);
            requests_[b].reset();
        }
        end_round();
    }

    // Allgathers the layout and options of every rank and throws on every rank if any differ.
    void check_consistency() {
        constexpr std::size_t n = 11;
        const std::array<std::uint64_t, n> mine = {model_.num_parameters(),
                                                   model_.state().size(),
                                                   model_.num_layers(),
                                                   detail::layout_hash(model_),
                                                   opt_.state_slots(),
                                                   sizeof(value_type),
                                                   options_.bucket_bytes,
                                                   options_.overlap ? 1u : 0u,
                                                   options_.accumulation_steps,
                                                   std::uint64_t(options_.state_sync),
                                                   std::uint64_t(std::int64_t(options_.root))};
        std::vector<std::uint64_t> all(n * std::size_t(comm_.size()));
        DTRAIN_MPI_CHECK(MPI_Allgather(mine.data(), int(n), MPI_UINT64_T, all.data(), int(n), MPI_UINT64_T,
                                       comm_.mpi_comm()));
        auto describe = [&](int r) {
            const std::uint64_t* v = all.data() + n * std::size_t(r);
            return detail::concat("rank ", r, " has ", v[0], " parameters, ", v[1], " state values, ", v[2],
                                  " layers (layout hash ", v[3], "), ", v[4], " optimizer state slots, ",
                                  v[5], "-byte values");
        };
        auto describe_options = [&](int r) {
            const std::uint64_t* v = all.data() + n * std::size_t(r);
            return detail::concat("rank ", r, " has bucket_bytes ", v[6], ", overlap ", v[7],
                                  ", accumulation_steps ", v[8], ", state_sync ", v[9], ", root ",
                                  std::int64_t(v[10]));
        };
        for (int r = 1; r < comm_.size(); ++r) {
            const std::uint64_t* v = all.data() + n * std::size_t(r);
            DTRAIN_CHECK(std::equal(v, v + 6, all.data()),
                         "DistOptimizer: the model differs across ranks (every rank must build the same "
                         "model and optimizer): ",
                         describe(0), " but ", describe(r));
            DTRAIN_CHECK(std::equal(v + 6, v + n, all.data() + 6),
                         "DistOptimizer: the options differ across ranks: ", describe_options(0), " but ",
                         describe_options(r));
        }
    }

    // Broadcasts parameters, model state and optimizer state + step count from the root.
    void broadcast_initial_state() {
        const std::size_t n = model_.num_parameters();
        const std::size_t slots = opt_.state_slots();
        if (!(slots > 0 && opt_.state().size() == slots * n)) {
            const std::uint64_t steps = opt_.steps();
            opt_.reset(n);
            opt_.set_steps(steps);
        }
        if (comm_.size() == 1) return;
        if (n > 0) comm_.broadcast(model_.parameters(), options_.root);
        if (!model_.state().empty()) comm_.broadcast(model_.state(), options_.root);
        if (!opt_.state().empty()) comm_.broadcast(opt_.state(), options_.root);
        std::uint64_t steps = opt_.steps();
        DTRAIN_MPI_CHECK(MPI_Bcast(&steps, 1, MPI_UINT64_T, options_.root, comm_.mpi_comm()));
        opt_.set_steps(steps);
    }

    // Keeps the non-trainable model state consistent across ranks (options_.state_sync).
    void sync_state() {
        Span<value_type> s = model_.state();
        if (s.empty()) return;
        switch (options_.state_sync) {
            case StateSync::Broadcast:
                comm_.broadcast(s, options_.root);
                break;
            case StateSync::Average: {
                comm_.allreduce_sum(s);
                const value_type inv = value_type(1.0 / double(comm_.size()));
                for (auto& v : s)
                    v *= inv;
                break;
            }
            case StateSync::None:
                break;
        }
    }

    Model<value_type>& model_;
    Opt opt_;
    DistOptions options_;
    Comm comm_;
    std::vector<Bucket> buckets_;
    std::vector<std::optional<typename Comm::Request>> requests_;
    std::vector<std::int64_t> started_us_;   // timeline: when each bucket's nonblocking reduction started
    std::vector<std::int64_t> finished_us_;  // timeline: when it was seen complete
    std::vector<char> done_;                 // bucket's nonblocking reduction has completed
    std::size_t launched_ = 0;               // buckets [0, launched_) were started during backward
    std::size_t first_pending_ = 0;          // first started bucket not known to be complete
    std::size_t passes_ = 0;                 // backward passes since the last step / zero_grad
    bool communicating_ = false;             // the current backward pass starts reductions
    bool in_pass_ = false;                   // a backward pass has reported gradients and not finished
    std::size_t ready_from_ = 0;             // gradients [ready_from_, end) are final in this pass
    std::mutex mutex_;                       // guards comm_, requests_, done_, launched_, first_pending_
    std::condition_variable wake_;           // wakes the progress thread
    std::thread progress_;                   // progress thread (overlap with more than one rank and bucket)
    bool stop_ = false;                      // asks the progress thread to end
    std::exception_ptr progress_error_;
    value_type scale_ = value_type(1);
    bool need_scale_ = false;
};

}  // namespace dtrain

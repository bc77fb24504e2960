#pragma once

/// @file
/// The communication hook as the synchronous DistOptimizer holds it: AnyCommHook, the hook behind one
/// interface whatever its type (the optional members filled in with their defaults), and HookedComm, the
/// communicator as the BucketSchedule sees it (starting a bucket's reduction calls the hook).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include <mpi.h>

#include <dtrain/core/operation.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/distributed/bucket.hpp>
#include <dtrain/distributed/comm_hook.hpp>
#include <dtrain/distributed/compression_hook.hpp>
#include <dtrain/distributed/detail/replica_check.hpp>
#include <dtrain/distributed/options.hpp>

namespace dtrain::detail {

/// Whether Hook has setup(const CommHookContext&).
template <class Hook, class = void>
struct has_hook_setup : std::false_type {};
/// Specialisation that detects it.
template <class Hook>
struct has_hook_setup<
    Hook, std::void_t<decltype(std::declval<Hook&>().setup(std::declval<const CommHookContext&>()))>>
    : std::true_type {};

/// Whether Hook has check_communicator<Comm>().
template <class Hook, class Comm, class = void>
struct has_hook_check : std::false_type {};
/// Specialisation that detects it.
template <class Hook, class Comm>
struct has_hook_check<Hook, Comm,
                      std::void_t<decltype(std::declval<const Hook&>().template check_communicator<Comm>())>>
    : std::true_type {};

/// Whether Hook has prewarm(Comm&, std::size_t).
template <class Hook, class Comm, class = void>
struct has_hook_prewarm : std::false_type {};
/// Specialisation that detects it.
template <class Hook, class Comm>
struct has_hook_prewarm<
    Hook, Comm, std::void_t<decltype(std::declval<Hook&>().prewarm(std::declval<Comm&>(), std::size_t()))>>
    : std::true_type {};

/// Whether Hook has commit().
template <class Hook, class = void>
struct has_hook_commit : std::false_type {};
/// Specialisation that detects it.
template <class Hook>
struct has_hook_commit<Hook, std::void_t<decltype(std::declval<Hook&>().commit())>> : std::true_type {};

/// Whether Hook has state() convertible to Span<T>.
template <class Hook, class T, class = void>
struct has_hook_state : std::false_type {};
/// Specialisation that detects it.
template <class Hook, class T>
struct has_hook_state<Hook, T, std::void_t<decltype(Span<T>(std::declval<Hook&>().state()))>>
    : std::true_type {};

/// Whether Hook has nonfinite_hint().
template <class Hook, class = void>
struct has_hook_hint : std::false_type {};
/// Specialisation that detects it.
template <class Hook>
struct has_hook_hint<
    Hook, std::void_t<decltype(static_cast<const char*>(std::declval<const Hook&>().nonfinite_hint()))>>
    : std::true_type {};

/// A communication hook for communicator Comm and element type T behind one interface (type erasure).
/// Its Request is empty when the hook summed the bucket at once (the blocking form under overlap).
template <class Comm, class T>
class AnyCommHook {
public:
    /// A started bucket: the communicator's request, or nothing when the sum is already there.
    using Request = std::optional<typename Comm::Request>;
    virtual ~AnyCommHook() = default;
    /// The hook's setup() and its check_communicator<Comm>() (when it has them).
    virtual void setup(const CommHookContext& ctx) = 0;
    /// Starts bucket `b` (the blocking form: sums it and returns nothing).
    virtual Request start(Comm& comm, const GradBucket<T>& b) = 0;
    /// Writes the completed sum into b.grads (nothing for the blocking form).
    virtual void finish(const GradBucket<T>& b) = 0;
    /// Sums bucket `b` before returning.
    virtual void reduce(Comm& comm, const GradBucket<T>& b) = 0;
    /// The hook's prewarm() (nothing without one).
    virtual void prewarm(Comm& comm, std::size_t n) = 0;
    /// The hook's commit() (nothing without one).
    virtual void commit() = 0;
    /// The hook's describe().
    virtual std::string describe() const = 0;
    /// The hook's state() (empty without one).
    virtual Span<T> state() = 0;
    /// The hook's nonfinite_hint() ("" without one).
    virtual const char* nonfinite_hint() const = 0;
    /// The hook object if it is of type `type`, else nullptr.
    virtual void* target(const std::type_info& type) noexcept = 0;
};

/// AnyCommHook holding a hook of type Hook.
template <class Comm, class T, class Hook>
class CommHookModel final : public AnyCommHook<Comm, T> {
    static constexpr bool async = has_hook_start<Hook, Comm, T>::value;

public:
    using typename AnyCommHook<Comm, T>::Request;
    /// Holds `hook`.
    explicit CommHookModel(Hook hook) : hook_(std::move(hook)) {}
    void setup(const CommHookContext& ctx) override {
        if constexpr (has_hook_setup<Hook>::value) hook_.setup(ctx);
        if constexpr (has_hook_check<Hook, Comm>::value) hook_.template check_communicator<Comm>();
    }
    Request start(Comm& comm, const GradBucket<T>& b) override {
        if constexpr (async) {
            return Request(hook_.start(comm, b));
        } else {
            hook_.reduce(comm, b);
            return Request();
        }
    }
    void finish(const GradBucket<T>& b) override {
        if constexpr (async) hook_.finish(b);
    }
    void reduce(Comm& comm, const GradBucket<T>& b) override {
        if constexpr (has_hook_reduce<Hook, Comm, T>::value) {
            hook_.reduce(comm, b);
        } else {
            typename Comm::Request r = hook_.start(comm, b);
            comm.wait(r);
            hook_.finish(b);
        }
    }
    void prewarm(Comm& comm, std::size_t n) override {
        if constexpr (has_hook_prewarm<Hook, Comm>::value) hook_.prewarm(comm, n);
    }
    void commit() override {
        if constexpr (has_hook_commit<Hook>::value) hook_.commit();
    }
    std::string describe() const override { return std::string(hook_.describe()); }
    Span<T> state() override {
        if constexpr (has_hook_state<Hook, T>::value)
            return Span<T>(hook_.state());
        else
            return Span<T>();
    }
    const char* nonfinite_hint() const override {
        if constexpr (has_hook_hint<Hook>::value)
            return hook_.nonfinite_hint();
        else
            return "";
    }
    void* target(const std::type_info& type) noexcept override {
        return type == typeid(Hook) ? static_cast<void*>(&hook_) : nullptr;
    }

private:
    Hook hook_;
};

/// DistOptimizer::register_comm_hook()'s checks, collective over `comm`: throws dtrain::Error on every rank
/// when `busy` (backward passes or started buckets since the last step) or when the hooks' `description`
/// differs across ranks, naming rank `root`'s and the first differing one.
inline void check_hook_registration(const std::string& description, std::size_t busy, int root,
                                    MPI_Comm comm) {
    DTRAIN_CHECK(busy == 0,
                 "DistOptimizer::register_comm_hook: call it between steps, not after a backward "
                 "pass without a step");
    ReplicaFacts facts;
    add_fact(facts, "the communication hooks", "the hook", description);
    check_replicas(facts, "DistOptimizer::register_comm_hook",
                   "register the same hook with the same settings on every rank", root, comm);
}

/// The hook a DistOptimizer runs: set up for its buckets, prewarmed, and what the rest of it asks about it.
template <class Comm, class T>
class CommHookSlot {
public:
    /// Sets `hook` up for the `buckets` of a flat buffer of `n` values over `comm` (setup(),
    /// check_communicator<Comm>()), prewarms it when `prewarm` and there are several ranks (collective), and
    /// then makes it the hook; returns it. Throws what the hook throws, keeping the hook before.
    template <class Hook>
    Hook& install(Hook hook, const std::vector<Bucket>& buckets, std::size_t n, Comm& comm, bool prewarm) {
        auto next = std::make_unique<CommHookModel<Comm, T, Hook>>(std::move(hook));
        next->setup(CommHookContext{buckets, n, comm.rank(), comm.size()});
        if (prewarm && comm.size() > 1) next->prewarm(comm, n);
        bool plain = false;  // the plain all-reduce: nothing to do at one rank
        if constexpr (std::is_same_v<Hook, CompressionHook<T>>)
            plain = static_cast<Hook*>(next->target(typeid(Hook)))->setting() == Compression::None;
        hook_ = std::move(next);
        plain_ = plain;
        return *static_cast<Hook*>(hook_->target(typeid(Hook)));
    }
    /// DistOptimizer::register_comm_hook() at step `step` under `options`: check_hook_registration()
    /// (collective: `busy` backward passes or started buckets), then install() under `mutex`.
    template <class Hook>
    Hook& replace(Hook hook, std::size_t busy, const SyncOptions& options, std::uint64_t step,
                  std::mutex& mutex, const std::vector<Bucket>& buckets, std::size_t n, Comm& comm) {
        static_assert(
            is_comm_hook_v<Hook, Comm, T>,
            "dtrain::DistOptimizer::register_comm_hook: Hook needs describe() and start()/finish() or "
            "reduce() for this communicator and element type (see distributed/comm_hook.hpp)");
        OperationScope op("DistOptimizer::register_comm_hook", comm.mpi_comm(), step, options.stall_timeout);
        check_hook_registration(std::string(hook.describe()), busy, options.root, comm.mpi_comm());
        std::lock_guard<std::mutex> lock(mutex);
        return install(std::move(hook), buckets, n, comm, options.overlap);
    }
    /// The hook.
    AnyCommHook<Comm, T>& operator*() noexcept { return *hook_; }
    /// The hook.
    AnyCommHook<Comm, T>* operator->() noexcept { return hook_.get(); }
    /// See operator->().
    const AnyCommHook<Comm, T>* operator->() const noexcept { return hook_.get(); }
    /// True for the plain all-reduce, which leaves a single rank's gradient as it is.
    bool plain() const noexcept { return plain_; }
    /// The hook if it is of type Hook, else nullptr.
    template <class Hook>
    Hook* get() noexcept {
        return hook_ ? static_cast<Hook*>(hook_->target(typeid(Hook))) : nullptr;
    }
    /// The built-in hook's compressor, or an idle Compression::None one under a hook of another type.
    GradientCompressor<T>& compressor() noexcept {
        CompressionHook<T>* h = get<CompressionHook<T>>();
        return h ? h->compressor() : idle_;
    }

private:
    std::unique_ptr<AnyCommHook<Comm, T>> hook_;
    bool plain_ = true;
    GradientCompressor<T> idle_;
};

/// The communicator as BucketSchedule sees it: iallreduce_sum(range) starts the hook on the bucket `range`
/// of the flat gradient buffer `grads`; test() and wait() complete the communicator's request (at once for
/// a bucket the hook has summed already). A view of four references, made where it is used.
template <class Comm, class T>
class HookedComm {
public:
    /// The hook's request.
    using Request = typename AnyCommHook<Comm, T>::Request;
    /// A view of `comm` running `hook` on the `buckets` of `grads`.
    HookedComm(Comm& comm, AnyCommHook<Comm, T>& hook, const std::vector<Bucket>& buckets,
               Span<T> grads) noexcept
        : comm_(comm), hook_(hook), buckets_(buckets), grads_(grads) {}
    /// Starts the hook on bucket `range` of the gradients.
    Request iallreduce_sum(Span<T> range) {
        const std::size_t b =
            bucket_index(buckets_, std::size_t(range.data() - grads_.data()), range.size(), "DistOptimizer");
        return hook_.start(comm_, GradBucket<T>{range, b, buckets_[b]});
    }
    /// The communicator's test() (true for a bucket summed already).
    bool test(Request& r) { return !r || comm_.test(*r); }
    /// The communicator's wait().
    void wait(Request& r) {
        if (r) comm_.wait(*r);
    }

private:
    Comm& comm_;
    AnyCommHook<Comm, T>& hook_;
    const std::vector<Bucket>& buckets_;
    Span<T> grads_;
};

}  // namespace dtrain::detail

#pragma once

/// @file
/// Communication hooks of the synchronous DistOptimizer (PyTorch DDP's register_comm_hook): what a hook is
/// given for one gradient bucket (GradBucket), where it runs (CommHookContext), and the members a hook
/// type provides (is_comm_hook_v). DistOptimizer::register_comm_hook() installs one; the built-in hooks of
/// SyncOptions::compression are CompressionHook (distributed/compression_hook.hpp).

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/distributed/bucket.hpp>

namespace dtrain {

/// One gradient bucket as a communication hook sees it: a contiguous range of the model's flat gradient
/// buffer (make_buckets()). On entry `grads` holds this rank's gradient of the bucket (summed over the
/// accumulated backward passes); when the hook is done it must hold the SUM of that bucket over all ranks,
/// bitwise identical on every rank. DistOptimizer then divides by size() * accumulation_steps and checks
/// for non-finite values exactly as without a hook.
template <class T>
struct GradBucket {
    /// The bucket's values in the flat gradient buffer (this rank's on entry, the sum over ranks after).
    Span<T> grads;
    /// Position in reduction order (0 holds the last layers; DistOptimizer::buckets()[index] is `bucket`).
    std::size_t index = 0;
    /// Where the bucket lies in the flat buffer and which layers it covers.
    Bucket bucket;
};

/// Where a hook runs, given to its setup() when it is registered: the buckets in reduction order, the
/// length of the flat gradient buffer, this rank and the number of ranks.
struct CommHookContext {
    /// The buckets, in reduction order (DistOptimizer::buckets()).
    std::vector<Bucket> buckets;
    /// Length of the flat gradient buffer (Model::num_parameters()).
    std::size_t num_values = 0;
    /// This rank.
    int rank = 0;
    /// Number of ranks.
    int size = 1;
};

/// The members a communication hook `Hook` provides for element type T and communicator Comm, all called
/// by DistOptimizer on the thread that runs backward() and step() (never two at once; the progress thread
/// only tests the requests), in the same order on every rank:
///
/// | member | meaning |
/// |---|---|
/// | `std::string describe() const` | required: names the hook and its settings; checkpoints store it and refuse another, registration compares it across ranks |
/// | `typename Comm::Request start(Comm&, const GradBucket<T>&)` and `void finish(const GradBucket<T>&)` | the nonblocking form: start() starts the bucket's communication (e.g. `comm.iallreduce_sum(b.grads)`), DistOptimizer completes the request with the communicator's test()/wait(), then finish() writes the sum into `b.grads` (decode) |
/// | `void reduce(Comm&, const GradBucket<T>&)` | the blocking form: leaves the sum in `b.grads` before it returns |
/// | `void setup(const CommHookContext&)` | optional: allocates per-bucket buffers at registration |
/// | `template <class Comm> void check_communicator() const` | optional: throws dtrain::Error when Comm cannot carry the hook's wire |
/// | `void prewarm(Comm&, std::size_t n)` | optional: sizes the communicator's scratch for every bucket in flight at once (collective, outside a step), so steady-state steps do not allocate |
/// | `void commit()` | optional: the step's update was applied (state formed during the step, such as error-feedback residuals, becomes the state; a skipped or failed step does not call it) |
/// | `Span<T> state()` | optional: this rank's state, the same length on every rank, saved and restored by checkpoints |
/// | `const char* nonfinite_hint() const` | optional: what a non-finite averaged gradient may also come from under this hook |
///
/// A hook needs the nonblocking form, the blocking one, or both. With only the blocking form it also runs
/// with SyncOptions::overlap: a bucket's communication then happens where it would have started, inside
/// backward(). With only the nonblocking form, the blocking one is start() + wait() + finish(). `Comm` may
/// be a template parameter of the member functions, so one hook serves every communicator.
template <class Hook, class Comm, class T, class = void>
struct is_comm_hook : std::false_type {};

namespace detail {

/// Whether Hook has start() and finish() for (Comm, T).
template <class Hook, class Comm, class T, class = void>
struct has_hook_start : std::false_type {};

/// Specialisation that detects both and that start() returns Comm's Request.
template <class Hook, class Comm, class T>
struct has_hook_start<
    Hook, Comm, T,
    std::void_t<decltype(std::declval<Hook&>().start(std::declval<Comm&>(),
                                                     std::declval<const GradBucket<T>&>())),
                decltype(std::declval<Hook&>().finish(std::declval<const GradBucket<T>&>()))>>
    : std::is_same<decltype(std::declval<Hook&>().start(std::declval<Comm&>(),
                                                        std::declval<const GradBucket<T>&>())),
                   typename Comm::Request> {};

/// Whether Hook has the blocking reduce() for (Comm, T).
template <class Hook, class Comm, class T, class = void>
struct has_hook_reduce : std::false_type {};

/// Specialisation that detects it.
template <class Hook, class Comm, class T>
struct has_hook_reduce<Hook, Comm, T,
                       std::void_t<decltype(std::declval<Hook&>().reduce(
                           std::declval<Comm&>(), std::declval<const GradBucket<T>&>()))>> : std::true_type {
};

/// Whether Hook has describe() returning text.
template <class Hook, class = void>
struct has_hook_describe : std::false_type {};

/// Specialisation that detects it.
template <class Hook>
struct has_hook_describe<Hook, std::void_t<decltype(std::string(std::declval<const Hook&>().describe()))>>
    : std::true_type {};

/// The index of the bucket that starts at `offset` and holds `size` values, among `buckets` in reduction
/// order (descending offsets); throws dtrain::Error naming `who` when there is none.
inline std::size_t bucket_index(const std::vector<Bucket>& buckets, std::size_t offset, std::size_t size,
                                const char* who) {
    std::size_t lo = 0, hi = buckets.size();
    while (lo < hi) {  // the first bucket with offset <= `offset`
        const std::size_t mid = lo + (hi - lo) / 2;
        if (buckets[mid].offset > offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    DTRAIN_CHECK(lo < buckets.size() && buckets[lo].offset == offset && buckets[lo].size == size, who, ": [",
                 offset, ", ", offset + size, ") is not a bucket");
    return lo;
}

}  // namespace detail

/// Specialisation that detects a hook: describe() and the nonblocking or the blocking form.
template <class Hook, class Comm, class T>
struct is_comm_hook<Hook, Comm, T,
                    std::enable_if_t<detail::has_hook_describe<Hook>::value &&
                                     (detail::has_hook_start<Hook, Comm, T>::value ||
                                      detail::has_hook_reduce<Hook, Comm, T>::value)>> : std::true_type {};

/// True when Hook is a communication hook for communicator Comm and element type T (see is_comm_hook).
template <class Hook, class Comm, class T>
inline constexpr bool is_comm_hook_v = is_comm_hook<Hook, Comm, T>::value;

}  // namespace dtrain

#pragma once

/// @file
/// Gradient compression of the synchronous DistOptimizer (SyncOptions::compression): how one bucket of the
/// flat gradient buffer is encoded for the wire, reduced through the communicator and decoded again, and
/// the error-feedback residuals of top-k sparsification. It knows buckets (ranges of one buffer), no
/// layers; the communicator moves its wire buffers.

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <dtrain/comm/communicator.hpp>
#include <dtrain/comm/half.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/distributed/bucket.hpp>
#include <dtrain/distributed/bucket_schedule.hpp>
#include <dtrain/distributed/comm_hook.hpp>
#include <dtrain/distributed/detail/compression_kernels.hpp>
#include <dtrain/distributed/detail/sums_elements.hpp>
#include <dtrain/distributed/options.hpp>

namespace dtrain {

/// The setting's name: "none", "fp16", "bf16" or "topk" (the choices of the examples' --compression).
inline const char* compression_name(Compression c) noexcept {
    switch (c) {
        case Compression::None:
            return "none";
        case Compression::Fp16:
            return "fp16";
        case Compression::Bf16:
            return "bf16";
        case Compression::TopK:
            return "topk";
    }
    return "invalid";
}

/// Every setting's name, in the order of the enumeration.
inline std::vector<std::string> compression_names() {
    return {"none", "fp16", "bf16", "topk"};
}

/// The setting named `name` (see compression_name()); throws dtrain::Error listing the names otherwise.
inline Compression compression_from_name(const std::string& name) {
    for (Compression c : {Compression::None, Compression::Fp16, Compression::Bf16, Compression::TopK})
        if (name == compression_name(c)) return c;
    throw Error(detail::concat("unknown compression '", name, "' (use none, fp16, bf16 or topk)"));
}

/// The setting as checkpoints and errors name it: "none", "fp16", "bf16" or "topk(ratio=0.01)" (the ratio
/// in the shortest text that reads back as the same double, so two settings differ exactly when their
/// texts do).
inline std::string describe_compression(Compression c, double topk_ratio) {
    if (c != Compression::TopK) return compression_name(c);
    char text[32];
    const auto r = std::to_chars(text, text + sizeof text, topk_ratio);
    return "topk(ratio=" + std::string(text, r.ptr) + ")";
}

/// The number of values top-k sends of a bucket of `n` values: round(ratio * n), at least 1, at most n.
inline std::size_t topk_count(std::size_t n, double ratio) {
    const double k = ratio * double(n) + 0.5;
    return n == 0 ? 0 : std::clamp<std::size_t>(k < 1.0 ? 1 : std::size_t(k), 1, n);
}

/// The gradient compression of one synchronous DistOptimizer: wire buffers allocated once at construction,
/// and per bucket (make_buckets()) an encode step that fills the bucket's wire, the communicator's sum of
/// that wire, and a decode step that writes the summed float gradient back into the bucket (DistOptimizer
/// then scales it to the average and checks it). Every rank decodes the same bytes the same way, so the
/// results are bitwise identical on every rank.
///
/// - None: the bucket itself is summed (no copy).
/// - Fp16 / Bf16: the bucket's values are rounded to Half / BFloat16 (to nearest, ties to even), the 16-bit
///   buffer is summed with fp32 accumulation (the communicator's half_float_sums) and converted back to T.
///   Half holds at most 65504: a larger gradient, or sum, becomes infinite (the non-finite check catches
///   it); BFloat16 keeps float's range with 8 bits of precision.
/// - TopK: acc = gradient + residual; the k = topk_count(n, ratio) values of largest magnitude (ties to the
///   lower index, NaN above infinity so a non-finite gradient is always sent and caught) go out as (index,
///   value) pairs, and acc minus what was sent (acc with those k values zeroed) becomes the residual
///   (error feedback). The pairs of all ranks are gathered by summing a p*k-pair buffer of 32-bit words in
///   which each rank fills its own slot and leaves zeros elsewhere: integer sums with zeros are exact, so
///   every rank receives every rank's pairs bitwise, through the communicator's own nonblocking
///   iallreduce_sum (the Communicator concept has no all-gather; this moves about twice the bytes of a ring
///   all-gather, 2p*k*(4 + sizeof(T)) bytes per bucket instead of 2*n*sizeof(T)). Decoding zeroes the bucket
///   and adds the pairs in rank order. The new residuals become the state only when the step's update is
///   applied (commit()); a skipped or failed step keeps the old ones.
///
/// Nothing allocates after construction. Not thread-safe (DistOptimizer serialises its use).
///
/// @tparam T the gradient element type (float or double).
template <class T>
class GradientCompressor {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                  "dtrain::GradientCompressor: gradients must be float or double");

public:
    /// Compression::None over no buckets.
    GradientCompressor() = default;

    /// Compression `c` (with `topk_ratio` for TopK) of the `buckets` of a flat buffer of `n` values, on rank
    /// `rank` of `ranks`. Allocates every buffer. Throws dtrain::Error when c is not a Compression, when
    /// topk_ratio is not in (0, 1] for TopK, or when a bucket has 2^32 values or more.
    GradientCompressor(Compression c, double topk_ratio, std::vector<Bucket> buckets, std::size_t n, int rank,
                       int ranks)
        : c_(c), ratio_(topk_ratio), buckets_(std::move(buckets)), rank_(rank), ranks_(ranks) {
        DTRAIN_CHECK(c == Compression::None || c == Compression::Fp16 || c == Compression::Bf16 ||
                         c == Compression::TopK,
                     "SyncOptions::compression: invalid value ", int(c), " (use None, Fp16, Bf16 or TopK)");
        if (c == Compression::Fp16) half_.resize(n);
        if (c == Compression::Bf16) bf16_.resize(n);
        if (c != Compression::TopK) return;
        DTRAIN_CHECK(topk_ratio > 0.0 && topk_ratio <= 1.0,
                     "SyncOptions::topk_ratio must be in (0, 1] with Compression::TopK, got ", topk_ratio);
        residual_.assign(n, T(0));
        next_.assign(n, T(0));
        std::size_t words = 0, largest = 0, most = 0;
        for (const Bucket& b : buckets_) {
            DTRAIN_CHECK(b.size < (std::size_t(1) << 32), "Compression::TopK: a bucket of ", b.size,
                         " values is too large for 32-bit indices; lower SyncOptions::bucket_bytes");
            k_.push_back(topk_count(b.size, topk_ratio));
            words_at_.push_back(words);
            words += std::size_t(ranks) * k_.back() * pair_words;
            largest = std::max(largest, b.size);
            most = std::max(most, k_.back());
        }
        words_.assign(words, 0u);
        order_.resize(most);
        select_ = detail::TopKSelector<T>(largest);
    }

    /// The setting.
    Compression setting() const noexcept { return c_; }
    /// The setting as describe_compression() names it ("topk(ratio=0.01)").
    std::string describe() const { return describe_compression(c_, ratio_); }
    /// This rank's error-feedback residuals over the whole flat buffer (TopK; empty otherwise).
    Span<T> residual() noexcept { return Span<T>(residual_.data(), residual_.size()); }
    /// See residual().
    Span<const T> residual() const noexcept { return Span<const T>(residual_.data(), residual_.size()); }
    /// The values TopK sends of bucket `b` (its k).
    std::size_t topk_count_of(std::size_t b) const { return c_ == Compression::TopK ? k_.at(b) : 0; }

    /// Throws dtrain::Error unless `Comm` can carry this setting: Fp16 and Bf16 need half_float_sums (see
    /// comm/communicator.hpp), TopK sums of Span<std::uint32_t>.
    template <class Comm>
    void check_communicator() const {
        DTRAIN_CHECK(
            (c_ != Compression::Fp16 && c_ != Compression::Bf16) || has_half_sums_v<Comm>,
            "SyncOptions::compression ", compression_name(c_),
            " needs a communicator that sums Half and BFloat16 in float (half_float_sums, see "
            "comm/communicator.hpp), which this one does not declare; use Collective, Ring or Naive");
        DTRAIN_CHECK(c_ != Compression::TopK || (detail::sums_elements<Comm, std::uint32_t>::value),
                     "SyncOptions::compression topk needs a communicator whose allreduce_sum and "
                     "iallreduce_sum take Span<std::uint32_t>");
    }

    /// Encodes `range` (a bucket of the flat buffer `grads`) and starts the sum of its wire; finish() decodes
    /// it once the request has completed. Without compression the bucket is its own wire: `range` must then
    /// not be touched in between.
    template <class Comm>
    typename Comm::Request start(Comm& comm, Span<T> grads, Span<T> range) {
        if (c_ == Compression::None) return comm.iallreduce_sum(range);
        return start(comm, bucket_at(grads, range), range);
    }

    /// start() of `range`, bucket `b` (its index in reduction order) of the flat buffer.
    template <class Comm>
    typename Comm::Request start(Comm& comm, std::size_t b, Span<T> range) {
        if (c_ == Compression::None) return comm.iallreduce_sum(range);
        encode(b, range);
        return on_wire<typename Comm::Request, Comm>(b, [&](auto wire) { return comm.iallreduce_sum(wire); });
    }

    /// Writes the sum of the wire of `range` (started by start(), now complete) into `range`.
    void finish(Span<T> grads, Span<T> range) {
        if (c_ != Compression::None) decode(range, bucket_at(grads, range));
    }

    /// finish() of `range`, bucket `b` of the flat buffer.
    void finish(std::size_t b, Span<T> range) {
        if (c_ != Compression::None) decode(range, b);
    }

    /// Encodes `range`, sums its wire with the communicator's blocking allreduce_sum and decodes it.
    template <class Comm>
    void reduce(Comm& comm, Span<T> grads, Span<T> range) {
        if (c_ == Compression::None) return comm.allreduce_sum(range);
        reduce(comm, bucket_at(grads, range), range);
    }

    /// reduce() of `range`, bucket `b` of the flat buffer.
    template <class Comm>
    void reduce(Comm& comm, std::size_t b, Span<T> range) {
        if (c_ == Compression::None) return comm.allreduce_sum(range);
        encode(b, range);
        on_wire<void, Comm>(b, [&](auto wire) { comm.allreduce_sum(wire); });
        decode(range, b);
    }

    /// Sizes the communicator's reusable scratch for every bucket's wire in flight at once, the most a step
    /// can have (as BucketSchedule::prewarm() does for uncompressed buckets of a zero buffer of `n` values).
    /// Collective; call it outside a step.
    template <class Comm>
    void prewarm(Comm& comm, std::size_t n) {
        if (c_ == Compression::None) return BucketSchedule<Comm, T>(buckets_).prewarm(comm, n);
        std::vector<std::optional<typename Comm::Request>> reqs(buckets_.size());
        std::vector<T> zeros(n, T(0));
        const Span<T> grads(zeros.data(), zeros.size());  // encode() leaves the residuals as they are
        for (std::size_t b = 0; b < buckets_.size(); ++b)
            reqs[b].emplace(start(comm, grads, grads.subspan(buckets_[b].offset, buckets_[b].size)));
        for (auto& r : reqs)
            comm.wait(*r);
    }

    /// The step's update was applied: its TopK residuals become the state (no-op otherwise).
    void commit() noexcept { residual_.swap(next_); }

    /// What a non-finite averaged gradient may also come from under this setting ("" or a sentence for the
    /// error of NonFinite::Stop).
    const char* nonfinite_hint() const noexcept {
        return c_ == Compression::Fp16
                   ? " (with Compression::Fp16 also a gradient or a sum beyond fp16's "
                     "largest value 65504, which becomes infinite on the wire; Bf16 keeps "
                     "float's range)"
                   : "";
    }

private:
    static constexpr std::size_t pair_words = 1 + sizeof(T) / sizeof(std::uint32_t);  // index, value bits

    /// Calls `fn` with bucket b's wire as the Span of its element type (Half, BFloat16 or 32-bit words) and
    /// returns what it returns; only the element types `Comm` can sum are instantiated.
    template <class R, class Comm, class Fn>
    R on_wire(std::size_t b, Fn&& fn) {
        const Bucket& k = buckets_[b];
        if constexpr (has_half_sums_v<Comm>) {
            if (c_ == Compression::Fp16) return fn(Span<Half>(half_.data() + k.offset, k.size));
            if (c_ == Compression::Bf16) return fn(Span<BFloat16>(bf16_.data() + k.offset, k.size));
        }
        if constexpr (detail::sums_elements<Comm, std::uint32_t>::value) {
            if (c_ == Compression::TopK) return fn(wire_words(b));
        }
        check_communicator<Comm>();  // throws (DistOptimizer's constructor has checked this already)
        return R();
    }

    /// The index of the bucket `range` of `grads` is.
    std::size_t bucket_at(Span<T> grads, Span<T> range) const {
        return detail::bucket_index(buckets_, std::size_t(range.data() - grads.data()), range.size(),
                                    "GradientCompressor");
    }

    /// Bucket b's TopK wire: ranks slots of k pairs.
    Span<std::uint32_t> wire_words(std::size_t b) noexcept {
        return Span<std::uint32_t>(words_.data() + words_at_[b], std::size_t(ranks_) * k_[b] * pair_words);
    }

    /// Fills the wire of `range`, bucket b.
    void encode(std::size_t b, Span<T> range) {
        const std::size_t n = range.size(), o = buckets_[b].offset;
        const T* g = range.data();
        if (c_ == Compression::Fp16) {
            detail::convert_through_float(g, detail::wire_bits(half_, o), n, &detail::halves_from_floats);
            return;
        }
        if (c_ == Compression::Bf16) {
            detail::convert_through_float(g, detail::wire_bits(bf16_, o), n, &detail::bfloat16s_from_floats);
            return;
        }
        T* acc = next_.data() + o;
        const T* r = residual_.data() + o;
        for (std::size_t i = 0; i < n; ++i)
            acc[i] = g[i] + r[i];
        const std::size_t k = k_[b];
        std::uint32_t* idx = order_.data();
        select_.select(acc, n, k, idx);  // ascending indices
        const Span<std::uint32_t> wire = wire_words(b);
        std::fill(wire.begin(), wire.end(), 0u);
        std::uint32_t* mine = wire.data() + std::size_t(rank_) * k * pair_words;
        for (std::size_t j = 0; j < k; ++j) {
            mine[j * pair_words] = idx[j];
            std::memcpy(mine + j * pair_words + 1, acc + idx[j], sizeof(T));
            acc[idx[j]] = T(0);  // sent: the residual keeps what was not
        }
    }

    /// Writes bucket b's summed wire into `range` as T.
    void decode(Span<T> range, std::size_t b) {
        const std::size_t n = range.size(), o = buckets_[b].offset;
        T* g = range.data();
        if (c_ == Compression::Fp16) {
            detail::convert_through_float(detail::wire_bits(half_, o), g, n, &detail::floats_from_halves);
            return;
        }
        if (c_ == Compression::Bf16) {
            detail::convert_through_float(detail::wire_bits(bf16_, o), g, n, &detail::floats_from_bfloat16s);
            return;
        }
        std::fill(g, g + n, T(0));
        const Span<std::uint32_t> wire = wire_words(b);
        for (std::size_t q = 0; q < wire.size(); q += pair_words) {  // rank 0's pairs, then rank 1's, ...
            const std::uint32_t i = wire[q];
            DTRAIN_CHECK(i < n, "Compression::TopK: received index ", i, " in a bucket of ", n,
                         " values (the ranks disagree on the buckets)");
            T v;
            std::memcpy(&v, wire.data() + q + 1, sizeof(T));
            g[i] += v;
        }
    }

    Compression c_ = Compression::None;
    double ratio_ = 0.0;
    std::vector<Bucket> buckets_;
    int rank_ = 0, ranks_ = 1;
    std::vector<Half> half_;                 // Fp16 wire, laid out like the flat buffer
    std::vector<BFloat16> bf16_;             // Bf16 wire, laid out like the flat buffer
    std::vector<T> residual_, next_;         // TopK: the residuals, and the ones this step forms
    std::vector<std::size_t> k_, words_at_;  // TopK: per bucket, k and the start of its wire in words_
    std::vector<std::uint32_t> words_;       // TopK wire: per bucket, ranks slots of k (index, value) pairs
    std::vector<std::uint32_t> order_;       // TopK: the selected indices of a bucket (the largest k)
    detail::TopKSelector<T> select_;         // TopK: the selection's scratch for the largest bucket
};

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class GradientCompressor<float>)
DTRAIN_PRECOMPILED_INSTANCE(class GradientCompressor<double>)

}  // namespace dtrain

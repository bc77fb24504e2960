#pragma once

/// @file
/// The built-in communication hooks (comm_hook.hpp): the plain all-reduce and the gradient compressions of
/// SyncOptions::compression (fp16, bf16, top-k with error feedback), each a CompressionHook over a
/// GradientCompressor. DistOptimizer installs the one its options select; registering one explicitly
/// (register_comm_hook()) gives bitwise the same training.

#include <cstddef>
#include <string>
#include <utility>

#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/distributed/comm_hook.hpp>
#include <dtrain/distributed/compression.hpp>
#include <dtrain/distributed/options.hpp>

namespace dtrain {

/// A built-in communication hook: sums each bucket through the communicator with the gradient compression
/// `setting` (GradientCompressor: Compression::None is the plain all-reduce of the bucket in place; Fp16 and
/// Bf16 round to 16 bits and sum with fp32 accumulation; TopK sends the largest topk_ratio of gradient plus
/// residual and keeps the rest as its residual, committed only when the step is applied and saved in
/// checkpoints as state()). describe() is describe_compression(), so a checkpoint written with
/// SyncOptions::compression loads into a run with the same hook registered explicitly, and back.
///
/// @tparam T the gradient element type (float or double).
template <class T>
class CompressionHook {
public:
    /// The hook of `setting` (with `topk_ratio` for Compression::TopK). The setting is checked by setup().
    explicit CompressionHook(Compression setting = Compression::None, double topk_ratio = 0.01)
        : setting_(setting), ratio_(topk_ratio) {}

    /// Allocates the compressor's buffers for the buckets of `ctx`. Throws dtrain::Error as the
    /// GradientCompressor constructor does (an invalid setting, topk_ratio outside (0, 1] for TopK).
    void setup(const CommHookContext& ctx) {
        codec_ = GradientCompressor<T>(setting_, ratio_, ctx.buckets, ctx.num_values, ctx.rank, ctx.size);
    }

    /// Throws dtrain::Error unless `Comm` can carry the setting (GradientCompressor::check_communicator()).
    template <class Comm>
    void check_communicator() const {
        codec_.template check_communicator<Comm>();
    }

    /// Encodes bucket `b` and starts the sum of its wire (GradientCompressor::start()).
    template <class Comm>
    typename Comm::Request start(Comm& comm, const GradBucket<T>& b) {
        return codec_.start(comm, b.index, b.grads);
    }

    /// Decodes the completed sum of bucket `b` into b.grads (GradientCompressor::finish()).
    void finish(const GradBucket<T>& b) { codec_.finish(b.index, b.grads); }

    /// Encodes, sums with the communicator's blocking all-reduce and decodes bucket `b`.
    template <class Comm>
    void reduce(Comm& comm, const GradBucket<T>& b) {
        codec_.reduce(comm, b.index, b.grads);
    }

    /// Sizes the communicator's scratch for every bucket's wire in flight at once (collective).
    template <class Comm>
    void prewarm(Comm& comm, std::size_t n) {
        codec_.prewarm(comm, n);
    }

    /// The step was applied: the top-k residuals formed in it become the state.
    void commit() noexcept { codec_.commit(); }
    /// describe_compression() of the setting ("none", "fp16", "bf16", "topk(ratio=0.01)").
    std::string describe() const { return describe_compression(setting_, ratio_); }
    /// This rank's top-k residuals (empty for the other settings).
    Span<T> state() noexcept { return codec_.residual(); }
    /// The compressor's hint for a non-finite averaged gradient (fp16's range).
    const char* nonfinite_hint() const noexcept { return codec_.nonfinite_hint(); }
    /// The setting.
    Compression setting() const noexcept { return setting_; }
    /// The compressor (its residuals and per-bucket top-k counts).
    GradientCompressor<T>& compressor() noexcept { return codec_; }

private:
    Compression setting_ = Compression::None;
    double ratio_ = 0.01;
    GradientCompressor<T> codec_;
};

/// The plain all-reduce of every bucket in place (Compression::None), as DistOptimizer does by default.
template <class T>
CompressionHook<T> allreduce_hook() {
    return CompressionHook<T>(Compression::None);
}

/// Every bucket rounded to fp16 on the wire and summed with fp32 accumulation (Compression::Fp16).
template <class T>
CompressionHook<T> fp16_compress_hook() {
    return CompressionHook<T>(Compression::Fp16);
}

/// Every bucket rounded to bfloat16 on the wire and summed with fp32 accumulation (Compression::Bf16).
template <class T>
CompressionHook<T> bf16_compress_hook() {
    return CompressionHook<T>(Compression::Bf16);
}

/// Top-k sparsification with error feedback, `ratio` of every bucket's values sent (Compression::TopK).
template <class T>
CompressionHook<T> topk_compress_hook(double ratio) {
    return CompressionHook<T>(Compression::TopK, ratio);
}

// Compiled once in dtrain::precompiled for the programs that link it (core/precompiled.hpp).
DTRAIN_PRECOMPILED_INSTANCE(class CompressionHook<float>)
DTRAIN_PRECOMPILED_INSTANCE(class CompressionHook<double>)

}  // namespace dtrain

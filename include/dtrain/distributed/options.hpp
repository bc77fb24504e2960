#pragma once

/// @file
/// The options of DistOptimizer: what every policy takes (DistOptions), what the synchronous policies add
/// (SyncOptions) and what the parameter servers add (AsyncOptions), in the style of RingOptions.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace dtrain {

/// Policy tag selecting asynchronous parameter-server training in DistOptimizer<Async, Opt>: ranks
/// 0..masters-1 hold shards of the parameters and run the optimizer, the other ranks are workers (see
/// distributed/async.hpp).
struct Async {};

/// How DistOptimizer keeps non-trainable model state (BatchNorm running statistics) consistent.
enum class StateSync {
    Broadcast,  ///< the root's state is broadcast at every step (PyTorch DDP's broadcast_buffers).
    Average,    ///< the state is averaged over ranks at every step.
    None,       ///< left alone (each rank keeps its own).
};

/// How the asynchronous policy shards parameters over masters.
enum class Sharding {
    Balanced,  ///< contiguous ranges of the flat buffer balanced by size (layers may be split).
    ByLayer,   ///< whole layers per master, balanced greedily by size (masters in charge of layers).
};

/// What DistOptimizer does when a step's gradient holds a NaN or an infinity.
enum class NonFinite {
    Stop,    ///< throw dtrain::Error on every rank, naming the step and the first layer affected.
    Skip,    ///< skip the update (on every rank alike) and count it in skipped_steps().
    Ignore,  ///< no check: a NaN reaches the parameters silently (saves a pass over the gradients at 1 rank).
};

/// How the synchronous DistOptimizer compresses each gradient bucket on the wire (see
/// distributed/compression.hpp): each setting selects a built-in communication hook (CompressionHook,
/// distributed/compression_hook.hpp), which DistOptimizer::register_comm_hook() can replace.
enum class Compression {
    None,  ///< float gradients, all-reduced as they are.
    Fp16,  ///< converted to IEEE binary16 (Half), summed with fp32 accumulation, converted back and averaged.
    Bf16,  ///< converted to bfloat16 (BFloat16), summed with fp32 accumulation, converted back and averaged.
    TopK,  ///< the topk_ratio largest magnitudes per bucket as (index, value) pairs, with error feedback.
};

/// Staleness value meaning "no bound" (fully asynchronous).
inline constexpr std::uint64_t unbounded_staleness = std::numeric_limits<std::uint64_t>::max();

/// Options every policy takes.
///
/// | field | default | meaning |
/// |---|---|---|
/// | accumulation_steps | 1 | backward passes per step; gradients accumulate locally with no communication in between |
/// | root | 0 | rank whose initial parameters and optimizer state everyone starts from |
/// | nonfinite | Stop | a step whose gradient holds NaN or Inf: stop on every rank with an error naming the step and the layer, Skip it, or Ignore (no check: one pass over the gradients less at 1 rank) |
/// | stall_timeout | 0 | seconds a rank may wait in one of this optimizer's operations before the stall watchdog ends the job naming who did not arrive (0: DTRAIN_STALL_TIMEOUT, default 300; see Environment) |
struct DistOptions {
    /// Backward passes per step() (>= 1).
    std::size_t accumulation_steps = 1;
    /// Rank whose initial model and optimizer state every rank starts from.
    int root = 0;
    /// What a step does with a non-finite gradient.
    NonFinite nonfinite = NonFinite::Stop;
    /// Stall timeout of this optimizer's operations in seconds (0: the Environment's).
    double stall_timeout = 0.0;
};

/// Options of the synchronous policies (Collective, Ring, Naive and any Communicator), on top of DistOptions.
///
/// | field | default | meaning |
/// |---|---|---|
/// | bucket_bytes | 1 MiB | gradients are reduced in buckets of about this many bytes, last layer first; a layer larger than this is split into pieces (see make_buckets()); 0 = one bucket per whole layer. 1 MiB lets the large Dense layers of the CPU-sized models here start their reduction while the convolutions are still in backward (PyTorch DDP uses 25 MiB for GPU-sized models) |
/// | overlap | true | start a bucket's reduction during backward as soon as its gradients are final (Dense layers larger than a quarter bucket report their gradient in parts); step() then applies the optimizer bucket by bucket while the next reduction is in flight (optimizers with the range form) |
/// | state_sync | Broadcast | how BatchNorm running statistics are kept consistent |
/// | compression | None | gradient compression on the wire: Fp16 or Bf16 (16-bit values, fp32 accumulation: half the bytes), or TopK (each rank sends the topk_ratio largest magnitudes of gradient + residual per bucket, keeps the rest as its residual for the next step: error feedback; the residuals are saved in checkpoints). Applied at every rank count, also 1; see distributed/compression.hpp |
/// | topk_ratio | 0.01 | with TopK: the share of each bucket's values sent, in (0, 1] (k = round(ratio * n), at least 1) |
struct SyncOptions : DistOptions {
    /// Target bucket size in bytes (0: one bucket per layer).
    std::size_t bucket_bytes = std::size_t(1) << 20;
    /// Overlap the reductions with backward() and the optimizer with the reductions.
    bool overlap = true;
    /// How the model's non-trainable state is kept consistent.
    StateSync state_sync = StateSync::Broadcast;
    /// Gradient compression on the wire.
    Compression compression = Compression::None;
    /// Share of each bucket's values that Compression::TopK sends, in (0, 1].
    double topk_ratio = 0.01;
};

/// Options of the asynchronous parameter-server policy (Async), on top of DistOptions.
///
/// | field | default | meaning |
/// |---|---|---|
/// | masters | 1 | number of parameter-server ranks (ranks 0..masters-1); the rest are workers |
/// | staleness | unbounded | a worker may run at most this many steps ahead of the slowest worker (0 = bulk synchronous) |
/// | sharding | Balanced | how parameters are split over masters |
/// | average_rounds | false | masters apply one averaged update from every worker per round (a master-worker variant) |
/// | gather_to_all | false | after training, every rank (not only rank 0) gets the final parameters |
struct AsyncOptions : DistOptions {
    /// Parameter-server ranks (>= 1).
    int masters = 1;
    /// Steps a worker may run ahead of the slowest unfinished worker.
    std::uint64_t staleness = unbounded_staleness;
    /// How the parameters are split over the masters.
    Sharding sharding = Sharding::Balanced;
    /// One averaged update per round of every worker's gradient.
    bool average_rounds = false;
    /// Final parameters on every rank instead of rank 0 only.
    bool gather_to_all = false;
};

/// The options type of DistOptimizer<Policy, Opt>: AsyncOptions for Async, SyncOptions otherwise.
template <class Policy>
using options_for = std::conditional_t<std::is_same_v<Policy, Async>, AsyncOptions, SyncOptions>;

}  // namespace dtrain

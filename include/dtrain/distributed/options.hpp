#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

namespace dtrain {

/// How DistOptimizer keeps non-trainable model state (BatchNorm running statistics) consistent.
enum class StateSync {
    Broadcast,  ///< rank 0's state is broadcast at every step (PyTorch DDP's broadcast_buffers).
    Average,    ///< the state is averaged over ranks at every step.
    None,       ///< left alone (each rank keeps its own).
};

/// How the asynchronous policy shards parameters over masters.
enum class Sharding {
    Balanced,  ///< contiguous ranges of the flat buffer balanced by size (layers may be split).
    ByLayer,   ///< whole layers per master, balanced greedily by size (the assignment's design).
};

/// Staleness value meaning "no bound" (fully asynchronous).
inline constexpr std::uint64_t unbounded_staleness = std::numeric_limits<std::uint64_t>::max();

/// Options of DistOptimizer. Fields a policy does not use are ignored by it.
///
/// | field | default | used by | meaning |
/// |---|---|---|---|
/// | bucket_bytes | 1 MiB | synchronous | gradients are reduced in buckets of about this many bytes, last layer first; a layer larger than this is split into pieces (see make_buckets()); 0 = one bucket per whole layer. 1 MiB lets the large Dense layers of the CPU-sized models here start their reduction while the convolutions are still in backward (PyTorch DDP uses 25 MiB for GPU-sized models) |
/// | overlap | true | synchronous | start a bucket's reduction during backward as soon as its gradients are final (with bucket_bytes > 0, Dense layers larger than a quarter bucket report their gradient in parts, so pieces of even the first layer start before its backward ends); step() then applies the optimizer bucket by bucket while the next reduction is in flight (optimizers with the range form) |
/// | accumulation_steps | 1 | all | backward passes per step; gradients accumulate locally with no communication in between |
/// | state_sync | Broadcast | synchronous | how BatchNorm running statistics are kept consistent |
/// | root | 0 | all | rank whose initial parameters and optimizer state everyone starts from |
/// | masters | 1 | asynchronous | number of parameter-server ranks (ranks 0..masters-1); the rest are workers |
/// | staleness | unbounded | asynchronous | a worker may run at most this many steps ahead of the slowest worker (0 = bulk synchronous) |
/// | sharding | Balanced | asynchronous | how parameters are split over masters |
/// | average_rounds | false | asynchronous | the Go report's variant: masters average one update from every worker per round |
/// | gather_to_all | false | asynchronous | after training, every rank (not only rank 0) gets the final parameters |
struct DistOptions {
    std::size_t bucket_bytes = std::size_t(1) << 20;
    bool overlap = true;
    std::size_t accumulation_steps = 1;
    StateSync state_sync = StateSync::Broadcast;
    int root = 0;
    int masters = 1;
    std::uint64_t staleness = unbounded_staleness;
    Sharding sharding = Sharding::Balanced;
    bool average_rounds = false;
    bool gather_to_all = false;
};

}  // namespace dtrain

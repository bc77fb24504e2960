#pragma once

#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include <mpi.h>

#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/rng.hpp>
#include <dtrain/data/detail/seed.hpp>

namespace dtrain {

/// How a rank's share is cut out of the epoch's (shuffled) index list.
enum class ShardLayout {
    /// Rank r takes positions r, r + p, r + 2p, ... (PyTorch's DistributedSampler).
    Interleaved,
    /// Rank r takes the block [r*m/p, (r+1)*m/p) of the m positions (the split of the Go and SINGA
    /// examples; with ShardTail::None and no shuffle, exactly their [r*n/p, (r+1)*n/p)).
    Contiguous,
};

/// What happens to the n mod p samples that do not divide evenly among p ranks.
enum class ShardTail {
    /// Pad by wrapping around to the start of the epoch's list: ceil(n/p) samples per rank, so p - n mod p
    /// samples are seen twice in the epoch (PyTorch's default, drop_last=false).
    Pad,
    /// Drop the last n mod p samples of the epoch's (shuffled) list: floor(n/p) per rank; with shuffling a
    /// different set is dropped each epoch (PyTorch's drop_last=true).
    Drop,
    /// Neither: every sample exactly once, ranks get floor(n/p) or ceil(n/p) samples. For evaluation.
    None,
};

/// Options of the distributed sampler.
struct ShardOptions {
    /// Permute the indices each epoch (from seed and epoch); false keeps 0..n-1.
    bool shuffle = true;
    /// Seed shared by all ranks: with the epoch number it fixes the permutation, so ranks agree on it
    /// without communicating.
    std::uint64_t seed = 0;
    /// Tail handling; the default gives every rank the same count.
    ShardTail tail = ShardTail::Pad;
    /// How the list is cut into shards.
    ShardLayout layout = ShardLayout::Interleaved;
};

namespace detail {

/// Checks the arguments common to every sharding function.
DTRAIN_INLINE void check_shard_args(std::size_t n, int rank, int size, const char* who);

}  // namespace detail

/// The order of the n samples in `epoch`: 0..n-1 when !shuffle, else a permutation that depends only on
/// (seed, epoch), identical on every rank and platform. Written into `out` (no allocation when its capacity
/// suffices).
inline void epoch_permutation(std::size_t n, bool shuffle, std::uint64_t seed, std::uint64_t epoch,
                              std::vector<std::size_t>& out) {
    out.resize(n);
    std::iota(out.begin(), out.end(), std::size_t(0));
    if (!shuffle) return;
    Rng rng(detail::epoch_seed(seed, epoch));
    dtrain::shuffle(out.begin(), out.end(), rng);
}

/// Number of samples rank `rank` of `size` gets per epoch from n samples (see ShardTail).
inline std::size_t shard_count(std::size_t n, int rank, int size, ShardTail tail, ShardLayout layout) {
    detail::check_shard_args(n, rank, size, "dtrain::shard_count");
    const auto p = static_cast<std::size_t>(size), r = static_cast<std::size_t>(rank);
    if (tail == ShardTail::Pad) return (n + p - 1) / p;
    if (tail == ShardTail::Drop) return n / p;
    if (layout == ShardLayout::Interleaved) return (n - r + p - 1) / p;
    return (r + 1) * n / p - r * n / p;
}

/// The sample indices rank `rank` of `size` processes in `epoch`, as a pure function of (n, rank, size,
/// epoch, options): no communication. Over all ranks the shards are disjoint and cover the data set (up
/// to the padded or dropped tail, see ShardTail). `perm` is scratch space for the epoch's permutation and
/// `out` receives the shard; neither allocates when its capacity suffices. Throws when size < 1, rank is
/// outside [0, size) or n < size.
inline void shard_indices(std::size_t n, int rank, int size, std::uint64_t epoch, const ShardOptions& opt,
                          std::vector<std::size_t>& perm, std::vector<std::size_t>& out) {
    detail::check_shard_args(n, rank, size, "dtrain::shard_indices");
    epoch_permutation(n, opt.shuffle, opt.seed, epoch, perm);
    const auto p = static_cast<std::size_t>(size), r = static_cast<std::size_t>(rank);
    const std::size_t count = shard_count(n, rank, size, opt.tail, opt.layout);
    out.resize(count);
    if (opt.tail == ShardTail::None) {
        const std::size_t begin = opt.layout == ShardLayout::Contiguous ? r * n / p : 0;
        for (std::size_t k = 0; k < count; ++k)
            out[k] = opt.layout == ShardLayout::Contiguous ? perm[begin + k] : perm[r + k * p];
        return;
    }
    // pad: positions wrap around the permutation (p - n mod p < n, so at most one wrap); drop: the first
    // count * p positions.
    for (std::size_t k = 0; k < count; ++k) {
        const std::size_t pos = opt.layout == ShardLayout::Contiguous ? r * count + k : r + k * p;
        out[k] = perm[pos % n];
    }
}

/// Allocating convenience form of shard_indices().
inline std::vector<std::size_t> shard_indices(std::size_t n, int rank, int size, std::uint64_t epoch,
                                              const ShardOptions& opt = {}) {
    std::vector<std::size_t> perm, out;
    shard_indices(n, rank, size, epoch, opt, perm, out);
    return out;
}

/// The rest of `epoch` for rank `rank` of `size` after the first `consumed` positions of the epoch's global
/// order (epoch_permutation()) were trained on, by any number of ranks: rank r takes positions consumed + r,
/// consumed + r + size, ... of the n - consumed left, cut as `opt.tail` says (Pad wraps around to the start
/// of the epoch's order). The epoch's samples are thus neither skipped nor repeated whatever the number of
/// ranks before and after. With ShardLayout::Interleaved, where a step of b samples per rank takes the
/// global positions [k*b*size, (k+1)*b*size), consumed = k*b*size gives exactly the entries of
/// shard_indices() after its first k*b. Throws when the layout is Contiguous (a rank's block is not a
/// prefix of the global order) or consumed > n, and as shard_indices() does. Does not allocate when the
/// capacities of `perm` and `out` suffice.
inline void shard_indices_after(std::size_t n, int rank, int size, std::uint64_t epoch, std::size_t consumed,
                                const ShardOptions& opt, std::vector<std::size_t>& perm,
                                std::vector<std::size_t>& out) {
    detail::check_shard_args(n, rank, size, "dtrain::shard_indices_after");
    DTRAIN_CHECK(opt.layout == ShardLayout::Interleaved,
                 "dtrain::shard_indices_after: ShardLayout::Contiguous gives each rank a block of the epoch, "
                 "so the samples trained on are not the first ones of the epoch's order: use "
                 "ShardLayout::Interleaved to continue an epoch at another number of ranks");
    DTRAIN_CHECK(consumed <= n, "dtrain::shard_indices_after: ", consumed,
                 " samples consumed exceed the epoch's ", n);
    epoch_permutation(n, opt.shuffle, opt.seed, epoch, perm);
    const auto p = static_cast<std::size_t>(size), r = static_cast<std::size_t>(rank);
    const std::size_t left = n - consumed;
    std::size_t count = 0;
    if (opt.tail == ShardTail::Pad)
        count = (left + p - 1) / p;
    else if (opt.tail == ShardTail::Drop)
        count = left / p;
    else
        count = left > r ? (left - r + p - 1) / p : 0;
    out.resize(count);
    for (std::size_t k = 0; k < count; ++k)
        out[k] = perm[(consumed + r + k * p) % n];
}

/// Evaluation sharding: rank r of p gets the contiguous, unshuffled block [r*n/p, (r+1)*n/p), so every test
/// sample is counted exactly once (no padding, no dropping) and summing correct counts over ranks gives the
/// same accuracy as one process. Throws when n < size.
inline std::vector<std::size_t> eval_shard(std::size_t n, int rank, int size) {
    return shard_indices(n, rank, size, 0, ShardOptions{false, 0, ShardTail::None, ShardLayout::Contiguous});
}

/// DistributedSampler: the shard of one rank of a fixed data set, epoch after epoch. Pure in (n, rank,
/// size, seed, epoch); it keeps scratch buffers so refilling for a new epoch does not allocate.
class DistributedSampler {
public:
    /// Sampler for `n` samples on rank `rank` of `size`; throws when size < 1, rank is outside [0, size) or
    /// n < size.
    DistributedSampler(std::size_t n, int rank, int size, ShardOptions opt = {})
        : n_(n), rank_(rank), size_(size), opt_(opt) {
        detail::check_shard_args(n, rank, size, "dtrain::DistributedSampler");
        perm_.reserve(n);
    }

    /// Writes this rank's indices for `epoch` into `out` (no allocation when its capacity suffices).
    void indices(std::uint64_t epoch, std::vector<std::size_t>& out) {
        shard_indices(n_, rank_, size_, epoch, opt_, perm_, out);
    }
    /// This rank's indices for `epoch` (allocating form).
    std::vector<std::size_t> indices(std::uint64_t epoch) {
        std::vector<std::size_t> out;
        indices(epoch, out);
        return out;
    }
    /// This rank's indices for the rest of `epoch` after its first `consumed` global positions
    /// (shard_indices_after(): any number of ranks may have consumed them).
    void indices_after(std::uint64_t epoch, std::size_t consumed, std::vector<std::size_t>& out) {
        shard_indices_after(n_, rank_, size_, epoch, consumed, opt_, perm_, out);
    }
    /// Samples this rank gets per epoch (the same every epoch).
    std::size_t num_samples() const { return shard_count(n_, rank_, size_, opt_.tail, opt_.layout); }
    /// Size of the data set.
    std::size_t dataset_size() const { return n_; }
    /// This rank.
    int rank() const { return rank_; }
    /// Number of ranks.
    int size() const { return size_; }
    /// The options.
    const ShardOptions& options() const { return opt_; }

private:
    std::size_t n_;
    int rank_, size_;
    ShardOptions opt_;
    std::vector<std::size_t> perm_;
};

/// A DistributedSampler for this process's rank in `comm` (MPI_Comm_rank / MPI_Comm_size; no other
/// communication). Throws as DistributedSampler's constructor does.
inline DistributedSampler make_distributed_sampler(MPI_Comm comm, std::size_t n, ShardOptions opt = {}) {
    return DistributedSampler(n, comm_rank(comm), comm_size(comm), opt);
}

#if DTRAIN_HEADER_DEFINITIONS

namespace detail {

DTRAIN_INLINE void check_shard_args(std::size_t n, int rank, int size, const char* who) {
    DTRAIN_CHECK(size >= 1, who, ": world size must be >= 1, got ", size);
    DTRAIN_CHECK(rank >= 0 && rank < size, who, ": rank ", rank, " is outside [0, ", size, ")");
    DTRAIN_CHECK(n >= static_cast<std::size_t>(size), who, ": the data set has ", n,
                 " samples but there are ", size, " ranks; every rank needs at least one sample");
}

}  // namespace detail

#endif

}  // namespace dtrain

#pragma once

/// @file
/// Where a run stands when a checkpoint is written, and the check that a resumed run, possibly at another
/// number of ranks, continues it as the run that wrote it would have.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <dtrain/core/error.hpp>

namespace dtrain {

/// Where training stands when a checkpoint is written, and what fixes the order of the data and the size of
/// the update; saved with it and returned by load_checkpoint(). The resumed run checks it with
/// check_resume() and continues with `loader.seek_samples(epoch, samples, ranks)` (any number of ranks
/// keeping the samples per step) or `loader.seek(epoch, batch)` (the same number of ranks).
struct TrainingPosition {
    /// The epoch in progress.
    std::uint64_t epoch = 0;
    /// Batches of that epoch already trained on (per rank, at the number of ranks that wrote it).
    std::uint64_t batch = 0;
    /// Optimizer steps taken in the whole run (informational; the optimizer keeps its own count).
    std::uint64_t step = 0;
    /// The program's running sums of the epoch so far on THIS rank (e.g. loss and correct predictions).
    /// save_checkpoint() stores their sum over the ranks (added in rank order; every rank must pass as many),
    /// and load_checkpoint() returns that global sum on every rank: a resumed run adds it on one rank only
    /// (or uses it as the global figure), so the resumed epoch reports the uninterrupted run's metrics.
    std::vector<double> sums;
    /// Samples of the epoch trained on so far over all ranks: the position in the epoch's global order,
    /// which does not depend on the number of ranks. 0 with `batch` > 0 and `batch_size` > 0 is saved as
    /// batch * batch_size * ranks (whole steps).
    std::uint64_t samples = 0;
    /// Samples per rank and step (the per-rank batch size); 0 = not recorded, check_resume() then only
    /// allows the same number of ranks.
    std::uint64_t batch_size = 0;
    /// The seed of the data order (ShardOptions::seed, LoaderOptions::seed).
    std::uint64_t seed = 0;
    /// The ranks that trained: ignored by save_checkpoint(), which stores the size of its communicator;
    /// load_checkpoint() returns it (0 for a file of format version 3 or older, which did not store it).
    std::uint64_t ranks = 0;

    /// The start of training.
    TrainingPosition() = default;
    /// Epoch `e`, `b` batches into it, `s` steps in all, with the program's running sums (brace
    /// initialisation `{e, b, s}` without sums stays warning-free under -Wextra).
    TrainingPosition(std::uint64_t e, std::uint64_t b, std::uint64_t s, std::vector<double> sums_so_far = {})
        : epoch(e), batch(b), step(s), sums(std::move(sums_so_far)) {}
};

/// Checks that a run of `ranks` ranks taking `batch_size` samples per rank and step, with data seed `seed`,
/// continues the checkpoint `path`, whose position load_checkpoint() returned as `saved`, as the run that
/// wrote it would have: the same seed, and the same samples per step (ranks * batch_size), so that at another
/// number of ranks the update is the same up to float rounding and DataLoader::seek_samples() continues the
/// epoch's global order without skipping or repeating a sample. Throws dtrain::Error naming the path and the
/// field that differs ("was written with seed=1, this run has seed=2"), with the per-rank batch size that
/// would fit when there is one. A checkpoint that did not record its batch size (format version 3, or
/// batch_size 0) is accepted at its own number of ranks only, and one without its number of ranks (version
/// 3) is accepted as it is.
inline void check_resume(const std::string& path, const TrainingPosition& saved, std::uint64_t ranks,
                         std::uint64_t batch_size, std::uint64_t seed) {
    if (saved.ranks == 0) return;  // format version 3: nothing recorded to compare
    DTRAIN_CHECK(saved.seed == seed, "load_checkpoint: '", path, "' was written with seed=", saved.seed,
                 ", this run has seed=", seed, ": the data order would differ; resume with seed ",
                 saved.seed);
    if (saved.batch_size == 0) {
        DTRAIN_CHECK(
            saved.ranks == ranks, "load_checkpoint: '", path, "' was written with ranks=", saved.ranks,
            " and no batch size, this run has ranks=", ranks, ": resume with ", saved.ranks, " ranks");
        return;
    }
    const std::uint64_t global = saved.ranks * saved.batch_size;
    if (global == ranks * batch_size) return;
    const std::string fit =
        global % ranks == 0 ? detail::concat("use batch_size=", global / ranks, " per rank at ranks=", ranks)
                            : detail::concat("run with a number of ranks that divides ", global);
    if (saved.ranks == ranks)
        throw Error(
            detail::concat("load_checkpoint: '", path, "' was written with batch_size=", saved.batch_size,
                           ", this run has batch_size=", batch_size, " (samples per rank and step at ", ranks,
                           " ranks): the updates would differ; resume with batch_size=", saved.batch_size));
    throw Error(detail::concat("load_checkpoint: '", path, "' was written with ranks=", saved.ranks,
                               " x batch_size=", saved.batch_size, " (", global,
                               " samples per step), this run has ranks=", ranks, " x batch_size=", batch_size,
                               " (", ranks * batch_size,
                               "): the updates would differ; keep the samples per step: ", fit));
}

}  // namespace dtrain

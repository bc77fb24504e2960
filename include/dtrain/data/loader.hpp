#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/rng.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/data/augment.hpp>
#include <dtrain/data/dataset.hpp>
#include <dtrain/data/dataset_view.hpp>
#include <dtrain/data/detail/checked.hpp>
#include <dtrain/data/detail/seed.hpp>
#include <dtrain/data/sampler.hpp>

namespace dtrain {

/// Options of DataLoader.
struct LoaderOptions {
    /// Default options (batch size 32).
    LoaderOptions() = default;
    /// Options with `batch` samples per batch and every other field at its default, so `{64}` reads as
    /// "batches of 64".
    LoaderOptions(std::size_t batch) : batch_size(batch) {}  // NOLINT: implicit on purpose

    /// Samples per batch; must be > 0.
    std::size_t batch_size = 32;
    /// Drop the last, partial batch of an epoch instead of yielding it.
    bool drop_last = false;
    /// Shuffle the index list each epoch from (seed, epoch) (ignored with a DistributedSampler, which does
    /// its own shuffling).
    bool shuffle = true;
    /// Seed of the shuffle.
    std::uint64_t seed = 0;
    /// Image augmentation (needs samples of shape [C, H, W]); off by default.
    AugmentOptions augment;
};

/// Yields fixed-size batches of a data set epoch after epoch: features with class labels (labels()) or with
/// float targets (targets(), shape {batch, k}), whichever the data set holds. The order of an epoch comes
/// either from an index list (all samples by default), shuffled from (seed, epoch) when options.shuffle, or
/// from a DistributedSampler (this rank's shard), and does not depend on which kind it holds. The batch
/// tensors are owned by the loader and reused: after the
/// first epoch no batch allocates (a partial last batch has its own buffers). Typical use:
///
///     DataLoader loader(train, {64});
///     for (std::uint64_t e = 0; e < epochs; ++e) {
///         loader.start_epoch(e);
///         while (loader.next()) step(loader.features(), loader.labels());
///     }
class DataLoader {
public:
    /// A loader over every sample of `data` (0..N-1).
    DataLoader(DatasetView data, LoaderOptions opt);
    /// A loader over the samples of `data` at `indices` (e.g. a validation subset); throws when an index is
    /// out of range or the list is empty.
    DataLoader(DatasetView data, std::vector<std::size_t> indices, LoaderOptions opt)
        : data_(std::move(data)), opt_(opt), base_(std::move(indices)) {
        for (auto i : base_)
            DTRAIN_CHECK(i < data_.size, "DataLoader: index ", i, " out of range for a data set of ",
                         data_.size, " samples");
        init();
    }
    /// A loader over this rank's shard of `data`, taken from `sampler` each epoch; the sampler must be
    /// built for data.size samples.
    DataLoader(DatasetView data, DistributedSampler sampler, LoaderOptions opt)
        : data_(std::move(data)), opt_(opt), sampler_(std::move(sampler)) {
        DTRAIN_CHECK(sampler_->dataset_size() == data_.size, "DataLoader: the sampler was built for ",
                     sampler_->dataset_size(), " samples but the data set has ", data_.size);
        init();
    }

    /// Starts epoch `epoch`: computes its order (reproducible from seed and epoch) and rewinds to the first
    /// batch. Does not allocate after the first call.
    void start_epoch(std::uint64_t epoch);

    /// Fills features() and labels() (or targets()) with the next batch of the epoch; false when the epoch
    /// is over.
    bool next();

    /// Starts epoch `epoch` and moves past its first `batches` batches exactly as that many next() calls
    /// would (same order, same augmentation draws), so that the following next() yields the batch an
    /// uninterrupted run sees there: how a run resumed from a checkpoint continues mid-epoch. Costs what
    /// those next() calls cost. Throws dtrain::Error when `batches` exceeds batches_per_epoch().
    void seek(std::uint64_t epoch, std::size_t batches);

    /// Starts epoch `epoch` after its first `samples` samples, which `ranks` ranks trained on in whole steps
    /// of the epoch's global order: how a run resumed from a checkpoint continues mid-epoch, also at another
    /// number of ranks keeping the samples per step. At this loader's number of ranks, with `samples` a
    /// whole number of its steps (batch_size * ranks), it is seek() to that batch (same augmentation draws:
    /// bitwise the uninterrupted run). Otherwise the sampler's shard_indices_after() gives this rank its part
    /// of the samples left, so the epoch neither skips nor repeats one; batch_index() and
    /// batches_per_epoch() then count the rest of the epoch only, and augmentation draws restart from the
    /// epoch's seed. Throws dtrain::Error when the loader has no DistributedSampler and `ranks` is not 1 or
    /// `samples` not a whole number of batches, when its sampler's layout is Contiguous, or when `samples`
    /// exceeds the epoch.
    void seek_samples(std::uint64_t epoch, std::uint64_t samples, int ranks);

    /// Features of the current batch, shape {batch, sample...}.
    const Tensor<float>& features() const { return tail_ ? x_tail_ : x_full_; }
    /// Labels of the current batch. Throws dtrain::Error when the data set holds float targets (use
    /// targets()).
    const Labels& labels() const {
        DTRAIN_CHECK(!data_.targets, "DataLoader::labels: the data set holds float targets (",
                     data_.target_columns,
                     " per sample), not class labels: use targets(), e.g. "
                     "MeanSquaredError's compute(outputs, loader.targets(), grad)");
        return tail_ ? y_tail_ : y_full_;
    }
    /// Float targets of the current batch, shape {batch, k}: the shape of a model's [batch, k] output, which
    /// MeanSquaredError::compute(outputs, targets, grad) requires. Throws dtrain::Error when the data set
    /// holds class labels (use labels()).
    const Tensor<float>& targets() const {
        DTRAIN_CHECK(data_.targets,
                     "DataLoader::targets: the data set holds class labels, not float targets: "
                     "use labels(), or give the loader a data set of float targets");
        return tail_ ? t_tail_ : t_full_;
    }
    /// True when the batches carry float targets (targets()), false when they carry labels (labels()).
    bool has_targets() const { return data_.targets != nullptr; }
    /// Number of samples in the current batch.
    std::size_t current_batch_size() const { return rows(features()); }
    /// Batches yielded so far in this epoch.
    std::size_t batch_index() const { return batch_; }
    /// Current epoch number.
    std::uint64_t epoch() const { return epoch_; }
    /// Samples in one epoch (before dropping a partial batch).
    std::size_t samples_per_epoch() const { return order_.size(); }
    /// Batches in one epoch.
    std::size_t batches_per_epoch() const {
        const std::size_t n = order_.size(), b = opt_.batch_size;
        return n / b + (!opt_.drop_last && n % b != 0 ? 1 : 0);  // not (n + b - 1) / b: b may be SIZE_MAX
    }
    /// The sample indices of this epoch, in order.
    const std::vector<std::size_t>& epoch_order() const { return order_; }
    /// The options.
    const LoaderOptions& options() const { return opt_; }

private:
    void init();

    /// Sizes `x` and, by the kind of the data set, `y` or `t` for batches of `n` samples.
    void allocate_batch(Tensor<float>& x, Labels& y, Tensor<float>& t, std::size_t n) const;
    /// The batch size of `x` (0 before any allocation).
    static std::size_t rows(const Tensor<float>& x) { return x.dimension() == 0 ? 0 : x.shape()[0]; }

    DatasetView data_;
    LoaderOptions opt_;
    std::optional<DistributedSampler> sampler_;
    std::vector<std::size_t> base_, order_;
    std::size_t pos_ = 0, batch_ = 0;
    std::uint64_t epoch_ = 0, stream_ = 0;
    bool tail_ = false;
    Tensor<float> x_full_, x_tail_, t_full_, t_tail_;
    Labels y_full_, y_tail_;
    Rng aug_rng_;
};

#if DTRAIN_HEADER_DEFINITIONS

DTRAIN_INLINE DataLoader::DataLoader(DatasetView data, LoaderOptions opt)
    : data_(std::move(data)), opt_(opt) {
    base_.resize(data_.size);
    for (std::size_t i = 0; i < base_.size(); ++i)
        base_[i] = i;
    init();
}

DTRAIN_INLINE void DataLoader::start_epoch(std::uint64_t epoch) {
    epoch_ = epoch;
    if (sampler_) {
        sampler_->indices(epoch, order_);
    } else {
        order_.assign(base_.begin(), base_.end());
        if (opt_.shuffle) {
            Rng rng(detail::epoch_seed(opt_.seed, epoch));
            dtrain::shuffle(order_.begin(), order_.end(), rng);
        }
    }
    aug_rng_.reseed(detail::epoch_seed(opt_.augment.seed, epoch, 0xa06u + stream_));
    pos_ = 0;
    batch_ = 0;
}

DTRAIN_INLINE bool DataLoader::next() {
    const std::size_t left = order_.size() - pos_;
    if (left == 0 || (opt_.drop_last && left < opt_.batch_size)) return false;
    const std::size_t b = std::min(left, opt_.batch_size);
    tail_ = b < opt_.batch_size;
    Tensor<float>& x = tail_ ? x_tail_ : x_full_;
    Labels& y = tail_ ? y_tail_ : y_full_;
    Tensor<float>& t = tail_ ? t_tail_ : t_full_;
    if (tail_ && rows(x) != b)
        allocate_batch(x, y, t, b);  // only when the tail size changes (never in steady state)
    const std::size_t tc = data_.target_columns;
    const std::size_t m = data_.sample_size();
    const bool aug = opt_.augment.enabled();
    const std::size_t c = aug ? data_.sample_shape[0] : 0, h = aug ? data_.sample_shape[1] : 0,
                      w = aug ? data_.sample_shape[2] : 0;
    for (std::size_t k = 0; k < b; ++k) {
        const std::size_t i = order_[pos_ + k];
        const float* src = data_.features + i * m;
        if (aug)
            augment_image(src, x.data() + k * m, c, h, w, opt_.augment, aug_rng_);
        else
            std::memcpy(x.data() + k * m, src, m * sizeof(float));
        if (data_.targets)
            std::memcpy(t.data() + k * tc, data_.targets + i * tc, tc * sizeof(float));
        else
            y(k) = data_.labels[i];
    }
    pos_ += b;
    ++batch_;
    return true;
}

DTRAIN_INLINE void DataLoader::seek(std::uint64_t epoch, std::size_t batches) {
    start_epoch(epoch);
    DTRAIN_CHECK(batches <= batches_per_epoch(), "DataLoader::seek: batch ", batches,
                 " is past the end of epoch ", epoch, ", which has ", batches_per_epoch(), " batches");
    for (std::size_t i = 0; i < batches; ++i)
        next();
}

DTRAIN_INLINE void DataLoader::seek_samples(std::uint64_t epoch, std::uint64_t samples, int ranks) {
    const std::size_t here = sampler_ ? std::size_t(sampler_->size()) : 1;
    const std::uint64_t per_step = std::uint64_t(opt_.batch_size) * here;
    if (std::size_t(ranks) == here && samples % per_step == 0) {
        seek(epoch, std::size_t(samples / per_step));
        return;
    }
    DTRAIN_CHECK(sampler_,
                 "DataLoader::seek_samples: a loader without a DistributedSampler continues only "
                 "what 1 rank trained on in whole batches of ",
                 opt_.batch_size, ", got ", samples, " samples of ", ranks, " rank(s)");
    DTRAIN_CHECK(samples <= sampler_->dataset_size(), "DataLoader::seek_samples: ", samples,
                 " samples are past the end of epoch ", epoch, ", which has ", sampler_->dataset_size());
    start_epoch(epoch);
    sampler_->indices_after(epoch, std::size_t(samples), order_);
}

DTRAIN_INLINE void DataLoader::init() {
    DTRAIN_CHECK(opt_.batch_size > 0, "DataLoader: batch size must be > 0");
    DTRAIN_CHECK(data_.size > 0 && data_.sample_size() > 0, "DataLoader: the data set is empty (", data_.size,
                 " samples of shape ", detail::shape_str(data_.sample_shape), ")");
    if (opt_.augment.enabled())
        DTRAIN_CHECK(data_.sample_shape.size() == 3,
                     "DataLoader: augmentation needs image samples [C, H, W], "
                     "got samples of shape ",
                     detail::shape_str(data_.sample_shape));
    if (sampler_) stream_ = static_cast<std::uint64_t>(sampler_->rank()) + 1;
    const std::size_t n = sampler_ ? sampler_->num_samples() : base_.size();
    DTRAIN_CHECK(n > 0, "DataLoader: the index list is empty");
    DTRAIN_CHECK(!opt_.drop_last || n >= opt_.batch_size, "DataLoader: batch size ", opt_.batch_size,
                 " with drop_last exceeds the ", n, " samples per epoch, so no batch would be yielded");
    order_.reserve(n);
    // Buffers of at most n rows: a batch size beyond the epoch (up to SIZE_MAX) yields one partial batch.
    if (opt_.batch_size <= n) allocate_batch(x_full_, y_full_, t_full_, opt_.batch_size);
    const std::size_t rest = n % opt_.batch_size;
    if (rest > 0 && !opt_.drop_last) allocate_batch(x_tail_, y_tail_, t_tail_, rest);
    start_epoch(0);
}

DTRAIN_INLINE void DataLoader::allocate_batch(Tensor<float>& x, Labels& y, Tensor<float>& t,
                                              std::size_t n) const {
    const Shape shape = batch_shape(n, data_.sample_shape);
    detail::checked_shape_size(shape, "DataLoader: batches of ", n, " samples");
    x = Tensor<float>::from_shape(shape);
    if (data_.targets)
        t = Tensor<float>::from_shape({n, data_.target_columns});
    else
        y = Labels::from_shape({n});
}

#endif

}  // namespace dtrain

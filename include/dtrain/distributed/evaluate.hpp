#pragma once

/// @file
/// Evaluation across ranks under every policy: the global loss and accuracy of a classifier on a data set,
/// the same on every rank that takes part, with each sample counted once.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include <mpi.h>

#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/operation.hpp>
#include <dtrain/data/dataset.hpp>
#include <dtrain/data/loader.hpp>
#include <dtrain/distributed/async.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/nn/metrics.hpp>
#include <dtrain/nn/model.hpp>

namespace dtrain {

/// What evaluate() returns: global figures over every sample of the data set.
struct Evaluation {
    /// Mean loss over the samples.
    double loss = 0.0;
    /// Fraction of samples whose arg-max score is the label; NaN for a data set of float targets.
    double accuracy = 0.0;
    /// Number of samples evaluated (the data set's size).
    std::uint64_t samples = 0;
};

namespace detail {

/// Converts only to float targets: a loss whose compute() takes class labels alone does not accept it
/// (a Tensor<float> itself would convert to Labels).
struct TargetsArgument {
    operator const Tensor<float>&() const;  // NOLINT: implicit on purpose; declared only, never called
};

/// True when `Loss` computes against float targets (MeanSquaredError), not only class labels.
template <class Loss, class = void>
struct takes_targets : std::false_type {};
template <class Loss>
struct takes_targets<Loss, std::void_t<decltype(std::declval<const Loss&>().compute(
                               std::declval<const Tensor<float>&>(), std::declval<TargetsArgument>(),
                               std::declval<Tensor<float>&>()))>> : std::true_type {};

/// Loss sum, correct count and sample count of `model` (by Model::infer(): eval mode, the model's mode left
/// as it is) on the samples [first, last) of `data`, in batches of `batch_size`.
template <class Loss>
std::vector<double> evaluate_range(Model<float>& model, const Loss& loss, const Dataset& data,
                                   std::size_t first, std::size_t last, std::size_t batch_size) {
    std::vector<double> sums = {0.0, 0.0, 0.0};
    if (first == last) return sums;
    std::vector<std::size_t> indices(last - first);
    for (std::size_t i = 0; i < indices.size(); ++i)
        indices[i] = first + i;
    LoaderOptions lo(batch_size);
    lo.shuffle = false;
    DataLoader loader(data, std::move(indices), lo);
    Tensor<float> grad;
    for (loader.start_epoch(0); loader.next();) {
        const Tensor<float>& out = model.infer(loader.features());
        const double n = double(loader.current_batch_size());
        if (loader.has_targets()) {
            if constexpr (takes_targets<Loss>::value)  // else evaluate() has thrown
                sums[0] += double(loss.compute(out, loader.targets(), grad)) * n;
        } else {
            sums[0] += double(loss.compute(out, loader.labels(), grad)) * n;
            sums[1] += double(count_correct(out, loader.labels()));
        }
        sums[2] += n;
    }
    return sums;
}

/// The Evaluation of the reduced sums {loss sum, correct, samples}; throws for an empty data set.
inline Evaluation evaluation_of(const std::vector<double>& sums, const Dataset& data) {
    DTRAIN_CHECK(sums[2] > 0, "dtrain::evaluate: the data set '", data.source, "' is empty");
    const double accuracy = data.has_targets() ? std::numeric_limits<double>::quiet_NaN() : sums[1] / sums[2];
    return Evaluation{sums[0] / sums[2], accuracy, std::uint64_t(sums[2])};
}

/// Evaluation of `model` on `data` shared by the ranks of `comm`: rank r of p evaluates the contiguous
/// part [r*n/p, (r+1)*n/p) (empty when n < p) and the sums are all-reduced. Collective over `comm`. The
/// all-reduce is the operation "evaluate" at the optimizer's `step` for the stall watchdog, with `timeout`
/// (the optimizer's options.stall_timeout; 0: DTRAIN_STALL_TIMEOUT); the local forward passes are not.
template <class Loss>
Evaluation evaluate_shared(Model<float>& model, const Loss& loss, const Dataset& data, std::size_t batch_size,
                           MPI_Comm comm, std::uint64_t step, double timeout) {
    const std::size_t n = data.size(), p = std::size_t(comm_size(comm)), r = std::size_t(comm_rank(comm));
    std::vector<double> sums = evaluate_range(model, loss, data, r * n / p, (r + 1) * n / p, batch_size);
    {
        OperationScope op("evaluate", comm, step, timeout);
        DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sums.data(), 3, MPI_DOUBLE, MPI_SUM, comm));
    }
    return evaluation_of(sums, data);
}

}  // namespace detail

/// The loss (`loss.compute()`'s batch mean, averaged over samples) and accuracy of `dist.model()` on every
/// sample of `data`, in eval mode (by Model::infer(); the model's mode stays as it is), identical on every
/// rank that takes part.
/// Works under every policy:
/// - synchronous policies: collective over all ranks, each evaluates its part of the data set;
/// - Async inside run() (the worker loop): collective over the workers, each with its current parameters;
/// - Async after run(): collective over all ranks; with gather_to_all every rank evaluates its part of the
///   final model, otherwise rank 0 (which holds the final model) evaluates it all and tells the others.
/// `data` must be the same on every rank. Float targets (regression) need a loss that takes them
/// (MeanSquaredError; the accuracy is then NaN). Throws dtrain::Error for an empty data set or batch_size 0.
/// Its collective is bounded by the stall watchdog as the operation "evaluate (step S)", S being
/// `dist.optimizer().steps()`, with `dist.options().stall_timeout`.
template <class Policy, class Opt, class Loss>
Evaluation evaluate(DistOptimizer<Policy, Opt>& dist, const Loss& loss, const Dataset& data,
                    std::size_t batch_size = 256) {
    static_assert(std::is_same_v<typename Opt::value_type, float>,
                  "dtrain::evaluate: data sets hold float features, so the model must be a Model<float>");
    DTRAIN_CHECK(batch_size > 0, "dtrain::evaluate: batch_size must be > 0");
    DTRAIN_CHECK(detail::takes_targets<Loss>::value || !data.has_targets(), "dtrain::evaluate: '",
                 data.source,
                 "' holds float targets (regression); evaluate it with a loss that takes them, e.g. "
                 "MeanSquaredError");
    const std::uint64_t step = dist.optimizer().steps();
    const double timeout = dist.options().stall_timeout;
    if constexpr (std::is_same_v<Policy, Async>) {
        if (dist.in_run())
            return detail::evaluate_shared(dist.model(), loss, data, batch_size, dist.worker_comm(), step,
                                           timeout);
        if (dist.options().gather_to_all)
            return detail::evaluate_shared(dist.model(), loss, data, batch_size, dist.mpi_comm(), step,
                                           timeout);
        std::vector<double> sums(3, 0.0);
        if (dist.rank() == 0)
            sums = detail::evaluate_range(dist.model(), loss, data, 0, data.size(), batch_size);
        {
            OperationScope op("evaluate", dist.mpi_comm(), step, timeout);
            DTRAIN_MPI_CHECK(MPI_Bcast(sums.data(), 3, MPI_DOUBLE, 0, dist.mpi_comm()));
        }
        return detail::evaluation_of(sums, data);
    } else {
        return detail::evaluate_shared(dist.model(), loss, data, batch_size, dist.worker_comm(), step,
                                       timeout);
    }
}

}  // namespace dtrain

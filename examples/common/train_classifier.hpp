#pragma once

// Shared plumbing of dtrain's example programs (like SINGA's train_cnn.py, which its CNN examples share):
// the common command-line flags (common_flags.hpp) and one data-parallel training loop for a classifier
// with per-epoch metrics reduced over the workers, a live progress bar, a metrics CSV and a Chrome-trace
// timeline. Each example builds its model and data and calls train_classifier().

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <mpi.h>

#include <dtrain/app.hpp>
#include <dtrain/distributed/powersgd_hook.hpp>
#include <dtrain/dtrain.hpp>

#include "common_flags.hpp"

namespace example {

using dtrain::world_rank;
using dtrain::world_size;

/// What a program adds to the shared training loop.
struct TrainSetup {
    /// Augmentation of training images (off by default).
    dtrain::AugmentOptions augment;
    /// Batch size of evaluation.
    std::size_t eval_batch_size = 500;
    /// Print SINGA-style per-epoch output ("Starting Epoch", "Training loss = ...") instead of one line.
    bool singa_style = false;
};

/// Sums of one pass over a data set.
struct PassTotals {
    double loss_sum = 0.0;  // sum over samples of the loss
    double correct = 0.0;
    double samples = 0.0;
};

/// Result of train_classifier().
struct TrainResult {
    double final_test_accuracy = std::numeric_limits<double>::quiet_NaN();
    double samples_per_s = 0.0;  // of the last epoch, over all workers
    bool interrupted = false;    // stopped by --stop-after-step (on every rank)
};

/// Exit status of a run stopped by --stop-after-step, as a job interrupted before its end: EX_TEMPFAIL, so a
/// retry loop around mpiexec runs it again and it resumes from its checkpoint.
inline constexpr int interrupted_status = 75;

/// Data-parallel training of `model` with the local optimizer `opt` under communicator policy `Policy`.
/// The training set is sharded over the workers each epoch (DistributedSampler: shuffled, equal shares),
/// each worker trains on `f.batch_size` samples per step and the test set is split among the workers for
/// evaluation. The first worker (rank 0 for the synchronous policies, rank M for async) prints one line
/// per epoch with the global training loss and accuracy, the test loss and accuracy and the elapsed time
/// (maximum over workers), shows a live progress bar when asked, and writes the CSV log. With --timeline
/// every rank records data loading, forward, backward, step and evaluation. Collective over MPI_COMM_WORLD.
template <class Policy, class Opt, class Loss>
TrainResult train_classifier(dtrain::Model<float>& model, Opt opt, const Loss& loss,
                             const dtrain::Dataset& train, const dtrain::Dataset& test, const CommonFlags& f,
                             const TrainSetup& setup) {
    auto& tl = dtrain::timeline();
    if (!f.timeline.empty()) tl.enable(std::size_t(1) << 18, MPI_COMM_WORLD);

    // Resuming (synchronous policies): every rank restores the checkpoint rank 0 reads into the
    // DistOptimizer, with its gradient compression's state (top-k residuals), after checking that this run
    // keeps the data order and the samples per step (possibly at another number of ranks).
    dtrain::TrainingPosition start;
    const bool resume = !f.checkpoint.empty() && dtrain::checkpoint_exists(f.checkpoint);
    dtrain::DistOptimizer<Policy, Opt> dopt(model, std::move(opt), dist_options<Policy>(f));
    const std::size_t batch = per_worker_batch(f, dopt.num_workers());
    std::string compression = f.compression == "none" ? "" : f.compression;
    if constexpr (dtrain::is_communicator_v<Policy>) {
        if (f.compression == "powersgd") {  // registered before the checkpoint, which holds its state
            dtrain::PowerSgdOptions po;
            po.rank = f.powersgd_rank;
            po.start_iter = f.powersgd_start;
            compression = dopt.register_comm_hook(dtrain::PowerSgdHook<float>(model, po)).describe();
        } else if (f.compression != "none") {
            compression =
                dtrain::describe_compression(dtrain::compression_from_name(f.compression), f.topk_ratio);
        }
        if (resume) {
            start = dtrain::load_checkpoint(f.checkpoint, dopt);
            dtrain::check_resume(f.checkpoint, start, std::uint64_t(dopt.num_workers()), batch, f.seed);
        }
    }
    // Saves the position after `steps` steps of epoch `e` (0-based) with this worker's running sums.
    auto save = [&](std::uint64_t e, std::uint64_t steps, std::uint64_t step, std::vector<double> sums) {
        if constexpr (dtrain::is_communicator_v<Policy>) {
            dtrain::TimelineScope s("checkpoint", "io");
            dtrain::TrainingPosition at(e, steps, step, std::move(sums));
            at.samples = steps * batch * std::uint64_t(dopt.num_workers());
            at.batch_size = batch;
            at.seed = f.seed;
            dtrain::save_checkpoint(f.checkpoint, dopt, at);
        }
    };
    const bool printer = dopt.is_worker() && dopt.worker_rank() == 0;
    const bool live = f.progress == "on" || (f.progress == "auto" && dtrain::output_is_interactive());
    // The printing worker is not world rank 0 under Async (the masters come first): tell the bar which draws.
    dtrain::ProgressBar bar(std::cout, printer && live, 0.1, dtrain::DrawOn::RankZero, printer ? 0 : 1);
    dtrain::CsvLog csv;
    if (!f.log.empty())
        csv = dtrain::CsvLog(
            f.log, {"epoch", "train_loss", "train_acc", "test_loss", "test_acc", "time_s", "samples_per_s"},
            printer);
    if (world_rank() == 0) {
        std::string comm = f.comm;
        if (!compression.empty()) comm += ", compression " + compression;
        if (f.comm == "async")
            comm += " (" + std::to_string(f.masters) + " master(s), staleness " +
                    (f.staleness < 0 ? std::string("unbounded") : std::to_string(f.staleness)) + ")";
        std::printf("%d rank(s), communicator %s; batch %zu per worker; %zu training / %zu test samples\n",
                    world_size(), comm.c_str(), batch, train.size(), test.size());
        if (resume)
            std::printf(
                "resuming from %s at epoch %llu, batch %llu (step %llu; %llu samples of the epoch "
                "done by %llu rank(s))\n",
                f.checkpoint.c_str(), static_cast<unsigned long long>(start.epoch + 1),
                static_cast<unsigned long long>(start.batch), static_cast<unsigned long long>(start.step),
                static_cast<unsigned long long>(start.samples), static_cast<unsigned long long>(start.ranks));
        if (resume && start.epoch >= std::uint64_t(f.epochs))
            std::printf(
                "the checkpoint has already completed %llu epoch(s) of --epochs %d: nothing to train\n",
                static_cast<unsigned long long>(start.epoch), f.epochs);
        std::fflush(stdout);
    }

    TrainResult result;
    double last_test_acc = std::numeric_limits<double>::quiet_NaN();
    auto worker_loop = [&] {
        const int wr = dopt.worker_rank(), wn = dopt.num_workers();
        dtrain::ShardOptions so;
        so.seed = f.seed;
        dtrain::LoaderOptions lo;
        lo.batch_size = batch;
        lo.seed = f.seed;
        lo.augment = setup.augment;
        lo.augment.seed = f.seed + 7919u * std::uint64_t(wr + 1);
        dtrain::DataLoader loader(train, dtrain::DistributedSampler(train.size(), wr, wn, so), lo);
        dtrain::Tensor<float> grad;
        std::uint64_t step = start.step;
        for (int epoch = int(start.epoch) + 1; epoch <= f.epochs; ++epoch) {
            // Steps of this epoch done before the checkpoint: the epoch's global samples so far (any number
            // of ranks keeping the samples per step), or its batches for a file that did not record them.
            std::size_t first = 0;
            if (std::uint64_t(epoch - 1) != start.epoch) {
                loader.start_epoch(std::uint64_t(epoch - 1));
            } else if (start.ranks > 0) {
                loader.seek_samples(start.epoch, start.samples, int(start.ranks));
                first = std::size_t(start.samples / (batch * std::uint64_t(wn)));
            } else {
                loader.seek(start.epoch, std::size_t(start.batch));
                first = std::size_t(start.batch);
            }
            std::size_t batches = first + loader.batches_per_epoch() - loader.batch_index();
            if (f.steps > 0) batches = std::min(batches, f.steps);
            if (setup.singa_style && printer) {
                std::printf("Starting Epoch %d:\n", epoch);
                std::fflush(stdout);
            }
            // Resumed mid-epoch: the first worker starts from the global sums of the batches before the
            // checkpoint, so the epoch's global figures are those of the uninterrupted run.
            PassTotals tr;
            if (first > 0 && start.sums.size() == 3 && wr == 0)
                tr = PassTotals{start.sums[0], start.sums[1], start.sums[2]};
            model.train();
            // The workers start the epoch's clock together (a sum completes only when every worker has
            // joined it, and runs under the optimizer's watchdog): otherwise a worker's time would include
            // waiting in its first step for rank 0, which was still printing the last epoch's line.
            dopt.global_sum(0.0);
            bar.start(std::size_t(epoch), std::size_t(f.epochs), batches);
            const double t0 = MPI_Wtime();
            for (std::size_t b = first; b < batches; ++b) {
                {
                    dtrain::TimelineScope s("data", "data");
                    if (!loader.next()) break;
                }
                const auto& x = loader.features();
                const auto& y = loader.labels();
                dopt.zero_grad();
                double l = 0.0, correct = 0.0;
                {
                    dtrain::TimelineScope s("forward", "compute");
                    const auto& out = model.forward(x);
                    l = double(loss.compute(out, y, grad));
                    correct = double(dtrain::count_correct(out, y));
                }
                {
                    dtrain::TimelineScope s("backward", "compute");
                    model.backward(grad);
                }
                {
                    dtrain::TimelineScope s("step", "optim");
                    dopt.step();
                }
                ++step;
                const double n = double(y.size());
                tr.loss_sum += l * n;
                tr.correct += correct;
                tr.samples += n;
                if (f.checkpoint_every > 0 && step % f.checkpoint_every == 0 && b + 1 < batches)
                    save(std::uint64_t(epoch - 1), b + 1, step, {tr.loss_sum, tr.correct, tr.samples});
                if (step == f.stop_after_step) {  // as if interrupted: every rank at the same step
                    result.interrupted = true;
                    return;
                }
                // Equal shards: the job's samples so far are this worker's times the workers (the epoch
                // line's rate).
                bar.update(b + 1, tr.loss_sum / tr.samples, tr.correct / tr.samples,
                           std::size_t(tr.samples) * std::size_t(wn));
            }
            const double train_time = MPI_Wtime() - t0;
            bar.finish();

            dtrain::Evaluation te;  // global, over the workers' current models
            if (f.eval) {
                dtrain::TimelineScope s("evaluate", "eval");
                te = dtrain::evaluate(dopt, loss, test, setup.eval_batch_size);
            }
            const double elapsed = MPI_Wtime() - t0;
            // Global metrics over the workers (collective over the workers).
            const double g_loss = dopt.global_sum(tr.loss_sum), g_correct = dopt.global_sum(tr.correct),
                         g_samples = dopt.global_sum(tr.samples);
            double times[2] = {train_time, elapsed}, max_times[2] = {0, 0};
            DTRAIN_MPI_CHECK(MPI_Allreduce(times, max_times, 2, MPI_DOUBLE, MPI_MAX, dopt.worker_comm()));
            const double train_loss = g_loss / std::max(1.0, g_samples),
                         train_acc = g_correct / std::max(1.0, g_samples);
            const double test_loss = f.eval ? te.loss : std::nan("");
            const double test_acc = f.eval ? te.accuracy : std::nan("");
            const double rate = max_times[0] > 0 ? g_samples / max_times[0] : 0.0;
            last_test_acc = test_acc;
            result.samples_per_s = rate;
            if (printer) {  // one write per epoch, so mpiexec never splits the line
                char line[512];
                if (setup.singa_style) {
                    std::snprintf(line, sizeof line,
                                  "Training loss = %.6f, training accuracy = %.6f\n"
                                  "Evaluation accuracy = %.6f, Elapsed Time = %.2fs (%.0f samples/s)\n",
                                  train_loss, train_acc, test_acc, max_times[1], rate);
                } else if (f.eval) {
                    std::snprintf(
                        line, sizeof line,
                        "epoch %3d/%d  loss %.4f  train acc %6.2f%%  test loss %.4f  test acc %6.2f%%  "
                        "%.2fs  %.0f samples/s\n",
                        epoch, f.epochs, train_loss, 100.0 * train_acc, test_loss, 100.0 * test_acc,
                        max_times[1], rate);
                } else {
                    std::snprintf(line, sizeof line,
                                  "epoch %3d/%d  loss %.4f  train acc %6.2f%%  %.2fs  %.0f samples/s\n",
                                  epoch, f.epochs, train_loss, 100.0 * train_acc, max_times[1], rate);
                }
                std::fputs(line, stdout);
                std::fflush(stdout);
            }
            csv.row({double(epoch), train_loss, train_acc, test_loss, test_acc, max_times[1], rate});
            if (!f.checkpoint.empty()) save(std::uint64_t(epoch), 0, step, {});
        }
    };

    if (dopt.is_worker()) {
        dopt.run(worker_loop);
    } else {
        dtrain::TimelineScope s("serve (parameter server)", "comm");
        dopt.run(worker_loop);
    }

    // Final accuracy: for the synchronous policies every rank holds the final model, whose accuracy the
    // last epoch measured; for async the final parameters are assembled on rank 0, which evaluates them.
    double final_acc = last_test_acc;
    if (f.comm == "async") {
        final_acc = std::numeric_limits<double>::quiet_NaN();
        if (f.eval) {
            final_acc = dtrain::evaluate(dopt, loss, test, setup.eval_batch_size).accuracy;
            if (world_rank() == 0) {
                std::printf("final model (assembled on rank 0): test accuracy %.2f%%\n", 100.0 * final_acc);
                std::fflush(stdout);
            }
        }
    }
    // Every rank learns rank 0's figure (rank 0 is a worker, or the async master holding the final model),
    // so all ranks return the same exit status.
    DTRAIN_MPI_CHECK(MPI_Bcast(&final_acc, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    DTRAIN_MPI_CHECK(
        MPI_Bcast(&result.samples_per_s, 1, MPI_DOUBLE, f.comm == "async" ? f.masters : 0, MPI_COMM_WORLD));
    result.final_test_accuracy = final_acc;
    int stopped = result.interrupted ? 1 : 0;
    DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &stopped, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    result.interrupted = stopped != 0;

    if (!f.timeline.empty()) {
        tl.disable();
        tl.write(f.timeline, MPI_COMM_WORLD);
        if (world_rank() == 0) {
            std::printf("wrote timeline %s (%d ranks; open in ui.perfetto.dev or chrome://tracing)\n",
                        f.timeline.c_str(), world_size());
            std::fflush(stdout);
        }
    }
    return result;
}

/// Applies --min-accuracy: returns 3 (and rank 0 says why) when the final test accuracy is below it; returns
/// interrupted_status after --stop-after-step.
inline int accuracy_status(const CommonFlags& f, const TrainResult& r) {
    if (r.interrupted) {
        if (world_rank() == 0)
            std::printf(
                "stopped after step %zu (--stop-after-step) as if interrupted: exit status %d; run the "
                "same command again to resume from the checkpoint\n",
                f.stop_after_step, interrupted_status);
        return interrupted_status;
    }
    if (f.min_accuracy < 0) return 0;
    if (r.final_test_accuracy >= f.min_accuracy) {
        if (world_rank() == 0)
            std::printf("final test accuracy %.2f%% >= %.2f%%: OK\n", 100.0 * r.final_test_accuracy,
                        100.0 * f.min_accuracy);
        return 0;
    }
    if (world_rank() == 0)
        std::fprintf(stderr, "final test accuracy %.2f%% is below --min-accuracy %.2f%%\n",
                     100.0 * r.final_test_accuracy, 100.0 * f.min_accuracy);
    return 3;
}

}  // namespace example

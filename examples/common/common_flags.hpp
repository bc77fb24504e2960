#pragma once

// The flags every training example accepts (--epochs, --comm, --log, --checkpoint, ...), declared on a
// CLI11 app, and their checks against each other and the number of ranks.

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <dtrain/core/collectively.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/distributed/compression.hpp>
#include <dtrain/distributed/options.hpp>
#include <dtrain/distributed/policy_name.hpp>
#include <dtrain/util/blas_threads.hpp>

#include "command_line.hpp"

namespace example {

/// Flags every example accepts.
struct CommonFlags {
    int epochs = 10;
    std::size_t batch_size = 64;
    std::size_t global_batch = 0;  // samples per step over all workers (0: --batch-size per worker)
    double lr = 0.01;
    std::uint64_t seed = 42;
    int threads = 1;
    std::string comm = "collective";
    std::string compression = "none";
    double topk_ratio = 0.01;
    std::size_t powersgd_rank = 1;      // --compression powersgd: rank of the approximation
    std::uint64_t powersgd_start = 10;  // --compression powersgd: plain all-reduce steps first
    int masters = 1;
    long long staleness = -1;
    std::string log;
    std::string timeline;
    std::string progress = "auto";
    std::size_t steps = 0;
    bool eval = true;
    double min_accuracy = -1.0;
    std::string checkpoint;
    std::string save_model;  // a model file to write after training (the programs that offer --save-model)
    std::size_t checkpoint_every = 0;
    std::size_t stop_after_step = 0;
};

/// The values --compression accepts: the settings of SyncOptions::compression and powersgd (PowerSgdHook,
/// registered by train_classifier()).
inline std::vector<std::string> compression_flag_names() {
    std::vector<std::string> names = dtrain::compression_names();
    names.push_back("powersgd");
    return names;
}

/// Declares the common flags on `app`, bound to `f` (whose values are the defaults shown by --help).
inline void add_common_flags(CLI::App& app, CommonFlags& f) {
    add_number(app, "--epochs", f.epochs, "passes over the training data", 1);
    add_number(app, "--batch-size", f.batch_size, "samples per batch per worker", 1);
    add_number(app, "--global-batch", f.global_batch,
               "samples per step over all workers, divided equally among them (instead of --batch-size); "
               "keeps the update when a --checkpoint is resumed at another number of ranks")
        ->type_name("N");
    add_number(app, "--lr", f.lr, "learning rate", 0.0);
    add_number(app, "--seed", f.seed, "seed of the model initialisation, shuffling and augmentation");
    add_number(app, "--threads", f.threads, "BLAS threads per rank (openblas_set_num_threads)", 1);
    app.add_option("--comm", f.comm, "communicator policy")->check(CLI::IsMember(dtrain::policy_names()));
    app.add_option(
           "--compression", f.compression,
           "gradient compression on the wire (synchronous policies): none, fp16 or bf16 (16-bit values, "
           "fp32 accumulation), topk (--topk-ratio of each bucket, with error feedback), powersgd (rank "
           "--powersgd-rank approximations of the weight matrices, with error feedback)")
        ->check(CLI::IsMember(compression_flag_names()));
    add_number(app, "--topk-ratio", f.topk_ratio, "--compression topk: share of each gradient bucket sent",
               1e-6, 1.0);
    add_number(app, "--powersgd-rank", f.powersgd_rank, "--compression powersgd: rank of the approximation",
               1);
    add_number(app, "--powersgd-start", f.powersgd_start,
               "--compression powersgd: steps summed uncompressed before PowerSGD starts");
    add_number(app, "--masters", f.masters, "async: parameter-server ranks (0..M-1); the others are workers",
               1);
    add_number(app, "--staleness", f.staleness,
               "async: max steps a worker may run ahead of the slowest (-1 = unbounded)", -1);
    app.add_option("--log", f.log, "write per-epoch metrics to this CSV file (one row per epoch)")
        ->type_name("PATH");
    app.add_option("--timeline", f.timeline, "write a Chrome trace of every rank (open in ui.perfetto.dev)")
        ->type_name("PATH");
    app.add_option(
           "--progress", f.progress,
           "live progress bar: auto = when the output reaches a terminal (also through mpiexec), not in logs")
        ->check(CLI::IsMember({"auto", "on", "off"}));
    add_number(app, "--steps", f.steps, "stop each epoch after this many steps per worker (0 = whole epoch)");
    app.add_flag("--eval", f.eval, "evaluate on the test set after every epoch (--eval=false to skip)");
    add_number(app, "--min-accuracy", f.min_accuracy,
               "exit with status 3 when the final test accuracy is below this")
        ->type_name("X");
    app.add_option(
           "--checkpoint", f.checkpoint,
           "resume from this checkpoint if it exists; write it after every epoch (synchronous policies)")
        ->type_name("PATH");
    add_number(app, "--checkpoint-every", f.checkpoint_every,
               "also write the checkpoint every N steps (0 = per epoch only)")
        ->type_name("N");
    add_number(
        app, "--stop-after-step", f.stop_after_step,
        "stop training right after step N (and its checkpoint), as if interrupted, with exit status 75; "
        "for resume tests");
}

/// True when `--name` appeared on the command line `app` parsed.
inline bool given(const CLI::App& app, const std::string& name) {
    return app.count("--" + name) > 0;
}

/// The samples each of `workers` workers takes per step: --global-batch / workers when given, else
/// --batch-size.
inline std::size_t per_worker_batch(const CommonFlags& f, int workers) {
    return f.global_batch > 0 ? f.global_batch / std::size_t(workers) : f.batch_size;
}

/// The options of DistOptimizer<Policy, ...> from the flags.
template <class Policy>
dtrain::options_for<Policy> dist_options(const CommonFlags& f) {
    dtrain::options_for<Policy> o;
    if constexpr (std::is_same_v<Policy, dtrain::Async>) {
        o.masters = f.masters;
        o.staleness = f.staleness < 0 ? dtrain::unbounded_staleness : std::uint64_t(f.staleness);
    } else {
        o.compression = f.compression == "powersgd" ? dtrain::Compression::None
                                                    : dtrain::compression_from_name(f.compression);
        o.topk_ratio = f.topk_ratio;
    }
    return o;
}

/// Throws dtrain::Error naming the flag when rank 0 cannot write one of the output files the flags ask for
/// (--log, --timeline, --checkpoint, --save-model): found now, not after training. Files it creates to try
/// are removed.
inline void check_output_paths(const CommonFlags& f) {
    if (dtrain::world_rank() != 0) return;
    const std::pair<const char*, std::string> outputs[] = {
        {"--log", f.log},
        {"--timeline", f.timeline},
        {"--checkpoint", f.checkpoint.empty() ? "" : f.checkpoint + ".tmp"},
        {"--save-model", f.save_model.empty() ? "" : f.save_model + ".tmp"}};
    for (const auto& [flag, path] : outputs) {
        if (path.empty()) continue;
        const bool existed = std::filesystem::exists(path);
        const bool ok = bool(std::ofstream(path, std::ios::app));
        const int err = errno;
        if (ok && !existed) std::filesystem::remove(path);
        DTRAIN_CHECK(ok, "command line: ", flag, ": cannot write '", path, "': ", std::strerror(err));
    }
}

/// parse_command_line() with the common checks: the flags against each other, the number of ranks and the
/// output files. Sets the BLAS threads, and --batch-size to the per-worker share of --global-batch when that
/// is given. Returns keep_going, or the exit status of every rank (0 after --help, 2 after a bad flag on any
/// rank).
inline int parse_flags(CLI::App& app, CommonFlags& f, int argc, char** argv) {
    int status = parse_command_line(app, argc, argv, [&] {
        const int size = dtrain::world_size();
        DTRAIN_CHECK(f.comm != "async" || size > f.masters, "command line: --comm async with --masters ",
                     f.masters, " needs at least ", f.masters + 1, " ranks (run with mpiexec -n ",
                     f.masters + 1, " or more), got ", size);
        DTRAIN_CHECK(f.comm == "async" || (!given(app, "masters") && !given(app, "staleness")),
                     "command line: --masters and --staleness apply to --comm async only");
        DTRAIN_CHECK(f.comm != "async" || f.compression == "none",
                     "command line: --compression needs a synchronous policy (collective, ring or naive)");
        DTRAIN_CHECK(f.compression == "topk" || !given(app, "topk-ratio"),
                     "command line: --topk-ratio applies to --compression topk only");
        DTRAIN_CHECK(
            f.compression == "powersgd" || (!given(app, "powersgd-rank") && !given(app, "powersgd-start")),
            "command line: --powersgd-rank and --powersgd-start apply to --compression powersgd only");
        DTRAIN_CHECK(f.comm != "async" || f.checkpoint.empty(),
                     "command line: --checkpoint needs a synchronous policy (collective, ring or naive); "
                     "the async masters hold the optimizer state");
        DTRAIN_CHECK(f.checkpoint_every == 0 || !f.checkpoint.empty(),
                     "command line: --checkpoint-every needs --checkpoint PATH");
        DTRAIN_CHECK(f.global_batch == 0 || !given(app, "batch-size"),
                     "command line: give --batch-size (per worker) or --global-batch (over all workers), "
                     "not both");
        const int workers = f.comm == "async" ? size - f.masters : size;
        DTRAIN_CHECK(f.global_batch % std::size_t(workers) == 0, "command line: --global-batch ",
                     f.global_batch, " is not a multiple of the ", workers,
                     " worker(s): each takes an equal share; run with a number of workers that divides it");
        if (f.global_batch > 0) f.batch_size = per_worker_batch(f, workers);
        dtrain::set_blas_threads(f.threads);
    });
    // Every rank takes the same way out (ranks may have parsed other flags: mpiexec -n 1 a : -n 1 a --x).
    const int worst = dtrain::detail::allreduce_value(status, MPI_MAX, MPI_COMM_WORLD);
    if (worst != status && dtrain::world_rank() == 0)
        std::cerr << app.get_name() << ": error: another rank's command line is invalid (see its flags)\n";
    if (worst != keep_going) return worst;
    try {
        dtrain::collectively([&] { check_output_paths(f); });
    } catch (const dtrain::Error& e) {
        if (dtrain::world_rank() == 0) std::cerr << app.get_name() << ": error: " << e.what() << "\n";
        return 2;
    }
    return keep_going;
}

}  // namespace example

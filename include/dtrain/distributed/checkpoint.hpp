#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <mpi.h>

#include <dtrain/core/comm_handle.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/hash.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/operation.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/distributed/detail/checkpoint_format.hpp>
#include <dtrain/distributed/detail/optimizer_description.hpp>
#include <dtrain/distributed/detail/replica_check.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/distributed/training_position.hpp>
#include <dtrain/nn/model.hpp>
#include <dtrain/optim/optimizer.hpp>

namespace dtrain {

/// True on every rank when rank `root` can open the file `path`. Collective: every rank makes the same choice
/// between resuming and starting afresh, even when only root's file system holds the checkpoint (which is
/// all load_checkpoint() needs).
inline bool checkpoint_exists(const std::string& path, MPI_Comm comm = MPI_COMM_WORLD, int root = 0) {
    OperationScope op("checkpoint_exists", comm);
    int exists = 0;
    if (comm_rank(comm) == root) exists = std::ifstream(path, std::ios::binary).good() ? 1 : 0;
    DTRAIN_MPI_CHECK(MPI_Bcast(&exists, 1, MPI_INT, root, comm));
    return exists != 0;
}

namespace detail {

/// save_checkpoint() with the gradient compression `setting` (describe_compression(); "none" without a
/// DistOptimizer) and this rank's top-k `residual` (empty unless the setting has one; the same length on
/// every rank): root gathers every rank's residual and stores them, in rank order, after the rest.
template <class T, class Opt>
void write_checkpoint(const std::string& path, const Model<T>& model, const Opt& opt,
                      const TrainingPosition& position, MPI_Comm comm, int root, const std::string& setting,
                      Span<const T> residual);

/// load_checkpoint() that also checks the file's gradient compression against `setting` and restores this
/// rank's top-k residual into `residual`; without a DistOptimizer (`setting` empty) a file of a setting
/// with residuals (top-k) is refused and other settings are accepted (they keep no state).
template <class T, class Opt>
TrainingPosition read_checkpoint(const std::string& path, Model<T>& model, Opt& opt, MPI_Comm comm, int root,
                                 const std::string& setting, Span<T> residual);

}  // namespace detail

/// Writes a checkpoint of `model` (parameters, non-trainable state, the layers' extra state such as Dropout's
/// generators, and its layers), of `opt` (its description, state buffer and step count) and of `position` to
/// `path` (with gradient compression "none"; the DistOptimizer overload stores its compression and
/// residuals). Collective over `comm`: every rank first checks that all ranks hold bitwise-identical
/// parameters, model state, optimizer state and extra state (as synchronous data-parallel training
/// guarantees; a difference is an error on every rank naming the rank, what differs and what to do: when only
/// the extra state differs, e.g. Dropout seeded by rank, it names the first such layer and does not call the
/// ranks diverged); then rank `root` writes `path` + ".tmp" and renames it over `path`, so an interrupted
/// save never destroys the previous checkpoint. A failure on `root` is thrown as dtrain::Error naming the
/// path on EVERY rank; a save that fails removes its `.tmp` file, and a `.tmp` left by a save that was
/// killed is overwritten by the next save and never read by load_checkpoint(). The position's running sums
/// are stored summed over the ranks, with the number of ranks (see TrainingPosition). The learning rate
/// schedule is configuration: build the optimizer the same way when resuming. Values are stored in the
/// machine's byte order. With Async, save the model after run() instead.
template <class T, class Opt>
void save_checkpoint(const std::string& path, const Model<T>& model, const Opt& opt,
                     const TrainingPosition& position, MPI_Comm comm = MPI_COMM_WORLD, int root = 0) {
    detail::write_checkpoint(path, model, opt, position, comm, root, "none", Span<const T>());
}

template <class T, class Opt>
void detail::write_checkpoint(const std::string& path, const Model<T>& model, const Opt& opt,
                              const TrainingPosition& position, MPI_Comm comm, int root,
                              const std::string& setting, Span<const T> residual) {
    static_assert(is_optimizer_v<Opt>, "dtrain::save_checkpoint: Opt must model the Optimizer concept");
    static_assert(std::is_same_v<typename Opt::value_type, T>,
                  "dtrain::save_checkpoint: the optimizer's value_type must be the model's");
    const int size = comm_size(comm), rank = comm_rank(comm);
    detail::check_root("save_checkpoint", root, size);
    OperationScope op("save_checkpoint", comm);
    Opt& o = const_cast<Opt&>(opt);  // state() has no const overload in the concept
    const Span<const T> params = model.parameters(), state = model.state();
    const Span<T> ostate = o.state();
    const std::vector<std::uint64_t> extra = model.extra_state();

    // Every rank must hold what root writes; a difference names the part, the rank and what to do.
    constexpr int parts = 4;
    const std::uint64_t mine[parts] = {detail::fnv1a(params.data(), params.size() * sizeof(T)),
                                       detail::fnv1a(state.data(), state.size() * sizeof(T)),
                                       detail::fnv1a(ostate.data(), ostate.size() * sizeof(T)),
                                       detail::fnv1a(extra.data(), extra.size() * sizeof(std::uint64_t))};
    std::vector<std::uint64_t> all(std::size_t(parts * size));
    DTRAIN_MPI_CHECK(MPI_Allgather(mine, parts, MPI_UINT64_T, all.data(), parts, MPI_UINT64_T, comm));
    const std::string not_written = detail::concat("; no checkpoint was written to '", path, "'");
    const char* differences[parts - 1] = {
        "parameters, so the ranks have diverged",
        "model state (BatchNorm running statistics): keep it the same with DistOptions::state_sync "
        "Broadcast or Average (StateSync::None leaves each rank its own)",
        "optimizer state, so the ranks have diverged"};
    for (int k = 0; k < parts - 1; ++k)
        for (int r = 0; r < size; ++r)
            DTRAIN_CHECK(all[std::size_t(r * parts + k)] == all[std::size_t(root * parts + k)],
                         "save_checkpoint: ranks ", root, " and ", r, " hold different ", differences[k],
                         not_written);
    for (int r = 0; r < size; ++r)
        if (all[std::size_t(r * parts + 3)] != all[std::size_t(root * parts + 3)])
            detail::throw_extra_state_difference(model, root, r, not_written, comm);  // same r on every rank
    // The running sums: every rank's, added in rank order on root (the same bits however MPI reduces).
    const std::uint64_t nsums = position.sums.size();
    DTRAIN_CHECK(
        detail::same_everywhere(nsums, comm), "save_checkpoint: rank ", rank, " passes ", nsums,
        " running sum(s) in TrainingPosition::sums and another rank passes another number: pass each "
        "rank's own sums, as many on every rank",
        not_written);
    std::vector<double> gathered(rank == root ? nsums * std::size_t(size) : 0), sums(nsums, 0.0);
    if (nsums > 0)
        DTRAIN_MPI_CHECK(MPI_Gather(position.sums.data(), int(nsums), MPI_DOUBLE, gathered.data(), int(nsums),
                                    MPI_DOUBLE, root, comm));
    for (std::size_t r = 0; r < gathered.size() / std::max<std::size_t>(1, nsums); ++r)
        for (std::size_t k = 0; k < nsums; ++k)
            sums[k] += gathered[r * nsums + k];
    // Residuals differ by rank by design (each keeps what it did not send): root stores all of them.
    std::vector<T> residuals(rank == root ? residual.size() * std::size_t(size) : 0);
    if (!residual.empty()) {
        const int count = detail::mpi_count(residual, "save_checkpoint");
        DTRAIN_MPI_CHECK(MPI_Gather(residual.data(), count, mpi_type<T>(), residuals.data(), count,
                                    mpi_type<T>(), root, comm));
    }

    std::string error;
    if (rank == root) {
        detail::ReplicaFacts facts;
        detail::describe_model(model, facts);
        detail::CheckpointWriter out;
        out.bytes(detail::checkpoint_magic, sizeof detail::checkpoint_magic);
        out.u64(detail::checkpoint_version);
        out.u64(sizeof(T));
        out.text(detail::pack_facts(facts));
        out.text(detail::optimizer_description(opt));
        out.u64(o.state_slots());
        out.u64(o.steps());
        const std::uint64_t samples =
            position.samples > 0 ? position.samples : position.batch * position.batch_size * size;
        for (std::uint64_t v : {position.epoch, position.batch, position.step, samples, position.batch_size,
                                position.seed, std::uint64_t(size)})
            out.u64(v);
        out.values(sums.data(), sums.size());
        out.values(params.data(), params.size());
        out.values(state.data(), state.size());
        out.values(ostate.data(), ostate.size());
        out.values(extra.data(), extra.size());
        out.text(setting);
        out.u64(residual.empty() ? 0 : std::uint64_t(size));
        out.values(residuals.data(), residuals.size());
        error = out.write_atomically(path, "save_checkpoint");
    }
    detail::throw_if_failed_anywhere(error, root, comm);
}

/// Restores a checkpoint written by save_checkpoint() into `model` (parameters, state, extra state) and
/// `opt` (state buffer, resized with reset() if needed, and step count), and returns the saved
/// TrainingPosition. Collective over `comm`: rank `root` reads the file and broadcasts it, so only root
/// needs to see the file. Call it before constructing DistOptimizer (which then broadcasts the restored
/// state) or after (every rank restores the same bytes). Throws dtrain::Error on every rank, naming the path,
/// when the file cannot be read (missing, a directory), is not a dtrain checkpoint, has another format
/// version, is truncated or corrupted (checksum, impossible sizes), or was written for another model (the
/// first layer that differs is named), another kind of optimizer or other hyper-parameters (describe(); the
/// first that differs is named, e.g. "was written with momentum=0.9, this optimizer has momentum=0.5");
/// model and optimizer are then unchanged. The data order and the update size are the program's: check them
/// with check_resume().
/// Gradient compression: a checkpoint of a DistOptimizer with Compression::TopK holds every rank's
/// error-feedback residuals, which a model and optimizer cannot take, so it is refused here (naming its
/// setting; load it with the DistOptimizer overload); checkpoints of the other settings (no state) are
/// accepted, which is how a run changes its compression.
template <class T, class Opt>
TrainingPosition load_checkpoint(const std::string& path, Model<T>& model, Opt& opt,
                                 MPI_Comm comm = MPI_COMM_WORLD, int root = 0) {
    return detail::read_checkpoint(path, model, opt, comm, root, std::string(), Span<T>());
}

template <class T, class Opt>
TrainingPosition detail::read_checkpoint(const std::string& path, Model<T>& model, Opt& opt, MPI_Comm comm,
                                         int root, const std::string& setting, Span<T> residual) {
    static_assert(is_optimizer_v<Opt>, "dtrain::load_checkpoint: Opt must model the Optimizer concept");
    static_assert(std::is_same_v<typename Opt::value_type, T>,
                  "dtrain::load_checkpoint: the optimizer's value_type must be the model's");
    detail::check_root("load_checkpoint", root, comm_size(comm));
    OperationScope op("load_checkpoint", comm);
    const std::vector<unsigned char> bytes = detail::read_on_root(
        path, "load_checkpoint", root, comm, detail::checkpoint_magic, "dtrain checkpoint");
    // Every rank validates the same bytes, so every rank throws the same error.
    detail::CheckpointReader body =
        detail::open_fields(bytes, detail::checkpoint_magic, detail::checkpoint_version, "dtrain checkpoint",
                            path, "load_checkpoint", detail::checkpoint_oldest_version);
    detail::check_stored_model(body, model, path, "load_checkpoint", "was written for another model");
    const std::string described = body.text("the optimizer's description"),
                      mine = detail::optimizer_description(opt);
    detail::check_optimizer_description(described, mine, path);
    const std::uint64_t slots = body.u64("the optimizer's state slots"),
                        steps = body.u64("the optimizer's step count");
    DTRAIN_CHECK(slots == opt.state_slots(), "load_checkpoint: '", path, "' holds an optimizer with ", slots,
                 " state slot(s) per parameter, this optimizer has ", opt.state_slots());
    TrainingPosition pos;
    pos.epoch = body.u64("the position");
    pos.batch = body.u64("the position");
    pos.step = body.u64("the position");
    if (body.version() >= 4) {
        pos.samples = body.u64("the position");
        pos.batch_size = body.u64("the batch size");
        pos.seed = body.u64("the data seed");
        pos.ranks = body.u64("the number of ranks");
    }
    pos.sums = body.values<double>("the position's running sums");

    // Read everything before touching the model, so a bad file leaves model and optimizer as they were.
    const std::vector<T> params = body.values<T>("the parameters"), state = body.values<T>("the model state"),
                         ostate = body.values<T>("the optimizer state");
    const std::vector<std::uint64_t> extra = body.values<std::uint64_t>("the layers' extra state");
    std::string stored = "none";  // version 2 files precede compression
    std::uint64_t ranks = 0;
    std::vector<T> residuals;
    if (body.version() >= 3) {
        stored = body.text("the gradient compression");
        ranks = body.u64("the number of ranks with residuals");
        residuals = body.values<T>("the top-k residuals");
    }
    DTRAIN_CHECK(body.left() == 0, "load_checkpoint: '", path, "' has ", body.left(),
                 " unexpected trailing bytes");
    const std::size_t np = model.num_parameters();
    DTRAIN_CHECK(params.size() == np && state.size() == model.state().size() && ostate.size() == slots * np,
                 "load_checkpoint: '", path, "' is corrupted: it holds ", params.size(), " parameters, ",
                 state.size(), " state values and ", ostate.size(), " optimizer state values for a model of ",
                 np, " parameters and ", model.state().size(), " state values");
    const std::size_t my_extra = model.extra_state().size();
    DTRAIN_CHECK(extra.size() == my_extra, "load_checkpoint: '", path, "' holds ", extra.size(),
                 " words of the layers' extra state, this model's layers have ", my_extra);
    DTRAIN_CHECK(!setting.empty() || ranks == 0, "load_checkpoint: '", path,
                 "' was written with gradient compression ", stored,
                 " and holds every rank's error-feedback residuals, which a model and optimizer without "
                 "DistOptimizer (compression none) cannot take: construct DistOptimizer with that "
                 "SyncOptions::compression and load it with load_checkpoint(path, dist_opt)");
    DTRAIN_CHECK(setting.empty() || stored == setting, "load_checkpoint: '", path,
                 "' was written with gradient compression ", stored, ", this DistOptimizer uses ", setting,
                 " (SyncOptions::compression and topk_ratio, or register_comm_hook()); resume with the "
                 "setting of the checkpoint");
    const int size = comm_size(comm);
    DTRAIN_CHECK(ranks == (residual.empty() ? 0 : std::uint64_t(size)), "load_checkpoint: '", path,
                 "' holds the top-k residuals of ", ranks, " rank(s), this run has ", size,
                 " (each rank resumes its own): resume with the same number of ranks");
    DTRAIN_CHECK(residuals.size() == ranks * residual.size(), "load_checkpoint: '", path,
                 "' is corrupted: it holds ", residuals.size(), " residual values for ", ranks,
                 " rank(s) of ", residual.size(), " values");

    model.set_extra_state(Span<const std::uint64_t>(extra.data(), extra.size()));
    std::copy(params.begin(), params.end(), model.parameters().data());
    std::copy(state.begin(), state.end(), model.state().data());
    if (opt.state().size() != ostate.size()) opt.reset(np);
    std::copy(ostate.begin(), ostate.end(), opt.state().data());
    opt.set_steps(steps);
    const auto own = residuals.begin() + std::ptrdiff_t(std::size_t(comm_rank(comm)) * residual.size());
    std::copy(own, own + std::ptrdiff_t(residual.size()), residual.data());
    return pos;
}

/// save_checkpoint() of a DistOptimizer's model and local optimizer over its workers' communicator (rank
/// options().root writes), with its communication hook's describe() (the gradient compression setting for
/// the built-in hooks) and every rank's state of the hook (Compression::TopK's error-feedback residuals,
/// which differ by rank), so that a resumed run continues bitwise. For the synchronous policies; call it
/// between steps.
template <class Comm, class Opt>
void save_checkpoint(const std::string& path, DistOptimizer<Comm, Opt>& dist,
                     const TrainingPosition& position) {
    static_assert(is_communicator_v<Comm>,
                  "dtrain::save_checkpoint(path, DistOptimizer): synchronous "
                  "policies only; with Async, checkpoint the model after run()");
    detail::write_checkpoint(path, dist.model(), dist.optimizer(), position, dist.worker_comm(),
                             dist.options().root, dist.comm_hook_description(),
                             Span<const typename Opt::value_type>(dist.comm_hook_state()));
}

/// load_checkpoint() into a DistOptimizer's model and local optimizer (every rank restores the same bytes,
/// read by rank options().root) and its communication hook's state (top-k residuals: every rank its own).
/// Call it between steps, e.g. right after construction (and after register_comm_hook()). A checkpoint
/// written with another hook or compression setting (or another topk_ratio) is an error naming both; one
/// with state needs the number of ranks that wrote it.
template <class Comm, class Opt>
TrainingPosition load_checkpoint(const std::string& path, DistOptimizer<Comm, Opt>& dist) {
    static_assert(is_communicator_v<Comm>,
                  "dtrain::load_checkpoint(path, DistOptimizer): synchronous policies only");
    return detail::read_checkpoint(path, dist.model(), dist.optimizer(), dist.worker_comm(),
                                   dist.options().root, dist.comm_hook_description(), dist.comm_hook_state());
}

}  // namespace dtrain

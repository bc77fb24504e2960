#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

#include <mpi.h>

#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/nn/model.hpp>
#include <dtrain/optim/optimizer.hpp>

namespace dtrain {

/// Where training stands when a checkpoint is written; saved with it and returned by load_checkpoint(),
/// so that the resumed run continues with `loader.seek(epoch, batch)` (DataLoader::seek()).
struct TrainingPosition {
    /// The epoch in progress.
    std::uint64_t epoch = 0;
    /// Batches of that epoch already trained on.
    std::uint64_t batch = 0;
    /// Optimizer steps taken in the whole run (informational; the optimizer keeps its own count).
    std::uint64_t step = 0;
};

namespace detail {

/// File signature and format version of dtrain checkpoints.
inline constexpr char checkpoint_magic[8] = {'D', 'T', 'R', 'A', 'I', 'N', 'C', 'K'};
inline constexpr std::uint32_t checkpoint_version = 1;

/// The layer names of `model` joined by ", " (to name models in errors).
template <class T>
std::string layer_names(const Model<T>& model) {
    std::string s;
    for (std::size_t i = 0; i < model.num_layers(); ++i) {
        if (i > 0) s += ", ";
        s += model.layer(i).name();
    }
    return s;
}

/// Appends the bytes of `n` values at `p` to `out`.
inline void put_bytes(std::vector<char>& out, const void* p, std::size_t n) {
    const char* c = static_cast<const char*>(p);
    out.insert(out.end(), c, c + n);
}

/// Appends one 64-bit word.
inline void put_u64(std::vector<char>& out, std::uint64_t v) {
    put_bytes(out, &v, sizeof v);
}

/// Reads a checkpoint's bytes front to back; every read checks that the bytes are there.
class CheckpointReader {
public:
    CheckpointReader(const std::vector<char>& bytes, std::string path)
        : bytes_(bytes), path_(std::move(path)) {}

    /// Copies the next `n` bytes to `p`; throws naming the file and `what` if it is shorter.
    void get(void* p, std::size_t n, const char* what) {
        DTRAIN_CHECK(n <= bytes_.size() - pos_, "load_checkpoint: '", path_, "' is truncated (",
                     bytes_.size(), " bytes) while reading ", what);
        std::memcpy(p, bytes_.data() + pos_, n);
        pos_ += n;
    }
    /// The next 64-bit word.
    std::uint64_t u64(const char* what) {
        std::uint64_t v = 0;
        get(&v, sizeof v, what);
        return v;
    }
    /// Bytes read so far.
    std::size_t position() const { return pos_; }

private:
    const std::vector<char>& bytes_;
    std::string path_;
    std::size_t pos_ = 0;
};

}  // namespace detail

/// True on every rank when rank `root` can open the file `path`. Collective: every rank makes the same choice
/// between resuming and starting afresh, even when only root's file system holds the checkpoint (which is
/// all load_checkpoint() needs).
inline bool checkpoint_exists(const std::string& path, MPI_Comm comm = MPI_COMM_WORLD, int root = 0) {
    int exists = 0;
    if (comm_rank(comm) == root) exists = std::ifstream(path, std::ios::binary).good() ? 1 : 0;
    DTRAIN_MPI_CHECK(MPI_Bcast(&exists, 1, MPI_INT, root, comm));
    return exists != 0;
}

/// Writes a checkpoint of `model` (parameters, non-trainable state, the layers' extra state such as
/// Dropout's generators), of `opt` (its state buffer and step count) and of `position` to `path`.
/// Collective over `comm`: every rank first checks that all ranks hold bitwise-identical parameters, model
/// state and optimizer state (as synchronous data-parallel training guarantees; a difference means the
/// ranks diverged, and is an error on every rank); then rank `root` writes the file, to `path` + ".tmp"
/// first and renamed over `path` once complete, so an interrupted save never destroys the previous
/// checkpoint. A failure on `root` (e.g. the directory does not exist) is thrown as dtrain::Error naming
/// the path on EVERY rank. The file records the value type, the model's layer names and layout, and a
/// checksum; the learning rate and its schedule are configuration, not saved: build the optimizer the same
/// way when resuming. Values are stored in the machine's byte order. With the asynchronous policy,
/// checkpoint the model after run() instead (its optimizer state lives on the masters).
template <class T, class Opt>
void save_checkpoint(const std::string& path, const Model<T>& model, const Opt& opt,
                     const TrainingPosition& position, MPI_Comm comm = MPI_COMM_WORLD, int root = 0) {
    static_assert(is_optimizer_v<Opt>, "dtrain::save_checkpoint: Opt must model the Optimizer concept");
    static_assert(std::is_same_v<typename Opt::value_type, T>,
                  "dtrain::save_checkpoint: the optimizer's value_type must be the model's");
    const int size = comm_size(comm), rank = comm_rank(comm);
    detail::check_root("save_checkpoint", root, size);
    Opt& o = const_cast<Opt&>(opt);  // state() has no const overload in the concept
    const Span<const T> params = model.parameters(), state = model.state();
    const Span<T> ostate = o.state();
    const std::vector<std::uint64_t> extra = model.extra_state();

    // Every rank must hold what root writes.
    std::uint64_t h = detail::fnv1a(params.data(), params.size() * sizeof(T));
    h = detail::fnv1a(state.data(), state.size() * sizeof(T), h);
    h = detail::fnv1a(ostate.data(), ostate.size() * sizeof(T), h);
    h = detail::fnv1a(extra.data(), extra.size() * sizeof(std::uint64_t), h);
    std::vector<std::uint64_t> hashes(std::size_t(size), 0);
    DTRAIN_MPI_CHECK(MPI_Allgather(&h, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, comm));
    for (int r = 0; r < size; ++r)
        DTRAIN_CHECK(hashes[std::size_t(r)] == hashes[std::size_t(root)], "save_checkpoint: rank ", r,
                     "'s parameters, model state or optimizer state differ from rank ", root,
                     "'s, so the ranks have diverged and no checkpoint was written to '", path, "'");

    std::string error;
    if (rank == root) {
        std::vector<char> out;
        const std::string names = detail::layer_names(model);
        detail::put_bytes(out, detail::checkpoint_magic, sizeof detail::checkpoint_magic);
        detail::put_u64(out, detail::checkpoint_version);
        detail::put_u64(out, sizeof(T));
        detail::put_u64(out, params.size());
        detail::put_u64(out, state.size());
        detail::put_u64(out, detail::layout_hash(model));
        detail::put_u64(out, names.size());
        detail::put_bytes(out, names.data(), names.size());
        detail::put_u64(out, o.state_slots());
        detail::put_u64(out, ostate.size());
        detail::put_u64(out, o.steps());
        detail::put_u64(out, extra.size());
        detail::put_u64(out, position.epoch);
        detail::put_u64(out, position.batch);
        detail::put_u64(out, position.step);
        detail::put_bytes(out, params.data(), params.size() * sizeof(T));
        detail::put_bytes(out, state.data(), state.size() * sizeof(T));
        detail::put_bytes(out, ostate.data(), ostate.size() * sizeof(T));
        detail::put_bytes(out, extra.data(), extra.size() * sizeof(std::uint64_t));
        detail::put_u64(out, detail::fnv1a(out.data(), out.size()));

        const std::string tmp = path + ".tmp";
        {
            std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
            if (f) f.write(out.data(), std::streamsize(out.size()));
            if (f) f.flush();
            if (!f)
                error = detail::concat("save_checkpoint: cannot write '", tmp, "': ", std::strerror(errno));
        }
        if (error.empty() && std::rename(tmp.c_str(), path.c_str()) != 0)
            error = detail::concat("save_checkpoint: cannot rename '", tmp, "' to '", path,
                                   "': ", std::strerror(errno));
        if (!error.empty()) std::remove(tmp.c_str());
    }
    detail::throw_if_failed_anywhere(error, root, comm);
}

/// Restores a checkpoint written by save_checkpoint() into `model` (parameters, state, extra state) and
/// `opt` (state buffer, resized with reset() if needed, and step count), and returns the saved
/// TrainingPosition. Collective over `comm`: rank `root` reads the file and broadcasts it, so only root
/// needs to see the file. Call it before constructing DistOptimizer (which then broadcasts the restored
/// state and keeps the optimizer's state, see its constructor) or after (every rank restores the same
/// bytes). Throws dtrain::Error on every rank, naming the path, when the file cannot be read, is not a dtrain
/// checkpoint, has another format version, is truncated or corrupted (checksum), or was written for
/// another model (value type, parameter or state count, layer layout: the message names both models'
/// layers) or another kind of optimizer (state slots).
template <class T, class Opt>
TrainingPosition load_checkpoint(const std::string& path, Model<T>& model, Opt& opt,
                                 MPI_Comm comm = MPI_COMM_WORLD, int root = 0) {
    static_assert(is_optimizer_v<Opt>, "dtrain::load_checkpoint: Opt must model the Optimizer concept");
    static_assert(std::is_same_v<typename Opt::value_type, T>,
                  "dtrain::load_checkpoint: the optimizer's value_type must be the model's");
    const int size = comm_size(comm), rank = comm_rank(comm);
    detail::check_root("load_checkpoint", root, size);
    std::vector<char> bytes;
    std::string error;
    if (rank == root) {
        std::ifstream f(path, std::ios::binary);
        if (!f) {
            error = detail::concat("load_checkpoint: cannot open '", path, "': ", std::strerror(errno));
        } else {
            bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
            if (f.bad()) error = detail::concat("load_checkpoint: cannot read '", path, "'");
        }
    }
    detail::throw_if_failed_anywhere(error, root, comm);
    std::uint64_t n = bytes.size();
    DTRAIN_MPI_CHECK(MPI_Bcast(&n, 1, MPI_UINT64_T, root, comm));
    bytes.resize(n);
    for (std::uint64_t off = 0; off < n;) {  // in pieces that fit MPI's int count
        const int piece = int(std::min<std::uint64_t>(n - off, std::uint64_t(1) << 30));
        DTRAIN_MPI_CHECK(MPI_Bcast(bytes.data() + off, piece, MPI_CHAR, root, comm));
        off += std::uint64_t(piece);
    }

    // Every rank validates the same bytes, so every rank throws the same error.
    char magic[sizeof detail::checkpoint_magic];
    detail::CheckpointReader in(bytes, path);
    in.get(magic, sizeof magic, "the file signature");
    DTRAIN_CHECK(std::memcmp(magic, detail::checkpoint_magic, sizeof magic) == 0, "load_checkpoint: '", path,
                 "' is not a dtrain checkpoint");
    const std::uint64_t version = in.u64("the format version");
    DTRAIN_CHECK(version == detail::checkpoint_version, "load_checkpoint: '", path, "' has format version ",
                 version, ", this dtrain reads version ", detail::checkpoint_version);
    DTRAIN_CHECK(bytes.size() >= in.position() + sizeof(std::uint64_t), "load_checkpoint: '", path,
                 "' is truncated (", bytes.size(), " bytes)");
    std::uint64_t stored_sum = 0;
    std::memcpy(&stored_sum, bytes.data() + bytes.size() - sizeof stored_sum, sizeof stored_sum);
    DTRAIN_CHECK(detail::fnv1a(bytes.data(), bytes.size() - sizeof stored_sum) == stored_sum,
                 "load_checkpoint: '", path, "' is corrupted or truncated (checksum mismatch)");

    const std::uint64_t value_bytes = in.u64("the value size"), np = in.u64("the parameter count"),
                        ns = in.u64("the state count"), layout = in.u64("the layout");
    std::string names(in.u64("the layer names' length"), '\0');
    in.get(names.data(), names.size(), "the layer names");
    const std::string mine = detail::layer_names(model);
    DTRAIN_CHECK(value_bytes == sizeof(T) && np == model.num_parameters() && ns == model.state().size() &&
                     layout == detail::layout_hash(model),
                 "load_checkpoint: '", path, "' was written for another model: ", np, " parameters, ", ns,
                 " state values, ", value_bytes, "-byte values, layers [", names, "]; this model has ",
                 model.num_parameters(), " parameters, ", model.state().size(), " state values, ", sizeof(T),
                 "-byte values, layers [", mine, "]");
    const std::uint64_t slots = in.u64("the optimizer's state slots"),
                        nos = in.u64("the optimizer state size"),
                        steps = in.u64("the optimizer's step count"), nx = in.u64("the extra state size");
    DTRAIN_CHECK(slots == opt.state_slots() && nos == slots * np, "load_checkpoint: '", path,
                 "' holds an optimizer with ", slots, " state slot(s) per parameter, this optimizer has ",
                 opt.state_slots());
    TrainingPosition pos;
    pos.epoch = in.u64("the position");
    pos.batch = in.u64("the position");
    pos.step = in.u64("the position");

    // Read everything before touching the model, so a bad file leaves model and optimizer as they were.
    std::vector<T> params(np), state(ns), ostate(nos);
    std::vector<std::uint64_t> extra(nx);
    in.get(params.data(), np * sizeof(T), "the parameters");
    in.get(state.data(), ns * sizeof(T), "the model state");
    in.get(ostate.data(), nos * sizeof(T), "the optimizer state");
    in.get(extra.data(), nx * sizeof(std::uint64_t), "the layers' extra state");
    DTRAIN_CHECK(in.position() + sizeof stored_sum == bytes.size(), "load_checkpoint: '", path, "' has ",
                 bytes.size() - in.position() - sizeof stored_sum, " unexpected trailing bytes");
    const std::size_t my_extra = model.extra_state().size();
    DTRAIN_CHECK(nx == my_extra, "load_checkpoint: '", path, "' holds ", nx,
                 " words of the layers' extra state, this model's layers have ", my_extra);

    model.set_extra_state(Span<const std::uint64_t>(extra.data(), extra.size()));
    std::copy(params.begin(), params.end(), model.parameters().data());
    std::copy(state.begin(), state.end(), model.state().data());
    if (opt.state().size() != nos) opt.reset(np);
    std::copy(ostate.begin(), ostate.end(), opt.state().data());
    opt.set_steps(steps);
    return pos;
}

/// save_checkpoint() of a DistOptimizer's model and local optimizer over its workers' communicator (rank
/// options().root writes). For the synchronous policies; call it between steps.
template <class Comm, class Opt>
void save_checkpoint(const std::string& path, DistOptimizer<Comm, Opt>& dist,
                     const TrainingPosition& position) {
    static_assert(is_communicator_v<Comm>,
                  "dtrain::save_checkpoint(path, DistOptimizer): synchronous "
                  "policies only; with Async, checkpoint the model after run()");
    save_checkpoint(path, dist.model(), dist.optimizer(), position, dist.worker_comm(), dist.options().root);
}

/// load_checkpoint() into a DistOptimizer's model and local optimizer (every rank restores the same bytes,
/// read by rank options().root). Call it between steps, e.g. right after construction.
template <class Comm, class Opt>
TrainingPosition load_checkpoint(const std::string& path, DistOptimizer<Comm, Opt>& dist) {
    static_assert(is_communicator_v<Comm>,
                  "dtrain::load_checkpoint(path, DistOptimizer): synchronous "
                  "policies only");
    return load_checkpoint(path, dist.model(), dist.optimizer(), dist.worker_comm(), dist.options().root);
}

}  // namespace dtrain

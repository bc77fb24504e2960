#pragma once

/// @file
/// Model files for inference: a model's parameters, non-trainable state and layers, without any optimizer,
/// with named arrays kept next to them (preprocessing statistics, say), so a program can predict with a
/// trained model without building the optimizer it was trained with.

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <mpi.h>

#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/operation.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/distributed/detail/checkpoint_format.hpp>
#include <dtrain/distributed/detail/replica_check.hpp>
#include <dtrain/nn/model.hpp>

namespace dtrain {

/// What a model file keeps next to the model, so that an inference program needs nothing else.
struct ModelExtras {
    /// Named arrays: a Standardizer's statistics (`Standardizer::state()`), a program's numeric settings.
    std::map<std::string, std::vector<double>> arrays;
    /// Named texts: the class names (e.g. one per line), a description of the expected input.
    std::map<std::string, std::string> texts;

    /// True when both hold the same arrays and texts.
    friend bool operator==(const ModelExtras& a, const ModelExtras& b) {
        return a.arrays == b.arrays && a.texts == b.texts;
    }
};

namespace detail {

/// File signature and format version of dtrain model files.
inline constexpr char model_magic[8] = {'D', 'T', 'R', 'A', 'I', 'N', 'M', 'D'};
inline constexpr std::uint64_t model_version = 1;

/// Reads the extras of a model file (the fields after the layers).
inline ModelExtras read_extras(CheckpointReader& in) {
    ModelExtras extras;
    for (std::uint64_t k = 0, n = in.u64("the number of extra arrays"); k < n; ++k) {
        std::string name = in.text("an extra array's name");
        extras.arrays[name] = in.values<double>("an extra array's values");
    }
    for (std::uint64_t k = 0, n = in.u64("the number of extra texts"); k < n; ++k) {
        std::string name = in.text("an extra text's name");
        extras.texts[name] = in.text("an extra text");
    }
    return extras;
}

}  // namespace detail

/// Writes rank `root`'s `model` (parameters, non-trainable state, the layers' extra state, and the layers
/// themselves, which load_model() checks) and `extras` to `path`, atomically (`path`.tmp renamed over
/// `path`). No optimizer state: for inference and fine-tuning; use save_checkpoint() to resume training.
/// Collective over `comm`; a failure (e.g. a missing directory) is thrown as dtrain::Error on every rank.
/// After an Async run(), rank 0 holds the final model: save it with root 0 (the default).
template <class T>
void save_model(const std::string& path, const Model<T>& model, const ModelExtras& extras = {},
                MPI_Comm comm = MPI_COMM_WORLD, int root = 0) {
    detail::check_root("save_model", root, comm_size(comm));
    OperationScope op("save_model", comm);
    std::string error;
    if (comm_rank(comm) == root) {
        detail::ReplicaFacts facts;
        detail::describe_model(model, facts);
        const std::vector<std::uint64_t> extra = model.extra_state();
        detail::CheckpointWriter out;
        out.bytes(detail::model_magic, sizeof detail::model_magic);
        out.u64(detail::model_version);
        out.u64(sizeof(T));
        out.text(detail::pack_facts(facts));
        out.u64(extras.arrays.size());  // the extras first: read_model_extras() stops after them
        for (const auto& [name, values] : extras.arrays) {
            out.text(name);
            out.values(values.data(), values.size());
        }
        out.u64(extras.texts.size());
        for (const auto& [name, text] : extras.texts) {
            out.text(name);
            out.text(text);
        }
        out.values(model.parameters().data(), model.parameters().size());
        out.values(model.state().data(), model.state().size());
        out.values(extra.data(), extra.size());
        error = out.write_atomically(path, "save_model");
    }
    detail::throw_if_failed_anywhere(error, root, comm);
}

/// Restores a model file written by save_model() into `model`, which must have the same layers (build it
/// the same way: the first differing layer is named otherwise), and returns the extras. Collective over
/// `comm`: rank `root` reads the file and every rank gets the same model. Throws dtrain::Error on every
/// rank, naming the file, when it cannot be read, is not a dtrain model file, is truncated or corrupted, or
/// holds another model; `model` is then unchanged.
template <class T>
ModelExtras load_model(const std::string& path, Model<T>& model, MPI_Comm comm = MPI_COMM_WORLD,
                       int root = 0) {
    detail::check_root("load_model", root, comm_size(comm));
    OperationScope op("load_model", comm);
    const std::vector<unsigned char> bytes =
        detail::read_on_root(path, "load_model", root, comm, detail::model_magic, "dtrain model file");
    detail::CheckpointReader in = detail::open_fields(bytes, detail::model_magic, detail::model_version,
                                                      "dtrain model file", path, "load_model");
    detail::check_stored_model(in, model, path, "load_model", "holds another model");
    ModelExtras extras = detail::read_extras(in);
    const std::vector<T> params = in.values<T>("the parameters"), state = in.values<T>("the model state");
    const std::vector<std::uint64_t> extra = in.values<std::uint64_t>("the layers' extra state");
    DTRAIN_CHECK(in.left() == 0, "load_model: '", path, "' has ", in.left(), " unexpected trailing bytes");
    DTRAIN_CHECK(params.size() == model.num_parameters() && state.size() == model.state().size() &&
                     extra.size() == model.extra_state().size(),
                 "load_model: '", path, "' is corrupted: it holds ", params.size(), " parameters and ",
                 state.size(), " state values for a model of ", model.num_parameters(), " and ",
                 model.state().size());
    model.set_extra_state(Span<const std::uint64_t>(extra.data(), extra.size()));
    std::copy(params.begin(), params.end(), model.parameters().data());
    std::copy(state.begin(), state.end(), model.state().data());
    return extras;
}

/// The extras of a model file written by save_model(), without a model: for a program that must learn from
/// them how to build the model before load_model() (e.g. which activation it has). Collective over `comm`
/// (rank `root` reads); throws dtrain::Error on every rank, naming the file, as load_model() does.
inline ModelExtras read_model_extras(const std::string& path, MPI_Comm comm = MPI_COMM_WORLD, int root = 0) {
    detail::check_root("read_model_extras", root, comm_size(comm));
    OperationScope op("read_model_extras", comm);
    const std::vector<unsigned char> bytes =
        detail::read_on_root(path, "read_model_extras", root, comm, detail::model_magic, "dtrain model file");
    detail::CheckpointReader in = detail::open_fields(bytes, detail::model_magic, detail::model_version,
                                                      "dtrain model file", path, "read_model_extras");
    in.u64("the value size");
    in.text("the model's layers");
    return detail::read_extras(in);
}

}  // namespace dtrain

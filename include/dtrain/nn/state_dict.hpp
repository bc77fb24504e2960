#pragma once

/// @file
/// Loading a PyTorch state_dict, saved as a NumPy .npz file, into a Model of the same architecture: the
/// start of fine-tuning from PyTorch weights.

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/detail/npz_reader.hpp>
#include <dtrain/nn/layer.hpp>
#include <dtrain/nn/layers/batchnorm.hpp>
#include <dtrain/nn/layers/conv2d.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/embedding.hpp>
#include <dtrain/nn/layers/layernorm.hpp>
#include <dtrain/nn/layers/residual.hpp>
#include <dtrain/nn/model.hpp>

namespace dtrain {

namespace detail {

/// One tensor a layer takes from a state_dict: which layer and role, PyTorch's shape for it and where it
/// goes (the model's parameter buffer or, for running statistics, its state buffer).
struct StateDictSlot {
    std::string layer;  // "layer 2 Dense(30, 3)"
    std::string role;   // "weight", "bias", "running_mean", "running_var"
    std::vector<std::size_t> shape;
    bool state = false;
    std::size_t offset = 0;
};

/// True for the entries load_state_dict() passes over: BatchNorm's num_batches_tracked.
inline bool is_batch_counter(const std::string& name) {
    const std::string s = "num_batches_tracked";
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
}

/// True when the entry `name` is a running statistic ("bn.running_mean", "running_var").
inline bool is_running_stat(const std::string& name) {
    for (const std::string s : {"running_mean", "running_var"})
        if (name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) return true;
    return false;
}

/// Appends the tensors `layer` takes from a state_dict, in PyTorch's order, to `out`: its parameters start
/// at `params` in the model's parameter buffer and its state at `state` in the state buffer; `where` is
/// its position ("3", or "3.1" for child 1 of a Residual at 3). Throws for a layer that has parameters or
/// state and no known PyTorch counterpart.
template <class T>
void state_dict_slots(const Layer<T>& layer, std::size_t params, std::size_t state, const std::string& where,
                      std::vector<StateDictSlot>& out) {
    const std::string id = "layer " + where + " " + layer.name();
    using S = std::vector<std::size_t>;
    const auto add = [&](const char* role, S shape, bool in_state) {
        std::size_t& at = in_state ? state : params;
        out.push_back(StateDictSlot{id, role, shape, in_state, at});
        at += shape_size(shape);
    };
    if (const auto* d = dynamic_cast<const Dense<T>*>(&layer)) {
        add("weight", {d->out_features(), d->in_features()}, false);
        add("bias", {d->out_features()}, false);
    } else if (const auto* c = dynamic_cast<const Conv2d<T>*>(&layer)) {
        const auto k = c->kernel_size();
        add("weight", {c->out_channels(), c->in_channels(), k[0], k[1]}, false);
        add("bias", {c->out_channels()}, false);
    } else if (dynamic_cast<const BatchNorm1d<T>*>(&layer) != nullptr ||
               dynamic_cast<const BatchNorm2d<T>*>(&layer) != nullptr) {
        const std::size_t ch = layer.num_params() / 2;
        add("weight", {ch}, false);
        add("bias", {ch}, false);
        add("running_mean", {ch}, true);
        add("running_var", {ch}, true);
    } else if (const auto* n = dynamic_cast<const LayerNorm<T>*>(&layer)) {
        add("weight", {n->features()}, false);
        add("bias", {n->features()}, false);
    } else if (const auto* e = dynamic_cast<const Embedding<T>*>(&layer)) {
        add("weight", {e->count(), e->dim()}, false);
    } else if (const auto* r = dynamic_cast<const Residual<T>*>(&layer)) {
        for (std::size_t i = 0; i < r->num_layers(); ++i)
            state_dict_slots(r->layer(i), params + r->parameter_ranges()[i].offset,
                             state + r->state_ranges()[i].offset, where + "." + std::to_string(i), out);
    } else {
        DTRAIN_CHECK(layer.num_params() == 0 && layer.num_state() == 0, "load_state_dict: ", id,
                     " has parameters whose PyTorch layout is not known here (loaded: Dense, Conv2d, "
                     "BatchNorm1d, BatchNorm2d, LayerNorm, Embedding, and the children of Residual)");
    }
}

}  // namespace detail

/// Loads the PyTorch state_dict saved at `path` into `model`, a Model of the same architecture. The file
/// is what
///
///     numpy.savez(path, **{k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})
///
/// writes (or numpy.savez_compressed): one float32 or float64 array per state_dict entry, in state_dict
/// order, converted to T.
///
/// The mapping is by order, not by name. The model's tensors, layer 0 first (a Residual's children in
/// order), are
/// - Dense: weight [out, in], bias [out] (torch.nn.Linear's);
/// - Conv2d: weight [out, in, kh, kw], bias [out] (torch.nn.Conv2d's);
/// - BatchNorm1d / BatchNorm2d: weight [C], bias [C] (gamma and beta), then running_mean [C] and
///   running_var [C], which go to the model's state buffer;
/// - LayerNorm: weight [features], bias [features]; Embedding: weight [count, dim];
/// - nothing for the layers without parameters (activations, pooling, Flatten, Dropout).
///
/// They are matched one by one with the file's entries in order, leaving out BatchNorm's
/// num_batches_tracked and the entries named in `skip` (e.g. a head that the model replaces). Each pair
/// must have the same shape, and an entry named *running_mean / *running_var must meet a running
/// statistic and the other way round.
///
/// Throws dtrain::Error, and leaves `model` unchanged, when the file is missing, unreadable, not an .npz
/// file or damaged; when a name in `skip` is not in the file; when shapes differ ("load_state_dict:
/// layer 2 Dense(30, 3) weight has shape [3, 30] but 'fc2.weight' in weights.npz has [30, 3]"); when the
/// file has fewer or more entries than the model has tensors (naming the first one missing or left over);
/// for an entry of another dtype than float32 / float64 or in Fortran order; and for a layer with
/// parameters that has no PyTorch counterpart here. Everything is checked and converted into copies of the
/// buffers before the model's are overwritten.
template <class T>
void load_state_dict(Model<T>& model, const std::string& path, const std::vector<std::string>& skip = {}) {
    constexpr const char* who = "load_state_dict";
    const std::vector<detail::NpyArray> arrays = detail::read_npz(path, who);
    const auto skipped = [&](const std::string& name) {
        return std::find(skip.begin(), skip.end(), name) != skip.end();
    };
    for (const std::string& s : skip) {
        const bool found =
            std::any_of(arrays.begin(), arrays.end(), [&](const detail::NpyArray& a) { return a.name == s; });
        DTRAIN_CHECK(found, who, ": '", s, "' is to be skipped but is not in ", path);
    }
    std::vector<const detail::NpyArray*> entries;
    for (const detail::NpyArray& a : arrays)
        if (!detail::is_batch_counter(a.name) && !skipped(a.name)) entries.push_back(&a);

    std::vector<detail::StateDictSlot> slots;
    for (std::size_t i = 0; i < model.num_layers(); ++i)
        detail::state_dict_slots(model.layer(i), model.parameter_ranges()[i].offset,
                                 model.state_ranges()[i].offset, std::to_string(i), slots);

    std::vector<T> params(model.parameters().begin(), model.parameters().end());
    std::vector<T> state(model.state().begin(), model.state().end());
    for (std::size_t k = 0; k < std::min(slots.size(), entries.size()); ++k) {
        const detail::StateDictSlot& s = slots[k];
        const detail::NpyArray& a = *entries[k];
        const bool stat = s.role == "running_mean" || s.role == "running_var";
        DTRAIN_CHECK(stat == detail::is_running_stat(a.name), who, ": ", s.layer, " ", s.role, " meets '",
                     a.name, "' in ", path,
                     stat ? ", which is not a running statistic" : ", a running statistic",
                     ": the model and the state_dict do not have the same layers");
        DTRAIN_CHECK(s.shape == a.shape, who, ": ", s.layer, " ", s.role, " has shape ",
                     detail::shape_str(s.shape), " but '", a.name, "' in ", path, " has ",
                     detail::shape_str(a.shape));
        detail::npy_values(a, (s.state ? state : params).data() + s.offset, path, who);
    }
    const auto counts = [&] {
        return detail::concat(who, ": ", path, " has ", entries.size(), " tensors (num_batches_tracked",
                              skip.empty() ? "" : " and the skipped entries",
                              " not counted) but the model takes ", slots.size(), ": ");
    };
    if (entries.size() < slots.size()) {
        const detail::StateDictSlot& s = slots[entries.size()];
        throw Error(detail::concat(counts(), "nothing for ", s.layer, " ", s.role, " ",
                                   detail::shape_str(s.shape),
                                   slots.size() - entries.size() > 1 ? " and the tensors after it" : ""));
    }
    if (entries.size() > slots.size()) {
        const detail::NpyArray& a = *entries[slots.size()];
        throw Error(
            detail::concat(counts(), "'", a.name, "' ", detail::shape_str(a.shape),
                           entries.size() > slots.size() + 1 ? " and the entries after it have" : " has",
                           " no layer in the model (leave them out with `skip`)"));
    }
    std::copy(params.begin(), params.end(), model.parameters().begin());
    std::copy(state.begin(), state.end(), model.state().begin());
}

}  // namespace dtrain

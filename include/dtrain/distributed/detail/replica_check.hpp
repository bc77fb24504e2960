#pragma once

/// @file
/// "Same on every rank" checks of the distributed optimizers and checkpoints: a rank's model, optimizer and
/// options as a list of named facts, compared across ranks so that an error names the first fact that
/// differs (layer 8: Dense(128, 64) on rank 0 but Dense(128, 80) on rank 1) instead of a hash; likewise the
/// first layer whose extra state differs when a checkpoint's ranks differ in nothing else.

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <mpi.h>

#include <dtrain/core/error.hpp>
#include <dtrain/core/hash.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/distributed/compression.hpp>
#include <dtrain/distributed/options.hpp>
#include <dtrain/nn/model.hpp>
#include <dtrain/optim/optimizer.hpp>

namespace dtrain::detail {

/// One fact every rank must agree on: `part` is what it belongs to ("the models", "the optimizers", "the
/// options"), `key` names it ("layer 3", "lr") and `value` is this rank's value as text.
struct ReplicaFact {
    /// What the fact belongs to, as used in the error: "the models", "the optimizers", "the options".
    std::string part;
    /// The fact's name.
    std::string key;
    /// This rank's value.
    std::string value;
};

/// An ordered list of facts; two ranks agree when their lists are equal.
using ReplicaFacts = std::vector<ReplicaFact>;

/// Appends the fact (part, key, value as text via operator<<).
template <class V>
void add_fact(ReplicaFacts& facts, const char* part, std::string key, const V& value) {
    if constexpr (std::is_same_v<V, bool>)
        facts.push_back(ReplicaFact{part, std::move(key), value ? "true" : "false"});
    else
        facts.push_back(ReplicaFact{part, std::move(key), concat(value)});
}

/// "Dense(4, 30) (150 parameters)", with the state count when the layer has state: a layer as the facts
/// and checkpoints name it.
template <class T>
std::string describe_layer(const Model<T>& model, std::size_t i) {
    const Range& p = model.parameter_ranges()[i];
    const Range& s = model.state_ranges()[i];
    std::string d = concat(model.layer(i).name(), " (", p.size, " parameters");
    if (s.size > 0) d += concat(", ", s.size, " state values");
    return d + ")";
}

/// The model's facts, in the order that names the first differing layer first: the number of layers,
/// every layer (name and sizes), then the value size.
template <class T>
void describe_model(const Model<T>& model, ReplicaFacts& facts) {
    add_fact(facts, "the models", "the number of layers", model.num_layers());
    for (std::size_t i = 0; i < model.num_layers(); ++i)
        add_fact(facts, "the models", concat("layer ", i), describe_layer(model, i));
    add_fact(facts, "the models", "the value size in bytes", sizeof(T));
}

/// The optimizer's facts: its describe() (kind and hyper-parameters) when it has one, and its state slots.
template <class Opt>
void describe_optimizer(const Opt& opt, ReplicaFacts& facts) {
    if constexpr (has_describe_v<Opt>) add_fact(facts, "the optimizers", "the optimizer", opt.describe());
    add_fact(facts, "the optimizers", "the number of state slots", opt.state_slots());
}

/// The options every policy takes, as facts.
inline void describe_options(const DistOptions& o, ReplicaFacts& facts) {
    add_fact(facts, "the options", "accumulation_steps", o.accumulation_steps);
    add_fact(facts, "the options", "root", o.root);
    add_fact(facts, "the options", "nonfinite", int(o.nonfinite));
}

/// The synchronous policies' options, as facts.
inline void describe_options(const SyncOptions& o, ReplicaFacts& facts) {
    describe_options(static_cast<const DistOptions&>(o), facts);
    add_fact(facts, "the options", "bucket_bytes", o.bucket_bytes);
    add_fact(facts, "the options", "overlap", o.overlap);
    add_fact(facts, "the options", "state_sync", int(o.state_sync));
    add_fact(facts, "the options", "compression", describe_compression(o.compression, o.topk_ratio));
}

/// The parameter-server options, as facts.
inline void describe_options(const AsyncOptions& o, ReplicaFacts& facts) {
    describe_options(static_cast<const DistOptions&>(o), facts);
    add_fact(facts, "the options", "masters", o.masters);
    add_fact(facts, "the options", "staleness", o.staleness);
    add_fact(facts, "the options", "sharding", int(o.sharding));
    add_fact(facts, "the options", "average_rounds", o.average_rounds);
    add_fact(facts, "the options", "gather_to_all", o.gather_to_all);
}

/// Facts packed into one string (fields and facts separated by control characters no name contains).
inline std::string pack_facts(const ReplicaFacts& facts) {
    std::string s;
    for (const ReplicaFact& f : facts)
        s += f.part + '\x1f' + f.key + '\x1f' + f.value + '\x1e';
    return s;
}

/// The facts pack_facts() packed. Throws dtrain::Error when `s` is not of that form (a stored text from a
/// damaged or crafted file).
inline ReplicaFacts unpack_facts(const std::string& s) {
    constexpr std::size_t npos = std::string::npos;
    ReplicaFacts facts;
    std::size_t pos = 0;
    while (pos < s.size()) {
        const std::size_t end = s.find('\x1e', pos);
        const std::size_t a = s.find('\x1f', pos);
        const std::size_t b = a == npos ? npos : s.find('\x1f', a + 1);
        DTRAIN_CHECK(end != npos && b < end, "the layers' description is malformed at byte ", pos, " of ",
                     s.size(), " (three fields ended by a record separator expected)");
        facts.push_back(
            ReplicaFact{s.substr(pos, a - pos), s.substr(a + 1, b - a - 1), s.substr(b + 1, end - b - 1)});
        pos = end + 1;
    }
    return facts;
}

/// Index of the first fact where `a` and `b` differ (a missing fact differs), or npos when they are equal.
inline std::size_t first_difference(const ReplicaFacts& a, const ReplicaFacts& b) {
    for (std::size_t i = 0; i < a.size() || i < b.size(); ++i) {
        if (i >= a.size() || i >= b.size()) return i;
        if (a[i].part != b[i].part || a[i].key != b[i].key || a[i].value != b[i].value) return i;
    }
    return std::string::npos;
}

/// The first difference of `a` and `b` (which must differ): the part it belongs to and "<key> is <value in
/// a> <a_name> but <value in b> <b_name>".
inline std::pair<std::string, std::string> describe_difference(const ReplicaFacts& a,
                                                               const std::string& a_name,
                                                               const ReplicaFacts& b,
                                                               const std::string& b_name) {
    const std::size_t i = first_difference(a, b);
    const ReplicaFact none{"", "", "(nothing)"};
    const ReplicaFact& x = i < a.size() ? a[i] : none;
    const ReplicaFact& y = i < b.size() ? b[i] : none;
    const ReplicaFact& named = i < a.size() ? x : y;
    return {named.part, concat(named.key, " is ", x.value, " ", a_name, " but ", y.value, " ", b_name)};
}

/// Collective over `comm`: returns when every rank passed the same facts; otherwise throws dtrain::Error on
/// EVERY rank with "<who>: <part> differ across ranks: <key> is <root's value> on rank <root> but <value>
/// on rank <r> (<hint>)" for the lowest rank r that differs from `root` and the first fact where it does.
/// Costs one two-word all-reduce when the ranks agree.
inline void check_replicas(const ReplicaFacts& facts, const std::string& who, const std::string& hint,
                           int root, MPI_Comm comm) {
    const std::string mine = pack_facts(facts);
    if (same_everywhere(fnv1a(mine.data(), mine.size()), comm)) return;
    const int rank = comm_rank(comm), size = comm_size(comm);
    std::string theirs = mine;
    broadcast_string(theirs, root, comm);
    const ReplicaFacts root_facts = unpack_facts(theirs);
    const bool differs = first_difference(root_facts, facts) != std::string::npos;
    const int first = allreduce_value(differs ? rank : size, MPI_MIN, comm);
    std::string message;
    if (rank == first) {
        const auto d =
            describe_difference(root_facts, concat("on rank ", root), facts, concat("on rank ", rank));
        message = concat(who, ": ", d.first, " differ across ranks: ", d.second, " (", hint, ")");
    }
    if (first == size) message = concat(who, ": the ranks disagree (", hint, ")");  // hashes differ only
    throw_if_failed_anywhere(message, first == size ? root : first, comm);
}

/// Throws, on every rank, the error of a save_checkpoint() that found ranks `root` and `r` to agree on
/// parameters, model state and optimizer state but not on the layers' extra state: names the first
/// top-level layer whose extra state differs and what to do. Collective over `comm` (every rank calls it
/// with the same `r`). Extra state alone (e.g. Dropout seeded by rank) does not make the replicas diverge,
/// so the message does not say they have.
template <class T>
[[noreturn]] void throw_extra_state_difference(const Model<T>& model, int root, int r,
                                               const std::string& not_written, MPI_Comm comm) {
    const std::size_t layers = model.num_layers();
    std::vector<std::uint64_t> mine(layers + 1);
    mine[0] = layers;
    std::vector<std::uint64_t> words;
    for (std::size_t i = 0; i < layers; ++i) {
        words.clear();
        model.layer(i).save_extra_state(words);
        mine[i + 1] = fnv1a(words.data(), words.size() * sizeof(std::uint64_t));
    }
    // The layer counts first, so that the second exchange has one size on every rank.
    const int size = comm_size(comm);
    std::vector<std::uint64_t> counts(std::size_t(size), 0);
    DTRAIN_MPI_CHECK(MPI_Allgather(&mine[0], 1, MPI_UINT64_T, counts.data(), 1, MPI_UINT64_T, comm));
    const std::string intro = concat("save_checkpoint: ranks ", root, " and ", r,
                                     " hold the same parameters, model state and optimizer state but "
                                     "different layers' extra state");
    DTRAIN_CHECK(counts[std::size_t(r)] == counts[std::size_t(root)], intro, " (", counts[std::size_t(root)],
                 " layers on rank ", root, ", ", counts[std::size_t(r)], " on rank ", r, ")", not_written);
    std::vector<std::uint64_t> all(std::size_t(size) * (layers + 1));
    DTRAIN_MPI_CHECK(MPI_Allgather(mine.data(), int(layers + 1), MPI_UINT64_T, all.data(), int(layers + 1),
                                   MPI_UINT64_T, comm));
    std::size_t i = 0;
    while (i < layers &&
           all[std::size_t(r) * (layers + 1) + i + 1] == all[std::size_t(root) * (layers + 1) + i + 1])
        ++i;
    const std::string where =
        i == layers ? std::string() : concat(" in layer ", i, " (", model.layer(i).name(), ")");
    throw Error(concat(intro, where,
                       ": the state a layer keeps outside its parameters, such as a Dropout mask generator. "
                       "Seed every Dropout with the same value on every rank (not one derived from the rank)",
                       not_written));
}

}  // namespace dtrain::detail

#pragma once

/// @file
/// The checks both DistOptimizer constructors start with: the same model, optimizer and options on every rank
/// (collectively), and options that fit the communicator.

#include <string>
#include <type_traits>
#include <typeinfo>

#include <mpi.h>

#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/distributed/detail/replica_check.hpp>
#include <dtrain/distributed/options.hpp>
#include <dtrain/nn/model.hpp>

namespace dtrain::detail {

/// A communicator type's `policy_name` ("Ring"), or its type name for a communicator without one.
template <class Comm, class = void>
struct comm_policy_name {
    static const char* get() { return typeid(Comm).name(); }
};
/// A communicator type's `policy_name` ("Ring").
template <class Comm>
struct comm_policy_name<Comm, std::void_t<decltype(Comm::policy_name)>> {
    static const char* get() { return Comm::policy_name; }
};

/// Collective over `comm`, and the first thing a DistOptimizer does on it (the policies' own set-up differs,
/// so ranks with different policies would wait in different calls): throws dtrain::Error on every rank when
/// the ranks' `policy` differ ("<who>: the policies differ across ranks: policy is Ring on rank 0 but
/// Collective on rank 1"). Returns `comm`, for a constructor's member initialisers.
inline MPI_Comm check_same_policy(MPI_Comm comm, const std::string& policy, const std::string& who) {
    ReplicaFacts facts;
    add_fact(facts, "the policies", "policy", policy);
    check_replicas(facts, who, "every rank must use the same communication policy", 0, comm);
    return comm;
}

/// Collective over `comm`: check_replicas() of every rank's model, optimizer and options against rank 0's
/// (throws dtrain::Error on every rank, naming `who` and the first difference).
template <class T, class Opt, class Options>
void check_same_setup(const Model<T>& model, const Opt& opt, const Options& options, const std::string& who,
                      MPI_Comm comm) {
    ReplicaFacts facts;
    describe_model(model, facts);
    describe_optimizer(opt, facts);
    describe_options(options, facts);
    check_replicas(facts, who, "every rank must build the same model and optimizer", 0, comm);
}

/// The synchronous DistOptimizer's options on a communicator of `size` ranks: throws dtrain::Error when
/// accumulation_steps is 0 or root is not a rank.
inline void check_options(const SyncOptions& options, int size) {
    DTRAIN_CHECK(options.accumulation_steps >= 1, "DistOptimizer: accumulation_steps must be >= 1, got ",
                 options.accumulation_steps);
    check_root("DistOptimizer", options.root, size);
}

/// DistOptimizer<Async>'s options on a communicator of `size` ranks: throws dtrain::Error unless there are
/// at least one master and one worker, root is a rank and accumulation_steps is at least 1.
inline void check_options(const AsyncOptions& options, int size) {
    const int m = options.masters;
    DTRAIN_CHECK(m >= 1, "DistOptimizer<Async>: options.masters must be at least 1, got ", m);
    DTRAIN_CHECK(size >= m + 1, "DistOptimizer<Async>: ", m, " master(s) need at least ", m + 1,
                 " ranks (at least one worker), but the communicator has ", size, " rank(s)");
    check_root("DistOptimizer<Async>", options.root, size);
    DTRAIN_CHECK(options.accumulation_steps >= 1,
                 "DistOptimizer<Async>: options.accumulation_steps must be at least 1, got ",
                 options.accumulation_steps);
}

}  // namespace dtrain::detail

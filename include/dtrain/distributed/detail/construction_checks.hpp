#pragma once

/// @file
/// The checks both DistOptimizer constructors start with: the same model, optimizer and options on every rank
/// (collectively), and options that fit the communicator.

#include <string>

#include <mpi.h>

#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/distributed/detail/replica_check.hpp>
#include <dtrain/distributed/options.hpp>
#include <dtrain/nn/model.hpp>

namespace dtrain::detail {

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

#pragma once

/// @file
/// The DistOptimizer instances that dtrain::precompiled compiles once (core/precompiled.hpp): every
/// communicator the library ships (Collective, Ring, Naive, Async) with SGD, Adam and AdamW on float.
/// Included by <dtrain/distributed.hpp>; a program that includes only <dtrain/distributed/dist_optimizer.hpp>
/// compiles its DistOptimizer itself, as without the target.

#include <dtrain/comm/collective.hpp>
#include <dtrain/comm/naive.hpp>
#include <dtrain/comm/ring.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/distributed/async.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/optim/adam.hpp>
#include <dtrain/optim/adamw.hpp>
#include <dtrain/optim/sgd.hpp>

namespace dtrain {

DTRAIN_PRECOMPILED_INSTANCE(class DistOptimizer<Collective, SGD<float>>)
DTRAIN_PRECOMPILED_INSTANCE(class DistOptimizer<Collective, Adam<float>>)
DTRAIN_PRECOMPILED_INSTANCE(class DistOptimizer<Collective, AdamW<float>>)
DTRAIN_PRECOMPILED_INSTANCE(class DistOptimizer<Ring, SGD<float>>)
DTRAIN_PRECOMPILED_INSTANCE(class DistOptimizer<Ring, Adam<float>>)
DTRAIN_PRECOMPILED_INSTANCE(class DistOptimizer<Ring, AdamW<float>>)
DTRAIN_PRECOMPILED_INSTANCE(class DistOptimizer<Naive, SGD<float>>)
DTRAIN_PRECOMPILED_INSTANCE(class DistOptimizer<Naive, Adam<float>>)
DTRAIN_PRECOMPILED_INSTANCE(class DistOptimizer<Naive, AdamW<float>>)
DTRAIN_PRECOMPILED_INSTANCE(class DistOptimizer<Async, SGD<float>>)
DTRAIN_PRECOMPILED_INSTANCE(class DistOptimizer<Async, Adam<float>>)
DTRAIN_PRECOMPILED_INSTANCE(class DistOptimizer<Async, AdamW<float>>)

}  // namespace dtrain

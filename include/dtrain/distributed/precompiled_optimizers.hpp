#pragma once

/// @file
/// The DistOptimizer instances that dtrain::precompiled compiles once (core/precompiled.hpp): the
/// synchronous communicators the library ships (Collective, Ring, Naive) with SGD, Adam and AdamW on float
/// (Async's are at the end of distributed/async.hpp). Included at the end of
/// <dtrain/distributed/dist_optimizer.hpp>, so that every program that names one of them sees it.

#include <dtrain/comm/collective.hpp>
#include <dtrain/comm/naive.hpp>
#include <dtrain/comm/ring.hpp>
#include <dtrain/core/precompiled.hpp>
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

}  // namespace dtrain

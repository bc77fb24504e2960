#pragma once

/// @file
/// Distributed training: DistOptimizer and its communicator policies.

#include <dtrain/dist/async.hpp>
#include <dtrain/dist/bucket.hpp>
#include <dtrain/dist/checkpoint.hpp>
#include <dtrain/dist/dist_optimizer.hpp>
#include <dtrain/dist/lr_scaling.hpp>
#include <dtrain/dist/options.hpp>

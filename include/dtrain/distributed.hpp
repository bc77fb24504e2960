#pragma once

/// @file
/// Distributed training: DistOptimizer and its communicator policies.

#include <dtrain/distributed/async.hpp>
#include <dtrain/distributed/bucket.hpp>
#include <dtrain/distributed/checkpoint.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/distributed/lr_scaling.hpp>
#include <dtrain/distributed/options.hpp>
#include <dtrain/distributed/policy_name.hpp>

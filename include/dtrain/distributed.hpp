#pragma once

/// @file
/// Distributed training: DistOptimizer (synchronous policies and the Async parameter servers), its options,
/// gradient buckets and their schedule, the progress thread, shard planning, checkpoints and learning-rate
/// scaling.

#include <dtrain/distributed/async.hpp>
#include <dtrain/distributed/bucket.hpp>
#include <dtrain/distributed/bucket_schedule.hpp>
#include <dtrain/distributed/checkpoint.hpp>
#include <dtrain/distributed/comm_hook.hpp>
#include <dtrain/distributed/compression.hpp>
#include <dtrain/distributed/compression_hook.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/distributed/evaluate.hpp>
#include <dtrain/distributed/lr_scaling.hpp>
#include <dtrain/distributed/model_file.hpp>
#include <dtrain/distributed/options.hpp>
#include <dtrain/distributed/policy_name.hpp>
#include <dtrain/distributed/powersgd_hook.hpp>
#include <dtrain/distributed/progress_thread.hpp>
#include <dtrain/distributed/report.hpp>
#include <dtrain/distributed/sharding.hpp>

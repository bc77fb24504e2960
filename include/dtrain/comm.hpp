#pragma once

/// @file
/// Communicator policies: how ranks move buffers.

#include <dtrain/comm/collective.hpp>
#include <dtrain/comm/communicator.hpp>
#include <dtrain/comm/half.hpp>
#include <dtrain/comm/metrics.hpp>
#include <dtrain/comm/naive.hpp>
#include <dtrain/comm/reduce_op.hpp>
#include <dtrain/comm/ring.hpp>

#pragma once

/// @file
/// dtrain's umbrella header: includes every public header of every area.

#include <dtrain/comm.hpp>
#include <dtrain/config.hpp>
#include <dtrain/core.hpp>
#include <dtrain/data.hpp>
#include <dtrain/distributed.hpp>
#include <dtrain/nn.hpp>
#include <dtrain/optim.hpp>
#include <dtrain/util.hpp>

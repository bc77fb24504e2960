#pragma once

/// @file
/// Local optimizers and learning-rate schedules.

#include <dtrain/optim/adam.hpp>
#include <dtrain/optim/adamw.hpp>
#include <dtrain/optim/optimizer.hpp>
#include <dtrain/optim/schedule.hpp>
#include <dtrain/optim/sgd.hpp>

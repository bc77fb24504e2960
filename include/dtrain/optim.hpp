#pragma once

/// @file
/// Local optimizers and learning-rate schedules.

#include <dtrain/optim/optimizer.hpp>

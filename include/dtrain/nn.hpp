#pragma once

/// @file
/// Neural-network building blocks: the Model, layers, losses, metrics and initialisers.

#include <dtrain/nn/init.hpp>
#include <dtrain/nn/layer.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/losses/cross_entropy.hpp>
#include <dtrain/nn/losses/mse.hpp>
#include <dtrain/nn/metrics.hpp>
#include <dtrain/nn/model.hpp>

#pragma once

/// @file
/// Neural-network building blocks: the Model, layers, losses, metrics and initialisers.
///
/// Design note (composite layers such as Residual): a layer owns no parameter memory and
/// only keeps raw pointers set by bind(), so a composite can report the sum of its children's
/// num_params()/num_state(), split its slice among them in its own bind(), forward init_params() to each
/// child in order, and clone() them. Per-instance caches (Conv2d's column matrix, MaxPool2d's arg-max,
/// Dropout's mask, BatchNorm's batch statistics) hold only what the layer's own last forward() produced
/// and backward() never assumes that `in` or `out` live in Model-owned tensors, so children can be run by
/// a composite on its own intermediate tensors (a skip connection adds grad_out to the children's
/// grad_in). backward() ADDS into parameter gradients, which lets shared sub-blocks accumulate.

#include <dtrain/nn/init.hpp>
#include <dtrain/nn/layer.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/batchnorm.hpp>
#include <dtrain/nn/layers/conv2d.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/dropout.hpp>
#include <dtrain/nn/layers/flatten.hpp>
#include <dtrain/nn/layers/pool2d.hpp>
#include <dtrain/nn/layers/residual.hpp>
#include <dtrain/nn/losses/cross_entropy.hpp>
#include <dtrain/nn/losses/mse.hpp>
#include <dtrain/nn/metrics.hpp>
#include <dtrain/nn/model.hpp>
#include <dtrain/nn/zoo.hpp>

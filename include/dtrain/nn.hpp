#pragma once

/// @file
/// Neural-network building blocks: the Model, layers, losses, metrics and initialisers.
///
/// Design note (one chain for Model and composite layers): Sequential (nn/sequential.hpp) is the ONE
/// forward/backward chain over a list of layers. It lays the layers' parameter, gradient and state slices
/// out one after the other (parameter_ranges()/state_ranges(), relative to the sequence's own slices),
/// splits the slices among the layers in bind(), keeps every layer's output (output(i) is layer i's; two
/// layers run as one pass, nn/layer_fusion.hpp, keep only the second's) and runs backward last to first,
/// telling a BackwardListener of plain function pointers about each layer's partial gradient reports and
/// about each layer being done. Model is a Sequential plus the three flat
/// buffers it owns, the shapes, the seeded generator, the training flag and its hooks (driven through the
/// listener); Residual is a Layer wrapping a Sequential plus the skip addition, forwarding its children's
/// reports with their offsets in its slice. Range (nn/layer.hpp) describes a slice.
///
/// This works because a layer owns no parameter memory and only keeps raw pointers set by bind(), so a
/// composite reports the sum of its children's num_params()/num_state() and lets its Sequential split its
/// slice among them, initialise them in order and clone them. Per-instance caches (Conv2d's column matrix,
/// MaxPool2d's arg-max, Dropout's mask, BatchNorm's batch statistics) hold only what the layer's own last
/// forward() produced and backward() never assumes that `in` or `out` live in Model-owned tensors, so
/// children can be run by a composite on its own intermediate tensors (a skip connection adds grad_out to
/// the children's grad_in). backward() ADDS into parameter gradients, which lets shared sub-blocks
/// accumulate.

#include <dtrain/nn/grad_reporting.hpp>
#include <dtrain/nn/init.hpp>
#include <dtrain/nn/kernel_description.hpp>
#include <dtrain/nn/layer.hpp>
#include <dtrain/nn/layer_fusion.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/batchnorm.hpp>
#include <dtrain/nn/layers/conv2d.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/dropout.hpp>
#include <dtrain/nn/layers/embedding.hpp>
#include <dtrain/nn/layers/flatten.hpp>
#include <dtrain/nn/layers/layernorm.hpp>
#include <dtrain/nn/layers/leaky_relu.hpp>
#include <dtrain/nn/layers/pool2d.hpp>
#include <dtrain/nn/layers/residual.hpp>
#include <dtrain/nn/losses/bce_with_logits.hpp>
#include <dtrain/nn/losses/cross_entropy.hpp>
#include <dtrain/nn/losses/mse.hpp>
#include <dtrain/nn/metrics.hpp>
#include <dtrain/nn/model.hpp>
#include <dtrain/nn/onnx.hpp>
#include <dtrain/nn/predict.hpp>
#include <dtrain/nn/sequential.hpp>
#include <dtrain/nn/state_dict.hpp>
#include <dtrain/nn/zoo.hpp>

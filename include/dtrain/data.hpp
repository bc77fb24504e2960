#pragma once

/// @file
/// Data sets, readers, batching and sharding across ranks.

#include <dtrain/data/augment.hpp>
#include <dtrain/data/cifar.hpp>
#include <dtrain/data/csv.hpp>
#include <dtrain/data/dataset.hpp>
#include <dtrain/data/dataset_view.hpp>
#include <dtrain/data/idx.hpp>
#include <dtrain/data/loader.hpp>
#include <dtrain/data/sampler.hpp>
#include <dtrain/data/split.hpp>
#include <dtrain/data/transform.hpp>

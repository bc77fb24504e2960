#pragma once

/// @file
/// Distributed training: DistOptimizer and its communicator policies.

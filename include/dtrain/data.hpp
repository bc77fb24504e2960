#pragma once

/// @file
/// Data sets, readers, batching and sharding across ranks.

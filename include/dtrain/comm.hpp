#pragma once

/// @file
/// Communicator policies: how ranks move buffers.

#include <dtrain/comm/communicator.hpp>

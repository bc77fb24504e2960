#pragma once

/// @file
/// The name this area had before 0.2: includes <dtrain/distributed.hpp>. New code includes that header (a
/// folder named `dist/` is ignored by many `.gitignore` templates and tools, which can silently drop it).

#include <dtrain/distributed.hpp>

#pragma once

/// dtrain's version, major part.
#define DTRAIN_VERSION_MAJOR 0
/// dtrain's version, minor part.
#define DTRAIN_VERSION_MINOR 1
/// dtrain's version, patch part.
#define DTRAIN_VERSION_PATCH 0

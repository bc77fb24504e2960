#pragma once

/// @file
/// Application helpers for training programs (target dtrain::app): a live progress bar and a metrics CSV
/// log. Not part of the library proper, so <dtrain/dtrain.hpp> does not include this header; link
/// dtrain::app and include it (or <dtrain/app/...>) where a program wants them.

#include <dtrain/app/csv_log.hpp>
#include <dtrain/app/progress.hpp>

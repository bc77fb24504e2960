#pragma once

/// @file
/// Utilities for training programs: command-line parsing, progress bar, metrics CSV log, Chrome-trace
/// timeline and BLAS thread control.

#include <dtrain/util/blas_threads.hpp>
#include <dtrain/util/cli.hpp>
#include <dtrain/util/csv_log.hpp>
#include <dtrain/util/progress.hpp>
#include <dtrain/util/timeline.hpp>

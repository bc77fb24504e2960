#pragma once

/// @file
/// Core: errors, spans, tensors, random numbers, BLAS and the thin MPI layer.

#include <dtrain/core/abort.hpp>
#include <dtrain/core/blas.hpp>
#include <dtrain/core/collectively.hpp>
#include <dtrain/core/crash_report.hpp>
#include <dtrain/core/environment.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/exit_timer.hpp>
#include <dtrain/core/hash.hpp>
#include <dtrain/core/launcher.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/operation.hpp>
#include <dtrain/core/rng.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/core/watchdog.hpp>

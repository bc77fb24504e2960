#pragma once

/// @file
/// Library utilities: the Chrome-trace timeline and BLAS thread control. The progress
/// bar and the metrics CSV log are application helpers: <dtrain/app.hpp> (target dtrain::app).

#include <dtrain/util/blas_threads.hpp>
#include <dtrain/util/timeline.hpp>

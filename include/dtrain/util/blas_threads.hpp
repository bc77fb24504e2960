#pragma once

#include <cblas.h>

#include <dtrain/core/error.hpp>

namespace dtrain {

/// Sets the number of threads the BLAS library uses in this process (per MPI rank), e.g. 1 when every
/// core already runs a rank. With OpenBLAS this calls openblas_set_num_threads() and returns true; with
/// another BLAS it does nothing and returns false (use that library's environment variable instead).
/// Throws dtrain::Error for `threads` < 1.
inline bool set_blas_threads(int threads) {
    DTRAIN_CHECK(threads >= 1, "set_blas_threads: thread count must be at least 1, got ", threads);
#ifdef OPENBLAS_VERSION
    openblas_set_num_threads(threads);
    return true;
#else
    return false;
#endif
}

}  // namespace dtrain

#pragma once

#include <cstddef>

#include <cblas.h>

namespace dtrain::detail {

/// Row-major C = alpha * op(A) * op(B) + beta * C for float; op is transpose when the flag is set.
/// A is m x k after op, B is k x n after op, lda/ldb/ldc are row strides.
inline void gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, float alpha, const float* a,
                 std::size_t lda, const float* b, std::size_t ldb, float beta, float* c, std::size_t ldc) {
    if (m == 0 || n == 0) return;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n),
                int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

/// Double-precision overload of gemm (used by gradient checks).
inline void gemm(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k, double alpha, const double* a,
                 std::size_t lda, const double* b, std::size_t ldb, double beta, double* c, std::size_t ldc) {
    if (m == 0 || n == 0) return;
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n),
                int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

}  // namespace dtrain::detail

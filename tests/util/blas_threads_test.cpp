// Tests of dtrain::set_blas_threads (include/dtrain/util/blas_threads.hpp).
#include <catch2/catch.hpp>

#include <cblas.h>

#include <dtrain/util/blas_threads.hpp>

TEST_CASE("set_blas_threads sets the BLAS thread count of this process", "[util][blas]") {
#ifdef OPENBLAS_VERSION
    const int before = openblas_get_num_threads();
    CHECK(dtrain::set_blas_threads(2));  // OpenBLAS: applied, so true
    CHECK(openblas_get_num_threads() == 2);
    CHECK(dtrain::set_blas_threads(1));
    CHECK(openblas_get_num_threads() == 1);
    dtrain::set_blas_threads(before);
    CHECK(openblas_get_num_threads() == before);
#else
    CHECK_FALSE(dtrain::set_blas_threads(2));  // another BLAS: nothing to set, so false
#endif
}

TEST_CASE("set_blas_threads rejects a count below 1, naming it, and changes nothing",
          "[util][blas][errors]") {
#ifdef OPENBLAS_VERSION
    const int before = openblas_get_num_threads();
#endif
    CHECK_THROWS_WITH(dtrain::set_blas_threads(0),
                      Catch::Contains("set_blas_threads: thread count must be at least 1, got 0"));
    CHECK_THROWS_WITH(dtrain::set_blas_threads(-3), Catch::Contains("at least 1, got -3"));
#ifdef OPENBLAS_VERSION
    CHECK(openblas_get_num_threads() == before);
#endif
}

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include <dtrain/nn/layers/detail/conv_gemm.hpp>
#include <dtrain/nn/layers/detail/dense_gemm.hpp>

// Registered three times (tests/nn/CMakeLists.txt): DTRAIN_AVX512 unset, "0" and a bad value.
TEST_CASE(
    "DTRAIN_AVX512: unset or auto uses the AVX-512 kernels where the CPU has them, 0 switches them "
    "off, another value is an error naming it",
    "[nn][avx512][env]") {
    const char* env = std::getenv("DTRAIN_AVX512");
    const std::string mode = env != nullptr ? env : "auto";
    INFO("DTRAIN_AVX512=" << mode);
    dtrain::detail::ConvGeometry g{20, 12, 12, 5, 5, 1, 1, 0, 0};  // the SINGA CNN's second layer
    g.finish();
    if (mode == "auto" || mode == "0") {
        const bool on = mode == "auto";
        CHECK(dtrain::detail::gemm_avx512_enabled() == on);
        CHECK(dtrain::detail::gemm_avx512_available() == (on && dtrain::detail::cpu_has_avx512f()));
        CHECK(dtrain::detail::use_gemm_conv(g) ==
              (on && dtrain::detail::cpu_has_avx512f() && dtrain::detail::direct_conv_available()));
    } else {
        CHECK_THROWS_WITH(dtrain::detail::gemm_avx512_enabled(),
                          Catch::Contains("DTRAIN_AVX512 must be 0 or auto, got '" + mode + "'"));
        CHECK_THROWS_WITH(dtrain::detail::use_gemm_conv(g), Catch::Contains("DTRAIN_AVX512"));
    }
}

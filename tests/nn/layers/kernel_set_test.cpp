#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include <dtrain/nn/kernels/conv_algorithms.hpp>
#include <dtrain/nn/kernels/dense_algorithms.hpp>
#include <dtrain/nn/kernels/onednn.hpp>
#include <dtrain/nn/layers/detail/kernel_set.hpp>

using dtrain::detail::KernelSet;

// Registered once per environment (tests/nn/CMakeLists.txt): DTRAIN_KERNELS unset, native, avx2, reference,
// a bad value, and the old DTRAIN_AVX512 set.
TEST_CASE(
    "DTRAIN_KERNELS chooses the kernels of Conv2d and Dense; a bad value, or the old DTRAIN_AVX512, is an "
    "error naming it",
    "[nn][kernels][env]") {
    const char* env = std::getenv("DTRAIN_KERNELS");
    const char* old = std::getenv("DTRAIN_AVX512");
    const std::string mode = env != nullptr ? env : "";
    INFO("DTRAIN_KERNELS=" << mode << (old != nullptr ? " DTRAIN_AVX512 set" : ""));
    dtrain::detail::ConvGeometry g{20, 12, 12, 5, 5, 1, 1, 0, 0};  // the SINGA CNN's second layer
    g.finish();
    const dtrain::ConvProblem problem{g, 64, 50};
    if (old != nullptr) {
        CHECK_THROWS_WITH(
            dtrain::detail::kernel_set(),
            Catch::Contains("DTRAIN_AVX512 (set to '" + std::string(old) + "') is no longer read") &&
                Catch::Contains("DTRAIN_KERNELS=avx2"));
        CHECK_THROWS_WITH(dtrain::choose_conv_algorithm<float>(problem), Catch::Contains("DTRAIN_AVX512"));
    } else if (mode == "onednn" && !dtrain::onednn_linked()) {
        CHECK_THROWS_WITH(
            dtrain::detail::kernel_set(),
            Catch::Contains("DTRAIN_KERNELS=onednn: this program was built without dtrain's oneDNN "
                            "backend; link the CMake target dtrain::onednn"));
    } else if (mode.empty() || mode == "native" || mode == "avx2" || mode == "onednn" ||
               mode == "reference") {
        const KernelSet want = mode == "avx2"        ? KernelSet::avx2
                               : mode == "reference" ? KernelSet::reference
                               : mode == "onednn"    ? KernelSet::onednn
                                                     : KernelSet::native;
        CHECK(dtrain::detail::kernel_set() == want);
        CHECK(dtrain::detail::kernel_set_name(want) == (mode.empty() ? std::string("native") : mode));
        const bool avx512 = want == KernelSet::native && dtrain::detail::cpu_has_avx512f();
        const bool avx2 =
            (want == KernelSet::native || want == KernelSet::avx2) && dtrain::detail::cpu_has_avx2_fma();
        // oneDNN, when linked, computes what no native kernel does (everything under onednn)
        const bool onednn = dtrain::onednn_linked() && want != KernelSet::reference;
        const std::string fallback =
            onednn ? std::string("oneDNN") : std::string(dtrain::Im2colConv<float>::label);
        CHECK(dtrain::detail::gemm_avx512_available() == avx512);
        CHECK(dtrain::detail::direct_conv_available() == avx2);
        const std::string algo = dtrain::choose_conv_algorithm<float>(problem).name;
        CHECK((algo != fallback) == avx2);
        CHECK((algo == dtrain::GemmAvx512Conv::label) == (avx512 && avx2));
        CHECK(dtrain::choose_dense_algorithm<float>({64, 500, 10}).name ==
              (avx512   ? std::string(dtrain::GemmAvx512Dense::label)
               : avx2   ? std::string(dtrain::GemmAvx2Dense::label)
               : onednn ? std::string("oneDNN")
                        : std::string(dtrain::BlasDense<float>::label)));
    } else {
        CHECK_THROWS_WITH(
            dtrain::detail::kernel_set(),
            Catch::Contains("DTRAIN_KERNELS must be native, avx2, onednn or reference, got '" + mode + "'"));
        CHECK_THROWS_WITH(dtrain::choose_conv_algorithm<float>(problem), Catch::Contains("DTRAIN_KERNELS"));
    }
}

TEST_CASE("DTRAIN_THREADS sets the threads of a rank; a bad value is an error naming it",
          "[nn][kernels][env]") {
    const char* env = std::getenv("DTRAIN_THREADS");
    const std::string value = env != nullptr ? env : "";
    INFO("DTRAIN_THREADS=" << value);
    if (value.empty())
        CHECK(dtrain::compute_threads() == 1);
    else if (value == "2")
        CHECK(dtrain::compute_threads() == 2);
    else
        CHECK_THROWS_WITH(dtrain::compute_threads(),
                          "DTRAIN_THREADS must be a whole number from 1 to 4096, got '" + value + "'");
}

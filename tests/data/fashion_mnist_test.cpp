#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <vector>

#include <dtrain/data/idx.hpp>

#include "data_test_utils.hpp"

// The only test case of data_fashion_mnist_test, whose ctest test reports Skipped when the data set is
// not installed.
TEST_CASE("The real Fashion-MNIST files load with the right counts and labels", "[data][idx][fashion]") {
    const std::string dir = dtrain::default_fashion_mnist_dir();
    if (!std::filesystem::is_directory(dir)) {
        dtrain::test::skip_test(
            "Fashion-MNIST not found in " + dir +
            " (install Debian's dataset-fashion-mnist package or set DTRAIN_FASHION_MNIST_DIR)");
        return;
    }
    for (auto split : {dtrain::Split::Train, dtrain::Split::Test}) {
        const auto d = dtrain::load_fashion_mnist(split, dir);
        const std::size_t n = split == dtrain::Split::Train ? 60000 : 10000;
        INFO("split " << (split == dtrain::Split::Train ? "train" : "test"));
        REQUIRE(d.size() == n);
        CHECK(d.features.shape() == std::vector<std::size_t>{n, 1, 28, 28});
        CHECK(d.class_names.size() == 10);
        std::vector<std::size_t> per(10, 0);
        bool in_range = true;
        for (auto y : d.labels) {
            in_range = in_range && y >= 0 && y < 10;
            if (y >= 0 && y < 10) ++per[std::size_t(y)];
        }
        CHECK(in_range);
        CHECK(per == std::vector<std::size_t>(10, n / 10));  // Fashion-MNIST is balanced
        const auto [mn, mx] = std::minmax_element(d.features.begin(), d.features.end());
        CHECK(*mn == 0.0f);
        CHECK(*mx == 1.0f);
    }
}

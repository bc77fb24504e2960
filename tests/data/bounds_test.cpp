// Hostile sizes: dimensions whose product overflows, headers that declare more than the file holds, labels
// and batch sizes far beyond the data. Each must end in a dtrain::Error that says why, or in a correct
// result, with no allocation beyond what the file or the data justify: this program runs under an
// allocation limit (tests/support/fuzz.hpp) that refuses and records any larger allocation.
#define DTRAIN_FUZZ_REPLACE_NEW
#include <support/fuzz.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <dtrain/data/cifar.hpp>
#include <dtrain/data/csv.hpp>
#include <dtrain/data/dataset.hpp>
#include <dtrain/data/idx.hpp>
#include <dtrain/data/loader.hpp>
#include <dtrain/data/split.hpp>
#include <dtrain/data/transform.hpp>

#include "data_test_utils.hpp"

using Catch::Contains;
using dtrain::test::idx_bytes;
using dtrain::test::TempDir;
using dtrain::test::write_bytes;
using dtrain::test::write_text;
using dtrain::test::fuzz::AllocationLimit;

namespace {

constexpr std::size_t size_max = std::numeric_limits<std::size_t>::max();

/// n samples of 2 features with labels `labels[i % labels.size()]`.
dtrain::Dataset table(std::size_t n, const std::vector<std::int32_t>& labels) {
    dtrain::Tensor<float> x = dtrain::Tensor<float>::from_shape({n, 2});
    dtrain::Labels y = dtrain::Labels::from_shape({n});
    for (std::size_t i = 0; i < n; ++i) {
        x(i, 0) = float(i), x(i, 1) = -float(i);
        y(i) = labels[i % labels.size()];
    }
    return dtrain::make_dataset(std::move(x), std::move(y));
}

}  // namespace

TEST_CASE("IDX dimensions whose product overflows 64 bits are rejected with their real values",
          "[data][bounds]") {
    TempDir dir("bounds_idx");
    const auto path = dir.file("img");
    AllocationLimit limit;
    // 571 x 1925585868 x 16777248 = 2^64 + 128: 144 bytes in all, 128 of "data".
    write_bytes(path, idx_bytes({571, 1925585868u, 16777248u}, std::vector<unsigned char>(128, 7)));
    CHECK_THROWS_WITH(dtrain::read_idx_images(path),
                      Contains(path) && Contains("implausible dimensions [571, 1925585868, 16777248]"));
    // Every dimension is printed, also those after the one where the product stops being plausible.
    write_bytes(path, idx_bytes({0xFFFFFFFFu, 0xFFFFFFFFu, 3}, {}));
    CHECK_THROWS_WITH(dtrain::read_idx_images(path), Contains("[4294967295, 4294967295, 3]"));
    CHECK(limit.violation() == "");
}

TEST_CASE("Shapes whose element count overflows are errors, never a short buffer", "[data][bounds]") {
    AllocationLimit limit;
    const std::vector<float> x(8, 1.0f);
    const std::vector<std::int32_t> y(2, 0);
    CHECK_THROWS_WITH(dtrain::from_arrays(x.data(), y.data(), size_max / 2, {4}),
                      Contains("dtrain::from_arrays") && Contains("overflow"));
    CHECK_THROWS_WITH(dtrain::from_arrays(x.data(), y.data(), 2, {size_max / 2, 4}),
                      Contains("dtrain::from_arrays") && Contains("overflow"));
    // A view whose sample shape overflows (its fields are public) is refused before any batch is sized.
    const auto d = table(4, {0, 1});
    dtrain::DatasetView view(d);
    view.sample_shape = {std::size_t(1) << 40, std::size_t(1) << 40};
    CHECK_THROWS_WITH(dtrain::DataLoader(view, 2), Contains("dtrain::DatasetView") && Contains("overflow"));
    // An empty batch of images must not divide by zero.
    dtrain::ChannelNormalizer norm({0.5f}, {0.25f});
    dtrain::Tensor<float> empty = dtrain::Tensor<float>::from_shape({0, 1, 2, 2});
    CHECK_NOTHROW(norm.apply(empty));
    CHECK(limit.violation() == "");
}

TEST_CASE("A CSV header cannot declare more columns than the file has bytes", "[data][bounds][csv]") {
    TempDir dir("bounds_csv");
    const auto path = dir.file("tiny.csv");
    AllocationLimit limit;
    write_text(path, "1,999999999,a,b");  // 16 bytes that read as an sklearn header of 10^9 features
    CHECK_THROWS_WITH(dtrain::read_csv(path),
                      Contains(path) && Contains("declares 999999999 features") && Contains("15 bytes"));
    dtrain::CsvOptions sklearn;
    sklearn.layout = dtrain::CsvLayout::Sklearn;  // else the ragged second line makes it a header of names
    write_text(path, "2,999999999,a,b\n1,2,0\n3,4,1\n");
    CHECK_THROWS_WITH(dtrain::read_csv(path, sklearn), Contains("declares 999999999 features"));
    CHECK(limit.violation() == "");
}

TEST_CASE("A damaged gzip trailer cannot make a reader allocate far more than the file", "[data][bounds]") {
    TempDir dir("bounds_gzip");
    const auto path = dir.file("img.gz");
    dtrain::Rng rng(4);
    auto gz =
        dtrain::test::gzip_bytes(idx_bytes({2, 256, 256}, dtrain::test::random_bytes(2 * 256 * 256, rng)));
    for (std::size_t i = 1; i <= 4; ++i)
        gz[gz.size() - i] = 0xFF;  // ISIZE (the declared size, little-endian): 4 GiB - 1
    write_bytes(path, gz);
    AllocationLimit limit;
    CHECK_THROWS_WITH(dtrain::read_idx_images(path), Contains(path) && Contains("corrupt gzip data"));
    CHECK(limit.violation() == "");
    CHECK(limit.peak_live() < std::size_t(16) << 20);  // the file is 128 KiB
}

TEST_CASE("train_test_split sizes its per-class lists by the labels present", "[data][bounds][dataset]") {
    AllocationLimit limit;
    const auto d = table(20, {0, 999999999});
    const auto [train, test] = dtrain::train_test_split(d, 0.2, 3);
    CHECK(train.size() == 16);
    CHECK(test.size() == 4);
    std::size_t big = 0;
    for (auto v : test.labels)
        big += v == 999999999 ? 1 : 0;
    CHECK(big == 2);  // stratified: 2 of each class's 10
    CHECK(limit.violation() == "");
    CHECK(limit.peak_live() < (std::size_t(1) << 20));
}

TEST_CASE("A batch never allocates more rows than the data set has samples", "[data][bounds][loader]") {
    AllocationLimit limit;
    const auto d = table(5, {0, 1});
    for (std::size_t batch : {std::size_t(6), std::size_t(1) << 40, size_max}) {
        INFO("batch size " << batch);
        limit.reset();
        dtrain::DataLoader loader(d, batch);
        CHECK(loader.batches_per_epoch() == 1);
        REQUIRE(loader.next());
        CHECK(loader.current_batch_size() == 5);
        CHECK(loader.features().shape() == dtrain::Shape{5, 2});
        CHECK(!loader.next());
        dtrain::DataLoader sharded(d, dtrain::DistributedSampler(5, 0, 2), batch);
        CHECK(sharded.batches_per_epoch() == 1);
        REQUIRE(sharded.next());
        CHECK(sharded.current_batch_size() == 3);
        CHECK(limit.violation() == "");
        CHECK(limit.peak_live() < (std::size_t(1) << 20));
    }
    dtrain::LoaderOptions drop(size_max);
    drop.drop_last = true;
    CHECK_THROWS_WITH(dtrain::DataLoader(d, drop), Contains("exceeds the 5 samples per epoch"));
}

TEST_CASE("Reading CSV rows holds about twice the values it returns, plain or gzip", "[data][bounds][csv]") {
    TempDir dir("bounds_csv_rows");
    const auto plain = dir.file("rows.csv"), gz = dir.file("rows.csv.gz");
    std::string text;
    for (std::size_t i = 0; i < (std::size_t(1) << 18); ++i)  // 1 MiB of "1,0" rows
        text += "1,0\n";
    write_text(plain, text);
    write_bytes(gz, dtrain::test::gzip_bytes(std::vector<unsigned char>(text.begin(), text.end())));
    for (const auto& path : {plain, gz}) {
        INFO(path);
        AllocationLimit limit;
        std::size_t returned = 0;
        {
            const auto d = dtrain::read_csv(path);
            REQUIRE(d.size() == (std::size_t(1) << 18));
            returned = d.features.size() * sizeof(float) + d.labels.size() * sizeof(std::int32_t);
        }
        INFO("peak " << limit.peak_live() << " bytes for " << returned << " bytes returned");
        CHECK(limit.violation() == "");
        CHECK(limit.peak_live() <= 3 * returned);
    }
}

TEST_CASE("A gzip CSV of one line of commas costs about that line, not a field list", "[data][bounds][csv]") {
    TempDir dir("bounds_csv_commas");
    const auto one = dir.file("commas.csv.gz"), two = dir.file("two.csv.gz");
    const std::size_t line = std::size_t(4) << 20;
    {
        const std::string commas(line, ','), lines = commas + "\n" + commas + "\n";
        write_bytes(one, dtrain::test::gzip_bytes(std::vector<unsigned char>(commas.begin(), commas.end())));
        write_bytes(two, dtrain::test::gzip_bytes(std::vector<unsigned char>(lines.begin(), lines.end())));
    }
    AllocationLimit limit;
    CHECK_THROWS_WITH(dtrain::read_csv(one),
                      Contains(one) && Contains("has a header (line 1) but no data rows"));
    INFO("peak " << limit.peak_live() << " bytes for a line of " << line);
    CHECK(limit.violation() == "");
    CHECK(limit.peak_live() <= 5 * line / 2);
    // Two lines of commas: data (no field is a name above a number) with an empty first feature.
    limit.reset();
    CHECK_THROWS_WITH(dtrain::read_csv(two), Contains("line 1, column 1 ('column 1'): empty feature value"));
    INFO("peak " << limit.peak_live() << " bytes for two lines of " << line);
    CHECK(limit.violation() == "");
    CHECK(limit.peak_live() <= 7 * line / 2);
}

TEST_CASE("Running out of memory while reading a CSV file is a dtrain::Error naming it",
          "[data][bounds][csv]") {
    TempDir dir("bounds_csv_oom");
    const auto path = dir.file("rows.csv");
    std::string text;
    for (std::size_t i = 0; i < (std::size_t(1) << 18); ++i)
        text += "1,0\n";
    write_text(path, text);
    AllocationLimit limit(std::size_t(512) << 10);  // the features alone need 1 MiB in one piece
    CHECK_THROWS_WITH(dtrain::read_csv(path),
                      Contains("dtrain::read_csv: out of memory while reading '" + path + "'"));
    CHECK(limit.refused() > 0);
}

TEST_CASE("IDX and CIFAR-10 headers and sizes are checked before the data is read", "[data][bounds]") {
    TempDir dir("bounds_idx_first");
    const auto images = dir.file("images"), batch = dir.file("batch.bin");
    // A wrong magic number before 16 MiB of data: refused without reading the data.
    std::vector<unsigned char> big(std::size_t(16) << 20, 0);
    big[2] = 0x09;
    write_bytes(images, big);
    // A raw CIFAR-10 file one byte longer than 1000 records.
    write_bytes(batch, std::vector<unsigned char>(1000 * dtrain::cifar10_record_bytes + 1, 0));
    AllocationLimit limit;
    CHECK_THROWS_WITH(dtrain::read_idx_images(images), Contains(images) && Contains("wrong magic number"));
    CHECK_THROWS_WITH(dtrain::read_cifar10_batches({batch}),
                      Contains(batch) && Contains("is not a multiple of the 3073-byte record"));
    CHECK(limit.violation() == "");
    CHECK(limit.peak_live() < (std::size_t(1) << 20));
}

TEST_CASE("Running out of memory while reading IDX or CIFAR-10 is a dtrain::Error naming the file",
          "[data][bounds]") {
    TempDir dir("bounds_idx_oom");
    const auto images = dir.file("images.gz"), batch = dir.file("batch.bin");
    write_bytes(images,
                dtrain::test::gzip_bytes(idx_bytes({1000, 28, 28}, std::vector<unsigned char>(784000, 9))));
    write_bytes(batch, std::vector<unsigned char>(200 * dtrain::cifar10_record_bytes, 0));
    AllocationLimit limit(std::size_t(512) << 10);  // the results need 3 MiB and 2.4 MiB in one piece
    CHECK_THROWS_WITH(dtrain::read_idx_images(images),
                      Contains("dtrain::read_idx_images: out of memory while reading '" + images + "'"));
    CHECK_THROWS_WITH(dtrain::read_cifar10_batches({batch}), Contains("out of memory") && Contains(batch));
    CHECK(limit.refused() > 0);
}

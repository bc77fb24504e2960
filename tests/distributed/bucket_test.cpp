#include <catch2/catch.hpp>

#include <vector>

#include <dtrain/distributed/bucket.hpp>

namespace {

std::vector<dtrain::Range> ranges(const std::vector<std::size_t>& sizes) {
    std::vector<dtrain::Range> r;
    std::size_t off = 0;
    for (auto s : sizes) {
        r.push_back({off, s});
        off += s;
    }
    return r;
}

}  // namespace

TEST_CASE("make_buckets groups whole layers, last layer first, into contiguous ranges", "[dist][bucket]") {
    // Layers: 100, 0 (activation), 50, 0, 10 values of 4 bytes.
    const auto r = ranges({100, 0, 50, 0, 10});
    SECTION("bucket_bytes 0 gives one bucket per layer with parameters") {
        const auto b = dtrain::make_buckets(r, 0, 4);
        REQUIRE(b.size() == 3);
        CHECK(b[0].offset == 150);
        CHECK(b[0].size == 10);
        CHECK(b[0].first_layer == 4);
        CHECK(b[0].last_layer == 4);
        CHECK(b[1].offset == 100);
        CHECK(b[1].size == 50);
        CHECK(b[1].first_layer == 2);
        CHECK(b[2].offset == 0);
        CHECK(b[2].size == 100);
        CHECK(b[2].first_layer == 0);
    }
    SECTION("a bucket closes once it holds at least bucket_bytes; a larger layer is split into pieces") {
        const auto b = dtrain::make_buckets(r, 200, 4);  // 50 values: layer 0 (100 values) is split in 2
        REQUIRE(b.size() == 3);
        CHECK(b[0].offset == 100);
        CHECK(b[0].size == 60);  // layers 4 and 2: 40 bytes, then 240 >= 200
        CHECK(b[0].first_layer == 2);
        CHECK(b[0].last_layer == 4);
        CHECK(b[1].offset == 36);  // pieces are rounded up to 64 values, last piece first: [36, 100), [0, 36)
        CHECK(b[1].size == 64);
        CHECK(b[1].first_layer == 0);
        CHECK(b[1].last_layer == 0);
        CHECK(b[2].offset == 0);
        CHECK(b[2].size == 36);
        CHECK(b[2].first_layer == 0);
    }
    SECTION("a large bucket holds the whole model") {
        const auto b = dtrain::make_buckets(r, 1 << 20, 4);
        REQUIRE(b.size() == 1);
        CHECK(b[0].offset == 0);
        CHECK(b[0].size == 160);
        CHECK(b[0].first_layer == 0);
        CHECK(b[0].last_layer == 4);
    }
    SECTION("the value size counts") {
        CHECK(dtrain::make_buckets(r, 400, 4).size() == 1);  // 40, 240, 640 bytes
        CHECK(dtrain::make_buckets(r, 400, 8).size() == 3);  // 80, 480 bytes: closed; layer 0 split in 2
        CHECK(dtrain::make_buckets(r, 1000, 8).size() == 1);
        CHECK(dtrain::make_buckets(r, 640, 4).size() == 1);
    }
    SECTION("a model without parameters has no buckets") {
        CHECK(dtrain::make_buckets(ranges({0, 0}), 0, 4).empty());
        CHECK(dtrain::make_buckets({}, 0, 4).empty());
    }
}

TEST_CASE("make_buckets: the first piece of a split layer takes the open bucket; buckets tile the buffer",
          "[dist][bucket]") {
    // Sizes like the MLP 784-512-256-10: 401920, 0, 131328, 0, 2570 values of 4 bytes, 1 MiB buckets.
    const auto r = ranges({401920, 0, 131328, 0, 2570});
    const auto b = dtrain::make_buckets(r, std::size_t(1) << 20, 4);
    REQUIRE(b.size() == 2);
    CHECK(b[0].first_layer == 0);  // layers 4 and 2 (534 KB) + the last piece of layer 0
    CHECK(b[0].last_layer == 4);
    CHECK(b[0].size == 2570 + 131328 + 200960);
    CHECK(b[1].first_layer == 0);
    CHECK(b[1].last_layer == 0);
    CHECK(b[1].size % 64 == 0);
    CHECK(b[1].size == 200960);  // 401920 / 2, already a multiple of 64
    std::size_t end = 401920 + 131328 + 2570;
    for (const auto& k : b) {
        CHECK(k.offset + k.size == end);  // contiguous, from the end of the buffer to its start
        end = k.offset;
    }
    CHECK(end == 0);
    // The CNN of the examples: Dense(800, 500) (400500 values) is split; Dense(500, 10) joins its last piece.
    const auto c = dtrain::make_buckets(ranges({520, 0, 0, 25050, 0, 0, 0, 400500, 0, 5010}), 1 << 20, 4);
    REQUIRE(c.size() == 3);
    CHECK(c[0].last_layer == 9);
    CHECK(c[0].first_layer == 7);
    CHECK(c[1].first_layer == 7);
    CHECK(c[2].first_layer == 0);
    CHECK(c[2].last_layer == 3);
}

TEST_CASE("make_buckets rejects non-contiguous ranges", "[dist][bucket]") {
    std::vector<dtrain::Range> r = {{0, 10}, {12, 5}};
    CHECK_THROWS_WITH(dtrain::make_buckets(r, 0, 4), Catch::Contains("layer 1 starts at 12"));
    CHECK_THROWS_AS(dtrain::make_buckets(ranges({1}), 0, 0), dtrain::Error);
}

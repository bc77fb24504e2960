// Shard planning for the parameter-server policy: every plan covers the buffer exactly once.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <limits>
#include <vector>

#include <dtrain/core/rng.hpp>
#include <dtrain/distributed/sharding.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/dense.hpp>

namespace {

// True when `parts` are in order, contiguous, and cover [0, n) exactly once (empty parts allowed).
bool covers_exactly_once(const std::vector<dtrain::Range>& parts, std::size_t n) {
    std::vector<int> hits(n, 0);
    std::size_t next = 0;
    for (const auto& r : parts) {
        if (r.size > 0 && r.offset != next) return false;
        if (r.offset + r.size > n) return false;
        for (std::size_t i = r.offset; i < r.offset + r.size; ++i)
            ++hits[i];
        next = r.offset + r.size;
    }
    return std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; });
}

std::vector<dtrain::Range> layers_of(const std::vector<std::size_t>& sizes) {
    std::vector<dtrain::Range> out;
    std::size_t off = 0;
    for (std::size_t s : sizes) {
        out.push_back({off, s});
        off += s;
    }
    return out;
}

// Smallest possible largest part over every split of `sizes` into at most `parts` contiguous groups.
std::size_t brute_force_best(const std::vector<std::size_t>& sizes, std::size_t parts) {
    std::size_t best = std::numeric_limits<std::size_t>::max();
    std::function<void(std::size_t, std::size_t, std::size_t)> go = [&](std::size_t i, std::size_t left,
                                                                        std::size_t worst) {
        if (i == sizes.size()) {
            best = std::min(best, worst);
            return;
        }
        if (left == 0) return;
        std::size_t load = 0;
        for (std::size_t j = i; j < sizes.size(); ++j) {
            load += sizes[j];
            go(j + 1, left - 1, std::max(worst, load));
        }
    };
    go(0, parts, 0);
    return best;
}

}  // namespace

TEST_CASE("shard_balanced covers the buffer once with sizes differing by at most one", "[dist][sharding]") {
    for (std::size_t n : {0u, 1u, 2u, 5u, 7u, 64u, 1000u, 1001u}) {
        for (std::size_t m = 1; m <= 9; ++m) {
            const auto parts = dtrain::shard_balanced(n, m);
            INFO("n " << n << ", parts " << m);
            REQUIRE(parts.size() == m);
            CHECK(covers_exactly_once(parts, n));
            std::size_t lo = n, hi = 0;
            for (const auto& r : parts) {
                lo = std::min(lo, r.size);
                hi = std::max(hi, r.size);
            }
            CHECK(hi - lo <= 1);
        }
    }
    CHECK_THROWS_WITH(dtrain::shard_balanced(10, 0), Catch::Contains("at least one part"));
}

TEST_CASE("shard_balanced splits a layer larger than a shard", "[dist][sharding]") {
    dtrain::Model<float> model({100});
    model.add(dtrain::Dense<float>(100, 50)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(50, 2));
    const auto parts = dtrain::plan_shards(model, 3, dtrain::Sharding::Balanced);
    CHECK(covers_exactly_once(parts, model.num_parameters()));
    // The first layer (5050 values) spans the first two shards.
    CHECK(parts[1].offset + parts[1].size < model.parameter_ranges()[0].size);
}

TEST_CASE("shard_by_layer keeps layers whole, covers the buffer once and minimises the largest shard",
          "[dist][sharding]") {
    dtrain::Rng rng(3);
    for (int trial = 0; trial < 300; ++trial) {
        const std::size_t layers = 1 + rng.below(7);
        std::vector<std::size_t> sizes;
        for (std::size_t i = 0; i < layers; ++i)
            sizes.push_back(rng.below(4) == 0 ? 0 : 1 + rng.below(50));
        const std::size_t m = 1 + rng.below(9);  // often more parts than layers
        const auto ranges = layers_of(sizes);
        const auto parts = dtrain::shard_by_layer(ranges, m);
        std::size_t n = 0;
        for (std::size_t s : sizes)
            n += s;
        INFO("trial " << trial << ", " << layers << " layers, " << m << " parts");
        REQUIRE(parts.size() == m);
        CHECK(covers_exactly_once(parts, n));
        // Every boundary between parts is a layer boundary.
        for (const auto& p : parts) {
            const bool starts =
                p.offset == n || std::any_of(ranges.begin(), ranges.end(),
                                             [&](const dtrain::Range& r) { return r.offset == p.offset; });
            CHECK(starts);
        }
        std::size_t worst = 0;
        for (const auto& p : parts)
            worst = std::max(worst, p.size);
        CHECK(worst == brute_force_best(sizes, m));
    }
}

TEST_CASE("plan_shards by layer on a model with more masters than layers", "[dist][sharding]") {
    dtrain::Model<float> model({4});
    model.add(dtrain::Dense<float>(4, 8)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(8, 3));
    const auto parts = dtrain::plan_shards(model, 5, dtrain::Sharding::ByLayer);
    REQUIRE(parts.size() == 5);
    CHECK(covers_exactly_once(parts, model.num_parameters()));
    CHECK(parts[0].size == 40);  // Dense(4, 8) with the parameter-free ReLU
    CHECK(parts[1].size == 27);  // Dense(8, 3)
    CHECK(parts[2].size + parts[3].size + parts[4].size == 0);
    CHECK_THROWS_WITH(dtrain::shard_by_layer({{0, 3}, {4, 2}}, 2), Catch::Contains("contiguous"));
    CHECK_THROWS_WITH(dtrain::shard_by_layer({{0, 3}, {3, 2}}, 0),
                      Catch::Contains("shard_by_layer: need at least one part, got 0"));
    CHECK_THROWS_WITH(dtrain::plan_shards(model, 0, dtrain::Sharding::ByLayer),
                      Catch::Contains("shard_by_layer: need at least one part, got 0"));
}

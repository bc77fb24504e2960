#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <dtrain/data/sampler.hpp>

#include "data_test_utils.hpp"

using dtrain::ShardLayout;
using dtrain::ShardOptions;
using dtrain::ShardTail;
using dtrain::test::error_message;

namespace {

using Shards = std::vector<std::vector<std::size_t>>;

Shards all_shards(std::size_t n, int p, std::uint64_t epoch, const ShardOptions& o) {
    Shards s;
    for (int r = 0; r < p; ++r)
        s.push_back(dtrain::shard_indices(n, r, p, epoch, o));
    return s;
}

std::string describe(std::size_t n, int p, const ShardOptions& o) {
    return "n=" + std::to_string(n) + " p=" + std::to_string(p) + " shuffle=" + std::to_string(o.shuffle) +
           " tail=" + std::to_string(int(o.tail)) + " layout=" + std::to_string(int(o.layout));
}

}  // namespace

TEST_CASE("Shards are disjoint, cover the data set and have equal counts, p = 1..5", "[data][sampler]") {
    for (int p = 1; p <= 5; ++p)
        for (std::size_t n :
             {std::size_t(p), std::size_t(7), std::size_t(10), std::size_t(23), std::size_t(60)}) {
            if (n < std::size_t(p)) continue;
            for (bool shuffle : {false, true})
                for (auto tail : {ShardTail::Pad, ShardTail::Drop, ShardTail::None})
                    for (auto layout : {ShardLayout::Interleaved, ShardLayout::Contiguous}) {
                        const ShardOptions o{shuffle, 42, tail, layout};
                        INFO(describe(n, p, o));
                        const auto s = all_shards(n, p, 3, o);
                        std::map<std::size_t, int> seen;
                        std::size_t total = 0, mn = n, mx = 0;
                        for (int r = 0; r < p; ++r) {
                            CHECK(s[r].size() == dtrain::shard_count(n, r, p, tail, layout));
                            mn = std::min(mn, s[r].size());
                            mx = std::max(mx, s[r].size());
                            total += s[r].size();
                            for (auto i : s[r]) {
                                CHECK(i < n);
                                ++seen[i];
                            }
                        }
                        const std::size_t rem = n % std::size_t(p);
                        if (tail == ShardTail::Pad) {
                            CHECK(mn == mx);
                            CHECK(mn == (n + p - 1) / std::size_t(p));
                            CHECK(seen.size() == n);  // covers everything
                            std::size_t twice = 0;
                            for (auto& kv : seen) {
                                CHECK(kv.second <= 2);
                                twice += kv.second == 2;
                            }
                            CHECK(twice == (rem == 0 ? 0 : std::size_t(p) - rem));  // only the wrapped tail
                        } else if (tail == ShardTail::Drop) {
                            CHECK(mn == mx);
                            CHECK(mn == n / std::size_t(p));
                            CHECK(seen.size() == total);  // disjoint
                            CHECK(total == n - rem);
                        } else {
                            CHECK(mx - mn <= 1);
                            CHECK(total == n);  // every sample exactly once
                            CHECK(seen.size() == n);
                        }
                    }
        }
}

TEST_CASE("The contiguous split without shuffle is the Go/SINGA [r*n/p, (r+1)*n/p)", "[data][sampler]") {
    for (int p = 1; p <= 5; ++p) {
        const std::size_t n = 23;
        for (int r = 0; r < p; ++r) {
            const auto s =
                dtrain::shard_indices(n, r, p, 9, {false, 0, ShardTail::None, ShardLayout::Contiguous});
            std::vector<std::size_t> want;
            for (std::size_t i = std::size_t(r) * n / std::size_t(p);
                 i < std::size_t(r + 1) * n / std::size_t(p); ++i)
                want.push_back(i);
            CHECK(s == want);
        }
    }
    // Interleaved, unshuffled: PyTorch's rank::p stride.
    CHECK(dtrain::shard_indices(10, 1, 3, 0, {false, 0, ShardTail::Pad, ShardLayout::Interleaved}) ==
          std::vector<std::size_t>{1, 4, 7, 0});
    CHECK(dtrain::shard_indices(10, 2, 3, 0, {false, 0, ShardTail::Pad, ShardLayout::Interleaved}) ==
          std::vector<std::size_t>{2, 5, 8, 1});
    CHECK(dtrain::shard_indices(10, 2, 3, 0, {false, 0, ShardTail::Drop, ShardLayout::Interleaved}) ==
          std::vector<std::size_t>{2, 5, 8});
}

TEST_CASE("Evaluation shards count every sample exactly once, in order", "[data][sampler]") {
    for (int p = 1; p <= 5; ++p)
        for (std::size_t n : {std::size_t(5), std::size_t(13), std::size_t(10000)}) {
            std::vector<std::size_t> cat;
            for (int r = 0; r < p; ++r) {
                const auto s = dtrain::eval_shard(n, r, p);
                cat.insert(cat.end(), s.begin(), s.end());
            }
            REQUIRE(cat.size() == n);
            for (std::size_t i = 0; i < n; ++i)
                CHECK(cat[i] == i);
        }
}

TEST_CASE("Shuffled shards are deterministic in (seed, epoch) and reshuffle every epoch", "[data][sampler]") {
    for (int p = 1; p <= 5; ++p) {
        const std::size_t n = 50;
        const ShardOptions o{true, 1234, ShardTail::Pad, ShardLayout::Interleaved};
        for (int r = 0; r < p; ++r) {
            const auto e0 = dtrain::shard_indices(n, r, p, 0, o);
            CHECK(e0 == dtrain::shard_indices(n, r, p, 0, o));  // determinism
            const auto e1 = dtrain::shard_indices(n, r, p, 1, o);
            CHECK(e0 != e1);  // reshuffled
            ShardOptions other = o;
            other.seed = 1235;
            CHECK(dtrain::shard_indices(n, r, p, 0, other) != e0);
        }
        // Ranks agree: the union over ranks of epoch 1 is a permutation identical when recomputed.
        CHECK(all_shards(n, p, 1, o) == all_shards(n, p, 1, o));
    }
    // (seed, epoch) = (0, 1) and (1, 0) differ (no seed + epoch collision).
    const ShardOptions a{true, 0, ShardTail::Pad, ShardLayout::Interleaved};
    const ShardOptions b{true, 1, ShardTail::Pad, ShardLayout::Interleaved};
    CHECK(dtrain::shard_indices(30, 0, 1, 1, a) != dtrain::shard_indices(30, 0, 1, 0, b));
    // The permutation is one.
    std::vector<std::size_t> perm;
    dtrain::epoch_permutation(100, true, 5, 2, perm);
    auto sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 0; i < 100; ++i)
        CHECK(sorted[i] == i);
    // With drop, the dropped samples change between epochs.
    std::set<std::vector<std::size_t>> dropped_sets;
    for (std::uint64_t e = 0; e < 5; ++e) {
        std::set<std::size_t> kept;
        for (const auto& s : all_shards(11, 3, e, {true, 7, ShardTail::Drop, ShardLayout::Interleaved}))
            kept.insert(s.begin(), s.end());
        std::vector<std::size_t> dropped;
        for (std::size_t i = 0; i < 11; ++i)
            if (!kept.count(i)) dropped.push_back(i);
        CHECK(dropped.size() == 2);
        dropped_sets.insert(dropped);
    }
    CHECK(dropped_sets.size() > 1);
}

TEST_CASE("DistributedSampler refills without allocating and rejects bad arguments", "[data][sampler]") {
    dtrain::DistributedSampler s(1000, 2, 3, {true, 9, ShardTail::Pad, ShardLayout::Interleaved});
    CHECK(s.num_samples() == 334);
    std::vector<std::size_t> out;
    s.indices(0, out);
    const auto* p = out.data();
    const auto first = out;
    for (std::uint64_t e = 1; e < 4; ++e) {
        s.indices(e, out);
        CHECK(out.data() == p);
        CHECK(out.size() == 334);
    }
    s.indices(0, out);
    CHECK(out == first);
    CHECK(s.indices(0) == dtrain::shard_indices(1000, 2, 3, 0, s.options()));

    auto m = error_message([] { dtrain::DistributedSampler(3, 0, 4); });
    CHECK(m.find("3 samples") != std::string::npos);
    CHECK(m.find("4 ranks") != std::string::npos);
    CHECK(!error_message([] { dtrain::eval_shard(2, 0, 3); }).empty());
    CHECK(error_message([] { dtrain::shard_indices(10, 0, 0, 0); }).find("world size") != std::string::npos);
    CHECK(error_message([] { dtrain::shard_indices(10, 3, 3, 0); }).find("rank 3") != std::string::npos);
    CHECK(error_message([] { dtrain::shard_indices(10, -1, 3, 0); }).find("rank -1") != std::string::npos);
}

TEST_CASE("shard_indices_after continues an epoch's global order at any number of ranks", "[data][sampler]") {
    const std::size_t n = 60;
    for (ShardTail tail : {ShardTail::Pad, ShardTail::Drop, ShardTail::None}) {
        const dtrain::ShardOptions opt{true, 3, tail, ShardLayout::Interleaved};
        const auto perm = [&] {
            std::vector<std::size_t> p;
            dtrain::epoch_permutation(n, true, 3, 2, p);
            return p;
        }();
        std::vector<std::size_t> scratch, out;
        // At the same number of ranks after k whole steps of b per rank: the rest of shard_indices().
        for (int p : {1, 2, 3, 4}) {
            for (std::size_t k : {0, 1, 2}) {
                const std::size_t b = 5;
                for (int r = 0; r < p; ++r) {
                    const auto full = dtrain::shard_indices(n, r, p, 2, opt);
                    dtrain::shard_indices_after(n, r, p, 2, k * b * std::size_t(p), opt, scratch, out);
                    CHECK(out == std::vector<std::size_t>(full.begin() + std::ptrdiff_t(k * b), full.end()));
                }
            }
        }
        // At another number of ranks: the positions left, each exactly once (none skipped or repeated).
        for (std::size_t consumed : {0, 12, 24, 36, 59}) {
            for (int p : {1, 2, 3, 4, 5}) {
                std::vector<int> seen(n, 0);
                for (std::size_t pos = 0; pos < consumed; ++pos)
                    ++seen[perm[pos]];
                std::size_t total = 0;
                for (int r = 0; r < p; ++r) {
                    dtrain::shard_indices_after(n, r, p, 2, consumed, opt, scratch, out);
                    total += out.size();
                    if (tail == ShardTail::None || (n - consumed) % std::size_t(p) == 0)
                        for (std::size_t i : out)
                            ++seen[i];
                }
                if (tail == ShardTail::None || (n - consumed) % std::size_t(p) == 0) {
                    CHECK(total == n - consumed);
                    CHECK(std::count(seen.begin(), seen.end(), 1) == std::ptrdiff_t(n));
                } else if (tail == ShardTail::Pad) {
                    CHECK(total == ((n - consumed + std::size_t(p) - 1) / std::size_t(p)) * std::size_t(p));
                } else {
                    CHECK(total == ((n - consumed) / std::size_t(p)) * std::size_t(p));
                }
            }
        }
    }
    std::vector<std::size_t> scratch, out;
    CHECK_THAT(error_message([&] {
                   dtrain::shard_indices_after(
                       10, 0, 2, 0, 4, {true, 0, ShardTail::Pad, ShardLayout::Contiguous}, scratch, out);
               }),
               Catch::Contains("use ShardLayout::Interleaved"));
    CHECK_THAT(error_message([&] { dtrain::shard_indices_after(10, 0, 2, 0, 11, {}, scratch, out); }),
               Catch::Contains("11 samples consumed exceed the epoch's 10"));
}

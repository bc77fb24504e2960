#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <xtensor/xbuilder.hpp>

#include <dtrain/data/augment.hpp>
#include <dtrain/data/dataset.hpp>
#include <dtrain/data/loader.hpp>
#include <dtrain/data/split.hpp>
#include <dtrain/data/transform.hpp>
#include <dtrain/nn/losses/mse.hpp>

#include "data_test_utils.hpp"

using dtrain::DataLoader;
using dtrain::LoaderOptions;
using dtrain::test::contains;
using dtrain::test::error_message;

namespace {

/// n samples of `width` features where feature j of sample i is i * 100 + j; label i % 3.
dtrain::Dataset indexed_dataset(std::size_t n, std::size_t width = 2) {
    dtrain::Tensor<float> x = dtrain::Tensor<float>::from_shape({n, width});
    dtrain::Labels y = dtrain::Labels::from_shape({n});
    for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t j = 0; j < width; ++j)
            x(i, j) = float(i * 100 + j);
        y(i) = std::int32_t(i % 3);
    }
    return dtrain::make_dataset(std::move(x), std::move(y));
}

/// Runs one epoch and returns the sample ids seen (decoded from the features) and the batch sizes.
std::pair<std::vector<std::size_t>, std::vector<std::size_t>> run_epoch(DataLoader& l, std::uint64_t epoch) {
    l.start_epoch(epoch);
    std::vector<std::size_t> ids, sizes;
    while (l.next()) {
        const auto& x = l.features();
        const auto& y = l.labels();
        sizes.push_back(y.size());
        CHECK(x.shape()[0] == y.size());
        for (std::size_t k = 0; k < y.size(); ++k) {
            const auto id = std::size_t(x(k, 0)) / 100;
            CHECK(x(k, 1) == float(id * 100 + 1));
            CHECK(y(k) == std::int32_t(id % 3));
            ids.push_back(id);
        }
    }
    return {ids, sizes};
}

}  // namespace

TEST_CASE("DataLoader yields fixed-size batches, last partial or dropped", "[data][loader]") {
    const auto d = indexed_dataset(10);
    LoaderOptions o;
    o.batch_size = 4;
    o.shuffle = false;
    DataLoader l(d, o);
    CHECK(l.batches_per_epoch() == 3);
    auto [ids, sizes] = run_epoch(l, 0);
    CHECK(sizes == std::vector<std::size_t>{4, 4, 2});
    CHECK(ids == std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    o.drop_last = true;
    DataLoader ld(d, o);
    CHECK(ld.batches_per_epoch() == 2);
    std::tie(ids, sizes) = run_epoch(ld, 0);
    CHECK(sizes == std::vector<std::size_t>{4, 4});
    CHECK(ids.size() == 8);
    CHECK_FALSE(ld.next());  // stays finished
}

TEST_CASE("DataLoader shuffles reproducibly per (seed, epoch) and covers every sample", "[data][loader]") {
    const auto d = indexed_dataset(37);
    LoaderOptions o;
    o.batch_size = 8;
    o.seed = 77;
    DataLoader a(d, o), b(d, o);
    const auto a0 = run_epoch(a, 0).first, a1 = run_epoch(a, 1).first;
    CHECK(run_epoch(b, 1).first == a1);  // epochs in a different order give the same result
    CHECK(run_epoch(b, 0).first == a0);
    CHECK(a0 != a1);
    std::vector<std::size_t> identity(37);
    for (std::size_t i = 0; i < 37; ++i)
        identity[i] = i;
    CHECK(a0 != identity);
    for (const auto& v : {a0, a1}) {
        auto s = v;
        std::sort(s.begin(), s.end());
        CHECK(s == identity);
    }
    o.seed = 78;
    DataLoader c(d, o);
    CHECK(run_epoch(c, 0).first != a0);
}

TEST_CASE("DataLoader reuses its batch buffers", "[data][loader]") {
    const auto d = indexed_dataset(10);
    LoaderOptions o;
    o.batch_size = 3;
    DataLoader l(d, o);
    const float* full = nullptr;
    const float* tail = nullptr;
    const std::int32_t* yfull = nullptr;
    for (std::uint64_t e = 0; e < 3; ++e) {
        l.start_epoch(e);
        while (l.next()) {
            if (l.current_batch_size() == 3) {
                if (!full) full = l.features().data(), yfull = l.labels().data();
                CHECK(l.features().data() == full);
                CHECK(l.labels().data() == yfull);
            } else {
                CHECK(l.current_batch_size() == 1);
                if (!tail) tail = l.features().data();
                CHECK(l.features().data() == tail);
            }
        }
    }
    CHECK(full != nullptr);
    CHECK(tail != nullptr);
}

TEST_CASE("DataLoader over an index list or a sampler", "[data][loader]") {
    const auto d = indexed_dataset(20);
    LoaderOptions o;
    o.batch_size = 4;
    o.shuffle = false;
    DataLoader sub(d, std::vector<std::size_t>{5, 3, 19}, o);
    CHECK(run_epoch(sub, 0).first == std::vector<std::size_t>{5, 3, 19});
    // Three ranks' loaders over their shards together see every sample once per epoch (padding aside).
    std::vector<std::size_t> all;
    std::size_t batches = 0;
    for (int r = 0; r < 3; ++r) {
        const dtrain::ShardOptions so{true, 5, dtrain::ShardTail::None, dtrain::ShardLayout::Interleaved};
        DataLoader l(d, dtrain::DistributedSampler(20, r, 3, so), o);
        const auto ids = run_epoch(l, 2).first;
        all.insert(all.end(), ids.begin(), ids.end());
        batches += l.batches_per_epoch();
        CHECK(ids == dtrain::shard_indices(20, r, 3, 2, so));  // the sampler's order, not reshuffled
    }
    std::sort(all.begin(), all.end());
    CHECK(all.size() == 20);
    CHECK(std::unique(all.begin(), all.end()) == all.end());
    CHECK(batches == 2 + 2 + 2);
}

TEST_CASE("DataLoader rejects bad arguments", "[data][loader]") {
    const auto d = indexed_dataset(5);
    LoaderOptions o;
    o.batch_size = 0;
    CHECK(contains(error_message([&] { DataLoader(d, o); }), "batch size must be > 0"));
    o.batch_size = 6;
    o.drop_last = true;
    CHECK(contains(error_message([&] { DataLoader(d, o); }), "no batch would be yielded"));
    o = {};
    CHECK(contains(error_message([&] { DataLoader(d, std::vector<std::size_t>{1, 5}, o); }), "index 5"));
    CHECK(
        contains(error_message([&] { DataLoader(d, dtrain::DistributedSampler(6, 0, 2), o); }), "6 samples"));
    o.augment.horizontal_flip = true;
    CHECK(contains(error_message([&] { DataLoader(d, o); }), "[C, H, W]"));
    o = {};
    CHECK(contains(error_message([&] { DataLoader(d, std::vector<std::size_t>{}, o); }),
                   "DataLoader: the index list is empty"));
}

TEST_CASE("DatasetView and DataLoader reject malformed or empty user arrays", "[data][loader][errors]") {
    const LoaderOptions o;
    const dtrain::Labels three = {0, 1, 2}, none = dtrain::Labels::from_shape({0});
    const auto flat = dtrain::Tensor<float>::from_shape({3});
    CHECK_THROWS_WITH(
        dtrain::DatasetView(flat, three),
        Catch::Contains("dtrain::DatasetView: features must be batch-first with rank >= 2, got [3]"));
    const auto two = dtrain::Tensor<float>::from_shape({2, 4});
    CHECK_THROWS_WITH(dtrain::DatasetView(two, three),
                      Catch::Contains("dtrain::DatasetView: features have 2 samples but there are 3 labels"));
    const auto no_samples = dtrain::Tensor<float>::from_shape({0, 4});
    CHECK_THROWS_WITH(DataLoader(dtrain::DatasetView(no_samples, none), o),
                      Catch::Contains("DataLoader: the data set is empty (0 samples of shape [4])"));
    const auto no_features = dtrain::Tensor<float>::from_shape({3, 0});
    CHECK_THROWS_WITH(DataLoader(dtrain::DatasetView(no_features, three), o),
                      Catch::Contains("DataLoader: the data set is empty (3 samples of shape [0])"));
    const auto ok = dtrain::Tensor<float>(xt::zeros<float>({3, 4}));
    CHECK_NOTHROW(DataLoader(dtrain::DatasetView(ok, three), o));
}

TEST_CASE("augment_image crops after zero padding and flips", "[data][augment]") {
    // One channel 3x3: values 1..9.
    const std::vector<float> src = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    std::vector<float> dst(9);
    dtrain::augment_image(src.data(), dst.data(), 1, 3, 3, 0, 0, false);
    CHECK(dst == src);
    dtrain::augment_image(src.data(), dst.data(), 1, 3, 3, 0, 0, true);
    CHECK(dst == std::vector<float>{3, 2, 1, 6, 5, 4, 9, 8, 7});
    dtrain::augment_image(src.data(), dst.data(), 1, 3, 3, 1, -1, false);  // dst(y,x) = src(y+1, x-1)
    CHECK(dst == std::vector<float>{0, 4, 5, 0, 7, 8, 0, 0, 0});
    dtrain::augment_image(src.data(), dst.data(), 1, 3, 3, -1, 1, true);  // dst(y,x) = src(y-1, 2-x+1)
    CHECK(dst == std::vector<float>{0, 0, 0, 0, 3, 2, 0, 6, 5});
}

TEST_CASE("augment_image matches the padded-crop-then-flip definition for every offset", "[data][augment]") {
    const long c = 2, h = 3, w = 5;
    std::vector<float> src(std::size_t(c * h * w));
    for (std::size_t i = 0; i < src.size(); ++i)
        src[i] = float(i + 1);
    std::vector<float> dst(src.size());
    for (long pad = 0; pad <= 6; ++pad)
        for (long oy = 0; oy <= 2 * pad; ++oy)
            for (long ox = 0; ox <= 2 * pad; ++ox)
                for (bool flip : {false, true}) {
                    // Reference: zero-pad by `pad`, crop h x w at (oy, ox), then mirror the crop.
                    const long ph = h + 2 * pad, pw = w + 2 * pad;
                    std::vector<float> padded(std::size_t(c * ph * pw), 0.0f);
                    for (long k = 0; k < c; ++k)
                        for (long y = 0; y < h; ++y)
                            for (long x = 0; x < w; ++x)
                                padded[std::size_t((k * ph + y + pad) * pw + x + pad)] =
                                    src[std::size_t((k * h + y) * w + x)];
                    std::vector<float> want(src.size());
                    for (long k = 0; k < c; ++k)
                        for (long y = 0; y < h; ++y)
                            for (long x = 0; x < w; ++x) {
                                const long cx = flip ? w - 1 - x : x;
                                want[std::size_t((k * h + y) * w + x)] =
                                    padded[std::size_t((k * ph + y + oy) * pw + cx + ox)];
                            }
                    dtrain::augment_image(src.data(), dst.data(), std::size_t(c), std::size_t(h),
                                          std::size_t(w), oy - pad, ox - pad, flip);
                    INFO("pad " << pad << " offset (" << oy << ", " << ox << ") flip " << flip);
                    CHECK(dst == want);
                }
}

TEST_CASE("DataLoader augmentation is seeded and draws every crop offset and flip", "[data][augment]") {
    const std::size_t n = 64, c = 2, h = 4, w = 5, pad = 1;
    dtrain::Rng rng(4);
    dtrain::Tensor<float> x = dtrain::Tensor<float>::from_shape({n, c, h, w});
    for (auto& v : x)
        v = float(rng.uniform(0.1, 1.0));  // no zeros, so padding is visible
    dtrain::Labels y = dtrain::Labels::from_shape({n});
    for (std::size_t i = 0; i < n; ++i)
        y(i) = std::int32_t(i);
    const auto d = dtrain::make_dataset(x, y);
    LoaderOptions o;
    o.batch_size = 16;
    o.augment.crop_padding = pad;
    o.augment.horizontal_flip = true;
    o.augment.seed = 3;
    DataLoader a(d, o), b(d, o);
    std::set<int> seen;  // (dy, dx, flip) combinations used
    std::vector<float> epoch0;
    for (std::uint64_t e = 0; e < 2; ++e) {
        a.start_epoch(e);
        b.start_epoch(e);
        while (a.next()) {
            REQUIRE(b.next());
            CHECK(std::equal(a.features().begin(), a.features().end(), b.features().begin()));
            for (std::size_t k = 0; k < a.current_batch_size(); ++k) {
                const std::size_t i = std::size_t(a.labels()(k)), m = c * h * w;
                const float* out = a.features().data() + k * m;
                if (e == 0) epoch0.insert(epoch0.end(), out, out + m);
                int match = -1;
                std::vector<float> cand(m);
                for (long dy = -1; dy <= 1 && match < 0; ++dy)
                    for (long dx = -1; dx <= 1 && match < 0; ++dx)
                        for (int f = 0; f < 2 && match < 0; ++f) {
                            dtrain::augment_image(d.features.data() + i * m, cand.data(), c, h, w, dy, dx,
                                                  f == 1);
                            if (std::equal(cand.begin(), cand.end(), out))
                                match = int((dy + 1) * 6 + (dx + 1) * 2 + f);
                        }
                CHECK(match >= 0);
                seen.insert(match);
            }
        }
    }
    CHECK(seen.size() == 18);  // all 3 x 3 offsets x 2 flips occur over 128 draws
    // Restarting an epoch repeats its augmentations.
    a.start_epoch(0);
    std::vector<float> again;
    while (a.next())
        again.insert(again.end(), a.features().begin(), a.features().end());
    CHECK(again == epoch0);

    // A different epoch gives different augmentations of the same samples. Without shuffling every epoch
    // yields the samples in the same order, so only the epoch's augmentation seed can tell epochs apart.
    LoaderOptions fixed = o;
    fixed.shuffle = false;
    DataLoader f(d, fixed);
    auto run = [&](std::uint64_t e, std::vector<std::int32_t>& labels) {
        f.start_epoch(e);
        std::vector<float> out;
        labels.clear();
        while (f.next()) {
            out.insert(out.end(), f.features().begin(), f.features().end());
            labels.insert(labels.end(), f.labels().begin(), f.labels().end());
        }
        return out;
    };
    std::vector<std::int32_t> labels0, labels0_again, labels5;
    const auto fixed0 = run(0, labels0);
    CHECK(run(0, labels0_again) == fixed0);
    const auto fixed5 = run(5, labels5);
    REQUIRE(labels5 == labels0);  // the same samples in the same order ...
    CHECK(fixed5 != fixed0);      // ... augmented differently
}

TEST_CASE("Datasets from user arrays, subsets and stratified splits", "[data][dataset]") {
    const std::vector<float> xs = {1, 2, 3, 4, 5, 6};
    const std::vector<std::int32_t> ys = {0, 1, 1};
    auto d = dtrain::from_arrays(xs.data(), ys.data(), 3, {2});
    CHECK(d.features(2, 1) == 6.0f);
    CHECK(d.num_classes() == 2);
    const auto s = dtrain::subset(d, {2, 0});
    CHECK(s.features(0, 0) == 5.0f);
    CHECK(s.labels(1) == 0);
    CHECK(contains(error_message([&] { dtrain::subset(d, {3}); }), "index 3"));
    CHECK(contains(
        error_message([] {
            dtrain::make_dataset(dtrain::Tensor<float>::from_shape({3, 2}), dtrain::Labels::from_shape({2}));
        }),
        "2 labels"));
    dtrain::Labels neg = {0, -1};
    CHECK(contains(error_message([&] {
                       dtrain::make_dataset(dtrain::Tensor<float>::from_shape({2, 1}), neg);
                   }),
                   "label -1"));
    dtrain::Labels big = {0, 2};
    CHECK(contains(error_message([&] {
                       dtrain::make_dataset(dtrain::Tensor<float>::from_shape({2, 1}), big, {"a", "b"});
                   }),
                   "label 2"));
    dtrain::Tensor<float> nanx = dtrain::Tensor<float>::from_shape({2, 1});
    nanx(0, 0) = 1.0f;
    nanx(1, 0) = std::nanf("");
    CHECK(contains(error_message([&] { dtrain::make_dataset(nanx, dtrain::Labels{0, 0}); }), "non-finite"));

    const auto big_d = indexed_dataset(30);  // labels i % 3: 10 per class
    auto [tr, te] = dtrain::train_test_split(big_d, 0.2, 1);
    CHECK(tr.size() == 24);
    CHECK(te.size() == 6);
    std::vector<int> per(3, 0);
    for (auto v : te.labels)
        ++per[std::size_t(v)];
    CHECK(per == std::vector<int>{2, 2, 2});
    std::set<float> ids;
    for (std::size_t i = 0; i < tr.size(); ++i)
        ids.insert(tr.features(i, 0));
    for (std::size_t i = 0; i < te.size(); ++i)
        ids.insert(te.features(i, 0));
    CHECK(ids.size() == 30);  // disjoint and covering
}

TEST_CASE("ChannelNormalizer fits per-channel mean and std", "[data][transform]") {
    dtrain::Rng rng(2);
    dtrain::Tensor<float> x = dtrain::Tensor<float>::from_shape({20, 3, 4, 4});
    for (std::size_t i = 0; i < 20; ++i)
        for (std::size_t c = 0; c < 3; ++c)
            for (std::size_t p = 0; p < 16; ++p)
                x(i, c, p / 4, p % 4) = float(c * 10 + rng.normal(0.0, 1.0 + c));
    dtrain::ChannelNormalizer cn;
    cn.fit(x);
    CHECK(cn.mean()[2] == Approx(20.0).margin(0.5));
    cn.apply(x);
    for (std::size_t c = 0; c < 3; ++c) {
        double m = 0, v = 0;
        for (std::size_t i = 0; i < 20; ++i)
            for (std::size_t p = 0; p < 16; ++p)
                m += x(i, c, p / 4, p % 4);
        m /= 320;
        for (std::size_t i = 0; i < 20; ++i)
            for (std::size_t p = 0; p < 16; ++p)
                v += (x(i, c, p / 4, p % 4) - m) * (x(i, c, p / 4, p % 4) - m);
        CHECK(std::abs(m) < 1e-5);
        CHECK(v / 320 == Approx(1.0).epsilon(1e-4));
    }
    dtrain::ChannelNormalizer given({0.5f}, {0.25f});
    dtrain::Tensor<float> one = dtrain::Tensor<float>::from_shape({1, 1, 1, 2});
    one(0, 0, 0, 0) = 1.0f;
    one(0, 0, 0, 1) = 0.0f;
    given.apply(one);
    CHECK(one(0, 0, 0, 0) == 2.0f);
    CHECK(one(0, 0, 0, 1) == -2.0f);
    CHECK(contains(error_message([&] { given.apply(x); }), "1 channel statistics"));
    CHECK(contains(error_message([] { dtrain::ChannelNormalizer({1.0f}, {0.0f}); }), "not > 0"));
}

namespace {

/// indexed_dataset(n, width)'s features with float targets (id / 4, -id) instead of labels.
dtrain::Dataset indexed_regression(std::size_t n, std::size_t width = 2) {
    const auto c = indexed_dataset(n, width);
    dtrain::Tensor<float> t = dtrain::Tensor<float>::from_shape({n, 2});
    for (std::size_t i = 0; i < n; ++i)
        t(i, 0) = float(i) / 4, t(i, 1) = -float(i);
    return dtrain::make_regression_dataset(c.features, std::move(t));
}

/// The sample ids of an epoch of a loader of float targets, checking each target row against its features.
std::vector<std::size_t> regression_epoch(DataLoader& l, std::uint64_t epoch,
                                          std::vector<std::size_t>& sizes) {
    l.start_epoch(epoch);
    std::vector<std::size_t> ids;
    while (l.next()) {
        const auto& x = l.features();
        const auto& t = l.targets();
        REQUIRE(t.shape() == std::vector<std::size_t>{x.shape()[0], 2});
        sizes.push_back(l.current_batch_size());
        for (std::size_t k = 0; k < t.shape()[0]; ++k) {
            const auto id = std::size_t(x(k, 0)) / 100;
            CHECK(t(k, 0) == float(id) / 4);
            CHECK(t(k, 1) == -float(id));
            ids.push_back(id);
        }
    }
    return ids;
}

}  // namespace

TEST_CASE("DataLoader yields float targets [batch, k] in the order the label path yields labels",
          "[data][loader][regression]") {
    const auto r = indexed_regression(10);
    const auto c = indexed_dataset(10);
    for (bool shuffle : {false, true}) {
        INFO("shuffle " << shuffle);
        LoaderOptions o;
        o.batch_size = 4;
        o.shuffle = shuffle;
        o.seed = 11;
        DataLoader lr(r, o), lc(c, o);
        CHECK(lr.has_targets());
        CHECK_FALSE(lc.has_targets());
        CHECK(lr.batches_per_epoch() == 3);
        for (std::uint64_t e : {0u, 3u}) {
            std::vector<std::size_t> sizes;
            const auto ids = regression_epoch(lr, e, sizes);
            CHECK(sizes == std::vector<std::size_t>{4, 4, 2});  // the last batch's targets are [2, 2]
            CHECK(ids == run_epoch(lc, e).first);
            if (!shuffle) CHECK(ids == std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
        }
    }
    // A distributed sampler shards float targets exactly as it shards labels.
    for (int rank : {0, 1, 2}) {
        DataLoader lr(r, dtrain::DistributedSampler(10, rank, 3, {true, 5}), {3});
        DataLoader lc(c, dtrain::DistributedSampler(10, rank, 3, {true, 5}), {3});
        std::vector<std::size_t> sizes;
        CHECK(regression_epoch(lr, 2, sizes) == run_epoch(lc, 2).first);
    }
    // Resuming mid-epoch gives the same next batch.
    DataLoader a(r, {3}), b(r, {3});
    a.start_epoch(1);
    a.next(), a.next();
    b.seek(1, 2);
    REQUIRE(a.next());
    REQUIRE(b.next());
    CHECK(a.targets() == b.targets());
}

TEST_CASE("Asking a loader for the kind of labels its data set does not hold is an error naming both",
          "[data][loader][regression][errors]") {
    const auto r = indexed_regression(6);
    DataLoader lr(r, {4});
    REQUIRE(lr.next());
    CHECK(
        contains(error_message([&] { lr.labels(); }),
                 "DataLoader::labels: the data set holds float targets (2 per sample), not class labels: use "
                 "targets()"));
    const auto c = indexed_dataset(6);
    DataLoader lc(c, {4});
    REQUIRE(lc.next());
    CHECK(contains(error_message([&] { lc.targets(); }),
                   "DataLoader::targets: the data set holds class labels, not float targets: use labels()"));

    // Views of user tensors: one target per sample as [N] becomes [batch, 1].
    dtrain::Tensor<float> x = dtrain::Tensor<float>::from_shape({5, 3}),
                          y = dtrain::Tensor<float>::from_shape({5});
    for (std::size_t i = 0; i < 5; ++i)
        x(i, 0) = x(i, 1) = x(i, 2) = float(i), y(i) = float(i) * 0.5f;
    LoaderOptions o;
    o.batch_size = 2;
    o.shuffle = false;
    DataLoader lv(dtrain::DatasetView(x, y), o);
    REQUIRE(lv.next());
    CHECK(lv.targets().shape() == std::vector<std::size_t>{2, 1});
    CHECK(lv.targets()(1, 0) == 0.5f);
    CHECK(contains(error_message([&] {
                       const dtrain::Tensor<float> four = dtrain::Tensor<float>::from_shape({4, 1});
                       dtrain::DatasetView(x, four);
                   }),
                   "features have 5 samples but there are 4 targets"));
    const dtrain::Tensor<float> cube = dtrain::Tensor<float>::from_shape({5, 1, 1});
    CHECK(contains(error_message([&] { dtrain::DatasetView(x, cube); }),
                   "targets must have shape [N] or [N, k], got [5, 1, 1]"));
    // A data set that holds both kinds is refused rather than read one way silently.
    auto both = indexed_regression(6);
    both.labels = dtrain::Labels{0, 1, 2, 0, 1, 2};
    CHECK(contains(error_message([&] { dtrain::DatasetView v(both); }),
                   "holds both class labels and float targets"));
}

TEST_CASE("A batch of float targets fits MeanSquaredError as it is", "[data][loader][regression]") {
    const auto r = indexed_regression(7);
    LoaderOptions o;
    o.batch_size = 3;
    DataLoader l(r, o);
    dtrain::MeanSquaredError<float> mse;
    dtrain::Tensor<float> grad;
    while (l.next()) {
        // A model's output for k = 2 targets is [batch, 2]; predicting the targets exactly gives loss 0, and
        // predicting them + 1 gives loss 1.
        dtrain::Tensor<float> out = l.targets();
        CHECK(mse.compute(out, l.targets(), grad) == 0.0f);
        out += 1.0f;
        CHECK(mse.compute(out, l.targets(), grad) == Approx(1.0f));
        CHECK(grad.shape() == l.targets().shape());
    }
}

TEST_CASE("DataLoader::seek_samples continues an epoch begun at another number of ranks", "[data][loader]") {
    const auto d = indexed_dataset(24);
    const dtrain::ShardOptions so{true, 4};
    // What 2 ranks with batches of 3 (6 per step) train on in epoch 1: every sample once.
    std::vector<std::size_t> whole;
    for (int r = 0; r < 2; ++r) {
        DataLoader l(d, dtrain::DistributedSampler(24, r, 2, so), {3});
        const auto ids = run_epoch(l, 1).first;
        whole.insert(whole.end(), ids.begin(), ids.end());
    }
    std::sort(whole.begin(), whole.end());
    // 2 steps at 2 ranks (12 samples), then the rest at 3 ranks with batches of 2 (6 per step): the 12
    // samples of the first two steps and the rest together are the epoch, none twice.
    std::vector<std::size_t> seen;
    for (int r = 0; r < 2; ++r) {
        DataLoader l(d, dtrain::DistributedSampler(24, r, 2, so), {3});
        l.start_epoch(1);
        for (int s = 0; s < 2 && l.next(); ++s)
            for (std::size_t k = 0; k < 3; ++k)
                seen.push_back(std::size_t(l.features()(k, 0)) / 100);
    }
    for (int r = 0; r < 3; ++r) {
        DataLoader l(d, dtrain::DistributedSampler(24, r, 3, so), {2});
        l.seek_samples(1, 12, 2);
        CHECK(l.batch_index() == 0);
        CHECK(l.batches_per_epoch() == 2);
        while (l.next())
            for (std::size_t k = 0; k < l.current_batch_size(); ++k)
                seen.push_back(std::size_t(l.features()(k, 0)) / 100);
    }
    std::sort(seen.begin(), seen.end());
    CHECK(seen == whole);
    // At its own number of ranks it is seek(): the same next batch.
    DataLoader a(d, dtrain::DistributedSampler(24, 1, 2, so), {3}),
        b(d, dtrain::DistributedSampler(24, 1, 2, so), {3});
    a.seek(1, 2);
    b.seek_samples(1, 12, 2);
    CHECK(b.batch_index() == 2);
    REQUIRE(a.next());
    REQUIRE(b.next());
    CHECK(a.labels() == b.labels());
    CHECK(a.features() == b.features());
    // Contiguous shards and a loader without a sampler cannot continue another number of ranks.
    DataLoader c(d,
                 dtrain::DistributedSampler(
                     24, 0, 3, {true, 4, dtrain::ShardTail::Pad, dtrain::ShardLayout::Contiguous}),
                 {2});
    CHECK_THAT(error_message([&] { c.seek_samples(1, 12, 2); }), Catch::Contains("ShardLayout::Interleaved"));
    DataLoader plain(d, {4});
    CHECK_THAT(error_message([&] { plain.seek_samples(1, 12, 2); }),
               Catch::Contains("a loader without a DistributedSampler"));
    CHECK_NOTHROW(plain.seek_samples(1, 12, 1));
    CHECK(plain.batch_index() == 3);
}

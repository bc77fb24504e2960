#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <dtrain/data/cifar.hpp>
#include <dtrain/data/csv.hpp>
#include <dtrain/data/idx.hpp>

#include "data_test_utils.hpp"

using dtrain::test::gzip_bytes;
using dtrain::test::idx_bytes;
using dtrain::test::random_bytes;
using dtrain::test::TempDir;
using dtrain::test::write_bytes;

namespace {

struct Tally {
    int loads = 0, errors = 0;
    /// Truncated variants tried, and the ones among them that loaded without an error.
    int cuts = 0;
    std::vector<std::string> loaded_cuts;
};

/// Checks a successfully loaded data set: consistent shapes, labels in range, finite features (and in
/// [0, 1] for images).
void check_clean(const dtrain::Dataset& d, bool images) {
    REQUIRE(d.features.dimension() >= 2);
    CHECK(d.features.shape()[0] == d.size());
    CHECK(d.size() > 0);
    bool ok = true;
    for (auto v : d.features)
        ok = ok && std::isfinite(v) && (!images || (v >= 0.0f && v <= 1.0f));
    CHECK(ok);
    for (auto y : d.labels)
        ok = ok && y >= 0 && (d.class_names.empty() || std::size_t(y) < d.class_names.size());
    CHECK(ok);
}

/// Writes each variant of `good` (every truncation length in `cuts`, and flips of each byte in `flips` with
/// two masks) to `path` and runs `load`: each outcome must be a clean load or a dtrain::Error naming the
/// file.
void corrupt_and_load(const std::vector<unsigned char>& good, const std::string& path,
                      const std::vector<std::size_t>& cuts, const std::vector<std::size_t>& flips,
                      const std::function<void()>& load, Tally& t) {
    auto attempt = [&](const std::vector<unsigned char>& bytes, const std::string& what, bool cut) {
        write_bytes(path, bytes);
        t.cuts += cut ? 1 : 0;
        try {
            load();
            ++t.loads;
            if (cut) t.loaded_cuts.push_back(what);
        } catch (const dtrain::Error& e) {
            ++t.errors;
            const std::string m = e.what();
            if (m.find(path) == std::string::npos)
                FAIL_CHECK(what << ": message does not name the file: " << m);
        }
    };
    for (auto c : cuts)
        if (c < good.size())
            attempt(std::vector<unsigned char>(good.begin(), good.begin() + long(c)),
                    path + " cut to " + std::to_string(c) + " of " + std::to_string(good.size()) + " bytes",
                    true);
    for (auto f : flips)
        for (unsigned char mask : {0xFF, 0x01}) {
            if (f >= good.size()) continue;
            auto b = good;
            b[f] ^= mask;
            attempt(b, "flip " + std::to_string(f), false);
        }
}

std::vector<std::size_t> every(std::size_t n, std::size_t step = 1) {
    std::vector<std::size_t> v;
    for (std::size_t i = 0; i < n; i += step)
        v.push_back(i);
    return v;
}

}  // namespace

TEST_CASE("Corrupted IDX files load cleanly or fail cleanly", "[data][corruption]") {
    TempDir dir("corrupt_idx");
    dtrain::Rng rng(1);
    const auto img = idx_bytes({3, 4, 5}, random_bytes(60, rng)), lab = idx_bytes({3}, {0, 9, 4});
    const auto ip = dir.file("img"), lp = dir.file("lab");
    Tally t;
    for (bool gz : {false, true}) {
        const auto gi = gz ? gzip_bytes(img) : img, gl = gz ? gzip_bytes(lab) : lab;
        write_bytes(lp, gl);
        auto load = [&] { check_clean(dtrain::load_idx(ip, lp, dtrain::fashion_mnist_class_names()), true); };
        corrupt_and_load(gi, ip, every(gi.size()), every(gi.size()), load, t);
        write_bytes(ip, gi);
        corrupt_and_load(gl, lp, every(gl.size()), every(gl.size()), load, t);
    }
    INFO("loads " << t.loads << " errors " << t.errors << " truncations " << t.cuts);
    CHECK(t.cuts > 100);
    // Every truncation must fail (an IDX header fixes the data size, gzip has a length trailer).
    std::string loaded;
    for (const auto& c : t.loaded_cuts)
        loaded += "\n  " + c;
    INFO("truncated files that loaded:" << loaded);
    CHECK(t.loaded_cuts.empty());
    CHECK(t.loads > 0);  // pixel flips in raw files are valid data
}

TEST_CASE("Corrupted CIFAR-10 batches load cleanly or fail cleanly", "[data][corruption]") {
    TempDir dir("corrupt_cifar");
    dtrain::Rng rng(2);
    std::vector<unsigned char> good;
    for (int r = 0; r < 2; ++r) {
        good.push_back(static_cast<unsigned char>(r * 7));
        const auto px = random_bytes(3072, rng);
        good.insert(good.end(), px.begin(), px.end());
    }
    const auto path = dir.file("test_batch.bin");
    auto load = [&] { check_clean(dtrain::load_cifar10(dir.str(), dtrain::Split::Test), true); };
    Tally t;
    std::vector<std::size_t> pos = {0, 1, 2, 3072, 3073, 3074, 6145};
    for (std::size_t i = 5; i < good.size(); i += 97)
        pos.push_back(i);
    corrupt_and_load(good, path, pos, pos, load, t);
    const auto gz = gzip_bytes(good);
    corrupt_and_load(gz, path, every(gz.size(), 23), every(gz.size(), 23), load, t);
    INFO("loads " << t.loads << " errors " << t.errors);
    CHECK(t.errors > 50);
    CHECK(t.loads > 0);
}

TEST_CASE("Corrupted CSV files load cleanly or fail cleanly", "[data][corruption]") {
    TempDir dir("corrupt_csv");
    const std::string text =
        "sepal_length,sepal_width,petal_length,petal_width,species\n"
        "5.1,3.5,1.4,0.2,Iris-setosa\n"
        "7.0,3.2,4.7,1.4,Iris-versicolor\n"
        "6.3,3.3,6.0,2.5,\"Iris-virginica\"\n";
    const std::string sk =
        "3,4,setosa,versicolor,virginica\n5.1,3.5,1.4,0.2,0\n7.0,3.2,4.7,1.4,1\n6.3,3.3,6.0,2.5,2\n";
    const auto path = dir.file("iris.csv");
    auto load = [&] { check_clean(dtrain::read_csv(path), false); };
    Tally t;
    for (const auto& s : {text, sk}) {
        const std::vector<unsigned char> good(s.begin(), s.end());
        corrupt_and_load(good, path, every(good.size()), every(good.size()), load, t);
    }
    INFO("loads " << t.loads << " errors " << t.errors);
    CHECK(t.errors > 100);
    CHECK(t.loads > 0);
}

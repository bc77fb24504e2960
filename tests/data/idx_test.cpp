#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <dtrain/data/cifar.hpp>
#include <dtrain/data/idx.hpp>

#include "data_test_utils.hpp"

using dtrain::test::contains;
using dtrain::test::error_message;
using dtrain::test::gzip_bytes;
using dtrain::test::idx_bytes;
using dtrain::test::random_bytes;
using dtrain::test::TempDir;
using dtrain::test::write_bytes;

namespace {

// Writes a 4-image Fashion-MNIST test split into `dir` (images gzip-compressed, labels 9, 0, 3, 1 raw);
// returns the pixels.
std::vector<unsigned char> write_test_split(const TempDir& dir) {
    dtrain::Rng rng(3);
    const auto px = random_bytes(4 * 28 * 28, rng);
    write_bytes(dir.file("t10k-images-idx3-ubyte.gz"), gzip_bytes(idx_bytes({4, 28, 28}, px)));
    write_bytes(dir.file("t10k-labels-idx1-ubyte"), idx_bytes({4}, {9, 0, 3, 1}));
    return px;
}

// Sets (or with nullptr unsets) an environment variable for one scope and restores it afterwards.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        const char* old = std::getenv(name);
        had_ = old != nullptr;
        if (had_) old_ = old;
        value ? ::setenv(name, value, 1) : ::unsetenv(name);
    }
    ~ScopedEnv() { had_ ? ::setenv(name_, old_.c_str(), 1) : ::unsetenv(name_); }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* name_;
    bool had_ = false;
    std::string old_;
};

}  // namespace

TEST_CASE("IDX images and labels round-trip, gzip and raw", "[data][idx]") {
    TempDir dir("idx_rt");
    dtrain::Rng rng(11);
    const std::uint32_t n = 7, h = 5, w = 3;
    const auto pixels = random_bytes(n * h * w, rng);
    const auto labels = random_bytes(n, rng, 10);
    for (bool gz : {false, true}) {
        const std::string ext = gz ? ".gz" : "";
        auto img = idx_bytes({n, h, w}, pixels), lab = idx_bytes({n}, labels);
        if (gz) {
            img = gzip_bytes(img);
            lab = gzip_bytes(lab);
            REQUIRE(img[0] == 0x1f);
        }
        write_bytes(dir.file("img" + ext), img);
        write_bytes(dir.file("lab" + ext), lab);
        const auto d = dtrain::load_idx(dir.file("img" + ext), dir.file("lab" + ext),
                                        {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"});
        REQUIRE(d.features.shape() == std::vector<std::size_t>{n, 1, h, w});
        REQUIRE(d.size() == n);
        for (std::size_t i = 0; i < pixels.size(); ++i)
            CHECK(d.features.data()[i] == float(pixels[i]) / 255.0f);
        for (std::size_t i = 0; i < n; ++i)
            CHECK(d.labels(i) == labels[i]);
        CHECK(d.class_names.size() == 10);
    }
}

TEST_CASE("load_fashion_mnist finds .gz files or raw files in a directory", "[data][idx]") {
    TempDir dir("idx_fm");
    const auto px = write_test_split(dir);
    const auto d = dtrain::load_fashion_mnist(dtrain::Split::Test, dir.str());
    CHECK(d.size() == 4);
    CHECK(d.labels(0) == 9);
    CHECK(d.class_names.at(9) == "Ankle boot");
    CHECK(d.features(3, 0, 27, 27) == float(px.back()) / 255.0f);
    auto m = error_message([&] { dtrain::load_fashion_mnist(dtrain::Split::Train, dir.str()); });
    CHECK(contains(m, dir.file("train-images-idx3-ubyte.gz")));
    CHECK(contains(m, "neither"));
    m = error_message([&] { dtrain::load_fashion_mnist(dtrain::Split::Train, dir.file("nowhere")); });
    CHECK(contains(m, "nowhere"));
    CHECK(contains(m, "does not exist"));
    // A label outside the 10 classes is rejected.
    write_bytes(dir.file("t10k-labels-idx1-ubyte"), idx_bytes({4}, {9, 0, 10, 1}));
    m = error_message([&] { dtrain::load_fashion_mnist(dtrain::Split::Test, dir.str()); });
    CHECK(contains(m, "label 10 at index 2"));
}

TEST_CASE("default_fashion_mnist_dir: DTRAIN_FASHION_MNIST_DIR overrides Debian's directory", "[data][idx]") {
    const std::string debian = "/usr/share/datasets/fashion-mnist";
    {
        ScopedEnv unset("DTRAIN_FASHION_MNIST_DIR", nullptr);
        CHECK(dtrain::default_fashion_mnist_dir() == debian);
    }
    {
        ScopedEnv empty("DTRAIN_FASHION_MNIST_DIR", "");
        CHECK(dtrain::default_fashion_mnist_dir() == debian);
    }
    TempDir dir("idx_env");
    write_test_split(dir);
    ScopedEnv set("DTRAIN_FASHION_MNIST_DIR", dir.str().c_str());
    CHECK(dtrain::default_fashion_mnist_dir() == dir.str());
    const auto d = dtrain::load_fashion_mnist(dtrain::Split::Test);  // no directory: the variable's
    CHECK(d.size() == 4);
    CHECK(d.labels(0) == 9);
    CHECK(d.source == dir.str());
}

TEST_CASE("IDX errors name the file and the defect", "[data][idx]") {
    TempDir dir("idx_err");
    dtrain::Rng rng(5);
    const auto img_path = dir.file("img"), lab_path = dir.file("lab");
    const auto good_img = idx_bytes({3, 4, 4}, random_bytes(48, rng));
    const auto good_lab = idx_bytes({3}, {1, 2, 3});
    auto img_err = [&](const std::vector<unsigned char>& bytes) {
        write_bytes(img_path, bytes);
        const auto m = error_message([&] { dtrain::read_idx_images(img_path); });
        CHECK(contains(m, img_path));
        return m;
    };
    CHECK(contains(error_message([&] { dtrain::read_idx_images(dir.file("none")); }), "cannot open"));
    CHECK(contains(img_err({}), "is empty"));
    CHECK(contains(img_err({0, 0, 8}), "too short"));
    auto m = img_err(good_lab);  // a labels file where images are expected
    CHECK(contains(m, "wrong magic number 0x00000801"));
    CHECK(contains(m, "1 dimensions"));
    CHECK(contains(img_err({'P', 'K', 3, 4, 0, 0, 0, 0}), "not an IDX file"));
    auto bad_type = good_img;
    bad_type[2] = 0x0D;
    CHECK(contains(img_err(bad_type), "element type 0x0D"));
    CHECK(
        contains(img_err(std::vector<unsigned char>(good_img.begin(), good_img.begin() + 10)), "truncated"));
    m = img_err(std::vector<unsigned char>(good_img.begin(), good_img.end() - 1));
    CHECK(contains(m, "truncated"));
    CHECK(contains(m, "need 48 bytes of data but only 47"));
    auto extra = good_img;
    extra.push_back(0);
    CHECK(contains(img_err(extra), "1 unexpected bytes"));
    CHECK(contains(img_err(idx_bytes({0, 4, 4}, {})), "dimension 0 as 0"));
    CHECK(contains(img_err(idx_bytes({0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}, {})), "implausible"));

    // gzip damage: truncated stream, corrupted payload/CRC.
    const auto gz = gzip_bytes(good_img);
    m = img_err(std::vector<unsigned char>(gz.begin(), gz.end() - 6));
    CHECK(contains(m, "gzip"));
    auto crc = gz;
    crc[crc.size() - 6] ^= 0xFF;  // inside the CRC32 trailer
    CHECK(contains(img_err(crc), "gzip"));

    // Image and label counts must agree.
    write_bytes(img_path, good_img);
    write_bytes(lab_path, idx_bytes({2}, {1, 2}));
    m = error_message([&] { dtrain::load_idx(img_path, lab_path); });
    CHECK(contains(m, img_path));
    CHECK(contains(m, lab_path));
    CHECK(contains(m, "2 labels"));
    CHECK(contains(m, "3 images"));
    write_bytes(lab_path, good_img);
    CHECK(contains(error_message([&] { dtrain::load_idx(img_path, lab_path); }),
                   "wrong magic number 0x00000803"));
    write_bytes(lab_path, idx_bytes({3}, {1, 2, 7}));
    CHECK(contains(error_message([&] { dtrain::load_idx(img_path, lab_path, {"a", "b", "c"}); }), "label 7"));
}

TEST_CASE("gzip: concatenated members are one stream, anything else after the last one is an error",
          "[data][idx][gzip]") {
    TempDir dir("idx_gzip");
    dtrain::Rng rng(6);
    const auto path = dir.file("img.gz");
    const auto raw = idx_bytes({3, 4, 4}, random_bytes(48, rng));
    const auto gz = gzip_bytes(raw);
    auto with = [&](std::vector<unsigned char> tail) {
        auto b = gz;
        b.insert(b.end(), tail.begin(), tail.end());
        return b;
    };
    // What gunzip reads: the file split in two members, concatenated.
    auto two = gzip_bytes(std::vector<unsigned char>(raw.begin(), raw.begin() + 20));
    const auto second = gzip_bytes(std::vector<unsigned char>(raw.begin() + 20, raw.end()));
    two.insert(two.end(), second.begin(), second.end());
    write_bytes(path, two);
    const auto x = dtrain::read_idx_images(path);
    REQUIRE(x.size() == 48);
    CHECK(x(2, 0, 3, 3) == float(raw.back()) / 255.0f);
    // Junk, zero padding or a lone byte after the last member.
    auto err = [&](const std::vector<unsigned char>& bytes) {
        write_bytes(path, bytes);
        return error_message([&] { dtrain::read_idx_images(path); });
    };
    auto m = err(with({'j', 'u', 'n', 'k'}));
    CHECK(contains(m, "dtrain::read_idx_images: '" + path +
                          "' has 4 bytes after the end of its gzip data (from byte " +
                          std::to_string(gz.size()) + " of " + std::to_string(gz.size() + 4) +
                          ") that do not start another gzip member"));
    CHECK(contains(err(with(std::vector<unsigned char>(512, 0))),
                   "has 512 bytes after the end of its gzip data"));
    CHECK(contains(err(with({0x1f})), "has 1 bytes after the end"));
    // Something that starts like a member but is not one, or is cut short.
    CHECK(contains(err(with({0x1f, 0x8b, 'j', 'u', 'n', 'k', 0, 0, 0, 0, 0, 0})), "corrupt gzip data"));
    CHECK(contains(err(with({0x1f, 0x8b})), "truncated"));
    CHECK(contains(err(with(std::vector<unsigned char>(second.begin(), second.end() - 3))), "truncated"));
    // A directory where a file is expected.
    CHECK(contains(error_message([&] { dtrain::read_idx_images(dir.str()); }),
                   "cannot read '" + dir.str() + "': it is a directory"));
}

namespace {

/// `n` CIFAR records with labels `first_label + k mod 10` and random pixels.
std::vector<unsigned char> cifar_records(std::size_t n, int first_label, dtrain::Rng& rng) {
    std::vector<unsigned char> b;
    for (std::size_t k = 0; k < n; ++k) {
        b.push_back(static_cast<unsigned char>((first_label + int(k)) % 10));
        const auto px = random_bytes(3072, rng);
        b.insert(b.end(), px.begin(), px.end());
    }
    return b;
}

}  // namespace

TEST_CASE("CIFAR-10 binary batches round-trip from a directory", "[data][cifar]") {
    TempDir dir("cifar_rt");
    dtrain::Rng rng(8);
    std::vector<std::vector<unsigned char>> files;
    for (int i = 1; i <= 5; ++i) {
        files.push_back(cifar_records(2, i, rng));
        const auto name = dir.file("data_batch_" + std::to_string(i) + ".bin");
        write_bytes(name, i == 3 ? gzip_bytes(files.back()) : files.back());  // one compressed file too
    }
    write_bytes(dir.file("test_batch.bin"), cifar_records(3, 0, rng));
    const auto tr = dtrain::load_cifar10(dir.str(), dtrain::Split::Train);
    REQUIRE(tr.features.shape() == std::vector<std::size_t>{10, 3, 32, 32});
    CHECK(tr.class_names.at(0) == "airplane");
    for (std::size_t f = 0; f < 5; ++f)
        for (std::size_t r = 0; r < 2; ++r) {
            const auto& rec = files[f];
            const std::size_t k = f * 2 + r, off = r * 3073;
            CHECK(tr.labels(k) == rec[off]);
            // Channel planes: red plane first, then green, then blue, each row-major 32x32.
            CHECK(tr.features(k, 0, 0, 0) == float(rec[off + 1]) / 255.0f);
            CHECK(tr.features(k, 0, 0, 1) == float(rec[off + 2]) / 255.0f);
            CHECK(tr.features(k, 0, 1, 0) == float(rec[off + 1 + 32]) / 255.0f);
            CHECK(tr.features(k, 1, 0, 0) == float(rec[off + 1 + 1024]) / 255.0f);
            CHECK(tr.features(k, 2, 31, 31) == float(rec[off + 3072]) / 255.0f);
        }
    const auto te = dtrain::load_cifar10(dir.str(), dtrain::Split::Test);
    CHECK(te.size() == 3);
    CHECK(te.labels(2) == 2);
}

TEST_CASE("CIFAR-10 errors name the file and the defect", "[data][cifar]") {
    TempDir dir("cifar_err");
    dtrain::Rng rng(9);
    const auto path = dir.file("test_batch.bin");
    auto err = [&](const std::vector<unsigned char>& b) {
        write_bytes(path, b);
        const auto m = error_message([&] { dtrain::load_cifar10(dir.str(), dtrain::Split::Test); });
        CHECK(contains(m, path));
        return m;
    };
    auto m = error_message([&] { dtrain::load_cifar10(dir.file("absent"), dtrain::Split::Test); });
    CHECK(contains(m, "absent"));
    CHECK(contains(m, "does not exist"));
    CHECK(contains(error_message([&] { dtrain::load_cifar10(dir.str(), dtrain::Split::Test); }),
                   "cannot open"));
    CHECK(contains(err({}), "is empty"));
    auto recs = cifar_records(2, 0, rng);
    m = err(std::vector<unsigned char>(recs.begin(), recs.end() - 100));
    CHECK(contains(m, "truncated"));
    CHECK(contains(m, "2973 bytes"));
    recs[3073] = 10;
    m = err(recs);
    CHECK(contains(m, "record 1"));
    CHECK(contains(m, "label 10"));
    m = error_message([&] { dtrain::load_cifar10(dir.str(), dtrain::Split::Train); });
    CHECK(contains(m, "data_batch_1.bin"));
    CHECK(contains(error_message([] { dtrain::read_cifar10_batches({}); }),
                   "dtrain::read_cifar10: no batch files given"));
}

#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/core/file_io.hpp>
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/data/dataset.hpp>
#include <dtrain/data/detail/byte_source.hpp>
#include <dtrain/data/detail/checked.hpp>

namespace dtrain {

/// Where load_fashion_mnist() looks when given no directory: the environment variable
/// DTRAIN_FASHION_MNIST_DIR when it is set and not empty, else /usr/share/datasets/fashion-mnist (where
/// Debian's dataset-fashion-mnist package installs the files). Read at every call.
inline std::string default_fashion_mnist_dir() {
    const char* dir = std::getenv("DTRAIN_FASHION_MNIST_DIR");
    return dir != nullptr && *dir != '\0' ? dir : "/usr/share/datasets/fashion-mnist";
}

namespace detail {

/// Lookup table v -> v / 255.0f for pixel bytes (exact division, same result as the formula).
inline const std::array<float, 256>& byte_to_unit() {
    static const std::array<float, 256> table = [] {
        std::array<float, 256> t{};
        for (int v = 0; v < 256; ++v)
            t[static_cast<std::size_t>(v)] = static_cast<float>(v) / 255.0f;
        return t;
    }();
    return table;
}

/// Big-endian 32-bit integer at `p`.
inline std::uint32_t be32(const unsigned char* p) {
    return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | p[3];
}

/// The most data bytes an IDX file may declare (1 TiB): more is taken as a corrupt header.
inline constexpr std::size_t idx_max_bytes = std::size_t(1) << 40;

/// Reads exactly `n` bytes of `src` into `dst`, fewer only at the end of the data; returns how many.
inline std::size_t read_full(ByteSource& src, unsigned char* dst, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
        const std::size_t k = src.read(dst + got, n - got);
        if (k == 0) break;
        got += k;
    }
    return got;
}

/// Reads the rest of `src`, keeping nothing, and returns how many bytes it held (a gzip file is checked to
/// its end: truncation, CRC, bytes after the last member).
inline std::size_t drain(ByteSource& src) {
    unsigned char buf[4096];
    std::size_t n = 0, k = 0;
    while ((k = src.read(buf, sizeof buf)) > 0)
        n += k;
    return n;
}

/// Throws unless `have` bytes of data are exactly the `total` that dimensions `dims` declare.
inline void check_idx_data_size(std::size_t have, std::size_t total, const std::vector<std::size_t>& dims,
                                const std::string& path, const char* who) {
    DTRAIN_CHECK(have >= total, who, ": '", path, "' is truncated: dimensions ", shape_str(dims), " need ",
                 total, " bytes of data but only ", have, " are present");
    DTRAIN_CHECK(have == total, who, ": '", path, "' has ", have - total,
                 " unexpected bytes after the data (dimensions ", shape_str(dims), ")");
}

/// Reads and checks the header of an IDX file of unsigned bytes with `ndims` dimensions from `src`, which is
/// left at the first data byte, and returns the dimensions. The magic number and the dimensions are checked
/// before any data is read; for an uncompressed file, so is the file's size against the declared data.
inline std::vector<std::size_t> read_idx_header(ByteSource& src, std::size_t ndims, const std::string& path,
                                                const char* who, const char* kind) {
    unsigned char head[4 + 4 * 3] = {};
    const std::size_t header = 4 + 4 * ndims;
    std::size_t got = read_full(src, head, 4);
    DTRAIN_CHECK(got > 0, who, ": '", path, "' is empty");
    DTRAIN_CHECK(got >= 4, who, ": '", path, "' is truncated: ", got, " bytes, too short for an IDX header");
    const std::uint32_t magic = be32(head), expect = 0x0800u | static_cast<std::uint32_t>(ndims);
    if (magic != expect) {
        std::string why = "expected 0x0000080" + std::to_string(ndims) + " for an IDX " + kind + " file";
        if (head[0] != 0 || head[1] != 0)
            why += "; this is not an IDX file";
        else if (head[2] != 0x08) {
            char t[8];
            std::snprintf(t, sizeof t, "0x%02X", static_cast<unsigned>(head[2]));
            why += std::string("; element type ") + t + " is not unsigned byte (0x08)";
        } else
            why += "; it has " + std::to_string(head[3]) + " dimensions, not " + std::to_string(ndims);
        char hex[16];
        std::snprintf(hex, sizeof hex, "0x%08X", static_cast<unsigned>(magic));
        throw Error(concat(who, ": '", path, "' has wrong magic number ", hex, " (", why, ")"));
    }
    got += read_full(src, head + 4, header - 4);
    DTRAIN_CHECK(got == header, who, ": '", path, "' is truncated: ", got, " bytes, the header of an IDX ",
                 kind, " file needs ", header);
    std::vector<std::size_t> dims(ndims);
    for (std::size_t i = 0; i < ndims; ++i)
        dims[i] = be32(head + 4 + 4 * i);
    std::size_t total = 1;
    for (std::size_t i = 0; i < ndims; ++i) {
        DTRAIN_CHECK(dims[i] > 0, who, ": '", path, "' declares dimension ", i, " as 0 (dimensions ",
                     shape_str(dims), ")");
        // Checked before multiplying: a product that wraps past 2^64 would describe a tiny buffer.
        DTRAIN_CHECK(mul_fits(total, dims[i], total) && total <= idx_max_bytes, who, ": '", path,
                     "' declares implausible dimensions ", shape_str(dims),
                     " (more than 2^40 bytes of data)");
    }
    if (!src.compressed() && src.file_size() > 0)
        check_idx_data_size(src.file_size() - header, total, dims, path, who);
    return dims;
}

/// Reads the IDX file `path` (gzip-compressed or raw) of `ndims` dimensions, passing its data to
/// `consume(dims, read)` once the header is checked, where read(dst, n) reads the next n data bytes (all
/// of them present, else an error naming the file); then checks that nothing follows the data. A raw file's
/// size is checked against the header before anything is allocated; the data of a gzip file, whose size is
/// known only once it is decompressed, is decompressed first, so that what is allocated is bounded by the
/// data actually present, not by a damaged header. Running out of memory is an error naming the file.
template <class Consume>
void read_idx(const std::string& path, std::size_t ndims, const char* who, const char* kind,
              Consume&& consume) {
    try {
        ByteSource src(path, who, std::numeric_limits<std::size_t>::max(), "none");
        const auto dims = read_idx_header(src, ndims, path, who, kind);
        std::size_t total = 1, done = 0;
        for (auto v : dims)
            total *= v;
        std::vector<unsigned char> held;  // gzip: the data, grown as it is decompressed
        if (src.compressed()) {
            while (held.size() < total) {
                const std::size_t at = held.size(), want = std::min(total - at, ByteSource::piece);
                held.resize(at + want);
                const std::size_t got = read_full(src, held.data() + at, want);
                held.resize(at + got);
                if (got < want) break;
            }
            check_idx_data_size(held.size() + drain(src), total, dims, path, who);
        }
        auto read = [&](unsigned char* dst, std::size_t n) {
            if (src.compressed()) {
                std::memcpy(dst, held.data() + done, n);
                done += n;
                return;
            }
            const std::size_t got = read_full(src, dst, n);
            done += got;
            if (got < n) check_idx_data_size(done, total, dims, path, who);
        };
        consume(dims, read);
        if (!src.compressed()) check_idx_data_size(done + drain(src), total, dims, path, who);
    } catch (const std::bad_alloc&) {
        throw Error(concat(who, ": out of memory while reading '", path, "'"));
    }
}

}  // namespace detail

/// Reads an IDX3 images file (MNIST layout: magic 0x00000803, N, rows, cols, then N*rows*cols unsigned
/// bytes), gzip-compressed or raw. Returns features of shape [N, 1, rows, cols] scaled to [0, 1]. Throws
/// dtrain::Error naming the file when it is missing, unreadable, empty, has a wrong magic number, is
/// truncated, has bytes after the data, or needs more memory than there is. The header is checked before
/// any data is read (and, for a raw file, the file's size against it); the data is converted as it is
/// read, so only the result is held.
DTRAIN_INLINE Tensor<float> read_idx_images(const std::string& path);

/// Reads an IDX1 labels file (magic 0x00000801, N, then N unsigned bytes), gzip-compressed or raw. When
/// `num_classes` > 0 every label must be below it. Throws dtrain::Error naming the file on any defect, and
/// when memory runs out; checks as read_idx_images().
DTRAIN_INLINE Labels read_idx_labels(const std::string& path, std::size_t num_classes = 0);

/// Loads an IDX images file and its labels file as one data set, checking that they hold the same number of
/// samples. When `class_names` is given every label must be below its size.
DTRAIN_INLINE Dataset load_idx(const std::string& images_path, const std::string& labels_path,
                               std::vector<std::string> class_names = {});

/// The ten Fashion-MNIST class names, in label order.
inline std::vector<std::string> fashion_mnist_class_names() {
    return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
            "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
}

namespace detail {

/// `dir`/`base`.gz if it exists, else `dir`/`base` if it exists; throws naming both candidates otherwise.
inline std::string find_idx_file(const std::string& dir, const std::string& base, const char* who) {
    namespace fs = std::filesystem;
    std::error_code ec;
    DTRAIN_CHECK(fs::is_directory(dir, ec), who, ": directory '", dir, "' does not exist");
    const fs::path gz = fs::path(dir) / (base + ".gz"), raw = fs::path(dir) / base;
    if (fs::exists(gz, ec)) return gz.string();
    if (fs::exists(raw, ec)) return raw.string();
    throw Error(concat(who, ": neither '", gz.string(), "' nor '", raw.string(), "' exists"));
}

/// Loads the MNIST-style file pair of `split` from `dir` with 10 classes named `names`.
inline Dataset load_mnist_like(const std::string& dir, Split split, std::vector<std::string> names,
                               const char* who) {
    const std::string prefix = split == Split::Train ? "train" : "t10k";
    const auto images = find_idx_file(dir, prefix + "-images-idx3-ubyte", who);
    const auto labels = find_idx_file(dir, prefix + "-labels-idx1-ubyte", who);
    Dataset d = load_idx(images, labels, std::move(names));
    d.source = dir;
    return d;
}

}  // namespace detail

/// Loads the Fashion-MNIST `split` (60000 train or 10000 test images, [N, 1, 28, 28] in [0, 1], labels 0..9
/// with class names) from `dir` (default: default_fashion_mnist_dir()). Each file is taken as <name>.gz, or
/// raw <name> when no .gz exists.
DTRAIN_INLINE Dataset load_fashion_mnist(Split split, const std::string& dir = default_fashion_mnist_dir());

/// Loads the MNIST `split` from `dir` (same file names and layout as Fashion-MNIST; classes "0".."9").
DTRAIN_INLINE Dataset load_mnist(Split split, const std::string& dir);

#if DTRAIN_HEADER_DEFINITIONS

DTRAIN_INLINE Tensor<float> read_idx_images(const std::string& path) {
    Tensor<float> x;
    detail::read_idx(path, 3, "dtrain::read_idx_images", "images", [&](const auto& dims, auto&& read) {
        x = Tensor<float>::from_shape({dims[0], 1, dims[1], dims[2]});
        const auto& table = detail::byte_to_unit();
        unsigned char buf[1 << 14];
        float* dst = x.data();
        for (std::size_t left = x.size(); left > 0;) {
            const std::size_t k = std::min(left, sizeof buf);
            read(buf, k);
            for (std::size_t i = 0; i < k; ++i)
                dst[i] = table[buf[i]];
            dst += k;
            left -= k;
        }
    });
    return x;
}

DTRAIN_INLINE Labels read_idx_labels(const std::string& path, std::size_t num_classes) {
    const char* who = "dtrain::read_idx_labels";
    Labels y;
    detail::read_idx(path, 1, who, "labels", [&](const auto& dims, auto&& read) {
        y = Labels::from_shape({dims[0]});
        unsigned char buf[1 << 14];
        for (std::size_t i = 0; i < dims[0];) {
            const std::size_t k = std::min(dims[0] - i, sizeof buf);
            read(buf, k);
            for (std::size_t j = 0; j < k; ++j, ++i) {
                const unsigned v = buf[j];
                DTRAIN_CHECK(num_classes == 0 || v < num_classes, who, ": '", path, "' has label ", v,
                             " at index ", i, ", outside [0, ", num_classes, ")");
                y(i) = static_cast<std::int32_t>(v);
            }
        }
    });
    return y;
}

DTRAIN_INLINE Dataset load_idx(const std::string& images_path, const std::string& labels_path,
                               std::vector<std::string> class_names) {
    Dataset d;
    d.features = read_idx_images(images_path);
    d.labels = read_idx_labels(labels_path, class_names.size());
    DTRAIN_CHECK(d.features.shape()[0] == d.labels.size(), "dtrain::load_idx: labels file '", labels_path,
                 "' has ", d.labels.size(), " labels but images file '", images_path, "' has ",
                 d.features.shape()[0], " images");
    d.class_names = std::move(class_names);
    d.source = images_path;
    return d;
}

DTRAIN_INLINE Dataset load_fashion_mnist(Split split, const std::string& dir) {
    return detail::load_mnist_like(dir, split, fashion_mnist_class_names(), "dtrain::load_fashion_mnist");
}

DTRAIN_INLINE Dataset load_mnist(Split split, const std::string& dir) {
    return detail::load_mnist_like(dir, split, {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"},
                                   "dtrain::load_mnist");
}

#endif

}  // namespace dtrain

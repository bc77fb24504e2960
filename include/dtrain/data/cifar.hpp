#pragma once

#include <cstddef>
#include <cstdint>
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
#include <dtrain/data/idx.hpp>

namespace dtrain {

/// The ten CIFAR-10 class names, in label order.
inline std::vector<std::string> cifar10_class_names() {
    return {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
}

/// Bytes of one CIFAR-10 binary record: 1 label byte + 3 x 32 x 32 pixel bytes (red, green, blue planes).
inline constexpr std::size_t cifar10_record_bytes = 1 + 3 * 32 * 32;

namespace detail {

/// The bytes of the CIFAR-10 batch file `path` (decompressed when it is gzip). The size of a raw file is
/// checked to be a non-zero whole number of records before it is read; running out of memory is an error
/// naming the file.
inline std::vector<unsigned char> read_cifar10_file(const std::string& path, const char* who) {
    try {
        ByteSource src(path, who, std::numeric_limits<std::size_t>::max(), "none");
        const std::size_t size = src.file_size();
        if (!src.compressed() && size > 0)
            DTRAIN_CHECK(size % cifar10_record_bytes == 0, who, ": '", path,
                         "' is truncated or malformed: ", size, " bytes is not a multiple of the ",
                         cifar10_record_bytes, "-byte record (1 label + 3072 pixels); the last record has ",
                         size % cifar10_record_bytes, " bytes");
        std::vector<unsigned char> out(src.compressed() ? 0 : size);
        std::size_t got = out.empty() ? 0 : src.read(out.data(), out.size());
        while (got == out.size()) {  // gzip, or a file that grew: read on in pieces
            out.resize(got + ByteSource::piece);
            const std::size_t k = src.read(out.data() + got, ByteSource::piece);
            got += k;
            if (k == 0) break;
        }
        out.resize(got);
        return out;
    } catch (const std::bad_alloc&) {
        throw Error(concat(who, ": out of memory while reading '", path, "'"));
    }
}

}  // namespace detail

/// Reads CIFAR-10 binary batch files (data_batch_1.bin ... test_batch.bin layout; gzip-compressed or raw)
/// in the given order into one data set: features [N, 3, 32, 32] scaled to [0, 1], labels 0..9. Throws
/// dtrain::Error naming the file when one is missing, unreadable, empty, not a whole number of records
/// (truncated; a raw file's size is checked before it is read), holds a label above 9, or when memory
/// runs out.
DTRAIN_INLINE Dataset read_cifar10_batches(const std::vector<std::string>& files);

/// Loads the CIFAR-10 `split` from the binary-version directory `dir` (cifar-10-batches-bin): train reads
/// data_batch_1.bin ... data_batch_5.bin (50000 images), test reads test_batch.bin (10000). Throws naming
/// the directory or file that is missing.
DTRAIN_INLINE Dataset load_cifar10(const std::string& dir, Split split);

#if DTRAIN_HEADER_DEFINITIONS

DTRAIN_INLINE Dataset read_cifar10_batches(const std::vector<std::string>& files) {
    const char* who = "dtrain::read_cifar10";
    DTRAIN_CHECK(!files.empty(), who, ": no batch files given");
    std::vector<std::vector<unsigned char>> contents;
    std::size_t total = 0;
    for (const auto& f : files) {
        contents.push_back(detail::read_cifar10_file(f, who));
        const auto& b = contents.back();
        DTRAIN_CHECK(!b.empty(), who, ": '", f, "' is empty");
        DTRAIN_CHECK(b.size() % cifar10_record_bytes == 0, who, ": '", f,
                     "' is truncated or malformed: ", b.size(), " bytes is not a multiple of the ",
                     cifar10_record_bytes, "-byte record (1 label + 3072 pixels); the last record has ",
                     b.size() % cifar10_record_bytes, " bytes");
        const std::size_t n = b.size() / cifar10_record_bytes;
        for (std::size_t r = 0; r < n; ++r) {
            const unsigned y = b[r * cifar10_record_bytes];
            DTRAIN_CHECK(y < 10, who, ": '", f, "' record ", r, " (byte offset ", r * cifar10_record_bytes,
                         ") has label ", y, ", outside [0, 10)");
        }
        total += n;
    }
    const Shape shape{total, 3, 32, 32};
    detail::checked_shape_size(shape, who, ": ", total, " records");
    Dataset d;
    try {
        d.features = Tensor<float>::from_shape(shape);
        d.labels = Labels::from_shape({total});
    } catch (const std::bad_alloc&) {
        throw Error(detail::concat(who, ": out of memory for the ", total, " images of ", files.size(),
                                   " files from '", files.front(), "'"));
    }
    const auto& table = detail::byte_to_unit();
    std::size_t k = 0;
    for (const auto& b : contents) {
        const std::size_t n = b.size() / cifar10_record_bytes;
        for (std::size_t r = 0; r < n; ++r, ++k) {
            const unsigned char* rec = b.data() + r * cifar10_record_bytes;
            d.labels(k) = rec[0];
            float* dst = d.features.data() + k * (cifar10_record_bytes - 1);
            for (std::size_t j = 0; j + 1 < cifar10_record_bytes; ++j)
                dst[j] = table[rec[1 + j]];
        }
    }
    d.class_names = cifar10_class_names();
    d.source = files.front();
    return d;
}

DTRAIN_INLINE Dataset load_cifar10(const std::string& dir, Split split) {
    namespace fs = std::filesystem;
    std::error_code ec;
    DTRAIN_CHECK(fs::is_directory(dir, ec), "dtrain::load_cifar10: directory '", dir, "' does not exist");
    std::vector<std::string> files;
    if (split == Split::Train)
        for (int i = 1; i <= 5; ++i)
            files.push_back((fs::path(dir) / ("data_batch_" + std::to_string(i) + ".bin")).string());
    else
        files.push_back((fs::path(dir) / "test_batch.bin").string());
    Dataset d = read_cifar10_batches(files);
    d.source = dir;
    return d;
}

#endif

}  // namespace dtrain

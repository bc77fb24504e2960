#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <unistd.h>
#include <zlib.h>

#include <dtrain/core/error.hpp>
#include <dtrain/core/rng.hpp>
#include <support/test_utils.hpp>

namespace dtrain::test {

/// A fresh directory under the system temp directory, unique per process, removed on destruction.
class TempDir {
public:
    /// Creates <tmp>/dtrain_<tag>_<pid>_<rank>.
    explicit TempDir(const std::string& tag) {
        path_ = std::filesystem::temp_directory_path() /
                ("dtrain_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(world_rank()));
        std::filesystem::remove_all(path_);
        std::filesystem::create_directories(path_);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    /// The directory.
    std::string str() const { return path_.string(); }
    /// Path of `name` inside the directory.
    std::string file(const std::string& name) const { return (path_ / name).string(); }

private:
    std::filesystem::path path_;
};

/// Whether `sub` occurs in `s`.
inline bool contains(const std::string& s, const std::string& sub) {
    return s.find(sub) != std::string::npos;
}

/// Writes `bytes` to `path` as is.
inline void write_bytes(const std::string& path, const std::vector<unsigned char>& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

/// Writes text to `path`.
inline void write_text(const std::string& path, const std::string& text) {
    write_bytes(path, std::vector<unsigned char>(text.begin(), text.end()));
}

/// gzip-compresses `bytes` (a complete gzip file, header and trailer included).
inline std::vector<unsigned char> gzip_bytes(const std::vector<unsigned char>& bytes) {
    z_stream zs{};
    deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    std::vector<unsigned char> out(deflateBound(&zs, static_cast<uLong>(bytes.size())) + 64);
    zs.next_in = const_cast<unsigned char*>(bytes.data());
    zs.avail_in = static_cast<uInt>(bytes.size());
    zs.next_out = out.data();
    zs.avail_out = static_cast<uInt>(out.size());
    deflate(&zs, Z_FINISH);
    out.resize(zs.total_out);
    deflateEnd(&zs);
    return out;
}

/// An IDX file of unsigned bytes: magic 0x0000080<ndims>, big-endian dims, then `data`.
inline std::vector<unsigned char> idx_bytes(const std::vector<std::uint32_t>& dims,
                                            const std::vector<unsigned char>& data) {
    std::vector<unsigned char> b = {0, 0, 0x08, static_cast<unsigned char>(dims.size())};
    for (auto d : dims)
        for (int s = 24; s >= 0; s -= 8)
            b.push_back(static_cast<unsigned char>(d >> s));
    b.insert(b.end(), data.begin(), data.end());
    return b;
}

/// `n` random bytes below `limit` (default 256).
inline std::vector<unsigned char> random_bytes(std::size_t n, Rng& rng, unsigned limit = 256) {
    std::vector<unsigned char> v(n);
    for (auto& x : v)
        x = static_cast<unsigned char>(rng.below(limit));
    return v;
}

/// Reports the running test as skipped: prints "DTRAIN_SKIP: <reason>", which ctest's
/// SKIP_REGULAR_EXPRESSION on the test's registration turns into "Skipped" (see tests/data/CMakeLists.txt).
/// A match makes ctest report Skipped whatever else the program printed or returned, so call it only from a
/// test case that runs as a ctest test of its own, and return right after it.
inline void skip_test(const std::string& reason) {
    std::cout << "DTRAIN_SKIP: " << reason << std::endl;
}

}  // namespace dtrain::test

#pragma once

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <zlib.h>

#include <dtrain/core/error.hpp>

namespace dtrain::detail {

/// Closes a FILE* on scope exit.
struct FileCloser {
    std::FILE* f = nullptr;
    ~FileCloser() {
        if (f) std::fclose(f);
    }
};

/// Closes a gzFile on scope exit unless released.
struct GzCloser {
    gzFile f = nullptr;
    ~GzCloser() {
        if (f) gzclose(f);
    }
};

/// Reads the whole of `path` into memory. A file starting with the gzip magic bytes 1f 8b is decompressed
/// with zlib (gzread); any other file is read as is. Throws dtrain::Error naming `who` and the file when it
/// cannot be opened or read, or when the gzip stream is truncated or corrupt (CRC and length are checked).
inline std::vector<unsigned char> read_file_bytes(const std::string& path, const char* who) {
    std::vector<unsigned char> out;
    bool gzip = false;
    {
        FileCloser fc{std::fopen(path.c_str(), "rb")};
        DTRAIN_CHECK(fc.f != nullptr, who, ": cannot open '", path, "': ", std::strerror(errno));
        unsigned char buf[1 << 16];
        std::size_t got = std::fread(buf, 1, 2, fc.f);
        DTRAIN_CHECK(!std::ferror(fc.f), who, ": cannot read '", path, "': ", std::strerror(errno));
        gzip = got == 2 && buf[0] == 0x1f && buf[1] == 0x8b;
        if (!gzip) {
            if (std::fseek(fc.f, 0, SEEK_END) == 0) {
                const long size = std::ftell(fc.f);
                if (size > 0) out.reserve(static_cast<std::size_t>(size));
                std::fseek(fc.f, 0, SEEK_SET);
            } else {
                out.insert(out.end(), buf, buf + got);  // not seekable: keep what was read and go on
            }
            while ((got = std::fread(buf, 1, sizeof buf, fc.f)) > 0)
                out.insert(out.end(), buf, buf + got);
            DTRAIN_CHECK(!std::ferror(fc.f), who, ": cannot read '", path, "': ", std::strerror(errno));
            return out;
        }
    }
    GzCloser gc{gzopen(path.c_str(), "rb")};
    DTRAIN_CHECK(gc.f != nullptr, who, ": cannot open gzip file '", path, "'");
    gzbuffer(gc.f, 1u << 18);
    std::size_t used = 0;
    out.resize(std::size_t(1) << 20);
    for (;;) {
        if (used == out.size()) out.resize(out.size() * 2);
        const std::size_t want = std::min<std::size_t>(out.size() - used, std::size_t(1) << 30);
        const int n = gzread(gc.f, out.data() + used, static_cast<unsigned>(want));
        if (n < 0) {
            int err = 0;
            const char* msg = gzerror(gc.f, &err);
            throw Error(
                concat(who, ": corrupt gzip data in '", path, "': ", msg ? msg : "unknown zlib error"));
        }
        if (n == 0) break;
        used += static_cast<std::size_t>(n);
    }
    int err = Z_OK;
    const char* msg = gzerror(gc.f, &err);
    DTRAIN_CHECK(err == Z_OK, who, ": truncated or corrupt gzip data in '", path,
                 "': ", msg ? msg : "unknown zlib error");
    gzFile f = gc.f;
    gc.f = nullptr;
    const int rc = gzclose(f);
    DTRAIN_CHECK(rc == Z_OK, who, ": truncated or corrupt gzip data in '", path, "' (gzclose returned ", rc,
                 ")");
    out.resize(used);
    return out;
}

}  // namespace dtrain::detail

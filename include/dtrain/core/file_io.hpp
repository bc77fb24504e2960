#pragma once

/// @file
/// Reading whole files for the data readers and the checkpoint format (bounded allocations, gzip members
/// decompressed in memory) and writing files atomically, with errors that name the file (internals in
/// dtrain::detail).

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
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

/// Ends a zlib inflate stream on scope exit.
struct InflateEnder {
    z_stream* zs = nullptr;
    ~InflateEnder() {
        if (zs) inflateEnd(zs);
    }
};

/// At most this many times the compressed size is allocated on the word of a gzip trailer (ISIZE) before any
/// data is decompressed: a damaged or hostile trailer can declare up to 4 GiB. Beyond it the output grows
/// with the data actually decompressed.
inline constexpr std::size_t gzip_trusted_ratio = 8;

/// Reads the whole of `path` into memory as it is. Throws dtrain::Error naming `who` and the file when it
/// cannot be opened, is a directory, or cannot be read.
inline std::vector<unsigned char> read_raw_bytes(const std::string& path, const char* who) {
    FileCloser fc{std::fopen(path.c_str(), "rb")};
    DTRAIN_CHECK(fc.f != nullptr, who, ": cannot open '", path, "': ", std::strerror(errno));
    struct stat st {};
    const bool known = ::fstat(::fileno(fc.f), &st) == 0;
    DTRAIN_CHECK(!known || !S_ISDIR(st.st_mode), who, ": cannot read '", path, "': it is a directory");
    std::vector<unsigned char> out;
    if (known && S_ISREG(st.st_mode) && st.st_size > 0) out.reserve(static_cast<std::size_t>(st.st_size));
    unsigned char buf[1 << 16];
    std::size_t got = 0;
    while ((got = std::fread(buf, 1, sizeof buf, fc.f)) > 0)
        out.insert(out.end(), buf, buf + got);
    DTRAIN_CHECK(!std::ferror(fc.f), who, ": cannot read '", path, "': ", std::strerror(errno));
    return out;
}

/// True when `bytes` starts with the gzip magic bytes 1f 8b at `pos`.
inline bool gzip_magic_at(const std::vector<unsigned char>& bytes, std::size_t pos) {
    return bytes.size() >= 2 && pos <= bytes.size() - 2 && bytes[pos] == 0x1f && bytes[pos + 1] == 0x8b;
}

/// Decompresses the gzip file `gz` (read whole) member after member: concatenated members are one stream,
/// as gunzip reads them. Throws dtrain::Error naming `who` and the file when a member is truncated or
/// corrupt (zlib checks each member's CRC-32 and length), or when bytes that do not start another member
/// follow the last one (gzread would ignore them silently). The output starts at the last member's declared
/// size, at most gzip_trusted_ratio times the file's size, and doubles as the data actually decompressed
/// needs, so what is allocated is bounded by the file and its real content.
inline std::vector<unsigned char> gunzip_bytes(const std::vector<unsigned char>& gz, const std::string& path,
                                               const char* who) {
    z_stream zs{};
    const int init = inflateInit2(&zs, 15 + 16);  // 16: gzip wrapper only
    DTRAIN_CHECK(init == Z_OK, who, ": cannot decompress '", path, "': zlib's inflateInit2 returned ", init);
    InflateEnder ender{&zs};
    std::size_t declared = 0;  // ISIZE, the last member's uncompressed size mod 2^32 (little-endian)
    for (std::size_t i = 0; i < 4 && gz.size() >= 4; ++i)
        declared |= std::size_t(gz[gz.size() - 4 + i]) << (8 * i);
    std::vector<unsigned char> out(std::min(declared, gz.size() * gzip_trusted_ratio) + 1);
    const std::size_t chunk = std::size_t(1) << 30;  // zlib counts in 32 bits
    std::size_t in = 0, used = 0;
    for (;;) {
        if (used == out.size()) out.resize(out.size() * 2);
        const std::size_t give = std::min(gz.size() - in, chunk), room = std::min(out.size() - used, chunk);
        zs.next_in = const_cast<Bytef*>(gz.data() + in);
        zs.avail_in = static_cast<uInt>(give);
        zs.next_out = out.data() + used;
        zs.avail_out = static_cast<uInt>(room);
        const int rc = inflate(&zs, Z_NO_FLUSH);
        in += give - zs.avail_in;
        used += room - zs.avail_out;
        if (rc == Z_STREAM_END) {
            if (in == gz.size()) break;
            DTRAIN_CHECK(gzip_magic_at(gz, in), who, ": '", path, "' has ", gz.size() - in,
                         " bytes after the end of its gzip data (from byte ", in, " of ", gz.size(),
                         ") that do not start another gzip member: the file is damaged or not one gzip file");
            inflateReset(&zs);
        } else if (rc == Z_BUF_ERROR && in == gz.size()) {  // no progress: it wants input that is not there
            throw Error(concat(who, ": '", path, "' is truncated: its gzip data ends after ", gz.size(),
                               " bytes, before the end of the compressed stream"));
        } else if (rc != Z_OK) {  // Z_BUF_ERROR with input left and room (cannot happen) is taken as damage
            throw Error(concat(who, ": corrupt gzip data in '", path, "' near byte ", in, ": ",
                               zs.msg ? zs.msg : "zlib error " + std::to_string(rc)));
        }
    }
    out.resize(used);
    return out;
}

/// Reads the whole of `path` into memory. A file starting with the gzip magic bytes 1f 8b is decompressed
/// (gunzip_bytes: every member, nothing after the last); any other file is returned as it is. Throws
/// dtrain::Error naming `who` and the file when it cannot be opened or read, is a directory, or is damaged
/// gzip.
inline std::vector<unsigned char> read_file_bytes(const std::string& path, const char* who) {
    auto bytes = read_raw_bytes(path, who);
    return gzip_magic_at(bytes, 0) ? gunzip_bytes(bytes, path, who) : bytes;
}

/// Writes `size` bytes at `data` to `path` + ".tmp", then renames it over `path`, so an interrupted write
/// never destroys the previous file; the temporary file is removed when either step fails. Returns "" or
/// the error, naming `who` and the file.
inline std::string write_file_atomically(const std::string& path, const char* data, std::size_t size,
                                         const char* who) {
    const std::string tmp = path + ".tmp";
    std::string error;
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (f) f.write(data, std::streamsize(size));
        if (f) f.flush();
        if (!f) error = concat(who, ": cannot write '", tmp, "': ", std::strerror(errno));
    }
    if (error.empty() && std::rename(tmp.c_str(), path.c_str()) != 0)
        error = concat(who, ": cannot rename '", tmp, "' to '", path, "': ", std::strerror(errno));
    if (!error.empty()) std::remove(tmp.c_str());
    return error;
}

}  // namespace dtrain::detail

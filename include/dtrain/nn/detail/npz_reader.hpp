#pragma once

/// @file
/// Reading NumPy .npz archives, as numpy.savez and numpy.savez_compressed write them: the zip central
/// directory (zip64 fields included), stored and deflated entries checked against their CRC-32, and the
/// .npy header of every array (internals of nn/state_dict.hpp).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <zlib.h>

#include <dtrain/core/error.hpp>
#include <dtrain/core/file_io.hpp>

namespace dtrain::detail {

/// One array of an .npz file: its name (the entry's name without ".npy"), its dtype as NumPy spells it
/// ("<f4"), its order, its shape and its values' bytes as stored.
struct NpyArray {
    std::string name;
    std::string descr;
    bool fortran_order = false;
    std::vector<std::size_t> shape;
    std::vector<unsigned char> data;
};

/// The little-endian unsigned integer of `n` bytes at `pos` of `b`; throws naming `who` and `path` when
/// the bytes are not there (a truncated or damaged file).
inline std::uint64_t zip_uint(const std::vector<unsigned char>& b, std::size_t pos, int n,
                              const std::string& path, const char* who) {
    DTRAIN_CHECK(pos <= b.size() && std::size_t(n) <= b.size() - pos, who, ": '", path,
                 "' is truncated or damaged: a zip record at byte ", pos, " runs past its end (", b.size(),
                 " bytes)");
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i)
        v |= std::uint64_t(b[pos + std::size_t(i)]) << (8 * i);
    return v;
}

/// The text after `key` up to the first of `stops` in the .npy header `h` (a Python dict literal), with
/// the separating ':' and spaces skipped; throws naming the entry when the key is missing.
inline std::string npy_header_field(const std::string& h, const char* key, const char* stops,
                                    const std::string& entry, const std::string& path, const char* who) {
    std::size_t p = h.find(key);
    DTRAIN_CHECK(p != std::string::npos, who, ": entry '", entry, "' in ", path, " has no ", key,
                 " in its .npy header: ", h);
    p = h.find_first_not_of(": ", p + std::strlen(key));
    const std::size_t e = p == std::string::npos ? p : h.find_first_of(stops, p + 1);
    DTRAIN_CHECK(e != std::string::npos, who, ": entry '", entry, "' in ", path, " has a malformed ", key,
                 " in its .npy header: ", h);
    return h.substr(p, e - p + 1);
}

/// Parses the .npy file `npy` (the entry `entry` of `path`): header version 1, 2 or 3, its descr,
/// fortran_order and shape, and keeps the bytes after the header as the values.
inline NpyArray parse_npy(const std::vector<unsigned char>& npy, const std::string& entry,
                          const std::string& path, const char* who) {
    static const unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    DTRAIN_CHECK(npy.size() >= 10 && std::memcmp(npy.data(), magic, 6) == 0, who, ": entry '", entry, "' in ",
                 path, " is not a .npy array (no \\x93NUMPY signature)");
    const int major = npy[6];
    DTRAIN_CHECK(major >= 1 && major <= 3, who, ": entry '", entry, "' in ", path,
                 " has .npy format version ", major, " (versions 1 to 3 are read)");
    const int len_bytes = major == 1 ? 2 : 4;
    const std::size_t len = std::size_t(zip_uint(npy, 8, len_bytes, path, who));
    const std::size_t start = 8 + std::size_t(len_bytes);
    DTRAIN_CHECK(len <= npy.size() - start, who, ": entry '", entry, "' in ", path,
                 " is truncated in its header");
    const std::string h(reinterpret_cast<const char*>(npy.data()) + start, len);

    NpyArray a;
    a.name = entry;
    const std::string descr = npy_header_field(h, "'descr'", "'", entry, path, who);  // '<f4'
    a.descr = descr.substr(1, descr.size() - 2);
    a.fortran_order = npy_header_field(h, "'fortran_order'", "e", entry, path, who) == "True";
    const std::string shape = npy_header_field(h, "'shape'", ")", entry, path, who);  // (16, 4)
    for (std::size_t p = 1; p < shape.size();) {
        const std::size_t d = shape.find_first_of("0123456789", p);
        if (d == std::string::npos) break;
        std::size_t used = 0;
        a.shape.push_back(std::size_t(std::stoull(shape.substr(d), &used)));
        p = d + used;
    }
    a.data.assign(npy.begin() + std::ptrdiff_t(start + len), npy.end());
    return a;
}

/// The bytes of entry `name` stored with `method` (0 stored, 8 deflate) in `csize` bytes at `pos` of the
/// archive `zip`, `usize` bytes once decompressed, checked against `crc`.
inline std::vector<unsigned char> zip_entry_bytes(const std::vector<unsigned char>& zip, std::size_t pos,
                                                  std::uint64_t csize, std::uint64_t usize,
                                                  std::uint64_t method, std::uint64_t crc,
                                                  const std::string& name, const std::string& path,
                                                  const char* who) {
    DTRAIN_CHECK(pos <= zip.size() && csize <= zip.size() - pos, who, ": '", path, "' is truncated: entry '",
                 name, "' runs past the end of the file");
    const unsigned char* src = zip.data() + pos;
    std::vector<unsigned char> out;
    if (method == 0) {
        DTRAIN_CHECK(csize == usize, who, ": '", path, "' is damaged: stored entry '", name, "' has ", csize,
                     " bytes but declares ", usize);
        out.assign(src, src + csize);
    } else {
        DTRAIN_CHECK(method == 8, who, ": entry '", name, "' in ", path, " uses zip compression method ",
                     method, "; numpy.savez (stored) and numpy.savez_compressed (deflate) are read");
        // Deflate expands at most about 1032 times: a larger declared size is damage, not data.
        DTRAIN_CHECK(usize <= 1032 * csize + 64, who, ": '", path, "' is damaged: entry '", name,
                     "' declares ", usize, " bytes from ", csize, " compressed");
        out.resize(std::size_t(usize));
        z_stream zs{};
        const int init = inflateInit2(&zs, -15);  // raw deflate, as zip stores it
        DTRAIN_CHECK(init == Z_OK, who, ": cannot decompress '", path, "': zlib's inflateInit2 returned ",
                     init);
        InflateEnder ender{&zs};
        zs.next_in = const_cast<Bytef*>(src);
        zs.avail_in = static_cast<uInt>(csize);
        zs.next_out = out.data();
        zs.avail_out = static_cast<uInt>(out.size());
        const int rc = inflate(&zs, Z_FINISH);
        DTRAIN_CHECK(rc == Z_STREAM_END && zs.total_out == usize, who, ": corrupt deflate data in entry '",
                     name, "' of ", path, ": ",
                     zs.msg != nullptr ? zs.msg : "zlib returned " + std::to_string(rc));
    }
    const uLong got = crc32(crc32(0L, Z_NULL, 0), out.data(), static_cast<uInt>(out.size()));
    DTRAIN_CHECK(got == crc, who, ": entry '", name, "' of ", path,
                 " fails its CRC-32 check: the file is damaged");
    return out;
}

/// Reads every array of the .npz file `path`, in the order of the zip central directory (the order
/// numpy.savez wrote them). Throws dtrain::Error naming `who` and the file when it cannot be read, is not a
/// zip archive, is damaged, or holds an entry that is not a .npy array.
inline std::vector<NpyArray> read_npz(const std::string& path, const char* who) {
    const std::vector<unsigned char> zip = read_raw_bytes(path, who);
    const auto u = [&](std::size_t pos, int n) { return zip_uint(zip, pos, n, path, who); };
    // The end-of-central-directory record: 22 bytes and a comment of at most 65535 at the end of the file.
    std::size_t eocd = std::string::npos;
    for (std::size_t p = zip.size() >= 22 ? zip.size() - 22 : 0; zip.size() >= 22; --p) {
        if (u(p, 4) == 0x06054b50) {
            eocd = p;
            break;
        }
        if (p == 0 || zip.size() - p > 22 + 65535) break;
    }
    DTRAIN_CHECK(eocd != std::string::npos, who, ": '", path,
                 "' is not an .npz file (no zip directory found); write it with numpy.savez or "
                 "numpy.savez_compressed");
    std::uint64_t count = u(eocd + 10, 2), dir = u(eocd + 16, 4);
    if ((count == 0xffff || dir == 0xffffffff) && eocd >= 20 && u(eocd - 20, 4) == 0x07064b50) {
        const std::size_t z64 = std::size_t(u(eocd - 20 + 8, 8));  // the zip64 end-of-directory record
        DTRAIN_CHECK(u(z64, 4) == 0x06064b50, who, ": '", path, "' is damaged: bad zip64 directory record");
        count = u(z64 + 32, 8);
        dir = u(z64 + 48, 8);
    }
    std::vector<NpyArray> arrays;
    std::size_t p = std::size_t(dir);
    for (std::uint64_t k = 0; k < count; ++k) {
        DTRAIN_CHECK(u(p, 4) == 0x02014b50, who, ": '", path, "' is damaged: zip directory entry ", k,
                     " not found at byte ", p);
        const std::uint64_t method = u(p + 10, 2), crc = u(p + 16, 4);
        std::uint64_t csize = u(p + 20, 4), usize = u(p + 24, 4), local = u(p + 42, 4);
        const std::size_t name_len = std::size_t(u(p + 28, 2)), extra_len = std::size_t(u(p + 30, 2));
        const std::size_t comment_len = std::size_t(u(p + 32, 2));
        DTRAIN_CHECK(p + 46 <= zip.size() && name_len + extra_len + comment_len <= zip.size() - (p + 46), who,
                     ": '", path, "' is damaged: zip directory entry ", k, " runs past the end of the file");
        const std::string name(reinterpret_cast<const char*>(zip.data()) + p + 46, name_len);
        // Zip64 extra field (id 1): the 8-byte values of the fields above that read 0xffffffff, in order.
        for (std::size_t e = p + 46 + name_len; e + 4 <= p + 46 + name_len + extra_len;) {
            const std::size_t id = std::size_t(u(e, 2)), size = std::size_t(u(e + 2, 2));
            std::size_t v = e + 4;
            if (id == 1) {
                for (std::uint64_t* f : {&usize, &csize, &local})
                    if (*f == 0xffffffff) {
                        *f = u(v, 8);
                        v += 8;
                    }
            }
            e += 4 + size;
        }
        DTRAIN_CHECK(u(std::size_t(local), 4) == 0x04034b50, who, ": '", path,
                     "' is damaged: no local header for entry '", name, "'");
        const std::size_t data = std::size_t(local) + 30 + std::size_t(u(std::size_t(local) + 26, 2)) +
                                 std::size_t(u(std::size_t(local) + 28, 2));
        const std::vector<unsigned char> npy =
            zip_entry_bytes(zip, data, csize, usize, method, crc, name, path, who);
        const bool is_npy = name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0;
        DTRAIN_CHECK(is_npy, who, ": entry '", name, "' of ", path, " is not a .npy array");
        arrays.push_back(parse_npy(npy, name.substr(0, name.size() - 4), path, who));
        p += 46 + name_len + extra_len + comment_len;
    }
    return arrays;
}

/// Converts the values of `a` (read from `path`; little-endian float32 "<f4" or float64 "<f8", C order) to
/// T at `out`, which has room for all of them. Throws dtrain::Error naming `who`, the entry and the file
/// for any other dtype, for Fortran order, and when the data does not hold shape's count of values.
template <class T>
void npy_values(const NpyArray& a, T* out, const std::string& path, const char* who) {
    DTRAIN_CHECK(a.descr == "<f4" || a.descr == "<f8", who, ": '", a.name, "' in ", path, " has dtype '",
                 a.descr,
                 "'; float32 ('<f4') and float64 ('<f8') are read (convert with .float() in PyTorch)");
    DTRAIN_CHECK(!a.fortran_order, who, ": '", a.name, "' in ", path,
                 " is stored in Fortran order; save C-contiguous arrays (numpy.ascontiguousarray, or "
                 ".contiguous() in PyTorch)");
    std::size_t n = 1;
    for (std::size_t d : a.shape)
        n *= d;
    const std::size_t item = a.descr == "<f4" ? 4 : 8;
    DTRAIN_CHECK(a.data.size() == n * item, who, ": '", a.name, "' in ", path, " holds ", a.data.size(),
                 " bytes of values but its shape ", shape_str(a.shape), " needs ", n * item);
    for (std::size_t i = 0; i < n; ++i) {
        if (item == 4) {
            std::uint32_t bits = std::uint32_t(zip_uint(a.data, 4 * i, 4, path, who));
            float f = 0;
            std::memcpy(&f, &bits, 4);
            out[i] = static_cast<T>(f);
        } else {
            std::uint64_t bits = zip_uint(a.data, 8 * i, 8, path, who);
            double f = 0;
            std::memcpy(&f, &bits, 8);
            out[i] = static_cast<T>(f);
        }
    }
}

}  // namespace dtrain::detail

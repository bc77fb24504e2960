// Failures in include/dtrain/core/file_io.hpp that a healthy system never produces (a read error
// after the first bytes, zlib failing to start), injected through the readers' public API. This program is
// linked with -Wl,--wrap for fread, ferror and inflateInit2_ (tests/core/CMakeLists.txt): every call from
// this program goes to the __wrap_ functions below, which fail on request and otherwise call the real ones.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include <zlib.h>

#include <dtrain/data/csv.hpp>
#include <dtrain/data/idx.hpp>

#include "../data/data_test_utils.hpp"

namespace {

enum class Fault { none, read, inflate_init };

Fault fault = Fault::none;
int fread_calls = 0;
bool read_failed = false;

/// Injects `f` until the end of the scope.
struct Inject {
    explicit Inject(Fault f) {
        fault = f;
        fread_calls = 0;
        read_failed = false;
    }
    ~Inject() {
        fault = Fault::none;
        read_failed = false;
    }
    Inject(const Inject&) = delete;
    Inject& operator=(const Inject&) = delete;
};

}  // namespace

extern "C" {
std::size_t __real_fread(void* ptr, std::size_t size, std::size_t n, std::FILE* f);
int __real_ferror(std::FILE* f);
int __real_inflateInit2_(z_streamp strm, int window_bits, const char* version, int stream_size);

// With Fault::read the second fread fails with EIO, after the first one has returned data.
std::size_t __wrap_fread(void* ptr, std::size_t size, std::size_t n, std::FILE* f) {
    if (fault == Fault::read && ++fread_calls == 2) {
        read_failed = true;
        errno = EIO;
        return 0;
    }
    return __real_fread(ptr, size, n, f);
}
int __wrap_ferror(std::FILE* f) {
    return read_failed ? 1 : __real_ferror(f);
}
// With Fault::inflate_init zlib cannot start a stream, as when it runs out of memory.
int __wrap_inflateInit2_(z_streamp strm, int window_bits, const char* version, int stream_size) {
    if (fault == Fault::inflate_init) return Z_MEM_ERROR;
    return __real_inflateInit2_(strm, window_bits, version, stream_size);
}
}

using Catch::Contains;
using dtrain::test::gzip_bytes;
using dtrain::test::idx_bytes;
using dtrain::test::TempDir;
using dtrain::test::write_bytes;
using dtrain::test::write_text;

TEST_CASE("A read error after the first bytes names the file and the system's reason", "[data][io][errors]") {
    TempDir dir("io_read");
    const auto path = dir.file("iris.csv");
    write_text(path, "a,b,label\n1,2,x\n3,4,y\n");
    CHECK_NOTHROW(dtrain::read_csv(path));  // the wrappers pass calls through when nothing is injected
    Inject fail(Fault::read);
    CHECK_THROWS_WITH(dtrain::read_csv(path),
                      Contains("dtrain::read_csv: cannot read '" + path + "': Input/output error"));
    CHECK(fread_calls == 2);
}

TEST_CASE("zlib failing to start names the gzip file", "[data][io][errors]") {
    TempDir dir("io_gzip");
    const auto path = dir.file("images.gz");
    write_bytes(path, gzip_bytes(idx_bytes({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7})));
    CHECK(dtrain::read_idx_images(path).size() == 8);
    Inject fail(Fault::inflate_init);
    CHECK_THROWS_WITH(dtrain::read_idx_images(path), Contains("dtrain::read_idx_images: cannot decompress '" +
                                                              path + "': zlib's inflateInit2 returned -4"));
}

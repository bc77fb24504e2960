#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <zlib.h>

#include <dtrain/core/error.hpp>
#include <dtrain/core/file_io.hpp>

namespace dtrain::detail {

/// The bytes of a file read front to back in pieces, decompressed on the way when the file starts with the
/// gzip magic bytes 1f 8b, or the bytes of a string in memory. The readers that use it hold what they
/// return and one piece, never the whole file. Gzip input is checked as gunzip_bytes() checks it:
/// concatenated members are one stream, a truncated or corrupt member and bytes after the last member that
/// do not start another are errors naming the file. At most `limit` bytes are produced: more is an error
/// naming the file and `limit_name`, the option that sets the limit (a gzip file of a few kilobytes can
/// hold gigabytes).
class ByteSource {
public:
    /// Opens `path`; throws dtrain::Error naming `who` and the file when it cannot be opened, is a
    /// directory, or cannot be read.
    ByteSource(const std::string& path, const char* who, std::size_t limit, std::string limit_name)
        : path_(path), who_(who), limit_(limit), limit_name_(std::move(limit_name)) {
        file_.f = std::fopen(path.c_str(), "rb");
        DTRAIN_CHECK(file_.f != nullptr, who, ": cannot open '", path, "': ", std::strerror(errno));
        struct stat st {};
        const bool known = ::fstat(::fileno(file_.f), &st) == 0;
        DTRAIN_CHECK(!known || !S_ISDIR(st.st_mode), who, ": cannot read '", path, "': it is a directory");
        if (known && S_ISREG(st.st_mode)) file_size_ = static_cast<std::size_t>(st.st_size);
        in_.resize(piece);
        refill();
        gzip_ = end_ - pos_ >= 2 && in_[pos_] == 0x1f && in_[pos_ + 1] == 0x8b;
        if (gzip_) {
            const int init = inflateInit2(&zs_, 15 + 16);  // 16: gzip wrapper only
            DTRAIN_CHECK(init == Z_OK, who, ": cannot decompress '", path, "': zlib's inflateInit2 returned ",
                         init);
            ender_.zs = &zs_;
        }
    }

    /// Reads the bytes of `text` (named `path` in messages) as they are.
    ByteSource(const std::string& text, const std::string& path, const char* who, std::size_t limit,
               std::string limit_name)
        : path_(path), who_(who), limit_(limit), limit_name_(std::move(limit_name)) {
        in_.assign(text.begin(), text.end());
        end_ = in_.size();
        file_size_ = in_.size();
        at_eof_ = true;
    }

    ByteSource(const ByteSource&) = delete;
    ByteSource& operator=(const ByteSource&) = delete;

    /// Copies up to `n` next bytes to `dst` and returns how many; 0 only at the end of the data. Throws
    /// dtrain::Error naming the file on a read error, damaged gzip data, or more than the limit.
    std::size_t read(unsigned char* dst, std::size_t n) {
        std::size_t got = 0;
        if (!gzip_) {
            while (got < n) {
                if (pos_ == end_ && !refill()) break;
                const std::size_t k = std::min(n - got, end_ - pos_);
                std::memcpy(dst + got, in_.data() + pos_, k);
                pos_ += k;
                got += k;
            }
        } else {
            while (got < n && !done_)
                got += inflate_into(dst + got, n - got);
        }
        produced_ += got;
        DTRAIN_CHECK(produced_ <= limit_, who_, ": '", path_, "' holds more than ", limit_, " bytes",
                     gzip_ ? " once decompressed" : "", " (limit ", limit_name_,
                     "): raise the limit if the file is genuine",
                     gzip_ ? "; a gzip file of kilobytes can hold gigabytes" : "");
        return got;
    }

    /// Bytes produced so far (after decompression).
    std::size_t produced() const { return produced_; }
    /// True when the file is gzip-compressed.
    bool compressed() const { return gzip_; }
    /// The file's size on disk, 0 when unknown (not a regular file).
    std::size_t file_size() const { return file_size_; }

    /// Size of the pieces read from the file.
    static constexpr std::size_t piece = std::size_t(1) << 16;

private:
    /// Moves unread input to the front and reads more after it; false when nothing is left to read.
    bool refill() {
        if (at_eof_) return pos_ < end_;
        if (pos_ > 0) {
            std::memmove(in_.data(), in_.data() + pos_, end_ - pos_);
            end_ -= pos_;
            consumed_ += pos_;
            pos_ = 0;
        }
        const std::size_t got = std::fread(in_.data() + end_, 1, in_.size() - end_, file_.f);
        DTRAIN_CHECK(got > 0 || !std::ferror(file_.f), who_, ": cannot read '", path_,
                     "': ", std::strerror(errno));
        if (got == 0) at_eof_ = true;
        end_ += got;
        return pos_ < end_;
    }

    /// Inflates into `dst` (up to `n` bytes); returns the bytes written, sets done_ at the end of the data.
    std::size_t inflate_into(unsigned char* dst, std::size_t n) {
        if (pos_ == end_) refill();
        zs_.next_in = in_.data() + pos_;
        zs_.avail_in = static_cast<uInt>(end_ - pos_);
        zs_.next_out = dst;
        zs_.avail_out = static_cast<uInt>(std::min(n, std::size_t(1) << 30));  // zlib counts in 32 bits
        const uInt room = zs_.avail_out;
        const int rc = inflate(&zs_, Z_NO_FLUSH);
        pos_ = end_ - zs_.avail_in;
        const std::size_t wrote = room - zs_.avail_out;
        if (rc == Z_STREAM_END) {
            if (end_ - pos_ < 2) refill();  // another member's magic may straddle two pieces
            if (pos_ == end_) {
                done_ = true;
            } else {
                const std::size_t at = consumed_ + pos_;
                DTRAIN_CHECK(end_ - pos_ >= 2 && in_[pos_] == 0x1f && in_[pos_ + 1] == 0x8b, who_, ": '",
                             path_, "' has ", file_size_ > at ? file_size_ - at : end_ - pos_,
                             " bytes after the end of its gzip data (from byte ", at, " of ", file_size_,
                             ") that do not start another gzip member: the file is damaged or not one gzip "
                             "file");
                inflateReset(&zs_);
            }
        } else if (rc == Z_BUF_ERROR && pos_ == end_ && at_eof_) {  // it wants input that is not there
            throw Error(concat(who_, ": '", path_, "' is truncated: its gzip data ends after ",
                               consumed_ + end_, " bytes, before the end of the compressed stream"));
        } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
            throw Error(concat(who_, ": corrupt gzip data in '", path_, "' near byte ", consumed_ + pos_,
                               ": ", zs_.msg ? zs_.msg : "zlib error " + std::to_string(rc)));
        }
        return wrote;
    }

    std::string path_;
    const char* who_;
    std::size_t limit_;
    std::string limit_name_;
    FileCloser file_;
    std::vector<unsigned char> in_;
    std::size_t pos_ = 0, end_ = 0;  // unread input is in_[pos_, end_)
    std::size_t consumed_ = 0;       // file bytes before in_[0]
    std::size_t file_size_ = 0, produced_ = 0;
    bool at_eof_ = false, gzip_ = false, done_ = false;
    z_stream zs_{};
    InflateEnder ender_;
};

}  // namespace dtrain::detail

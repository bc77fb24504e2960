#pragma once

/// @file
/// The bytes of a dtrain checkpoint: a writer that appends fields and a reader that checks every field
/// against what is left before it allocates, so a truncated, corrupted or crafted file is a dtrain::Error
/// naming the file and the field, never a crash or an unbounded allocation.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <dtrain/core/error.hpp>

namespace dtrain::detail {

/// File signature of dtrain checkpoints.
inline constexpr char checkpoint_magic[8] = {'D', 'T', 'R', 'A', 'I', 'N', 'C', 'K'};
/// The format version this dtrain writes and reads (2: the model's layers and the optimizer's description
/// are stored and compared).
inline constexpr std::uint64_t checkpoint_version = 2;

/// Appends checkpoint fields to a byte buffer.
class CheckpointWriter {
public:
    /// Appends `n` raw bytes.
    void bytes(const void* p, std::size_t n) {
        const char* c = static_cast<const char*>(p);
        out_.insert(out_.end(), c, c + n);
    }
    /// Appends one 64-bit word.
    void u64(std::uint64_t v) { bytes(&v, sizeof v); }
    /// Appends a length-prefixed string.
    void text(const std::string& s) {
        u64(s.size());
        bytes(s.data(), s.size());
    }
    /// Appends a count followed by that many values.
    template <class T>
    void values(const T* p, std::size_t n) {
        u64(n);
        bytes(p, n * sizeof(T));
    }
    /// The bytes so far.
    std::vector<char>& data() noexcept { return out_; }

private:
    std::vector<char> out_;
};

/// Reads checkpoint fields front to back; every read checks that the bytes are there, and every count is
/// checked against the bytes left before anything is allocated for it.
class CheckpointReader {
public:
    /// A reader of `size` bytes at `data` from the file `path` (for messages).
    CheckpointReader(const char* data, std::size_t size, std::string path)
        : data_(data), size_(size), path_(std::move(path)) {}

    /// Copies the next `n` bytes to `p`; throws naming the file and `what` if fewer are left.
    void bytes(void* p, std::size_t n, const char* what) {
        DTRAIN_CHECK(n <= size_ - pos_, "load_checkpoint: '", path_, "' is truncated (", size_,
                     " bytes) while reading ", what);
        if (n > 0) std::memcpy(p, data_ + pos_, n);
        pos_ += n;
    }
    /// The next 64-bit word.
    std::uint64_t u64(const char* what) {
        std::uint64_t v = 0;
        bytes(&v, sizeof v, what);
        return v;
    }
    /// A length-prefixed string.
    std::string text(const char* what) {
        std::string s(count(1, what), '\0');
        bytes(s.data(), s.size(), what);
        return s;
    }
    /// A count followed by that many values of T.
    template <class T>
    std::vector<T> values(const char* what) {
        std::vector<T> v(count(sizeof(T), what));
        bytes(v.data(), v.size() * sizeof(T), what);
        return v;
    }
    /// Bytes not read yet.
    std::size_t left() const noexcept { return size_ - pos_; }

private:
    // A count of `elem_bytes`-byte elements that must fit in what is left of the file.
    std::size_t count(std::size_t elem_bytes, const char* what) {
        const std::uint64_t n = u64(what);
        DTRAIN_CHECK(n <= left() / elem_bytes, "load_checkpoint: '", path_,
                     "' is truncated or corrupted: ", what, " claims ", n, " values of ", elem_bytes,
                     " bytes, but ", left(), " bytes are left");
        return std::size_t(n);
    }

    const char* data_;
    std::size_t size_;
    std::string path_;
    std::size_t pos_ = 0;
};

}  // namespace dtrain::detail

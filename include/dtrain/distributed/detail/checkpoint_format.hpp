#pragma once

/// @file
/// The bytes of dtrain's files (checkpoints and model files): a writer that appends fields and a checksum and
/// writes the file atomically, and a reader, fed by the root rank's read of the file on every rank, that
/// checks the signature, version and checksum and every field against what is left before it allocates, so
/// a truncated, corrupted or crafted file is a dtrain::Error naming the file and the field on every rank,
/// never a crash, an unbounded allocation or a hang.

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <sys/stat.h>

#include <mpi.h>

#include <dtrain/core/error.hpp>
#include <dtrain/core/file_io.hpp>
#include <dtrain/core/hash.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/distributed/detail/replica_check.hpp>

namespace dtrain::detail {

/// File signature of dtrain checkpoints.
inline constexpr char checkpoint_magic[8] = {'D', 'T', 'R', 'A', 'I', 'N', 'C', 'K'};
/// The format version this dtrain writes (2: the model's layers and the optimizer's description are stored
/// and compared; 3: followed by the gradient compression setting and every rank's top-k residuals; 4: the
/// position also holds the epoch's global samples, the per-rank batch size, the data seed and the number of
/// ranks, and its running sums are summed over the ranks).
inline constexpr std::uint64_t checkpoint_version = 4;
/// The oldest checkpoint format version this dtrain reads (a version-2 file holds no compression section:
/// it was written without compression).
inline constexpr std::uint64_t checkpoint_oldest_version = 2;

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

    /// Appends the checksum and writes the bytes to `path` + ".tmp", then renames it over `path`, so an
    /// interrupted write never destroys the previous file. Returns "" or the error, naming `who` and the
    /// file.
    std::string write_atomically(const std::string& path, const char* who) {
        u64(fnv1a(out_.data(), out_.size()));
        return write_file_atomically(path, out_.data(), out_.size(), who);
    }

private:
    std::vector<char> out_;
};

/// Reads checkpoint fields front to back; every read checks that the bytes are there, and every count is
/// checked against the bytes left before anything is allocated for it.
class CheckpointReader {
public:
    /// A reader of `size` bytes at `data` from the file `path`; messages start with `who`.
    CheckpointReader(const char* data, std::size_t size, std::string path,
                     const char* who = "load_checkpoint")
        : data_(data), size_(size), path_(std::move(path)), who_(who) {}

    /// Copies the next `n` bytes to `p`; throws naming the file and `what` if fewer are left.
    void bytes(void* p, std::size_t n, const char* what) {
        DTRAIN_CHECK(n <= size_ - pos_, who_, ": '", path_, "' is truncated (", size_,
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
    /// The file's format version (set by open_fields()).
    std::uint64_t version() const noexcept { return version_; }
    /// Records the file's format version.
    void set_version(std::uint64_t v) noexcept { version_ = v; }

private:
    // A count of `elem_bytes`-byte elements that must fit in what is left of the file.
    std::size_t count(std::size_t elem_bytes, const char* what) {
        const std::uint64_t n = u64(what);
        DTRAIN_CHECK(n <= left() / elem_bytes, who_, ": '", path_, "' is truncated or corrupted: ", what,
                     " claims ", n, " values of ", elem_bytes, " bytes, but ", left(), " bytes are left");
        return std::size_t(n);
    }

    const char* data_;
    std::size_t size_;
    std::string path_;
    const char* who_;
    std::size_t pos_ = 0;
    std::uint64_t version_ = 0;
};

/// Reads the file `path` that should start with the signature `magic` of a `kind` ("dtrain checkpoint"),
/// checking before it reads the whole: it must be a regular file (not a directory, a device such as
/// /dev/zero, or a pipe, which have no size to check), and when it has 8 bytes or more its first 8 must be
/// the signature, so a large file of another kind is refused after reading 8 bytes. A file starting with
/// the gzip magic bytes is decompressed as read_file_bytes() does. Throws dtrain::Error naming `who` and the
/// file, also when the memory for it cannot be allocated.
inline std::vector<unsigned char> read_signed_file(const std::string& path, const char* who,
                                                   const char (&magic)[8], const char* kind) {
    FileCloser fc{std::fopen(path.c_str(), "rb")};
    DTRAIN_CHECK(fc.f != nullptr, who, ": cannot open '", path, "': ", std::strerror(errno));
    struct stat st {};
    DTRAIN_CHECK(::fstat(::fileno(fc.f), &st) == 0, who, ": cannot read '", path,
                 "': ", std::strerror(errno));
    DTRAIN_CHECK(!S_ISDIR(st.st_mode), who, ": cannot read '", path, "': it is a directory");
    DTRAIN_CHECK(S_ISREG(st.st_mode), who, ": cannot read '", path,
                 "': it is not a regular file (a device, a pipe or a socket), and a ", kind,
                 " is one: give the path of the file save_checkpoint() or save_model() wrote");
    const auto size = static_cast<std::uint64_t>(st.st_size);
    unsigned char head[sizeof magic] = {};
    const std::size_t got = std::fread(head, 1, sizeof head, fc.f);
    if (got >= 2 && head[0] == 0x1f && head[1] == 0x8b) return read_file_bytes(path, who);  // gzip
    DTRAIN_CHECK(got < sizeof head || std::memcmp(head, magic, sizeof head) == 0, who, ": '", path,
                 "' is not a ", kind, " (it does not start with the signature; ", size, " bytes)");
    std::vector<unsigned char> bytes;
    try {
        bytes.resize(static_cast<std::size_t>(size));
    } catch (const std::bad_alloc&) {
        throw Error(concat(who, ": cannot allocate ", size, " bytes to read '", path, "'"));
    }
    if (!bytes.empty()) std::memcpy(bytes.data(), head, std::min<std::size_t>(got, bytes.size()));
    const std::size_t rest = bytes.size() > got ? bytes.size() - got : 0;
    const std::size_t read = rest > 0 ? std::fread(bytes.data() + got, 1, rest, fc.f) : 0;
    DTRAIN_CHECK(!std::ferror(fc.f), who, ": cannot read '", path, "': ", std::strerror(errno));
    DTRAIN_CHECK(read == rest && std::fgetc(fc.f) == EOF && got <= bytes.size(), who, ": '", path,
                 "' changed size while it was read (", size, " bytes at the start)");
    return bytes;
}

/// Every rank of `comm` gets the bytes of the file `path` as rank `root` reads it with read_signed_file()
/// (only root needs to see the file): a file that is not a regular file or lacks the signature `magic` of a
/// `kind` is refused on root before it is read whole and before anything is broadcast. Throws dtrain::Error
/// naming `who` and the file on every rank when root cannot read it or a rank cannot allocate its copy.
/// Collective.
inline std::vector<unsigned char> read_on_root(const std::string& path, const char* who, int root,
                                               MPI_Comm comm, const char (&magic)[8], const char* kind) {
    std::vector<unsigned char> bytes;
    std::string error;
    if (comm_rank(comm) == root) {
        try {
            bytes = read_signed_file(path, who, magic, kind);
        } catch (const std::exception& e) {
            error = e.what();
        }
    }
    throw_if_failed_anywhere(error, root, comm);
    std::uint64_t n = bytes.size();
    DTRAIN_MPI_CHECK(MPI_Bcast(&n, 1, MPI_UINT64_T, root, comm));
    int failed = 0;
    try {
        bytes.resize(n);
    } catch (const std::bad_alloc&) {
        failed = 1;
    }
    DTRAIN_CHECK(allreduce_value(failed, MPI_MAX, comm) == 0, who, ": a rank cannot allocate ", n,
                 " bytes for its copy of '", path, "'");
    for (std::uint64_t off = 0; off < n;) {  // in pieces that fit MPI's int count
        const int piece = int(std::min<std::uint64_t>(n - off, std::uint64_t(1) << 30));
        DTRAIN_MPI_CHECK(MPI_Bcast(bytes.data() + off, piece, MPI_BYTE, root, comm));
        off += std::uint64_t(piece);
    }
    return bytes;
}

/// Checks that `bytes` (of the file `path`) start with `magic` and `version` (or, given `oldest`, a version
/// from oldest to version) and end with a valid checksum; returns a reader of the fields between them, which
/// knows the version. Throws dtrain::Error naming `who`, the file and the problem ("is not a <kind>",
/// another format version, truncated, checksum mismatch).
inline CheckpointReader open_fields(const std::vector<unsigned char>& bytes, const char (&magic)[8],
                                    std::uint64_t version, const char* kind, const std::string& path,
                                    const char* who, std::uint64_t oldest = 0) {
    const char* data = reinterpret_cast<const char*>(bytes.data());
    CheckpointReader in(data, bytes.size(), path, who);
    char seen[8];
    in.bytes(seen, sizeof seen, "the file signature");
    DTRAIN_CHECK(std::memcmp(seen, magic, sizeof seen) == 0, who, ": '", path, "' is not a ", kind);
    const std::uint64_t v = in.u64("the format version");
    if (oldest == 0 || oldest >= version)
        DTRAIN_CHECK(v == version, who, ": '", path, "' has format version ", v,
                     ", this dtrain reads version ", version);
    else
        DTRAIN_CHECK(v >= oldest && v <= version, who, ": '", path, "' has format version ", v,
                     ", this dtrain reads versions ", oldest, " to ", version);
    DTRAIN_CHECK(in.left() >= sizeof(std::uint64_t), who, ": '", path, "' is truncated (", bytes.size(),
                 " bytes)");
    std::uint64_t stored = 0;
    std::memcpy(&stored, data + bytes.size() - sizeof stored, sizeof stored);
    DTRAIN_CHECK(fnv1a(data, bytes.size() - sizeof stored) == stored, who, ": '", path,
                 "' is corrupted or truncated (checksum mismatch)");
    CheckpointReader fields(data + 16, bytes.size() - 16 - sizeof stored, path, who);
    fields.set_version(v);
    return fields;
}

/// Reads the value size and the layer layout a file stores and checks them against `model`; throws
/// dtrain::Error naming `who`, the file and the first differing layer (`stored_for` says what the file
/// holds, e.g. "holds another model").
template <class T>
void check_stored_model(CheckpointReader& in, const Model<T>& model, const std::string& path, const char* who,
                        const char* stored_for) {
    const std::uint64_t value_bytes = in.u64("the value size");
    DTRAIN_CHECK(value_bytes == sizeof(T), who, ": '", path, "' holds ", value_bytes,
                 "-byte values, this model has ", sizeof(T), "-byte values");
    ReplicaFacts facts;
    describe_model(model, facts);
    const std::string layers = in.text("the model's layers");  // its own errors name the file already
    ReplicaFacts stored;
    try {
        stored = unpack_facts(layers);
    } catch (const Error& e) {
        throw Error(concat(who, ": '", path, "': ", e.what()));
    }
    DTRAIN_CHECK(first_difference(stored, facts) == std::string::npos, who, ": '", path, "' ", stored_for,
                 ": ", describe_difference(stored, "in the file", facts, "in this model").second);
}

}  // namespace dtrain::detail

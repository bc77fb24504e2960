#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace dtrain::detail {

/// Writes Protocol Buffers messages in the wire format (varints, length-delimited fields and 32-bit
/// floats, little-endian), enough to write an ONNX model without the protobuf library. Nested messages are
/// written into a writer of their own and appended with message().
class ProtobufWriter {
public:
    /// Field `field` as a varint (int32, int64, enum); negative values take ten bytes, as protobuf's.
    void integer(int field, std::int64_t value) {
        key(field, 0);
        varint(static_cast<std::uint64_t>(value));
    }

    /// Field `field` as a 32-bit float (wire type 5).
    void float32(int field, float value) {
        key(field, 5);
        std::uint32_t bits = 0;
        std::memcpy(&bits, &value, sizeof bits);
        for (int i = 0; i < 4; ++i)
            out_.push_back(char((bits >> (8 * i)) & 0xffu));
    }

    /// Field `field` holding `size` bytes at `data` (string, bytes).
    void bytes(int field, const void* data, std::size_t size) {
        key(field, 2);
        varint(size);
        out_.append(static_cast<const char*>(data), size);
    }

    /// Field `field` holding the text `s`.
    void text(int field, const std::string& s) { bytes(field, s.data(), s.size()); }

    /// Field `field` holding the message written into `m`.
    void message(int field, const ProtobufWriter& m) { bytes(field, m.out_.data(), m.out_.size()); }

    /// Appends the fields written into `m` to this message's fields.
    void append(const ProtobufWriter& m) { out_ += m.out_; }

    /// The bytes written so far.
    const std::string& str() const noexcept { return out_; }

private:
    void key(int field, unsigned wire) { varint((std::uint64_t(field) << 3) | wire); }

    void varint(std::uint64_t v) {
        while (v >= 0x80) {
            out_.push_back(char((v & 0x7f) | 0x80));
            v >>= 7;
        }
        out_.push_back(char(v));
    }

    std::string out_;
};

}  // namespace dtrain::detail

#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/data/detail/byte_source.hpp>

namespace dtrain::detail {

/// At most this many bytes of a value from a file are echoed in a message.
inline constexpr std::size_t echo_max_bytes = 64;

/// `s` as it may appear in a message: control bytes and bytes that are not UTF-8 become \xNN escapes (a
/// backslash becomes \\), and only the first echo_max_bytes bytes are shown, followed by "... (N bytes)"
/// when there are more. Values of damaged files then print as readable text of bounded length.
inline std::string printable(std::string_view s) {
    std::string out;
    const std::size_t n = std::min(s.size(), echo_max_bytes);
    auto escape = [&](unsigned char c) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\x%02X", static_cast<unsigned>(c));
        out += hex;
    };
    for (std::size_t i = 0; i < n;) {
        const auto c = static_cast<unsigned char>(s[i]);
        // Length of the UTF-8 sequence that `c` starts (0: not a valid lead byte).
        const std::size_t len = c < 0x80           ? 1
                                : (c >> 5) == 0x6  ? 2
                                : (c >> 4) == 0xE  ? 3
                                : (c >> 3) == 0x1E ? 4
                                                   : 0;
        bool ok = len > 0 && i + len <= s.size() && c >= 0x20 && c != 0x7F && c != '\\';
        for (std::size_t k = 1; ok && k < len; ++k)
            ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 0x2;
        if (c == '\\') {
            out += "\\\\";
            ++i;
        } else if (ok) {
            out.append(s.data() + i, len);
            i += len;
        } else {
            escape(c);
            ++i;
        }
    }
    if (s.size() > n) out += concat("... (", s.size(), " bytes)");
    return out;
}

/// Parses `s` (a leading '+' allowed) as a finite float; false when it is not exactly one number. Values
/// too small for a float ("1e-50") become 0 or a denormal, as in every other reader; values too large are
/// not finite, so false.
inline bool parse_csv_float(std::string_view s, float& out) {
    const char* b = s.data();
    const char* e = b + s.size();
    if (b != e && *b == '+') ++b;
    if (b == e) return false;
    const auto r = std::from_chars(b, e, out);
    if (r.ec == std::errc::result_out_of_range && r.ptr == e) {
        // Out of range: an underflow when the number's decimal magnitude is negative. The magnitude is the
        // exponent plus the position of the first non-zero digit relative to the point.
        const char* p = b + (*b == '-' ? 1 : 0);
        long digits = 0, lead_zeros_after_point = 0;
        bool point = false, nonzero = false;
        for (; p != e && *p != 'e' && *p != 'E'; ++p) {
            if (*p == '.') {
                point = true;
            } else if (!nonzero && *p == '0') {
                if (point) ++lead_zeros_after_point;
            } else {
                nonzero = true;
                if (!point) ++digits;
            }
        }
        long exponent = 0;
        if (p != e) {
            const char* q = p + 1 + (p + 1 != e && (p[1] == '+') ? 1 : 0);
            if (std::from_chars(q, e, exponent).ec == std::errc::result_out_of_range)
                exponent = q != e && *q == '-' ? -1000000 : 1000000;
        }
        const long magnitude = exponent + (digits > 0 ? digits : -lead_zeros_after_point);
        if (magnitude > 0) return false;
        double d = 0.0;
        const auto rd = std::from_chars(b, e, d);  // a denormal float when a double holds it
        out = rd.ec == std::errc() ? static_cast<float>(d) : 0.0f;
        if (*b == '-') out = std::copysign(out, -1.0f);
        return true;
    }
    return r.ec == std::errc() && r.ptr == e && std::isfinite(out);
}

/// True when `s` is a non-negative decimal integer of at most 9 digits (so it fits an int32).
inline bool is_small_uint(std::string_view s) {
    return !s.empty() && s.size() <= 9 &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// The value of a string is_small_uint() accepted.
inline long small_uint_value(std::string_view s) {
    long v = 0;
    std::from_chars(s.data(), s.data() + s.size(), v);
    return v;
}

/// Reads the lines of a ByteSource one at a time into a buffer reused from line to line, so that only one
/// line is held: '\n' ends a line, a '\r' before it is dropped, a UTF-8 BOM at the start is skipped. The
/// buffer grows by a quarter at a time (a string would double): a long line costs at most 2.25 times its
/// length while it is read.
class LineReader {
public:
    explicit LineReader(ByteSource& src) : src_(src), buf_(ByteSource::piece) {}

    /// The next line (blank ones included) into `line`, valid until the next call; false at the end.
    bool next(std::string_view& line) {
        line_buf_.clear();
        bool any = false;
        for (;;) {
            if (pos_ == end_) {
                end_ = src_.read(buf_.data(), buf_.size());
                pos_ = 0;
                if (end_ == 0) break;
            }
            any = true;
            const auto* start = buf_.data() + pos_;
            const auto* nl = static_cast<const unsigned char*>(std::memchr(start, '\n', end_ - pos_));
            const std::size_t k = nl ? static_cast<std::size_t>(nl - start) : end_ - pos_;
            const std::size_t size = line_buf_.size();
            if (size + k > line_buf_.capacity())
                line_buf_.reserve(std::max(size + k, line_buf_.capacity() + line_buf_.capacity() / 4));
            line_buf_.insert(line_buf_.end(), start, start + k);
            pos_ += k;
            if (nl) {
                ++pos_;
                break;
            }
        }
        if (!any) return false;
        ++line_;
        std::size_t b = 0, e = line_buf_.size();
        if (e > 0 && line_buf_[e - 1] == '\r') --e;
        if (line_ == 1 && e >= 3 && std::memcmp(line_buf_.data(), "\xEF\xBB\xBF", 3) == 0) b = 3;
        line = std::string_view(reinterpret_cast<const char*>(line_buf_.data()) + b, e - b);
        return true;
    }
    /// 1-based number of the line last returned.
    std::size_t line() const { return line_; }

private:
    ByteSource& src_;
    std::vector<unsigned char> buf_, line_buf_;
    std::size_t pos_ = 0, end_ = 0, line_ = 0;
};

/// True when `line` holds only spaces and tabs (a blank line, skipped).
inline bool is_blank(std::string_view line) {
    return line.find_first_not_of(" \t") == std::string_view::npos;
}

/// The fields of one CSV line, one at a time, trimmed of spaces and tabs. Double-quoted fields may contain
/// the delimiter and "" for a quote (not newlines). A line "a," has two fields, the second one empty.
class CsvFields {
public:
    /// Fields of `line` (line number `number` of `path`, for messages) separated by `delim`.
    CsvFields(std::string_view line, char delim, std::size_t number, const std::string& path, const char* who)
        : ln_(line), delim_(delim), number_(number), path_(path), who_(who) {}

    /// The next field into `out` (a view into the line, or into this object for a quoted field, valid until
    /// the next call); false when the line has no more. Throws naming the line and column for an
    /// unterminated quoted field or characters after one.
    bool next(std::string_view& out) {
        if (done_) return false;
        std::size_t i = i_;
        while (i < ln_.size() && (ln_[i] == ' ' || ln_[i] == '\t'))
            ++i;
        if (i < ln_.size() && ln_[i] == '"') {
            const std::size_t open = i++;
            bool closed = false;
            quoted_.clear();
            while (i < ln_.size()) {
                if (ln_[i] == '"') {
                    if (i + 1 < ln_.size() && ln_[i + 1] == '"') {
                        quoted_ += '"';
                        i += 2;
                        continue;
                    }
                    closed = true;
                    ++i;
                    break;
                }
                quoted_ += ln_[i++];
            }
            DTRAIN_CHECK(closed, who_, ": '", path_, "' line ", number_, ", column ", count_ + 1,
                         ": unterminated quoted field starting at character ", open + 1);
            while (i < ln_.size() && (ln_[i] == ' ' || ln_[i] == '\t'))
                ++i;
            DTRAIN_CHECK(i == ln_.size() || ln_[i] == delim_, who_, ": '", path_, "' line ", number_,
                         ", column ", count_ + 1, ": unexpected character after a quoted field");
            out = quoted_;
        } else {
            const std::size_t start = i;
            const void* d = std::memchr(ln_.data() + i, delim_, ln_.size() - i);
            i = d ? static_cast<std::size_t>(static_cast<const char*>(d) - ln_.data()) : ln_.size();
            std::size_t e = i;
            while (e > start && (ln_[e - 1] == ' ' || ln_[e - 1] == '\t'))
                --e;
            out = ln_.substr(start, e - start);
        }
        ++count_;
        if (i >= ln_.size())
            done_ = true;
        else
            i_ = i + 1;  // skip the delimiter
        return true;
    }
    /// Number of fields returned so far.
    std::size_t count() const { return count_; }
    /// Number of fields of the whole line (counts the rest without keeping it).
    std::size_t total() {
        std::string_view f;
        while (next(f)) {
        }
        return count_;
    }

private:
    std::string_view ln_;
    char delim_;
    std::size_t number_;
    const std::string& path_;
    const char* who_;
    std::size_t i_ = 0, count_ = 0;
    bool done_ = false;
    std::string quoted_;
};

}  // namespace dtrain::detail

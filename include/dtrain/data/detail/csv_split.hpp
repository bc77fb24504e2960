#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <dtrain/core/error.hpp>

namespace dtrain::detail {

/// One non-blank line of a CSV file split into fields, with its 1-based line number.
struct CsvRow {
    std::size_t line = 0;
    std::vector<std::string> fields;
};

/// Parses `s` (surrounding '+' allowed) as a finite float; false when it is not exactly one number.
inline bool parse_csv_float(const std::string& s, float& out) {
    const char* b = s.data();
    const char* e = b + s.size();
    if (b != e && *b == '+') ++b;
    if (b == e) return false;
    const auto r = std::from_chars(b, e, out);
    return r.ec == std::errc() && r.ptr == e && std::isfinite(out);
}

/// True when `s` is a non-negative decimal integer of at most 9 digits (so it fits an int32).
inline bool is_small_uint(const std::string& s) {
    return !s.empty() && s.size() <= 9 &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// Splits the text of a CSV file into rows of trimmed fields. Double-quoted fields may contain the
/// delimiter and "" for a quote (not newlines). Blank lines are skipped; CRLF endings and a UTF-8 BOM are
/// accepted.
inline std::vector<CsvRow> split_csv(const std::string& text, char delim, const std::string& path,
                                     const char* who) {
    std::vector<CsvRow> rows;
    std::size_t pos = 0, line = 0;
    if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) pos = 3;
    while (pos < text.size()) {
        ++line;
        std::size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        std::size_t stop = end;
        if (stop > pos && text[stop - 1] == '\r') --stop;
        const std::string_view ln(text.data() + pos, stop - pos);
        pos = end + 1;
        if (ln.find_first_not_of(" \t") == std::string_view::npos) continue;
        CsvRow row;
        row.line = line;
        std::size_t i = 0;
        for (;;) {  // one field per iteration
            while (i < ln.size() && (ln[i] == ' ' || ln[i] == '\t'))
                ++i;
            std::string field;
            if (i < ln.size() && ln[i] == '"') {
                const std::size_t open = i++;
                bool closed = false;
                while (i < ln.size()) {
                    if (ln[i] == '"') {
                        if (i + 1 < ln.size() && ln[i + 1] == '"') {
                            field += '"';
                            i += 2;
                            continue;
                        }
                        closed = true;
                        ++i;
                        break;
                    }
                    field += ln[i++];
                }
                DTRAIN_CHECK(closed, who, ": '", path, "' line ", line, ", column ", row.fields.size() + 1,
                             ": unterminated quoted field starting at character ", open + 1);
                while (i < ln.size() && (ln[i] == ' ' || ln[i] == '\t'))
                    ++i;
                DTRAIN_CHECK(i == ln.size() || ln[i] == delim, who, ": '", path, "' line ", line, ", column ",
                             row.fields.size() + 1, ": unexpected character after a quoted field");
            } else {
                const std::size_t start = i;
                while (i < ln.size() && ln[i] != delim)
                    ++i;
                std::size_t e = i;
                while (e > start && (ln[e - 1] == ' ' || ln[e - 1] == '\t'))
                    --e;
                field.assign(ln.data() + start, e - start);
            }
            row.fields.push_back(std::move(field));
            if (i >= ln.size()) break;
            ++i;  // skip the delimiter
        }
        rows.push_back(std::move(row));
    }
    return rows;
}

}  // namespace dtrain::detail

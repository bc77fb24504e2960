#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <dtrain/core/error.hpp>
#include <dtrain/data/detail/csv_split.hpp>

namespace dtrain::detail {

/// True when `s` is a number as a CSV feature must be: one finite float (parse_csv_float).
inline bool is_csv_number(std::string_view s) {
    float v = 0.0f;
    return parse_csv_float(s, v);
}

/// A non-blank line of a CSV file with its 1-based number; `number` 0 means there is no such line.
struct CsvLine {
    std::string text;
    std::size_t number = 0;
};

/// True when `first` is scikit-learn's "<n_samples>,<n_features>,<class names...>" line and `second` (the
/// next non-blank line, if any) has n_features + 1 fields.
inline bool looks_like_sklearn(const CsvLine& first, const CsvLine& second, char delim,
                               const std::string& path, const char* who) {
    CsvFields f(first.text, delim, first.number, path, who);
    std::string_view v;
    if (!f.next(v) || !is_small_uint(v) || !f.next(v) || !is_small_uint(v)) return false;
    const long features = small_uint_value(v);
    std::size_t names = 0;
    for (; f.next(v); ++names)
        if (v.empty() || is_csv_number(v)) return false;
    if (names == 0) return false;
    return second.number == 0 ||
           CsvFields(second.text, delim, second.number, path, who).total() == std::size_t(features) + 1;
}

/// True when the line `first` holds column names rather than data: some field of it is not a number while
/// the same field of `second` is one (features are numbers, so their names stand out above them). Without
/// a second line: when some field of `first` is not a number. A first line of numbers is always data, and
/// so is "5.1,3.5,1.4,0.2,setosa" above "4.9,3.0,1.4,0.2,setosa".
inline bool first_row_is_header(const CsvLine& first, const CsvLine& second, char delim,
                                const std::string& path, const char* who) {
    CsvFields h(first.text, delim, first.number, path, who);
    std::string_view a, b;
    if (second.number == 0) {
        while (h.next(a))
            if (!is_csv_number(a)) return true;
        return false;
    }
    CsvFields d(second.text, delim, second.number, path, who);
    while (h.next(a) && d.next(b))
        if (!is_csv_number(a) && is_csv_number(b)) return true;
    return false;
}

/// The columns of a CSV file, for choosing them by name or index in CsvOptions and naming them in messages.
/// Names are read from the header line when asked for, not kept one by one: a line of millions of empty
/// names costs the line only.
struct CsvColumns {
    /// The header line (when `named`: a view of the caller's line, which must outlive this) and its number.
    std::string_view header;
    std::size_t header_line = 0;
    /// Field separator.
    char delim = ',';
    /// Number of columns.
    std::size_t count = 0;
    /// True when names come from a header line (else they are "column 1", "column 2", ...).
    bool named = false;
    /// Added to the message when a column is chosen by name in a file without a header: why it has none.
    std::string unnamed_note;
    std::string path;
    const char* who = "dtrain::read_csv";

    /// The name of column `c` (0-based), as read (not escaped).
    std::string name(std::size_t c) const {
        if (named) {
            CsvFields f(header, delim, header_line, path, who);
            std::string_view v;
            for (std::size_t k = 0; f.next(v); ++k)
                if (k == c) return std::string(v);
        }
        return "column " + std::to_string(c + 1);
    }
    /// "column C ('name')" for messages, the name escaped (printable()).
    std::string describe(std::size_t c) const {
        return concat("column ", c + 1, " ('", printable(name(c)), "')");
    }

    /// The index of the column called `name` for the option `what` ("label column"); throws naming the
    /// option and `instead` (how to choose it without a header) when the file has no header, and listing
    /// the first columns when none is called `name`.
    std::size_t by_name(const std::string& name, const char* what, const char* instead) const {
        DTRAIN_CHECK(named, who, ": '", path, "': ", what, " '", name,
                     "' is chosen by name, but this file has no header of column names", unnamed_note, "; ",
                     instead);
        CsvFields f(header, delim, header_line, path, who);
        std::string_view v;
        std::string listed;
        for (std::size_t k = 0; f.next(v); ++k) {
            if (v == name) return k;
            if (k < 20) listed += concat(k ? ", " : "", printable(v));
        }
        throw Error(concat(who, ": '", path, "' has no column named '", printable(name), "' for the ", what,
                           " (columns: [", listed, count > 20 ? ", ...]" : "]", ")"));
    }
    /// The column at `index` (0-based, negative counting from the end) for the option `what`
    /// ("label_index"); throws when it is out of range.
    std::size_t by_index(long index, const char* what) const {
        const long n = static_cast<long>(count), i = index < 0 ? n + index : index;
        DTRAIN_CHECK(i >= 0 && i < n, who, ": '", path, "': ", what, " ", index, " is out of range for ", n,
                     " columns");
        return static_cast<std::size_t>(i);
    }
};

}  // namespace dtrain::detail

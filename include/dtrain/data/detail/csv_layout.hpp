#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/data/detail/csv_split.hpp>

namespace dtrain::detail {

/// True when `s` is a number as a CSV feature must be: one finite float (parse_csv_float).
inline bool is_csv_number(const std::string& s) {
    float v = 0.0f;
    return parse_csv_float(s, v);
}

/// True when `rows` starts with scikit-learn's "<n_samples>,<n_features>,<class names...>" line.
inline bool looks_like_sklearn(const std::vector<CsvRow>& rows) {
    const auto& f = rows.front().fields;
    if (f.size() < 3 || !is_small_uint(f[0]) || !is_small_uint(f[1])) return false;
    for (std::size_t i = 2; i < f.size(); ++i)
        if (f[i].empty() || is_csv_number(f[i])) return false;
    return rows.size() < 2 || rows[1].fields.size() == std::stoul(f[1]) + 1;
}

/// True when the first of `rows` holds column names rather than data: some field of it is not a number
/// while the same field of the second row is one (features are numbers, so their names stand out above
/// them). With one row only: when some field of it is not a number. A first row of numbers is always data,
/// and so is "5.1,3.5,1.4,0.2,setosa" above "4.9,3.0,1.4,0.2,setosa".
inline bool first_row_is_header(const std::vector<CsvRow>& rows) {
    const auto& h = rows.front().fields;
    if (rows.size() < 2) return !std::all_of(h.begin(), h.end(), is_csv_number);
    const auto& d = rows[1].fields;
    for (std::size_t c = 0; c < std::min(h.size(), d.size()); ++c)
        if (!is_csv_number(h[c]) && is_csv_number(d[c])) return true;
    return false;
}

/// The columns of a CSV file, for choosing them by name or index in CsvOptions.
struct CsvColumns {
    /// Column names from the header, or "column 1", "column 2", ... without one.
    std::vector<std::string> names;
    /// True when `names` come from a header line.
    bool named = false;
    /// Added to the message when a column is chosen by name in a file without a header: why it has none.
    std::string unnamed_note;
    std::string path;
    const char* who = "dtrain::read_csv";

    /// The index of the column called `name` for the option `what` ("label column"); throws naming the
    /// option and `instead` (how to choose it without a header) when the file has no header, and listing
    /// the columns when none is called `name`.
    std::size_t by_name(const std::string& name, const char* what, const char* instead) const {
        DTRAIN_CHECK(named, who, ": '", path, "': ", what, " '", name,
                     "' is chosen by name, but this file has no header of column names", unnamed_note, "; ",
                     instead);
        const auto it = std::find(names.begin(), names.end(), name);
        DTRAIN_CHECK(it != names.end(), who, ": '", path, "' has no column named '", name, "' for the ", what,
                     " (columns: ", shape_str(names), ")");
        return static_cast<std::size_t>(it - names.begin());
    }
    /// The column at `index` (0-based, negative counting from the end) for the option `what`
    /// ("label_index"); throws when it is out of range.
    std::size_t by_index(long index, const char* what) const {
        const long n = static_cast<long>(names.size()), i = index < 0 ? n + index : index;
        DTRAIN_CHECK(i >= 0 && i < n, who, ": '", path, "': ", what, " ", index, " is out of range for ", n,
                     " columns");
        return static_cast<std::size_t>(i);
    }
};

}  // namespace dtrain::detail

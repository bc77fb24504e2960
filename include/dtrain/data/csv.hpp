#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/data/dataset.hpp>
#include <dtrain/data/detail/checked.hpp>
#include <dtrain/data/detail/file_io.hpp>

namespace dtrain {

/// How the first line of a CSV file is read.
enum class CsvLayout {
    /// sklearn's layout when the first line looks like "150,4,setosa,versicolor,virginica", else header.
    Automatic,
    /// The first line holds column names (Kaggle style: sepal_length,...,species).
    Header,
    /// scikit-learn's bundled layout: "<n_samples>,<n_features>,<class name>..." then rows whose label
    /// column holds integer ids into those class names; the row count must equal n_samples.
    Sklearn,
    /// No header: every line is data; columns can only be chosen by index.
    NoHeader,
};

/// Options of read_csv().
struct CsvOptions {
    /// How to read the first line.
    CsvLayout layout = CsvLayout::Automatic;
    /// Label column by name (header layout only); when set it overrides label_index.
    std::string label_column;
    /// Label column by 0-based index; negative values count from the end (-1, the default, is the last).
    long label_index = -1;
    /// Columns to ignore, by name (header layout only), e.g. {"Id"} for Kaggle's Iris.csv.
    std::vector<std::string> drop_columns;
    /// Fixes the label-to-id mapping (id = position); a label not in the list is an error. Use the training
    /// split's class_names when reading another split. Empty: ids are assigned as described at read_csv().
    std::vector<std::string> class_names;
    /// Field separator.
    char delimiter = ',';
};

namespace detail {

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

/// True when `rows` starts with scikit-learn's "<n_samples>,<n_features>,<class names...>" line.
inline bool looks_like_sklearn(const std::vector<CsvRow>& rows) {
    const auto& f = rows.front().fields;
    if (f.size() < 3 || !is_small_uint(f[0]) || !is_small_uint(f[1])) return false;
    float v = 0.0f;
    for (std::size_t i = 2; i < f.size(); ++i)
        if (f[i].empty() || parse_csv_float(f[i], v)) return false;
    return rows.size() < 2 || rows[1].fields.size() == std::stoul(f[1]) + 1;
}

}  // namespace detail

/// Parses CSV `text` (named `path` in messages) into a data set with features [N, F] and int32 labels.
///
/// The label column is chosen by name or index (default: the last column); every other column, except
/// `drop_columns`, is a numeric feature. Labels become ids as follows: with options.class_names, the
/// position in that list; in the sklearn layout, the integer in the file (an index into the header's class
/// names); otherwise, when every label is a non-negative integer, that integer (class_names left empty),
/// else the distinct strings sorted in byte order (Iris-setosa=0, Iris-versicolor=1, Iris-virginica=2), an
/// order that does not depend on the order of the rows.
///
/// Throws dtrain::Error naming the file, and the line and column where it applies, for: an empty file, a
/// header without data rows, ragged rows, a non-numeric or non-finite feature, an empty field, an unknown
/// label column or class, and an sklearn header that disagrees with the data or declares more features than
/// the file has bytes for.
inline Dataset parse_csv(const std::string& text, const std::string& path, const CsvOptions& opt = {}) {
    const char* who = "dtrain::read_csv";
    auto rows = detail::split_csv(text, opt.delimiter, path, who);
    DTRAIN_CHECK(!rows.empty(), who, ": '", path, "' is empty");

    CsvLayout layout = opt.layout;
    if (layout == CsvLayout::Automatic)
        layout = detail::looks_like_sklearn(rows) ? CsvLayout::Sklearn : CsvLayout::Header;

    std::vector<std::string> names;  // column names, for messages and selection by name
    std::vector<std::string> sk_classes;
    std::size_t first = 0, ncols = 0, sk_samples = 0;
    if (layout == CsvLayout::Sklearn) {
        const auto& h = rows.front().fields;
        DTRAIN_CHECK(h.size() >= 3 && detail::is_small_uint(h[0]) && detail::is_small_uint(h[1]), who, ": '",
                     path, "' line ", rows.front().line,
                     ": not an sklearn header (expected <n_samples>,<n_features>,<class names...>)");
        sk_samples = std::stoul(h[0]);
        const std::size_t features = std::stoul(h[1]);
        DTRAIN_CHECK(features > 0, who, ": '", path, "' line ", rows.front().line,
                     ": the sklearn header declares 0 features");
        // Every feature of a row takes at least two bytes (a value and a delimiter): a bound on what the
        // header can declare before anything is sized by it.
        DTRAIN_CHECK(features <= text.size() / 2, who, ": '", path, "' line ", rows.front().line,
                     ": the sklearn header declares ", features, " features, but the whole file has only ",
                     text.size(), " bytes, too few for one row of them");
        ncols = features + 1;
        sk_classes.assign(h.begin() + 2, h.end());
        for (std::size_t c = 0; c < ncols; ++c)
            names.push_back("column " + std::to_string(c + 1));
        first = 1;
    } else if (layout == CsvLayout::Header) {
        names = rows.front().fields;
        ncols = names.size();
        first = 1;
    } else {
        ncols = rows.front().fields.size();
        for (std::size_t c = 0; c < ncols; ++c)
            names.push_back("column " + std::to_string(c + 1));
    }
    DTRAIN_CHECK(rows.size() > first, who, ": '", path, "' has a header (line ", rows.front().line,
                 ") but no data rows");
    DTRAIN_CHECK(ncols >= 2, who, ": '", path, "' line ", rows.front().line, " has ", ncols,
                 " column; need at least one feature and a label");
    for (std::size_t r = first; r < rows.size(); ++r)
        DTRAIN_CHECK(rows[r].fields.size() == ncols, who, ": '", path, "' line ", rows[r].line, ", column ",
                     std::min(rows[r].fields.size(), ncols) + 1, ": ragged row with ", rows[r].fields.size(),
                     " fields, expected ", ncols,
                     first ? " (as declared by line " + std::to_string(rows.front().line) + ")"
                           : std::string(" (as on the first line)"));

    // Label and feature columns.
    std::size_t label_col = 0;
    if (!opt.label_column.empty()) {
        DTRAIN_CHECK(layout == CsvLayout::Header, who, ": '", path, "': label column '", opt.label_column,
                     "' chosen by name, but this file has no header of column names (use label_index)");
        const auto it = std::find(names.begin(), names.end(), opt.label_column);
        DTRAIN_CHECK(it != names.end(), who, ": '", path, "' has no column named '", opt.label_column,
                     "' (columns: ", detail::shape_str(names), ")");
        label_col = static_cast<std::size_t>(it - names.begin());
    } else {
        const long idx = opt.label_index < 0 ? static_cast<long>(ncols) + opt.label_index : opt.label_index;
        DTRAIN_CHECK(idx >= 0 && idx < static_cast<long>(ncols), who, ": '", path, "': label_index ",
                     opt.label_index, " is out of range for ", ncols, " columns");
        label_col = static_cast<std::size_t>(idx);
    }
    std::vector<bool> dropped(ncols, false);
    for (const auto& dc : opt.drop_columns) {
        DTRAIN_CHECK(layout == CsvLayout::Header, who, ": '", path, "': cannot drop column '", dc,
                     "' by name, this file has no header of column names");
        const auto it = std::find(names.begin(), names.end(), dc);
        DTRAIN_CHECK(it != names.end(), who, ": '", path, "' has no column named '", dc,
                     "' to drop (columns: ", detail::shape_str(names), ")");
        dropped[static_cast<std::size_t>(it - names.begin())] = true;
    }
    std::vector<std::size_t> feat_cols;
    for (std::size_t c = 0; c < ncols; ++c)
        if (c != label_col && !dropped[c]) feat_cols.push_back(c);
    DTRAIN_CHECK(!feat_cols.empty(), who, ": '", path, "' has no feature columns left");

    const std::size_t n = rows.size() - first;
    if (layout == CsvLayout::Sklearn)
        DTRAIN_CHECK(n == sk_samples, who, ": '", path, "' header (line ", rows.front().line, ") declares ",
                     sk_samples, " samples but the file has ", n, " data rows");

    const Shape shape{n, feat_cols.size()};
    detail::checked_shape_size(shape, who, ": '", path, "'");
    Dataset d;
    d.features = Tensor<float>::from_shape(shape);
    d.labels = Labels::from_shape({n});
    float* x = d.features.data();
    for (std::size_t r = 0; r < n; ++r) {
        const auto& row = rows[first + r];
        for (std::size_t j = 0; j < feat_cols.size(); ++j) {
            const std::size_t c = feat_cols[j];
            const std::string& s = row.fields[c];
            DTRAIN_CHECK(!s.empty(), who, ": '", path, "' line ", row.line, ", column ", c + 1, " ('",
                         names[c], "'): empty feature value");
            DTRAIN_CHECK(detail::parse_csv_float(s, x[r * feat_cols.size() + j]), who, ": '", path, "' line ",
                         row.line, ", column ", c + 1, " ('", names[c], "'): non-numeric feature value '", s,
                         "'");
        }
        DTRAIN_CHECK(!row.fields[label_col].empty(), who, ": '", path, "' line ", row.line, ", column ",
                     label_col + 1, " ('", names[label_col], "'): empty label");
    }

    // Labels to ids.
    auto label_at = [&](std::size_t r) -> const std::string& { return rows[first + r].fields[label_col]; };
    auto fail_label = [&](std::size_t r, const std::string& why) {
        throw Error(detail::concat(who, ": '", path, "' line ", rows[first + r].line, ", column ",
                                   label_col + 1, " ('", names[label_col], "'): ", why));
    };
    if (!opt.class_names.empty() && layout != CsvLayout::Sklearn) {
        std::map<std::string, std::int32_t> id;
        for (std::size_t k = 0; k < opt.class_names.size(); ++k)
            id.emplace(opt.class_names[k], std::int32_t(k));
        for (std::size_t r = 0; r < n; ++r) {
            const auto it = id.find(label_at(r));
            if (it == id.end())
                fail_label(r, "label '" + label_at(r) + "' is not one of the given class names " +
                                  detail::shape_str(opt.class_names));
            d.labels(r) = it->second;
        }
        d.class_names = opt.class_names;
    } else if (layout == CsvLayout::Sklearn) {
        d.class_names = opt.class_names.empty() ? sk_classes : opt.class_names;
        for (std::size_t r = 0; r < n; ++r) {
            const std::string& s = label_at(r);
            if (!detail::is_small_uint(s)) fail_label(r, "label '" + s + "' is not an integer class id");
            const unsigned long v = std::stoul(s);
            if (v >= d.class_names.size())
                fail_label(r, "label " + s + " is outside [0, " + std::to_string(d.class_names.size()) +
                                  ") (classes " + detail::shape_str(d.class_names) + ")");
            d.labels(r) = static_cast<std::int32_t>(v);
        }
    } else {
        bool all_int = true;
        for (std::size_t r = 0; r < n && all_int; ++r)
            all_int = detail::is_small_uint(label_at(r));
        if (all_int) {
            for (std::size_t r = 0; r < n; ++r)
                d.labels(r) = static_cast<std::int32_t>(std::stol(label_at(r)));
        } else {
            std::map<std::string, std::int32_t> id;
            for (std::size_t r = 0; r < n; ++r)
                id.emplace(label_at(r), 0);
            std::int32_t k = 0;
            for (auto& kv : id) {
                kv.second = k++;
                d.class_names.push_back(kv.first);
            }
            for (std::size_t r = 0; r < n; ++r)
                d.labels(r) = id.at(label_at(r));
        }
    }
    d.source = path;
    return d;
}

/// Reads the CSV file `path` (gzip-compressed or plain text) as described at parse_csv(). Reads both
/// scikit-learn's bundled iris.csv (first line "150,4,setosa,versicolor,virginica", integer labels) and
/// a Kaggle-style Iris CSV with a header and string species (the repository's data/iris.csv) with the
/// default options. Throws dtrain::Error naming the file when it is missing or unreadable.
inline Dataset read_csv(const std::string& path, const CsvOptions& opt = {}) {
    const auto bytes = detail::read_file_bytes(path, "dtrain::read_csv");
    return parse_csv(std::string(bytes.begin(), bytes.end()), path, opt);
}

}  // namespace dtrain

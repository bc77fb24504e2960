#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/data/dataset.hpp>
#include <dtrain/data/detail/checked.hpp>
#include <dtrain/data/detail/csv_labels.hpp>
#include <dtrain/data/detail/csv_split.hpp>
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
    /// Fixes the label-to-id mapping: the class names in id order (id = position); a label not in the list
    /// is an error naming its line, and a name listed twice is an error. Use it to read another split with
    /// the training split's class_names, to map labels that mix integers and other values (e.g. {"-1", "0",
    /// "1"}), or to make a misspelt label an error instead of an extra class. Empty: ids are assigned as
    /// described at parse_csv().
    std::vector<std::string> class_names;
    /// Field separator.
    char delimiter = ',';
};

namespace detail {

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
/// else, when no label is, the distinct strings sorted in byte order (Iris-setosa=0, Iris-versicolor=1,
/// Iris-virginica=2), an order that does not depend on the order of the rows. A column that mixes
/// non-negative integers with other values ("-1" among class ids, "7" among species names) is an error
/// naming a value and its line: give options.class_names to map such labels. With sorted string labels, a
/// class that occurs once while another occurs 10 times or more (most likely a typo: "setsoa" among 50
/// "setosa") is reported in the result's `warnings`, naming the value and its line.
///
/// Throws dtrain::Error naming the file, and the line and column where it applies, for: an empty file, a
/// header without data rows, ragged rows, a non-numeric or non-finite feature, an empty field, an unknown
/// label column or class, a label column mixing integers and other values, and an sklearn header that
/// disagrees with the data or declares more features than the file has bytes for.
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
    const detail::CsvLabelColumn col{rows, first, label_col, names[label_col], path, who};
    if (layout == CsvLayout::Sklearn)
        detail::csv_sklearn_labels(col, opt.class_names.empty() ? sk_classes : opt.class_names, d);
    else if (!opt.class_names.empty())
        detail::csv_listed_labels(col, opt.class_names, d);
    else
        detail::csv_automatic_labels(col, d);
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

#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/core/file_io.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/data/dataset.hpp>
#include <dtrain/data/detail/checked.hpp>
#include <dtrain/data/detail/csv_labels.hpp>
#include <dtrain/data/detail/csv_layout.hpp>
#include <dtrain/data/detail/csv_split.hpp>

namespace dtrain {

/// How the first line of a CSV file is read.
enum class CsvLayout {
    /// sklearn's layout when the first line looks like "150,4,setosa,versicolor,virginica"; else a header
    /// when some field of the first line is not a number while the same field of the second line is one
    /// (names above numeric features); else no header: a first line of numbers is data, never dropped.
    Automatic,
    /// The first line holds column names (Kaggle style: sepal_length,...,species). When it holds numbers
    /// only, the result's `warnings` say that a line of numbers was taken for names.
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
    /// Regression: the float target columns by name (header layout only), in the order of the result's
    /// target columns. Target columns, by name here or by index in target_indices, make read_csv() read
    /// float targets of shape [N, k] (Dataset::targets) instead of class labels, every other column not
    /// dropped being a feature; label_column, label_index and class_names must then keep their defaults.
    std::vector<std::string> target_columns;
    /// Regression: the float target columns by 0-based index, negative counting from the end ({-1}: the last
    /// column), as target_columns; give one or the other.
    std::vector<long> target_indices;
    /// Field separator.
    char delimiter = ',';
};

/// Parses CSV `text` (named `path` in messages) into a data set with features [N, F] and either int32
/// class labels or, with options.target_columns / target_indices, float targets [N, k].
///
/// The label column is chosen by name or index (default: the last column); every other column, except
/// `drop_columns`, is a numeric feature. Labels become ids as follows: with options.class_names, the
/// position in that list; in the sklearn layout, the integer in the file (an index into the header's class
/// names); otherwise, when every label is a non-negative integer, that integer (class_names left empty),
/// else, when no label is, the distinct strings sorted in byte order (Iris-setosa=0, Iris-versicolor=1,
/// Iris-virginica=2), an order that does not depend on the order of the rows. A column that mixes
/// non-negative integers with other values ("-1" among class ids, "7" among species names) is an error
/// naming a value and its line: give options.class_names to map such labels. A column of numbers written as
/// floats ("151.5", "100.0") is an error pointing to target_columns: it holds measurements, not classes.
/// With sorted string labels, a class that occurs once while another occurs 10 times or more (most likely a
/// typo: "setsoa" among 50 "setosa") is reported in the result's `warnings`, naming the value and its line.
///
/// Throws dtrain::Error naming the file, and the line and column where it applies, for: an empty file, a
/// header without data rows, ragged rows, a non-numeric or non-finite feature or target, an empty field, an
/// unknown label, target or dropped column or class, a label column mixing integers and other values or
/// holding floats, contradicting options, and an sklearn header that disagrees with the data or declares
/// more features than the file has bytes for.
inline Dataset parse_csv(const std::string& text, const std::string& path, const CsvOptions& opt = {}) {
    const char* who = "dtrain::read_csv";
    auto rows = detail::split_csv(text, opt.delimiter, path, who);
    DTRAIN_CHECK(!rows.empty(), who, ": '", path, "' is empty");

    CsvLayout layout = opt.layout;
    detail::CsvColumns cols{{}, false, "", path, who};
    if (layout == CsvLayout::Automatic) {
        layout = detail::looks_like_sklearn(rows)    ? CsvLayout::Sklearn
                 : detail::first_row_is_header(rows) ? CsvLayout::Header
                                                     : CsvLayout::NoHeader;
        if (layout == CsvLayout::NoHeader)
            cols.unnamed_note = detail::concat(" (CsvLayout::Automatic read line ", rows.front().line,
                                               " as data: none of its fields is a name above a number; give "
                                               "CsvLayout::Header if it holds column names)");
    }

    std::vector<std::string> sk_classes, warnings;
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
        first = 1;
    } else if (layout == CsvLayout::Header) {
        cols.names = rows.front().fields;
        cols.named = true;
        ncols = cols.names.size();
        first = 1;
        const auto& h = rows.front().fields;
        if (opt.layout == CsvLayout::Header && std::all_of(h.begin(), h.end(), detail::is_csv_number))
            warnings.push_back(
                detail::concat(who, ": '", path, "' line ", rows.front().line,
                               " holds only numbers but was read as column names (CsvLayout::Header), "
                               "so it is not a sample; if it is data, read the file with "
                               "CsvLayout::Automatic or CsvLayout::NoHeader"));
    } else {
        ncols = rows.front().fields.size();
    }
    if (!cols.named)
        for (std::size_t c = 0; c < ncols; ++c)
            cols.names.push_back("column " + std::to_string(c + 1));
    const auto& names = cols.names;
    DTRAIN_CHECK(rows.size() > first, who, ": '", path, "' has a header (line ", rows.front().line,
                 ") but no data rows");
    DTRAIN_CHECK(ncols >= 2, who, ": '", path, "' line ", rows.front().line, " has ", ncols,
                 " column; need at least one feature and a label or target");
    for (std::size_t r = first; r < rows.size(); ++r)
        DTRAIN_CHECK(rows[r].fields.size() == ncols, who, ": '", path, "' line ", rows[r].line, ", column ",
                     std::min(rows[r].fields.size(), ncols) + 1, ": ragged row with ", rows[r].fields.size(),
                     " fields, expected ", ncols,
                     first ? " (as declared by line " + std::to_string(rows.front().line) + ")"
                           : std::string(" (as on the first line)"));

    // The label column, or the target columns in the order given; then the features.
    const bool regression = !opt.target_columns.empty() || !opt.target_indices.empty();
    std::vector<std::size_t> outputs;
    if (regression) {
        DTRAIN_CHECK(opt.target_columns.empty() || opt.target_indices.empty(), who, ": '", path,
                     "': give the target columns by name (CsvOptions::target_columns) or by index "
                     "(CsvOptions::target_indices), not both");
        DTRAIN_CHECK(opt.label_column.empty() && opt.label_index == -1 && opt.class_names.empty(), who, ": '",
                     path,
                     "': target columns read float targets instead of class labels, so label_column, "
                     "label_index and class_names must keep their defaults");
        DTRAIN_CHECK(layout != CsvLayout::Sklearn, who, ": '", path, "' line ", rows.front().line,
                     " is a header of scikit-learn's classification layout, whose last column holds class "
                     "ids, not float targets");
        for (const auto& name : opt.target_columns)
            outputs.push_back(cols.by_name(name, "target column", "give it by index in target_indices"));
        for (const long index : opt.target_indices)
            outputs.push_back(cols.by_index(index, "target_indices entry"));
        for (std::size_t j = 0; j < outputs.size(); ++j)
            DTRAIN_CHECK(std::count(outputs.begin(), outputs.end(), outputs[j]) == 1, who, ": '", path,
                         "': column ", outputs[j] + 1, " ('", names[outputs[j]], "') is a target twice");
    } else {
        outputs.push_back(opt.label_column.empty()
                              ? cols.by_index(opt.label_index, "label_index")
                              : cols.by_name(opt.label_column, "label column", "give it by label_index"));
    }
    std::vector<bool> dropped(ncols, false);
    for (const auto& dc : opt.drop_columns) {
        const std::size_t c = cols.by_name(dc, "dropped column", "drop_columns needs a header");
        DTRAIN_CHECK(std::find(outputs.begin(), outputs.end(), c) == outputs.end(), who, ": '", path,
                     "': column '", dc, "' is both dropped and ", regression ? "a target" : "the label");
        dropped[c] = true;
    }
    std::vector<std::size_t> feat_cols;
    for (std::size_t c = 0; c < ncols; ++c)
        if (!dropped[c] && std::find(outputs.begin(), outputs.end(), c) == outputs.end())
            feat_cols.push_back(c);
    DTRAIN_CHECK(!feat_cols.empty(), who, ": '", path, "' has no feature columns left");

    const std::size_t n = rows.size() - first;
    if (layout == CsvLayout::Sklearn)
        DTRAIN_CHECK(n == sk_samples, who, ": '", path, "' header (line ", rows.front().line, ") declares ",
                     sk_samples, " samples but the file has ", n, " data rows");

    // A number of field `c` of `row` into `out`; `kind` ("feature", "target") names it in messages.
    auto number = [&](const detail::CsvRow& row, std::size_t c, const char* kind, float& out) {
        const std::string& s = row.fields[c];
        DTRAIN_CHECK(!s.empty(), who, ": '", path, "' line ", row.line, ", column ", c + 1, " ('", names[c],
                     "'): empty ", kind, " value");
        DTRAIN_CHECK(detail::parse_csv_float(s, out), who, ": '", path, "' line ", row.line, ", column ",
                     c + 1, " ('", names[c], "'): non-numeric ", kind, " value '", s, "'");
    };
    const Shape shape{n, feat_cols.size()};
    detail::checked_shape_size(shape, who, ": '", path, "'");
    Dataset d;
    d.features = Tensor<float>::from_shape(shape);
    if (regression)
        d.targets = Tensor<float>::from_shape({n, outputs.size()});
    else
        d.labels = Labels::from_shape({n});
    for (std::size_t r = 0; r < n; ++r) {
        const auto& row = rows[first + r];
        for (std::size_t j = 0; j < feat_cols.size(); ++j)
            number(row, feat_cols[j], "feature", d.features.data()[r * feat_cols.size() + j]);
        for (std::size_t j = 0; regression && j < outputs.size(); ++j)
            number(row, outputs[j], "target", d.targets.data()[r * outputs.size() + j]);
        DTRAIN_CHECK(regression || !row.fields[outputs[0]].empty(), who, ": '", path, "' line ", row.line,
                     ", column ", outputs[0] + 1, " ('", names[outputs[0]], "'): empty label");
    }

    // Labels to ids.
    if (!regression) {
        const detail::CsvLabelColumn col{rows, first, outputs[0], names[outputs[0]], path, who, cols.named};
        if (layout == CsvLayout::Sklearn)
            detail::csv_sklearn_labels(col, opt.class_names.empty() ? sk_classes : opt.class_names, d);
        else if (!opt.class_names.empty())
            detail::csv_listed_labels(col, opt.class_names, d);
        else
            detail::csv_automatic_labels(col, d);
    }
    d.source = path;
    d.warnings.insert(d.warnings.begin(), warnings.begin(), warnings.end());
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

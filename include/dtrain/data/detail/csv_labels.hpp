#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/data/dataset.hpp>
#include <dtrain/data/detail/csv_split.hpp>

namespace dtrain::detail {

/// A string class that occurs once is reported when the most frequent class occurs at least this often.
inline constexpr std::size_t csv_rare_label_majority = 10;
/// At most this many rare classes are named one by one; one more warning counts the rest.
inline constexpr std::size_t csv_rare_label_warnings = 5;

/// The label column of a parsed CSV file: its values row by row and where each one is, for messages.
struct CsvLabelColumn {
    const std::vector<CsvRow>& rows;
    std::size_t first = 0;  // index of the first data row in `rows`
    std::size_t column = 0;
    std::string name;
    std::string path;
    const char* who = "dtrain::read_csv";
    bool named = true;  // `name` comes from a header line (else it is "column C")

    /// Number of data rows.
    std::size_t size() const { return rows.size() - first; }
    /// The label of data row `r`.
    const std::string& value(std::size_t r) const { return rows[first + r].fields[column]; }
    /// The file line of data row `r`.
    std::size_t line(std::size_t r) const { return rows[first + r].line; }
    /// "dtrain::read_csv: '<path>' line L, column C ('name'): " for data row `r`.
    std::string where(std::size_t r) const {
        return concat(who, ": '", path, "' line ", line(r), ", column ", column + 1, " ('", name, "'): ");
    }
    /// Throws dtrain::Error with where(r) followed by `why`.
    [[noreturn]] void fail(std::size_t r, const std::string& why) const { throw Error(where(r) + why); }
};

/// The remedy every label message ends with.
inline const char* csv_class_names_remedy() {
    return "CsvOptions::class_names (the class names in id order; a label outside them is then an error "
           "naming its line)";
}

/// Ids by position in `class_names` (CsvOptions::class_names); a label not in it, or a name listed twice,
/// is an error.
inline void csv_listed_labels(const CsvLabelColumn& col, const std::vector<std::string>& class_names,
                              Dataset& d) {
    std::map<std::string, std::int32_t> id;
    for (std::size_t k = 0; k < class_names.size(); ++k)
        DTRAIN_CHECK(id.emplace(class_names[k], static_cast<std::int32_t>(k)).second, col.who, ": '",
                     col.path, "': CsvOptions::class_names lists '", class_names[k], "' twice ",
                     shape_str(class_names));
    for (std::size_t r = 0; r < col.size(); ++r) {
        const auto it = id.find(col.value(r));
        if (it == id.end())
            col.fail(r, "label '" + col.value(r) + "' is not one of the given class names " +
                            shape_str(class_names));
        d.labels(r) = it->second;
    }
    d.class_names = class_names;
}

/// Ids of the sklearn layout: integers below the number of `class_names`.
inline void csv_sklearn_labels(const CsvLabelColumn& col, const std::vector<std::string>& class_names,
                               Dataset& d) {
    for (std::size_t r = 0; r < col.size(); ++r) {
        const std::string& s = col.value(r);
        if (!is_small_uint(s)) col.fail(r, "label '" + s + "' is not an integer class id");
        const unsigned long v = std::stoul(s);
        if (v >= class_names.size())
            col.fail(r, "label " + s + " is outside [0, " + std::to_string(class_names.size()) +
                            ") (classes " + shape_str(class_names) + ")");
        d.labels(r) = static_cast<std::int32_t>(v);
    }
    d.class_names = class_names;
}

/// Warns in d.warnings about every class that occurs once while the most frequent one occurs at least
/// csv_rare_label_majority times: most likely a typo ("setsoa" among 50 "setosa") that became a class.
inline void csv_warn_rare_labels(const CsvLabelColumn& col, Dataset& d) {
    std::vector<std::size_t> count(d.class_names.size(), 0), first_row(d.class_names.size(), 0);
    for (std::size_t r = col.size(); r-- > 0;) {
        const auto k = static_cast<std::size_t>(d.labels(r));
        ++count[k];
        first_row[k] = r;
    }
    const auto top = static_cast<std::size_t>(std::max_element(count.begin(), count.end()) - count.begin());
    if (count[top] < csv_rare_label_majority) return;
    std::size_t rare = 0;
    for (std::size_t k = 0; k < count.size(); ++k) {
        if (count[k] != 1 || ++rare > csv_rare_label_warnings) continue;
        d.warnings.push_back(concat(
            col.where(first_row[k]), "label '", d.class_names[k], "' occurs only once, while '",
            d.class_names[top], "' occurs ", count[top],
            " times; if it is a typo, correct it, or give the classes with ", csv_class_names_remedy()));
    }
    if (rare > csv_rare_label_warnings)
        d.warnings.push_back(concat(col.who, ": '", col.path, "': ", rare - csv_rare_label_warnings,
                                    " more labels of column ", col.column + 1, " ('", col.name,
                                    "') occur only once"));
}

/// True when `s` is an integer literal: an optional sign and decimal digits, nothing else.
inline bool is_integer_literal(const std::string& s) {
    const std::size_t b = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
    return s.size() > b && std::all_of(s.begin() + static_cast<std::ptrdiff_t>(b), s.end(),
                                       [](char c) { return c >= '0' && c <= '9'; });
}

/// Throws when every label of `col` is a number and some are written as floats ("151.5", "100.0", "1e2"):
/// a column of measurements, which read as strings would make one class per distinct value. The message
/// names a non-integer value when there is one and points to the regression reading (target_columns).
/// Columns of integer literals ("-1", "7") are left to the class-label rules.
inline void csv_reject_float_labels(const CsvLabelColumn& col) {
    const std::size_t n = col.size();
    std::size_t fractional = n, floating = n;
    for (std::size_t r = 0; r < n; ++r) {
        float v = 0.0f;
        if (!parse_csv_float(col.value(r), v)) return;  // a name among them: the class-label rules apply
        if (is_integer_literal(col.value(r))) continue;
        floating = std::min(floating, r);
        if (fractional == n && v != std::trunc(v)) fractional = r;
    }
    if (floating == n) return;
    const std::size_t r = fractional < n ? fractional : floating;
    const std::string column =
                          col.named ? concat("column '", col.name, "'") : std::string("the label column"),
                      remedy = col.named ? concat("CsvOptions::target_columns = {\"", col.name, "\"}")
                                         : concat("CsvOptions::target_indices = {", col.column, "}");
    col.fail(r, concat(column, " holds ",
                       fractional < n ? "non-integer numbers" : "numbers written as floats", " (e.g. ",
                       col.value(r), "), not class labels: read it as a regression target with ", remedy,
                       fractional < n ? std::string()
                                      : "; if they are class ids, write them as integers or list them with " +
                                            std::string(csv_class_names_remedy())));
}

/// Ids when nothing fixes them: every label a non-negative integer gives that integer (class_names left
/// empty); no label an integer gives the distinct strings sorted in byte order (then rare classes are
/// warned about); a column that mixes the two is an error naming a value of the rarer kind, and a column of
/// numbers written as floats is one pointing to the regression reading (csv_reject_float_labels()).
inline void csv_automatic_labels(const CsvLabelColumn& col, Dataset& d) {
    const std::size_t n = col.size();
    std::size_t ints = 0, first_int = n, first_other = n;
    for (std::size_t r = 0; r < n; ++r) {
        if (!is_small_uint(col.value(r)))
            first_other = std::min(first_other, r);
        else if (ints++ == 0)
            first_int = r;
    }
    if (ints == n) {
        for (std::size_t r = 0; r < n; ++r)
            d.labels(r) = static_cast<std::int32_t>(std::stol(col.value(r)));
        return;
    }
    csv_reject_float_labels(col);
    if (ints > 0) {
        const bool odd_is_other = ints >= n - ints;
        const std::size_t r = odd_is_other ? first_other : first_int,
                          e = odd_is_other ? first_int : first_other;
        col.fail(r, concat("label '", col.value(r), odd_is_other ? "' is not" : "' is",
                           " a non-negative integer, but ", odd_is_other ? ints : n - ints,
                           " other labels of this column ", odd_is_other ? "are" : "are not", " (e.g. '",
                           col.value(e), "' on line ", col.line(e),
                           "). Integer labels are class ids, so a column that mixes them with other values "
                           "is ambiguous: correct the value, or map every label explicitly with ",
                           csv_class_names_remedy()));
    }
    std::map<std::string, std::int32_t> id;
    for (std::size_t r = 0; r < n; ++r)
        id.emplace(col.value(r), 0);
    std::int32_t k = 0;
    for (auto& kv : id) {
        kv.second = k++;
        d.class_names.push_back(kv.first);
    }
    for (std::size_t r = 0; r < n; ++r)
        d.labels(r) = id.at(col.value(r));
    csv_warn_rare_labels(col, d);
}

}  // namespace dtrain::detail

#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
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

/// The remedy every label message ends with.
inline const char* csv_class_names_remedy() {
    return "CsvOptions::class_names (the class names in id order; a label outside them is then an error "
           "naming its line)";
}

/// True when `s` is an integer literal: an optional sign and decimal digits, nothing else.
inline bool is_integer_literal(std::string_view s) {
    const std::size_t b = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
    return s.size() > b && std::all_of(s.begin() + static_cast<std::ptrdiff_t>(b), s.end(),
                                       [](char c) { return c >= '0' && c <= '9'; });
}

/// The label column of a CSV file as it streams by: its distinct values in the order they first occur,
/// each with its count and first line, and every row's index into them (4 bytes a row). At most
/// `max_classes` distinct values are kept, so memory does not grow with a column of measurements or ids.
struct CsvLabelColumn {
    /// One distinct label value.
    struct Entry {
        std::string value;
        std::size_t count = 0, first_line = 0;
    };
    std::vector<Entry> entries;
    std::unordered_map<std::string, std::uint32_t> index;
    std::size_t column = 0;
    std::string name;  // as read; printed escaped
    std::string path;
    const char* who = "dtrain::read_csv";
    bool named = true;  // the name comes from a header line (else it is "column C")
    std::size_t max_classes = 0;
    std::string key;  // reused for lookups

    /// "dtrain::read_csv: '<path>' line L, <name>: " for entry `e`.
    std::string where(const Entry& e) const {
        return concat(who, ": '", path, "' line ", e.first_line, ", column ", column + 1, " ('",
                      printable(name), "'): ");
    }
    /// Throws dtrain::Error with where(e) followed by `why`.
    [[noreturn]] void fail(const Entry& e, const std::string& why) const { throw Error(where(e) + why); }

    /// The key of label `v` of the row on line `line`; a new value gets the next key. `too_many` is called
    /// (and must throw) when a value would be the (max_classes + 1)-th distinct one.
    template <class TooMany>
    std::uint32_t add(std::string_view v, std::size_t line, TooMany&& too_many) {
        key.assign(v.data(), v.size());
        const auto it = index.find(key);
        if (it != index.end()) {
            ++entries[it->second].count;
            return it->second;
        }
        if (entries.size() >= max_classes) {
            entries.push_back({key, 1, line});
            too_many();
        }
        const auto k = static_cast<std::uint32_t>(entries.size());
        entries.push_back({key, 1, line});
        index.emplace(key, k);
        return k;
    }
};

/// Ids of the entries by position in `class_names` (CsvOptions::class_names); a label not in it, or a name
/// listed twice, is an error.
inline std::vector<std::int32_t> csv_listed_labels(const CsvLabelColumn& col,
                                                   const std::vector<std::string>& class_names) {
    std::map<std::string, std::int32_t> id;
    for (std::size_t k = 0; k < class_names.size(); ++k)
        DTRAIN_CHECK(id.emplace(class_names[k], static_cast<std::int32_t>(k)).second, col.who, ": '",
                     col.path, "': CsvOptions::class_names lists '", printable(class_names[k]), "' twice ",
                     shape_str(class_names));
    std::vector<std::int32_t> out;
    for (const auto& e : col.entries) {
        const auto it = id.find(e.value);
        if (it == id.end())
            col.fail(e, "label '" + printable(e.value) + "' is not one of the given class names " +
                            shape_str(class_names));
        out.push_back(it->second);
    }
    return out;
}

/// Ids of the sklearn layout: integers below the number of `class_names`.
inline std::vector<std::int32_t> csv_sklearn_labels(const CsvLabelColumn& col,
                                                    const std::vector<std::string>& class_names) {
    std::vector<std::int32_t> out;
    for (const auto& e : col.entries) {
        if (!is_small_uint(e.value))
            col.fail(e, "label '" + printable(e.value) + "' is not an integer class id");
        const long v = small_uint_value(e.value);
        if (static_cast<std::size_t>(v) >= class_names.size())
            col.fail(e, "label " + e.value + " is outside [0, " + std::to_string(class_names.size()) +
                            ") (classes " + shape_str(class_names) + ")");
        out.push_back(static_cast<std::int32_t>(v));
    }
    return out;
}

/// Throws when every label of `col` is a number and some are written as floats ("151.5", "100.0", "1e2"):
/// a column of measurements, which read as strings would make one class per distinct value. The message
/// names a non-integer value when there is one and points to the regression reading (target_columns).
/// Columns of integer literals ("-1", "7") are left to the class-label rules.
inline void csv_reject_float_labels(const CsvLabelColumn& col) {
    const std::size_t n = col.entries.size();
    std::size_t fractional = n, floating = n;
    for (std::size_t r = 0; r < n; ++r) {
        float v = 0.0f;
        const std::string& s = col.entries[r].value;
        if (!parse_csv_float(s, v)) return;  // a name among them: the class-label rules apply
        if (is_integer_literal(s)) continue;
        floating = std::min(floating, r);
        if (fractional == n && v != std::trunc(v)) fractional = r;
    }
    if (floating == n) return;
    const std::size_t r = fractional < n ? fractional : floating;
    const std::string column = col.named ? concat("column '", printable(col.name), "'")
                                         : std::string("the label column"),
                      remedy = col.named
                                   ? concat("CsvOptions::target_columns = {\"", printable(col.name), "\"}")
                                   : concat("CsvOptions::target_indices = {", col.column, "}");
    col.fail(col.entries[r],
             concat(column, " holds ", fractional < n ? "non-integer numbers" : "numbers written as floats",
                    " (e.g. ", printable(col.entries[r].value),
                    "), not class labels: read it as a regression target with ", remedy,
                    fractional < n ? std::string()
                                   : "; if they are class ids, write them as integers or list them with " +
                                         std::string(csv_class_names_remedy())));
}

/// Warns in `warnings` about every class that occurs once while the most frequent one occurs at least
/// csv_rare_label_majority times: most likely a typo ("setsoa" among 50 "setosa") that became a class.
/// `order` lists the entries in id order.
inline void csv_warn_rare_labels(const CsvLabelColumn& col, const std::vector<std::size_t>& order,
                                 std::vector<std::string>& warnings) {
    std::size_t top = 0;
    for (std::size_t k = 0; k < order.size(); ++k)
        if (col.entries[order[k]].count > col.entries[order[top]].count) top = k;
    const auto& most = col.entries[order[top]];
    if (most.count < csv_rare_label_majority) return;
    std::size_t rare = 0;
    for (std::size_t k = 0; k < order.size(); ++k) {
        const auto& e = col.entries[order[k]];
        if (e.count != 1 || ++rare > csv_rare_label_warnings) continue;
        warnings.push_back(concat(col.where(e), "label '", printable(e.value), "' occurs only once, while '",
                                  printable(most.value), "' occurs ", most.count,
                                  " times; if it is a typo, correct it, or give the classes with ",
                                  csv_class_names_remedy()));
    }
    if (rare > csv_rare_label_warnings)
        warnings.push_back(concat(col.who, ": '", col.path, "': ", rare - csv_rare_label_warnings,
                                  " more labels of column ", col.column + 1, " ('", printable(col.name),
                                  "') occur only once"));
}

/// Ids when nothing fixes them: every label a non-negative integer below `col.max_classes` gives that
/// integer (`class_names` left empty); no label an integer gives the distinct strings sorted in byte order
/// (then rare classes are warned about); a column that mixes the two is an error naming a value of the
/// rarer kind, a column of numbers written as floats is one pointing to the regression reading
/// (csv_reject_float_labels()), and an integer label of max_classes or more is one naming the label, its
/// line and CsvOptions::max_classes.
inline std::vector<std::int32_t> csv_automatic_labels(const CsvLabelColumn& col,
                                                      std::vector<std::string>& class_names,
                                                      std::vector<std::string>& warnings) {
    const std::size_t n = col.entries.size();
    std::size_t ints = 0, other = 0, first_int = n, first_other = n;
    for (std::size_t k = 0; k < n; ++k) {
        const auto& e = col.entries[k];
        if (!is_small_uint(e.value)) {
            other += e.count;
            first_other = std::min(first_other, k);
        } else {
            ints += e.count;
            first_int = std::min(first_int, k);
        }
    }
    std::vector<std::int32_t> out;
    if (other == 0) {
        for (const auto& e : col.entries) {
            const long v = small_uint_value(e.value);
            if (static_cast<std::size_t>(v) >= col.max_classes)
                col.fail(e, concat("label ", v, " is not below CsvOptions::max_classes (", col.max_classes,
                                   "): integer labels are class ids, so it would make ", v + 1,
                                   " classes; raise max_classes if the data really has that many, or read "
                                   "the column as a regression target (CsvOptions::target_columns)"));
            out.push_back(static_cast<std::int32_t>(v));
        }
        return out;
    }
    csv_reject_float_labels(col);
    if (ints > 0) {
        const bool odd_is_other = ints >= other;
        const auto& e = col.entries[odd_is_other ? first_other : first_int];
        const auto& example = col.entries[odd_is_other ? first_int : first_other];
        col.fail(e, concat("label '", printable(e.value), odd_is_other ? "' is not" : "' is",
                           " a non-negative integer, but ", odd_is_other ? ints : other,
                           " other labels of this column ", odd_is_other ? "are" : "are not", " (e.g. '",
                           printable(example.value), "' on line ", example.first_line,
                           "). Integer labels are class ids, so a column that mixes them with other values "
                           "is ambiguous: correct the value, or map every label explicitly with ",
                           csv_class_names_remedy()));
    }
    std::vector<std::size_t> order(n);
    for (std::size_t k = 0; k < n; ++k)
        order[k] = k;
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return col.entries[a].value < col.entries[b].value; });
    out.assign(n, 0);
    for (std::size_t k = 0; k < n; ++k) {
        out[order[k]] = static_cast<std::int32_t>(k);
        class_names.push_back(col.entries[order[k]].value);
    }
    csv_warn_rare_labels(col, order, warnings);
    return out;
}

}  // namespace dtrain::detail

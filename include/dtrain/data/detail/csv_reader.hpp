#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/data/csv_options.hpp>
#include <dtrain/data/dataset.hpp>
#include <dtrain/data/detail/blocks.hpp>
#include <dtrain/data/detail/byte_source.hpp>
#include <dtrain/data/detail/checked.hpp>
#include <dtrain/data/detail/csv_labels.hpp>
#include <dtrain/data/detail/csv_layout.hpp>
#include <dtrain/data/detail/csv_split.hpp>

namespace dtrain::detail {

/// A column read for something else than a feature: the label, a target (with its position among the
/// targets) or a dropped column.
struct CsvSpecial {
    enum class Kind { Label, Target, Dropped };
    std::size_t column = 0;
    Kind kind = Kind::Dropped;
    std::size_t slot = 0;
    bool operator<(const CsvSpecial& o) const { return column < o.column; }
};

/// Chooses the layout of the file from its first two non-blank lines (`second.number` 0 when it has one
/// line only) and fills `cols`; returns the layout. Adds to `warnings` when a header of numbers was forced.
inline CsvLayout csv_choose_layout(const CsvLine& first, const CsvLine& second, const CsvOptions& opt,
                                   CsvColumns& cols, std::vector<std::string>& warnings) {
    CsvLayout layout = opt.layout;
    const char d = opt.delimiter;
    if (layout == CsvLayout::Automatic) {
        layout = looks_like_sklearn(first, second, d, cols.path, cols.who)    ? CsvLayout::Sklearn
                 : first_row_is_header(first, second, d, cols.path, cols.who) ? CsvLayout::Header
                                                                              : CsvLayout::NoHeader;
        if (layout == CsvLayout::NoHeader)
            cols.unnamed_note = concat(" (CsvLayout::Automatic read line ", first.number,
                                       " as data: none of its fields is a name above a number; give "
                                       "CsvLayout::Header if it holds column names)");
    }
    cols.count = CsvFields(first.text, d, first.number, cols.path, cols.who).total();
    if (layout == CsvLayout::Header) {
        cols.header = first.text;
        cols.header_line = first.number;
        cols.named = true;
        CsvFields f(first.text, d, first.number, cols.path, cols.who);
        std::string_view v;
        bool numbers = true;
        while (numbers && f.next(v))
            numbers = is_csv_number(v);
        if (opt.layout == CsvLayout::Header && numbers)
            warnings.push_back(concat(cols.who, ": '", cols.path, "' line ", first.number,
                                      " holds only numbers but was read as column names (CsvLayout::Header), "
                                      "so it is not a sample; if it is data, read the file with "
                                      "CsvLayout::Automatic or CsvLayout::NoHeader"));
    }
    return layout;
}

/// The columns that are not features, sorted by column, from the options: the label (or the targets, or
/// none with features_only) and the dropped columns. Throws naming the option that is contradictory or
/// names a column the file does not have.
inline std::vector<CsvSpecial> csv_special_columns(const CsvOptions& opt, const CsvColumns& cols,
                                                   CsvLayout layout, const CsvLine& first) {
    const char* who = cols.who;
    const std::string& path = cols.path;
    const bool regression = !opt.target_columns.empty() || !opt.target_indices.empty();
    const bool label_defaults = opt.label_column.empty() && opt.label_index == -1 && opt.class_names.empty();
    std::vector<CsvSpecial> out;
    if (opt.features_only) {
        DTRAIN_CHECK(
            label_defaults && !regression, who, ": '", path,
            "': CsvOptions::features_only reads no labels nor targets, so label_column, label_index, "
            "class_names, target_columns and target_indices must keep their defaults");
        DTRAIN_CHECK(
            layout != CsvLayout::Sklearn, who, ": '", path, "' line ", first.number,
            " is a header of scikit-learn's classification layout, whose last column holds class ids; "
            "read the file with labels (CsvOptions::features_only = false)");
    } else if (regression) {
        DTRAIN_CHECK(opt.target_columns.empty() || opt.target_indices.empty(), who, ": '", path,
                     "': give the target columns by name (CsvOptions::target_columns) or by index "
                     "(CsvOptions::target_indices), not both");
        DTRAIN_CHECK(label_defaults, who, ": '", path,
                     "': target columns read float targets instead of class labels, so label_column, "
                     "label_index and class_names must keep their defaults");
        DTRAIN_CHECK(layout != CsvLayout::Sklearn, who, ": '", path, "' line ", first.number,
                     " is a header of scikit-learn's classification layout, whose last column holds class "
                     "ids, not float targets");
        for (const auto& name : opt.target_columns)
            out.push_back({cols.by_name(name, "target column", "give it by index in target_indices"),
                           CsvSpecial::Kind::Target, out.size()});
        for (const long index : opt.target_indices)
            out.push_back(
                {cols.by_index(index, "target_indices entry"), CsvSpecial::Kind::Target, out.size()});
        for (const auto& s : out)
            DTRAIN_CHECK(std::count_if(out.begin(), out.end(),
                                       [&](const CsvSpecial& o) { return o.column == s.column; }) == 1,
                         who, ": '", path, "': ", cols.describe(s.column), " is a target twice");
    } else {
        out.push_back({opt.label_column.empty()
                           ? cols.by_index(opt.label_index, "label_index")
                           : cols.by_name(opt.label_column, "label column", "give it by label_index"),
                       CsvSpecial::Kind::Label, 0});
    }
    for (const auto& dc : opt.drop_columns) {
        const std::size_t c = cols.by_name(dc, "dropped column", "drop_columns needs a header");
        const auto it =
            std::find_if(out.begin(), out.end(), [&](const CsvSpecial& s) { return s.column == c; });
        DTRAIN_CHECK(it == out.end() || it->kind == CsvSpecial::Kind::Dropped, who, ": '", path,
                     "': column '", printable(dc), "' is both dropped and ",
                     regression ? "a target" : "the label");
        if (it == out.end()) out.push_back({c, CsvSpecial::Kind::Dropped, 0});
    }
    std::sort(out.begin(), out.end());
    DTRAIN_CHECK(out.size() < cols.count, who, ": '", path, "' has no feature columns left");
    return out;
}

/// The ids of the label column's distinct values as the options and the layout fix them (class names into
/// `class_names`, rare-label warnings into `warnings`); throws naming the first offending label.
inline std::vector<std::int32_t> csv_label_ids(const CsvLabelColumn& col, const CsvOptions& opt,
                                               CsvLayout layout, const std::vector<std::string>& sk_classes,
                                               std::vector<std::string>& class_names,
                                               std::vector<std::string>& warnings) {
    if (layout == CsvLayout::Sklearn || !opt.class_names.empty()) {
        class_names = layout == CsvLayout::Sklearn && opt.class_names.empty() ? sk_classes : opt.class_names;
        return layout == CsvLayout::Sklearn ? csv_sklearn_labels(col, class_names)
                                            : csv_listed_labels(col, class_names);
    }
    return csv_automatic_labels(col, class_names, warnings);
}

}  // namespace dtrain::detail

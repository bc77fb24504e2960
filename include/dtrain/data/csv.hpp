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
#include <dtrain/core/precompiled.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/data/csv_options.hpp>
#include <dtrain/data/dataset.hpp>
#include <dtrain/data/detail/blocks.hpp>
#include <dtrain/data/detail/byte_source.hpp>
#include <dtrain/data/detail/checked.hpp>
#include <dtrain/data/detail/csv_labels.hpp>
#include <dtrain/data/detail/csv_layout.hpp>
#include <dtrain/data/detail/csv_reader.hpp>
#include <dtrain/data/detail/csv_split.hpp>

namespace dtrain {

namespace detail {

/// Reads the CSV data of `src` (named `path`) as parse_csv() describes, one line at a time: what is held
/// is the values returned (in blocks, then once in the result), the first line (the header) and the
/// current one, and the label column's distinct values (at most CsvOptions::max_classes).
inline Dataset csv_read(ByteSource& src, const std::string& path, const CsvOptions& opt) {
    const char* who = "dtrain::read_csv";
    DTRAIN_CHECK(opt.max_classes > 0, who, ": '", path, "': CsvOptions::max_classes must be at least 1");
    LineReader lines(src);
    std::string_view buf;
    auto next_line = [&](CsvLine& out) {
        while (lines.next(buf))
            if (!is_blank(buf)) {
                out.text.assign(buf.data(), buf.size());
                out.number = lines.line();
                return true;
            }
        return false;
    };
    CsvLine first, second;
    DTRAIN_CHECK(next_line(first), who, ": '", path, "' is empty");
    next_line(second);

    CsvColumns cols;
    cols.delim = opt.delimiter;
    cols.path = path;
    cols.who = who;
    Dataset d;
    const CsvLayout layout = csv_choose_layout(first, second, opt, cols, d.warnings);
    std::vector<std::string> sk_classes;
    std::size_t sk_samples = 0;
    if (layout == CsvLayout::Sklearn) {
        CsvFields h(first.text, opt.delimiter, first.number, path, who);
        std::string_view v;
        long samples = -1, declared = -1;  // each read before the next field replaces a quoted one
        if (h.next(v) && is_small_uint(v)) samples = small_uint_value(v);
        if (samples >= 0 && h.next(v) && is_small_uint(v)) declared = small_uint_value(v);
        DTRAIN_CHECK(cols.count >= 3 && declared >= 0, who, ": '", path, "' line ", first.number,
                     ": not an sklearn header (expected <n_samples>,<n_features>,<class names...>)");
        sk_samples = static_cast<std::size_t>(samples);
        const auto features = static_cast<std::size_t>(declared);
        DTRAIN_CHECK(features > 0, who, ": '", path, "' line ", first.number,
                     ": the sklearn header declares 0 features");
        // Every feature of a row takes at least two bytes (a value and a delimiter).
        DTRAIN_CHECK(second.number != 0 || features <= src.produced() / 2, who, ": '", path, "' line ",
                     first.number, ": the sklearn header declares ", features,
                     " features, but the whole file has only ", src.produced(),
                     " bytes, too few for one row of them");
        while (h.next(v))
            sk_classes.emplace_back(v);
        cols.count = features + 1;
    }
    const bool header = layout != CsvLayout::NoHeader;
    DTRAIN_CHECK(!header || second.number != 0, who, ": '", path, "' has a header (line ", first.number,
                 ") but no data rows");
    const std::size_t min_cols = opt.features_only ? 1 : 2;
    DTRAIN_CHECK(cols.count >= min_cols, who, ": '", path, "' line ", first.number, " has ", cols.count,
                 " column; need at least one feature", opt.features_only ? "" : " and a label or target");
    const auto special = csv_special_columns(opt, cols, layout, first);
    const std::size_t features = cols.count - special.size();
    std::size_t targets = 0;
    for (const auto& s : special)
        targets += s.kind == CsvSpecial::Kind::Target ? 1 : 0;
    const bool labelled = !opt.features_only && targets == 0;

    CsvLabelColumn labels;
    if (labelled) {
        const auto it = std::find_if(special.begin(), special.end(),
                                     [](const CsvSpecial& s) { return s.kind == CsvSpecial::Kind::Label; });
        labels.column = it->column;
        labels.name = cols.name(it->column);
        labels.path = path;
        labels.who = who;
        labels.named = cols.named;
        labels.max_classes = opt.max_classes;
    }
    std::vector<std::string> class_names;
    auto too_many = [&] {
        std::vector<std::string> warnings;
        csv_label_ids(labels, opt, layout, sk_classes, class_names, warnings);
        const auto& e = labels.entries.back();
        labels.fail(e, concat("label '", printable(e.value), "' is the ", labels.entries.size(),
                              "th distinct value of the label column, more than CsvOptions::max_classes (",
                              opt.max_classes,
                              "); raise max_classes if the data has that many classes, or read "
                              "the column as a regression target (CsvOptions::target_columns)"));
    };

    Blocks<float> x, y;
    Blocks<std::uint32_t> keys;
    std::vector<float> row_targets(targets);
    std::size_t rows = 0;
    auto number = [&](std::string_view s, std::size_t line, std::size_t c, const char* kind, float& out) {
        DTRAIN_CHECK(!s.empty(), who, ": '", path, "' line ", line, ", ", cols.describe(c), ": empty ", kind,
                     " value");
        DTRAIN_CHECK(parse_csv_float(s, out), who, ": '", path, "' line ", line, ", ", cols.describe(c),
                     ": non-numeric ", kind, " value '", printable(s), "'");
    };
    auto read_row = [&](std::string_view text, std::size_t line) {
        const std::size_t count = CsvFields(text, opt.delimiter, line, path, who).total();
        DTRAIN_CHECK(
            count == cols.count, who, ": '", path, "' line ", line, ", column ",
            std::min(count, cols.count) + 1, ": ragged row with ", count, " fields, expected ", cols.count,
            layout == CsvLayout::Sklearn ? concat(" (line ", first.number, ", the sklearn header, declares ",
                                                  cols.count - 1, " features and a label)")
            : header                     ? concat(" (as declared by line ", first.number, ")")
                                         : std::string(" (as on the first line)"));
        CsvFields f(text, opt.delimiter, line, path, who);
        std::string_view v;
        std::size_t sp = 0;
        for (std::size_t c = 0; f.next(v); ++c) {
            if (sp < special.size() && special[sp].column == c) {
                const auto& s = special[sp++];
                if (s.kind == CsvSpecial::Kind::Target) {
                    number(v, line, c, "target", row_targets[s.slot]);
                } else if (s.kind == CsvSpecial::Kind::Label) {
                    DTRAIN_CHECK(!v.empty(), who, ": '", path, "' line ", line, ", ", cols.describe(c),
                                 ": empty label");
                    keys.push(labels.add(v, line, too_many));
                }
            } else {
                float value = 0.0f;
                number(v, line, c, "feature", value);
                x.push(value);
            }
        }
        for (float t : row_targets)
            y.push(t);
        ++rows;
    };
    if (!header) read_row(first.text, first.number);
    if (second.number != 0) read_row(second.text, second.number);
    second = CsvLine();
    while (lines.next(buf))
        if (!is_blank(buf)) read_row(buf, lines.line());
    if (layout == CsvLayout::Sklearn)
        DTRAIN_CHECK(rows == sk_samples, who, ": '", path, "' header (line ", first.number, ") declares ",
                     sk_samples, " samples but the file has ", rows, " data rows");

    const Shape shape{rows, features};
    checked_shape_size(shape, who, ": '", path, "'");
    if (labelled) {
        const auto ids = csv_label_ids(labels, opt, layout, sk_classes, class_names, d.warnings);
        d.labels = Labels::from_shape({rows});
        keys.move_to(d.labels.data(), [&](std::uint32_t k) { return ids[k]; });
        d.class_names = std::move(class_names);
    }
    d.features = Tensor<float>::from_shape(shape);
    x.move_to(d.features.data());
    if (targets > 0) {
        d.targets = Tensor<float>::from_shape({rows, targets});
        y.move_to(d.targets.data());
    }
    d.source = path;
    return d;
}

/// Runs `read` and turns std::bad_alloc into a dtrain::Error naming the file.
template <class Read>
Dataset csv_out_of_memory_is_error(const std::string& path, Read&& read) {
    try {
        return read();
    } catch (const std::bad_alloc&) {
        throw Error(concat("dtrain::read_csv: out of memory while reading '", path,
                           "': the data does not fit; read a smaller file or free memory"));
    }
}

}  // namespace detail

/// Parses CSV `text` (named `path` in messages) into a data set with features [N, F] and either int32
/// class labels, or, with options.target_columns / target_indices, float targets [N, k], or, with
/// options.features_only, nothing else (read_csv_features()).
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
/// Integer labels must be below options.max_classes (65536 by default) and string labels may take at most
/// that many distinct values. Numbers too small for a float ("1e-50") read as 0 or a denormal. Values of
/// the file echoed in messages have their control and non-UTF-8 bytes escaped (\\xNN) and are cut after
/// 64 bytes.
///
/// Throws dtrain::Error naming the file, and the line and column where it applies, for: an empty file, a
/// header without data rows, ragged rows, a non-numeric or non-finite feature or target, an empty field, an
/// unknown label, target or dropped column or class, a label column mixing integers and other values or
/// holding floats, contradicting options, and an sklearn header that disagrees with the data or declares
/// more features than the file has bytes for, a label of max_classes or more, more than max_classes distinct
/// labels, and (as read_csv()) text beyond options.max_text_bytes or too little memory for the result.
DTRAIN_INLINE Dataset parse_csv(const std::string& text, const std::string& path, const CsvOptions& opt = {});

/// Reads the CSV file `path` (gzip-compressed or plain text) as described at parse_csv(), streaming: the
/// file is read and decompressed in pieces and parsed one line at a time, so the memory used is about twice
/// the returned values, plus the longest line, the header and the label column's distinct values. More than
/// options.max_text_bytes bytes of text (after decompression) is an error naming the file and the option.
/// Reads both scikit-learn's bundled iris.csv (first line "150,4,setosa,versicolor,virginica", integer
/// labels) and a Kaggle-style Iris CSV with a header and string species (the repository's data/iris.csv)
/// with the default options. Throws dtrain::Error naming the file when it is missing or unreadable, and
/// when memory runs out.
DTRAIN_INLINE Dataset read_csv(const std::string& path, const CsvOptions& opt = {});

/// Reads the features of the CSV file `path` only, for a file to predict on that has no label or target
/// column: read_csv() with options.features_only set (every column not in options.drop_columns is a
/// feature). The result's features can be scaled as the training split's were, e.g. with
/// Standardizer::from_state() of the statistics kept in a model file's extras. Throws as read_csv().
inline Dataset read_csv_features(const std::string& path, CsvOptions opt = {}) {
    opt.features_only = true;
    return read_csv(path, opt);
}

#if DTRAIN_HEADER_DEFINITIONS

DTRAIN_INLINE Dataset parse_csv(const std::string& text, const std::string& path, const CsvOptions& opt) {
    return detail::csv_out_of_memory_is_error(path, [&] {
        detail::ByteSource src(text, path, "dtrain::read_csv", opt.max_text_bytes,
                               "CsvOptions::max_text_bytes");
        return detail::csv_read(src, path, opt);
    });
}

DTRAIN_INLINE Dataset read_csv(const std::string& path, const CsvOptions& opt) {
    return detail::csv_out_of_memory_is_error(path, [&] {
        detail::ByteSource src(path, "dtrain::read_csv", opt.max_text_bytes, "CsvOptions::max_text_bytes");
        return detail::csv_read(src, path, opt);
    });
}

#endif

}  // namespace dtrain

#pragma once

#include <cstddef>
#include <string>
#include <vector>

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
    /// Features only, for files to predict on: every column not dropped is a feature and the result holds
    /// no labels nor targets (Dataset::has_labels() is false). label_column, label_index, class_names and
    /// the target columns must then keep their defaults. read_csv_features() sets it.
    bool features_only = false;
    /// The most classes a label column may make: integer labels must be below it (a label of 999999999
    /// would otherwise make 10^9 classes) and string labels may take at most this many distinct values.
    /// Raise it for data with more classes.
    std::size_t max_classes = 65536;
    /// The most bytes of text read from the file, after decompression: a gzip file of kilobytes can hold
    /// gigabytes. More is an error naming the file and this option. Memory stays about twice the returned
    /// values plus the longest line whatever the limit, so it bounds time more than memory.
    std::size_t max_text_bytes = std::size_t(4) << 30;
};

}  // namespace dtrain

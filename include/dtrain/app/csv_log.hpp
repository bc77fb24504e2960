#pragma once

/// @file
/// A CSV metrics log for training programs (application helper, target dtrain::app).

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include <dtrain/core/error.hpp>

namespace dtrain {

/// A CSV metrics log: a header line of column names, then one row of numbers per call to row() (e.g. one
/// per epoch), flushed at once so the file is usable while training runs (and by scripts/plot). Only the
/// rank that constructs it with `active` = true writes (rank 0); on other ranks every call does nothing,
/// so programs call it unconditionally. Numbers are written with up to 8 significant digits; a non-finite
/// value is written as "nan".
class CsvLog {
public:
    /// An inactive log with no columns: row() accepts any values and writes nothing.
    CsvLog() = default;

    /// Opens (truncates) `path` and writes the header when `active`; throws dtrain::Error naming the path
    /// when it cannot be opened, or when `columns` is empty or a column name contains a comma or quote.
    CsvLog(const std::string& path, std::vector<std::string> columns, bool active = true)
        : columns_(std::move(columns)), active_(active) {
        DTRAIN_CHECK(!columns_.empty(), "CsvLog: no columns for '", path, "'");
        for (const auto& c : columns_)
            DTRAIN_CHECK(!c.empty() && c.find_first_of(",\"\n") == std::string::npos,
                         "CsvLog: bad column name '", c, "' for '", path, "'");
        if (!active_) return;
        file_.open(path, std::ios::trunc);
        DTRAIN_CHECK(file_.good(), "CsvLog: cannot open '", path, "' for writing");
        for (std::size_t i = 0; i < columns_.size(); ++i)
            file_ << (i ? "," : "") << columns_[i];
        file_ << '\n' << std::flush;
        path_ = path;
    }

    /// True when this log writes.
    bool active() const { return active_; }

    /// Number of columns.
    std::size_t columns() const { return columns_.size(); }

    /// Appends one row; `values` must have one number per column (checked, also when inactive, unless the
    /// log was default-constructed).
    void row(std::initializer_list<double> values) { row(values.begin(), values.size()); }

    /// Appends one row from `n` values at `values`.
    void row(const double* values, std::size_t n) {
        DTRAIN_CHECK(columns_.empty() || n == columns_.size(), "CsvLog: row of ", n, " values but ",
                     columns_.size(), " columns");
        if (!active_) return;
        char buf[64];
        for (std::size_t i = 0; i < n; ++i) {
            if (std::isfinite(values[i]))
                std::snprintf(buf, sizeof buf, "%.8g", values[i]);
            else
                std::snprintf(buf, sizeof buf, "nan");
            file_ << (i ? "," : "") << buf;
        }
        file_ << '\n' << std::flush;
        DTRAIN_CHECK(file_.good(), "CsvLog: writing '", path_, "' failed");
    }

private:
    std::vector<std::string> columns_;
    bool active_ = false;
    std::ofstream file_;
    std::string path_;
};

}  // namespace dtrain

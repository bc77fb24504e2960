// Fuzz test of every reader in include/dtrain/data: IDX (raw and gzip), CIFAR-10 binary batches (raw and
// gzip) and CSV in its layouts. From small valid seed files it writes, deterministically: every truncation,
// single-byte flips (every position of the small seeds, a seeded sample of the large ones, three masks
// each), size fields set to huge or overflowing values, an empty file, a directory and a missing file. Each
// case must end in a clean load that agrees with what the file declares (sizes, counts, label range, every
// value) or in a dtrain::Error naming the file; never a crash, another exception type, or an allocation
// over 64 MiB (or 256 MiB live): this program replaces operator new with tests/support/fuzz.hpp's limit.
#define DTRAIN_FUZZ_REPLACE_NEW
#include <support/fuzz.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <zlib.h>

#include <dtrain/data/cifar.hpp>
#include <dtrain/data/csv.hpp>
#include <dtrain/data/idx.hpp>

#include "data_test_utils.hpp"

using dtrain::test::gzip_bytes;
using dtrain::test::idx_bytes;
using dtrain::test::random_bytes;
using dtrain::test::TempDir;
using dtrain::test::fuzz::AllocationLimit;
using dtrain::test::fuzz::Bytes;
using dtrain::test::fuzz::Report;

namespace fuzz = dtrain::test::fuzz;

namespace {

/// The decompressed content of a gzip file of one or more members (the reference the loaders must agree
/// with), or false when `gz` is not a sequence of valid members and nothing else.
bool gunzip_members(const Bytes& gz, Bytes& out) {
    z_stream zs{};
    if (inflateInit2(&zs, 15 + 16) != Z_OK) return false;
    out.assign(gz.size() * 16 + 65536, 0);  // plenty for these seeds, which hardly compress
    zs.next_in = const_cast<Bytef*>(gz.data());
    zs.avail_in = static_cast<uInt>(gz.size());
    zs.next_out = out.data();
    zs.avail_out = static_cast<uInt>(out.size());
    int rc = Z_OK;
    while ((rc = inflate(&zs, Z_FINISH)) == Z_STREAM_END && zs.avail_in >= 2 && zs.next_in[0] == 0x1f &&
           zs.next_in[1] == 0x8b)
        inflateReset(&zs);
    out.resize(out.size() - zs.avail_out);  // not total_out: inflateReset clears it
    const bool ok = rc == Z_STREAM_END && zs.avail_in == 0;
    inflateEnd(&zs);
    return ok;
}

/// What a file holds once decompressed the way the readers do; false when it is damaged gzip.
bool content(const Bytes& file, Bytes& out) {
    if (file.size() >= 2 && file[0] == 0x1f && file[1] == 0x8b) return gunzip_members(file, out);
    out = file;
    return true;
}

dtrain::Shape shape_of(const dtrain::Dataset& d) {
    return dtrain::Shape(d.features.shape().begin(), d.features.shape().end());
}

std::uint32_t be32(const Bytes& b, std::size_t at) {
    return (std::uint32_t(b[at]) << 24) | (std::uint32_t(b[at + 1]) << 16) | (std::uint32_t(b[at + 2]) << 8) |
           b[at + 3];
}

/// "" when the loaded images and labels are exactly what the two IDX files declare and hold.
std::string idx_agrees(const dtrain::Dataset& d, const Bytes& image_file, const Bytes& label_file) {
    Bytes img, lab;
    if (!content(image_file, img) || !content(label_file, lab)) return "a file is not valid gzip";
    if (img.size() < 16 || lab.size() < 8) return "a file is shorter than its IDX header";
    const std::size_t n = be32(img, 4), h = be32(img, 8), w = be32(img, 12);
    if (be32(img, 0) != 0x803 || be32(lab, 0) != 0x801) return "wrong magic numbers";
    if (shape_of(d) != dtrain::Shape{n, 1, h, w}) return "the shape differs from the header's";
    std::size_t values = 0;  // no wrap-around here: dimensions whose product overflows disagree with any file
    if (__builtin_mul_overflow(n, h, &values) || __builtin_mul_overflow(values, w, &values))
        return "the dimensions' product overflows";
    if (img.size() != 16 + values || lab.size() != 8 + n || be32(lab, 4) != n) return "sizes disagree";
    for (std::size_t i = 0; i < n * h * w; ++i)
        if (d.features.data()[i] != float(img[16 + i]) / 255.0f)
            return "pixel " + std::to_string(i) + " differs";
    for (std::size_t i = 0; i < n; ++i)
        if (d.labels(i) != lab[8 + i] || lab[8 + i] >= 10) return "label " + std::to_string(i) + " differs";
    return "";
}

/// "" when the loaded data set is exactly the CIFAR-10 records the file holds.
std::string cifar_agrees(const dtrain::Dataset& d, const Bytes& file) {
    Bytes b;
    if (!content(file, b)) return "the file is not valid gzip";
    const std::size_t rec = dtrain::cifar10_record_bytes, n = b.size() / rec;
    if (b.empty() || b.size() % rec != 0) return "the file is not a whole number of records";
    if (shape_of(d) != dtrain::Shape{n, 3, 32, 32} || d.size() != n) return "the shape differs";
    for (std::size_t r = 0; r < n; ++r) {
        if (d.labels(r) != b[r * rec] || b[r * rec] >= 10) return "label of record " + std::to_string(r);
        for (std::size_t j = 0; j + 1 < rec; ++j)
            if (d.features.data()[r * (rec - 1) + j] != float(b[r * rec + 1 + j]) / 255.0f)
                return "pixel " + std::to_string(j) + " of record " + std::to_string(r);
    }
    return "";
}

/// A CSV seed: its text and the options it is read with.
struct CsvSeed {
    std::string name, text;
    dtrain::CsvOptions options;
};

/// The non-blank lines of a CSV file.
std::vector<std::string> csv_lines(const Bytes& file) {
    std::vector<std::string> lines;
    for (std::size_t pos = 0; pos < file.size();) {
        std::size_t end = pos;
        while (end < file.size() && file[end] != '\n')
            ++end;
        std::string line(file.begin() + static_cast<std::ptrdiff_t>(pos),
                         file.begin() + static_cast<std::ptrdiff_t>(end));
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find_first_not_of(" \t") != std::string::npos) lines.push_back(line);
        pos = end + 1;
    }
    return lines;
}

/// The number of comma-separated fields of `line`, commas inside double quotes not counting.
std::size_t csv_fields(const std::string& line) {
    std::size_t n = 1;
    bool quoted = false;
    for (char c : line)
        if (c == '"')
            quoted = !quoted;
        else if (c == ',' && !quoted)
            ++n;
    return n;
}

/// The comma-separated fields of `line`, commas inside double quotes not splitting, each trimmed of spaces,
/// tabs and surrounding quotes.
std::vector<std::string> csv_split_fields(const std::string& line) {
    std::vector<std::string> fields(1);
    bool quoted = false;
    for (char c : line)
        if (c == '"')
            quoted = !quoted;
        else if (c == ',' && !quoted)
            fields.emplace_back();
        else
            fields.back().push_back(c);
    for (auto& f : fields) {
        const auto b = f.find_first_not_of(" \t"), e = f.find_last_not_of(" \t");
        f = b == std::string::npos ? std::string() : f.substr(b, e - b + 1);
    }
    return fields;
}

/// True when `s` is one finite decimal number (the oracle's own reading, by strtod).
bool csv_number(const std::string& s) {
    if (s.empty() || s.find_first_not_of("0123456789+-.eE") != std::string::npos) return false;
    char* end = nullptr;
    const float v = std::strtof(s.c_str(), &end);
    return end == s.c_str() + s.size() && std::isfinite(v);
}

/// True when CsvLayout::Automatic reads the first of `lines` as data: none of its fields is a non-number
/// above a number on the second line (with one line: all its fields are numbers).
bool first_line_is_data(const std::vector<std::string>& lines) {
    const auto h = csv_split_fields(lines[0]);
    if (lines.size() < 2) return std::all_of(h.begin(), h.end(), csv_number);
    const auto d = csv_split_fields(lines[1]);
    for (std::size_t c = 0; c < std::min(h.size(), d.size()); ++c)
        if (!csv_number(h[c]) && csv_number(d[c])) return false;
    return true;
}

/// "" when a CSV data set agrees with its file: one sample per non-blank line after the header (none when
/// the automatic layout finds the first line to be data), as many features as the first data line has
/// fields less the label and the dropped columns, finite features, labels within the class names (or
/// non-negative ids without them).
std::string csv_agrees(const dtrain::Dataset& d, const Bytes& file, const CsvSeed& seed) {
    const auto lines = csv_lines(file);
    const auto layout = seed.options.layout;
    const bool data_first = layout == dtrain::CsvLayout::NoHeader ||
                            (layout == dtrain::CsvLayout::Automatic && first_line_is_data(lines));
    const std::size_t header = data_first ? 0 : 1;
    if (d.size() + header != lines.size())
        return std::to_string(d.size()) + " samples from " + std::to_string(lines.size()) + " lines";
    const std::size_t features = csv_fields(lines[header]) - 1 - seed.options.drop_columns.size();
    if (shape_of(d) != dtrain::Shape{d.size(), features}) return "the feature count differs";
    for (auto v : d.features)
        if (!std::isfinite(v)) return "a feature is not finite";
    for (auto y : d.labels)
        if (y < 0 || (!d.class_names.empty() && std::size_t(y) >= d.class_names.size()))
            return "label " + std::to_string(y) + " is out of range";
    // Class names not taken from an sklearn header nor given are the column's strings, which must not mix
    // with integer class ids.
    std::vector<std::string> first(1);
    for (char c : lines[0])
        if (c == ',')
            first.emplace_back();
        else
            first.back().push_back(c);
    const bool from_header = first.size() >= 2 && std::equal(first.begin() + 2, first.end(),
                                                             d.class_names.begin(), d.class_names.end());
    if (!from_header && seed.options.class_names.empty())
        for (const auto& c : d.class_names)
            if (!c.empty() && c.size() <= 9 && c.find_first_not_of("0123456789") == std::string::npos)
                return "class '" + c + "' is an integer among string labels";
    return "";
}

/// Runs every truncation (all lengths), flips (at `flips` positions) and appended tail of `seed`, written to
/// `path`.
template <class Load>
void mutate(Report& report, AllocationLimit& limit, const Bytes& seed, const std::string& path,
            const std::string& tag, const std::vector<std::size_t>& flips, Load&& load) {
    auto one = [&](Bytes bytes, const std::string& what) {
        fuzz::write_file(path, bytes);
        fuzz::run_case(report, limit, tag + " " + what, path, [&] { return load(bytes); });
    };
    fuzz::for_each_truncation(seed, fuzz::positions(seed.size(), seed.size(), 0), one);
    fuzz::for_each_flip(seed, flips, one);
    fuzz::for_each_append(seed, one);
}

/// Rejects an empty file, a missing file and a directory at `path` (made and removed here).
template <class Load>
void degenerate(Report& report, AllocationLimit& limit, const std::string& path, const std::string& tag,
                Load&& load) {
    auto expect_error = [&] {
        load(Bytes{});
        return std::string("it loaded");
    };
    fuzz::write_file(path, {});
    fuzz::run_case(report, limit, tag + " empty file", path, expect_error);
    std::filesystem::remove(path);
    fuzz::run_case(report, limit, tag + " missing file", path, expect_error);
    std::filesystem::create_directory(path);
    fuzz::run_case(report, limit, tag + " directory", path, expect_error);
    std::filesystem::remove(path);
}

}  // namespace

TEST_CASE("Fuzzed IDX files load exactly what they declare or fail with dtrain::Error", "[data][fuzz][idx]") {
    TempDir dir("fuzz_idx");
    AllocationLimit limit;
    Report report;
    dtrain::Rng rng(21);
    const Bytes images = idx_bytes({3, 4, 5}, random_bytes(60, rng)), labels = idx_bytes({3}, {0, 9, 4});
    const auto ip = dir.file("images"), lp = dir.file("labels");
    Bytes image_file, label_file;  // what ip and lp hold
    auto load = [&](const Bytes&) {
        return idx_agrees(dtrain::load_idx(ip, lp, dtrain::fashion_mnist_class_names()), image_file,
                          label_file);
    };
    auto images_are = [&](const Bytes& b) {
        image_file = b;
        return load(b);
    };
    auto labels_are = [&](const Bytes& b) {
        label_file = b;
        return load(b);
    };
    auto pair = [&](const Bytes& img, const Bytes& lab, const std::string& what, const std::string& named) {
        fuzz::write_file(ip, image_file = img);
        fuzz::write_file(lp, label_file = lab);
        fuzz::run_case(report, limit, what, named, [&] { return load(img); });
    };
    for (bool gz : {false, true}) {
        const Bytes gi = gz ? gzip_bytes(images) : images, gl = gz ? gzip_bytes(labels) : labels;
        const std::string kind = gz ? "gzip" : "raw";
        fuzz::write_file(ip, image_file = gi);
        fuzz::write_file(lp, label_file = gl);
        CHECK(load(gi) == "");  // the seeds load
        mutate(report, limit, gi, ip, kind + " images", fuzz::positions(gi.size(), gi.size(), 0), images_are);
        degenerate(report, limit, ip, kind + " images", images_are);
        fuzz::write_file(ip, image_file = gi);
        mutate(report, limit, gl, lp, kind + " labels", fuzz::positions(gl.size(), gl.size(), 0), labels_are);
        degenerate(report, limit, lp, kind + " labels", labels_are);
        if (gz)  // the gzip trailer's declared size (ISIZE), huge or wrong
            for (auto v : fuzz::hostile_u32())
                pair(fuzz::with_u32(gi, gi.size() - 4, v, false), gl, "gzip ISIZE " + std::to_string(v), ip);
    }
    // Every field of both headers set to huge or overflowing values, and dimensions whose product wraps.
    for (std::size_t at : {0, 4, 8, 12})
        for (auto v : fuzz::hostile_u32())
            pair(fuzz::with_u32(images, at, v, true), labels,
                 "images field at " + std::to_string(at) + " = " + std::to_string(v), ip);
    for (std::size_t at : {0, 4})
        for (auto v : fuzz::hostile_u32())
            pair(images, fuzz::with_u32(labels, at, v, true),
                 "labels field at " + std::to_string(at) + " = " + std::to_string(v), lp);
    const std::vector<std::vector<std::uint32_t>> wrapping = {{571, 1925585868u, 16777248u},
                                                              {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu},
                                                              {65536, 65536, 65536},
                                                              {0x10000001u, 16, 16}};
    for (const auto& dims : wrapping)  // with as many labels as the first dimension says, when it can
        pair(idx_bytes(dims, Bytes(128, 7)),
             dims[0] < 1000 ? idx_bytes({dims[0]}, Bytes(dims[0], 1)) : labels,
             "dimensions " + dtrain::detail::shape_str(dims), ip);
    INFO(report.summary());
    CHECK(report.failed == 0);
    CHECK(report.cases > 900);
    CHECK(report.loaded > 100);  // pixel flips in raw files are valid data
    CHECK(report.rejected > report.loaded);
}

TEST_CASE("Fuzzed CIFAR-10 batches load exactly their records or fail with dtrain::Error",
          "[data][fuzz][cifar]") {
    TempDir dir("fuzz_cifar");
    AllocationLimit limit;
    Report report;
    dtrain::Rng rng(22);
    Bytes records;
    for (int r = 0; r < 2; ++r) {
        records.push_back(static_cast<unsigned char>(3 + 6 * r));
        const auto px = random_bytes(3072, rng);
        records.insert(records.end(), px.begin(), px.end());
    }
    const auto path = dir.file("test_batch.bin");
    auto load = [&](const Bytes& b) {
        return cifar_agrees(dtrain::load_cifar10(dir.str(), dtrain::Split::Test), b);
    };
    for (bool gz : {false, true}) {
        const Bytes seed = gz ? gzip_bytes(records) : records;
        const std::string kind = gz ? "gzip" : "raw";
        fuzz::write_file(path, seed);
        CHECK(load(seed) == "");
        // Every truncation; flips at 600 of the ~6150 positions (headers, trailers, both labels included).
        auto at = fuzz::positions(seed.size(), 600, gz ? 2 : 1);
        at.push_back(dtrain::cifar10_record_bytes);  // the second record's label
        mutate(report, limit, seed, path, kind, at, load);
        degenerate(report, limit, path, kind, load);
        if (gz)
            for (auto v : fuzz::hostile_u32()) {
                const auto b = fuzz::with_u32(seed, seed.size() - 4, v, false);
                fuzz::write_file(path, b);
                fuzz::run_case(report, limit, "gzip ISIZE " + std::to_string(v), path,
                               [&] { return load(b); });
            }
    }
    // Several batch files, one of them damaged: the error names that one.
    const auto second = dir.file("second.bin");
    fuzz::write_file(path, records);
    fuzz::write_file(second, Bytes(records.begin(), records.end() - 1));
    fuzz::run_case(report, limit, "second of two files cut", second, [&] {
        dtrain::read_cifar10_batches({path, second});
        return std::string("it loaded");
    });
    INFO(report.summary());
    CHECK(report.failed == 0);
    CHECK(report.cases > 10000);
    CHECK(report.loaded > 100);
    CHECK(report.rejected > report.loaded);
}

TEST_CASE("Fuzzed CSV files load what their lines hold or fail with dtrain::Error", "[data][fuzz][csv]") {
    TempDir dir("fuzz_csv");
    AllocationLimit limit;
    Report report;
    std::vector<CsvSeed> seeds(4);
    seeds[0] = {"kaggle",
                "Id,SepalLengthCm,SepalWidthCm,PetalLengthCm,PetalWidthCm,Species\n"
                "1,5.1,3.5,1.4,0.2,Iris-setosa\n51,7.0,3.2,4.7,1.4,Iris-versicolor\n"
                "101,6.3,3.3,6.0,2.5,Iris-virginica\n",
                {}};
    seeds[0].options.label_column = "Species";
    seeds[0].options.drop_columns = {"Id"};
    seeds[1] = {"sklearn",
                "3,4,setosa,versicolor,virginica\n5.1,3.5,1.4,0.2,0\n7.0,3.2,4.7,1.4,1\n6.3,3.3,6.0,2.5,2\n",
                {}};
    seeds[2] = {"headerless", "5.1,3.5,1.4,0.2,0\n7.0,3.2,4.7,1.4,1\n6.3,3.3,6.0,2.5,2\n", {}};
    seeds[2].options.layout = dtrain::CsvLayout::NoHeader;
    seeds[3] = {"quoted", "\"a\",b,label\r\n1,2.5,\"x, y\"\r\n\r\n3,-4e1,z\r\n", {}};
    const auto path = dir.file("data.csv");
    for (const auto& seed : seeds) {
        const Bytes bytes(seed.text.begin(), seed.text.end());
        auto load = [&](const Bytes& b) { return csv_agrees(dtrain::read_csv(path, seed.options), b, seed); };
        fuzz::write_file(path, bytes);
        CHECK(load(bytes) == "");
        mutate(report, limit, bytes, path, seed.name, fuzz::positions(bytes.size(), bytes.size(), 0), load);
        degenerate(report, limit, path, seed.name, load);
        fuzz::write_file(path, gzip_bytes(bytes));  // the same text compressed
        fuzz::run_case(report, limit, seed.name + " gzip", path, [&] { return load(bytes); });
    }
    // Size fields of the sklearn header and labels set to huge, negative or overflowing values, read as
    // sklearn (detected and forced) and headerless; also the header alone ("1,999999999,a,b").
    CsvSeed forced{"forced sklearn", "", {}};
    forced.options.layout = dtrain::CsvLayout::Sklearn;
    const std::vector<std::string> hostile = {"0",          "1",          "999999999",
                                              "2147483648", "4294967296", "18446744073709551616",
                                              "-1",         "1e99",       "99999999999999999999"};
    for (const auto& v : hostile)
        for (int field = 0; field < 3; ++field) {
            std::string t = field == 0   ? v + ",4,setosa,versicolor,virginica\n"
                            : field == 1 ? "3," + v + ",setosa,versicolor,virginica\n"
                                         : "3,4,setosa,versicolor,virginica\n";
            t += "5.1,3.5,1.4,0.2,0\n7.0,3.2,4.7,1.4," + (field == 2 ? v : "1") + "\n6.3,3.3,6.0,2.5,2\n";
            const Bytes b(t.begin(), t.end());
            const Bytes head(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(t.find('\n')));
            for (const auto& seed : {seeds[1], forced, seeds[2]})
                for (const auto& bytes : {b, head}) {
                    fuzz::write_file(path, bytes);
                    fuzz::run_case(
                        report, limit, seed.name + " field " + std::to_string(field) + " = " + v, path,
                        [&] { return csv_agrees(dtrain::read_csv(path, seed.options), bytes, seed); });
                }
        }
    INFO(report.summary());
    CHECK(report.failed == 0);
    CHECK(report.cases > 1400);
    CHECK(report.loaded > 100);
    CHECK(report.rejected > report.loaded);
}

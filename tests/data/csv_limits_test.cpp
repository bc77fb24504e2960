// read_csv at its limits: numbers too small for a float, labels that would make too many classes, bytes of
// damaged files in messages, text beyond CsvOptions::max_text_bytes, and files without a label column read
// for prediction (features only, scaled with statistics kept in a model file's extras).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include <dtrain/data/csv.hpp>
#include <dtrain/data/transform.hpp>
#include <dtrain/distributed/model_file.hpp>

#include "data_test_utils.hpp"

using Catch::Contains;
using dtrain::CsvOptions;
using dtrain::test::TempDir;
using dtrain::test::write_bytes;
using dtrain::test::write_text;

namespace {

/// The message of the dtrain::Error that reading `path` with `o` throws ("" when it loads).
std::string read_error(const std::string& path, const CsvOptions& o = {}) {
    try {
        dtrain::read_csv(path, o);
    } catch (const dtrain::Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("CSV numbers too small for a float read as 0 or a denormal; too large ones are errors",
          "[data][csv][limits]") {
    TempDir dir("csv_tiny");
    const auto path = dir.file("tiny.csv");
    write_text(path,
               "a,b,label\n1e-50,-1e-50,x\n1e-45,0.0000000000000000000000000000000000000000000014,y\n"
               "1e-400,3.4e38,x\n");
    const auto d = dtrain::read_csv(path);
    REQUIRE(d.features.shape() == dtrain::Shape{3, 2});
    CHECK(d.features(0, 0) == 0.0f);
    CHECK(d.features(0, 1) == 0.0f);
    CHECK(std::signbit(d.features(0, 1)));
    CHECK(d.features(1, 0) > 0.0f);  // the smallest denormal float, about 1.4e-45
    CHECK(d.features(1, 0) < 1e-44f);
    CHECK(d.features(1, 1) == d.features(1, 0));
    CHECK(d.features(2, 0) == 0.0f);
    CHECK(d.features(2, 1) == 3.4e38f);
    for (const char* big : {"3.5e38", "1e39", "-1e400", "100000000000000000000000000000000000000000"}) {
        write_text(path, std::string("a,b,label\n1,") + big + ",x\n");
        CHECK_THAT(read_error(path),
                   Contains("line 2, column 2 ('b'): non-numeric feature value '" + std::string(big) + "'"));
    }
}

TEST_CASE("CSV integer labels must be below CsvOptions::max_classes", "[data][csv][limits]") {
    TempDir dir("csv_max_classes");
    const auto path = dir.file("labels.csv");
    write_text(path, "a,label\n1,0\n2,999999999\n3,1\n");
    CHECK_THAT(read_error(path), Contains(path + "' line 3, column 2 ('label'): label 999999999 is not below "
                                                 "CsvOptions::max_classes (65536)") &&
                                     Contains("1000000000 classes"));
    CsvOptions o;
    o.max_classes = 1000000000;
    const auto d = dtrain::read_csv(path, o);
    CHECK(d.labels(1) == 999999999);
    CHECK(d.num_classes() == 1000000000);
    o.max_classes = 2;
    CHECK_THAT(read_error(path, o), Contains("label 999999999 is not below CsvOptions::max_classes (2)"));
    // String labels: at most max_classes distinct values; the message names the first one too many.
    write_text(path, "a,label\n1,x\n2,y\n3,x\n4,z\n5,w\n");
    o.max_classes = 3;
    CHECK_THAT(read_error(path, o),
               Contains("line 6, column 2 ('label'): label 'w' is the 4th distinct value") &&
                   Contains("CsvOptions::max_classes (3)"));
    o.max_classes = 4;
    CHECK(dtrain::read_csv(path, o).class_names == std::vector<std::string>{"w", "x", "y", "z"});
    // A column of measurements with more distinct values than classes allowed still says what it is.
    write_text(path, "a,label\n1,1.5\n2,2.5\n3,3.5\n");
    o.max_classes = 2;
    CHECK_THAT(read_error(path, o), Contains("holds non-integer numbers") && Contains("target_columns"));
    o.max_classes = 0;
    CHECK_THAT(read_error(path, o), Contains("CsvOptions::max_classes must be at least 1"));
}

TEST_CASE("CSV messages escape the bytes of damaged files and cut long values", "[data][csv][limits]") {
    TempDir dir("csv_escape");
    const auto path = dir.file("binary.csv");
    write_text(path, std::string("a,b,label\n1,\x01\xff\xfe"
                                 "abc\x1b[2J,x\n"));
    const std::string m = read_error(path);
    CHECK_THAT(m, Contains("non-numeric feature value '\\x01\\xFF\\xFEabc\\x1B[2J'"));
    CHECK(m.find('\x01') == std::string::npos);
    CHECK(m.find('\x1b') == std::string::npos);
    // UTF-8 text stays readable; a backslash is doubled.
    write_text(path, "Größe,b,label\n1,\\x41,x\n");
    CHECK_THAT(read_error(path), Contains("column 2 ('b'): non-numeric feature value '\\\\x41'"));
    write_text(path, "Größe,b,label\nzu groß,1,x\n");
    CHECK_THAT(read_error(path), Contains("column 1 ('Größe'): non-numeric feature value 'zu groß'"));
    // A long value is cut after 64 bytes and its length given.
    write_text(path, "a,b,label\n1," + std::string(100000, 'z') + ",x\n");
    const std::string l = read_error(path);
    CHECK_THAT(l, Contains("'" + std::string(64, 'z') + "... (100000 bytes)'"));
    CHECK(l.size() < 400);
    // Labels are escaped too.
    CsvOptions o;
    o.class_names = {"x", "y"};
    write_text(path, std::string("a,label\n1,x\n2,\x7f\x80q\n"));
    CHECK_THAT(read_error(path, o), Contains("label '\\x7F\\x80q' is not one of the given class names"));
}

TEST_CASE("CSV text beyond CsvOptions::max_text_bytes is an error naming the file and the option",
          "[data][csv][limits]") {
    TempDir dir("csv_max_text");
    std::string text = "a,b,label\n";
    while (text.size() < (std::size_t(1) << 20))
        text += "1,2,x\n";
    const auto plain = dir.file("big.csv"), gz = dir.file("big.csv.gz");
    write_text(plain, text);
    write_bytes(gz, dtrain::test::gzip_bytes(std::vector<unsigned char>(text.begin(), text.end())));
    CHECK(dtrain::read_csv(gz).size() == (text.size() - 10) / 6);
    CsvOptions o;
    o.max_text_bytes = 100000;
    CHECK_THAT(read_error(gz, o), Contains("dtrain::read_csv: '" + gz +
                                           "' holds more than 100000 bytes once "
                                           "decompressed") &&
                                      Contains("CsvOptions::max_text_bytes"));
    CHECK_THAT(read_error(plain, o), Contains("'" + plain + "' holds more than 100000 bytes") &&
                                         Contains("CsvOptions::max_text_bytes"));
    o.max_text_bytes = text.size();  // exactly the file: allowed
    CHECK(dtrain::read_csv(gz, o).size() == (text.size() - 10) / 6);
    CHECK(dtrain::read_csv(plain, o).size() == (text.size() - 10) / 6);
}

TEST_CASE("CSV files without a label column read as features only, scaled with a model file's statistics",
          "[data][csv][limits]") {
    TempDir dir("csv_features");
    const auto train = dir.file("train.csv"), rows = dir.file("rows.csv"), bare = dir.file("bare.csv");
    write_text(train,
               "sepal_length,sepal_width,species\n5.1,3.5,setosa\n7.0,3.2,versicolor\n"
               "6.3,3.3,virginica\n4.9,3.0,setosa\n");
    write_text(rows, "sepal_length,sepal_width\n7.0,3.2\n4.9,3.0\n");
    write_text(bare, "7.0,3.2\n4.9,3.0\n");
    const auto t = dtrain::read_csv(train);
    dtrain::Standardizer z;
    z.fit(t.features);
    dtrain::ModelExtras extras;  // what save_model() keeps next to the model
    extras.arrays["standardizer"] = z.state();

    for (const auto& path : {rows, bare}) {
        INFO(path);
        auto d = dtrain::read_csv_features(path);
        CHECK(!d.has_labels());
        CHECK(!d.has_targets());
        CHECK(d.size() == 2);
        CHECK(d.class_names.empty());
        REQUIRE(d.features.shape() == dtrain::Shape{2, 2});
        dtrain::Standardizer::from_state(extras.arrays.at("standardizer")).apply(d.features);
        auto expect = t.features;
        z.apply(expect);
        for (std::size_t j = 0; j < 2; ++j) {
            CHECK(d.features(0, j) == expect(1, j));
            CHECK(d.features(1, j) == expect(3, j));
        }
    }
    // A labelled file read for prediction: its label column is dropped by name.
    CsvOptions drop;
    drop.drop_columns = {"species"};
    const auto f = dtrain::read_csv_features(train, drop);
    CHECK(f.features.shape() == dtrain::Shape{4, 2});
    CHECK(!f.has_labels());
    // Label or target options contradict features_only.
    CsvOptions o;
    o.features_only = true;
    o.label_column = "sepal_width";
    CHECK_THAT(read_error(rows, o), Contains("features_only reads no labels nor targets"));
    o = CsvOptions();
    o.features_only = true;
    o.target_indices = {-1};
    CHECK_THAT(read_error(rows, o), Contains("features_only reads no labels nor targets"));
    // One column is enough for features only; none left is an error.
    write_text(bare, "x\n1\n2\n");
    CHECK(dtrain::read_csv_features(bare).features.shape() == dtrain::Shape{2, 1});
    drop.drop_columns = {"x"};
    CHECK_THAT(read_error(bare,
                          [&] {
                              auto p = drop;
                              p.features_only = true;
                              return p;
                          }()),
               Contains("has no feature columns left"));
}

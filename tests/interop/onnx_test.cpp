// export_onnx(): what it refuses and how it writes files. The comparison with ONNX Runtime is the ctest
// interop.onnx_runtime (run_onnx_test.sh).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <dtrain/nn.hpp>
#include <dtrain/nn/onnx.hpp>
#include <support/test_utils.hpp>

#include "onnx_models.hpp"

namespace {

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

bool contains(const std::string& bytes, const std::string& part) {
    return bytes.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("export_onnx names a layer without an ONNX form and its place, and writes nothing",
          "[interop][onnx]") {
    const std::string path = dtrain::test::shared_temp_path("dtrain_onnx", "refused.onnx");
    std::filesystem::remove(path);
    dtrain::Model<float> m({8}, 1);
    m.add(dtrain::Dense<float>(8, 8)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(8, 8));
    m.add(dtrain::LayerNorm<float>(8));
    CHECK_THROWS_WITH(dtrain::export_onnx(m, path),
                      Catch::StartsWith("export_onnx: layer 3, LayerNorm(8), has no ONNX form here"));
    CHECK_FALSE(std::filesystem::exists(path));
    CHECK_FALSE(std::filesystem::exists(path + ".tmp"));

    dtrain::Model<float> r({8}, 1);
    r.add(dtrain::Dense<float>(8, 8));
    r.add(dtrain::Residual<float>().add(dtrain::Dense<float>(8, 8)).add(dtrain::LayerNorm<float>(8)));
    CHECK_THROWS_WITH(dtrain::export_onnx(r, path),
                      Catch::StartsWith("export_onnx: layer 1.1, LayerNorm(8), has no ONNX form here"));
    CHECK_FALSE(std::filesystem::exists(path));

    dtrain::Model<float> e({5}, 1);
    e.add(dtrain::Embedding<float>(10, 4));
    CHECK_THROWS_WITH(dtrain::export_onnx(e, path),
                      Catch::StartsWith("export_onnx: layer 0, Embedding(10, 4), has no ONNX form here"));

    CHECK_THROWS_WITH(dtrain::export_onnx(dtrain::Model<float>({3}), path),
                      Catch::Contains("the model has no layers"));
    dtrain::Model<float> d({3});
    d.add(dtrain::Dense<float>(3, 2));
    CHECK_THROWS_WITH(dtrain::export_onnx(d, path, 12), Catch::Contains("opset 12 is not supported"));
    CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("export_onnx names a path it cannot write and replaces a file whole", "[interop][onnx]") {
    dtrain::Model<float> m({3}, 2);
    m.add(dtrain::Dense<float>(3, 2));
    const std::string missing = "/nonexistent-dtrain-dir/model.onnx";
    CHECK_THROWS_WITH(dtrain::export_onnx(m, missing),
                      Catch::Contains("export_onnx: cannot write '" + missing + ".tmp'"));

    // A directory in the way: the rename fails, and the temporary file is removed.
    const std::string dir = dtrain::test::shared_temp_path("dtrain_onnx", "dir.onnx");
    std::filesystem::create_directories(dir);
    CHECK_THROWS_WITH(dtrain::export_onnx(m, dir),
                      Catch::Contains("export_onnx: cannot rename '" + dir + ".tmp' to '" + dir + "'"));
    CHECK_FALSE(std::filesystem::exists(dir + ".tmp"));
    std::filesystem::remove(dir);

    const std::string path = dtrain::test::shared_temp_path("dtrain_onnx", "replace.onnx");
    {
        std::ofstream old(path);
        old << "an older file, longer than the model that replaces it";
    }
    dtrain::export_onnx(m, path);
    const std::string once = read_file(path);
    CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
    CHECK_FALSE(contains(once, "an older file"));
    dtrain::export_onnx(m, path);
    CHECK(read_file(path) == once);
    std::filesystem::remove(path);
}

TEST_CASE("export_onnx writes the ONNX fields, the parameters as float32 and a double model as float",
          "[interop][onnx]") {
    dtrain::Model<float> m({3}, 3);
    m.add(dtrain::Dense<float>(3, 2)).add(dtrain::Dropout<float>(0.5)).add(dtrain::Sigmoid<float>());
    dtrain::test::perturb(m, 4);
    const std::string path = dtrain::test::shared_temp_path("dtrain_onnx", "fields.onnx");
    dtrain::export_onnx(m, path);
    const std::string bytes = read_file(path);
    // ModelProto field 1 (ir_version), varint 8, comes first.
    REQUIRE(bytes.size() > 2);
    CHECK(bytes[0] == '\x08');
    CHECK(bytes[1] == '\x08');
    for (const char* part : {"Gemm", "transB", "Sigmoid", "input", "output", "batch", "layer0.weight"})
        CHECK(contains(bytes, part));
    CHECK_FALSE(contains(bytes, "Dropout"));  // the identity in eval mode: no node
    // The weights and biases, little-endian float32, as one raw_data each.
    const auto p = m.parameters();
    CHECK(contains(bytes, std::string(reinterpret_cast<const char*>(p.data()), 6 * sizeof(float))));
    CHECK(contains(bytes, std::string(reinterpret_cast<const char*>(p.data() + 6), 2 * sizeof(float))));

    // The same values in a Model<double> give the same file.
    dtrain::Model<double> md({3}, 3);
    md.add(dtrain::Dense<double>(3, 2)).add(dtrain::Dropout<double>(0.5)).add(dtrain::Sigmoid<double>());
    for (std::size_t i = 0; i < p.size(); ++i)
        md.parameters()[i] = double(p[i]);
    dtrain::export_onnx(md, path);
    CHECK(read_file(path) == bytes);
    std::filesystem::remove(path);
}

TEST_CASE("export_onnx writes LeakyReLU as LeakyRelu with its slope as alpha", "[interop][onnx]") {
    dtrain::Model<float> m({3}, 3);
    m.add(dtrain::Dense<float>(3, 2)).add(dtrain::LeakyReLU<float>(0.25));
    const std::string path = dtrain::test::shared_temp_path("dtrain_onnx", "leaky_relu.onnx");
    dtrain::export_onnx(m, path);
    const std::string bytes = read_file(path);
    std::filesystem::remove(path);
    CHECK(contains(bytes, "LeakyRelu"));
    CHECK(contains(bytes, "alpha"));
    const float alpha = 0.25f;  // AttributeProto field 2 (f), fixed32: tag 0x15, then the float's bytes
    CHECK(contains(bytes, "\x15" + std::string(reinterpret_cast<const char*>(&alpha), sizeof alpha)));
}

TEST_CASE("export_onnx exports every model that ONNX Runtime runs", "[interop][onnx]") {
    const std::string path = dtrain::test::shared_temp_path("dtrain_onnx", "case.onnx");
    for (auto& c : dtrain::test::onnx_cases()) {
        INFO(c.name);
        CHECK_NOTHROW(dtrain::export_onnx(c.model, path));
        CHECK(std::filesystem::file_size(path) > 4 * c.model.num_parameters());
    }
    std::filesystem::remove(path);
}

// Writes, for every model of onnx_models.hpp, into the directory given as the argument: <name>.onnx,
// <name>.input.bin and <name>.output.bin (float32, little-endian, row-major; the output of forward()
// after eval()) and <name>.json with both shapes. run_onnx.js runs the files in ONNX Runtime.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>

#include <dtrain/nn/onnx.hpp>

#include "onnx_models.hpp"

namespace {

void write_floats(const std::string& path, const dtrain::Tensor<float>& t) {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(t.data()), std::streamsize(t.size() * sizeof(float)));
    DTRAIN_CHECK(f.good(), "cannot write '", path, "'");
}

std::string json_shape(const std::vector<std::size_t>& s) {
    std::string out = "[";
    for (std::size_t i = 0; i < s.size(); ++i)
        out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: onnx_cases <output directory>\n");
        return 2;
    }
    try {
        const std::string dir = argv[1];
        for (auto& c : dtrain::test::onnx_cases()) {
            const std::string base = dir + "/" + c.name;
            dtrain::export_onnx(c.model, base + ".onnx");
            c.model.eval();
            const dtrain::Tensor<float> y = c.model.forward(c.input);
            // Every sample's output must differ from the first's, or the comparison would miss most of
            // the model (a constant output after ReLUs that are all off).
            const std::size_t n = y.shape()[0], row = y.size() / n;
            float scale = 0, spread = 0;
            for (std::size_t i = 0; i < y.size(); ++i) {
                scale = std::max(scale, std::abs(y.data()[i]));
                spread = std::max(spread, std::abs(y.data()[i] - y.data()[i % row]));
            }
            DTRAIN_CHECK(spread > 1e-2f * scale, c.name, ": the outputs of the samples are (nearly) equal");
            write_floats(base + ".input.bin", c.input);
            write_floats(base + ".output.bin", y);
            std::ofstream j(base + ".json");
            j << "{\"input\": " << json_shape({c.input.shape().begin(), c.input.shape().end()})
              << ", \"output\": " << json_shape({y.shape().begin(), y.shape().end()}) << "}\n";
            DTRAIN_CHECK(j.good(), "cannot write '", base, ".json'");
            std::printf("%s: %zu parameters, output %s\n", c.name.c_str(), c.model.num_parameters(),
                        json_shape({y.shape().begin(), y.shape().end()}).c_str());
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "onnx_cases: %s\n", e.what());
        return 1;
    }
    return 0;
}

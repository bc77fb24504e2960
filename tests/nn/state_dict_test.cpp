// load_state_dict: PyTorch state_dicts saved as .npz (tests/nn/data, written by make_torch_weights.py)
// give the same eval-mode outputs in dtrain as in PyTorch; every mismatch is an error that names both sides
// and leaves the model unchanged.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include <dtrain/nn/detail/npz_reader.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/batchnorm.hpp>
#include <dtrain/nn/layers/conv2d.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/flatten.hpp>
#include <dtrain/nn/layers/pool2d.hpp>
#include <dtrain/nn/state_dict.hpp>
#include <support/test_utils.hpp>

namespace {

std::string data(const std::string& file) {
    return std::string(DTRAIN_SOURCE_DIR) + "/tests/nn/data/" + file;
}

// The array `name` of torch_io.npz as a tensor of its shape.
template <class T>
dtrain::Tensor<T> io_array(const std::string& name) {
    for (const auto& a : dtrain::detail::read_npz(data("torch_io.npz"), "test")) {
        if (a.name != name) continue;
        dtrain::Tensor<T> t = dtrain::Tensor<T>::from_shape(a.shape);
        dtrain::detail::npy_values(a, t.data(), "torch_io.npz", "test");
        return t;
    }
    throw dtrain::Error("no array " + name + " in torch_io.npz");
}

// The largest |a - b| over two tensors of the same shape.
template <class T>
double max_abs_diff(const dtrain::Tensor<T>& a, const dtrain::Tensor<T>& b) {
    REQUIRE(a.shape() == b.shape());
    double m = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
        m = std::max(m, std::abs(double(a.data()[i]) - double(b.data()[i])));
    return m;
}

// Loads `weights` into `model`, runs the input `x` of torch_io.npz in eval mode and returns the largest
// difference from PyTorch's output `y`.
template <class T>
double diff_from_torch(dtrain::Model<T>& model, const std::string& weights, const char* x, const char* y) {
    dtrain::load_state_dict(model, data(weights));
    model.eval();
    const double d = max_abs_diff<T>(model.forward(io_array<T>(x)), io_array<T>(y));
    std::cout << "load_state_dict: " << weights << " in Model<" << (sizeof(T) == 4 ? "float" : "double")
              << ">: max |dtrain - torch| = " << d << '\n';
    return d;
}

template <class T>
dtrain::Model<T> mlp(std::size_t out = 3) {
    dtrain::Model<T> m({4}, 1);
    m.add(dtrain::Dense<T>(4, 16)).add(dtrain::ReLU<T>()).add(dtrain::Dense<T>(16, out));
    return m;
}

// The CNN of make_torch_weights.py; without its last Dense when `head` is false.
dtrain::Model<float> cnn(bool head = true) {
    dtrain::Model<float> m({1, 8, 8}, 1);
    m.add(dtrain::Conv2d<float>(1, 4, 3, 1, 1)).add(dtrain::BatchNorm2d<float>(4)).add(dtrain::ReLU<float>());
    m.add(dtrain::MaxPool2d<float>(2)).add(dtrain::Flatten<float>());
    if (head) m.add(dtrain::Dense<float>(64, 5));
    return m;
}

// Checks that load_state_dict(model, path, skip) throws a message containing `text` and leaves the
// model's parameters and state as they were.
void check_refused(dtrain::Model<float>& model, const std::string& path, const std::string& text,
                   const std::vector<std::string>& skip = {}) {
    const std::vector<float> params(model.parameters().begin(), model.parameters().end());
    const std::vector<float> state(model.state().begin(), model.state().end());
    CHECK_THROWS_WITH(dtrain::load_state_dict(model, path, skip), Catch::Contains(text));
    CHECK(std::equal(params.begin(), params.end(), model.parameters().begin()));
    CHECK(std::equal(state.begin(), state.end(), model.state().begin()));
}

}  // namespace

TEST_CASE("an MLP trained in PyTorch predicts in dtrain as in PyTorch", "[nn][state_dict]") {
    dtrain::Model<float> m = mlp<float>();
    CHECK(diff_from_torch(m, "torch_mlp.npz", "mlp_x", "mlp_y") <= 1e-5);
    // The weights are the file's, bit for bit: fc1.weight[0, 1] is the second value of the buffer.
    const auto arrays = dtrain::detail::read_npz(data("torch_mlp.npz"), "test");
    REQUIRE(arrays.size() == 4);
    CHECK(arrays[0].name == "fc1.weight");
    std::vector<float> w(16 * 4);
    dtrain::detail::npy_values(arrays[0], w.data(), "torch_mlp.npz", "test");
    CHECK(std::equal(w.begin(), w.end(), m.parameters().begin()));

    // float32 weights into a Model<double>, and float64 weights against PyTorch's float64 outputs.
    dtrain::Model<double> d = mlp<double>();
    CHECK(diff_from_torch(d, "torch_mlp.npz", "mlp_x", "mlp_y") <= 1e-5);
    dtrain::Model<double> d64 = mlp<double>();
    CHECK(diff_from_torch(d64, "torch_mlp_f64.npz", "mlp_x", "mlp_y64") <= 1e-12);
}

TEST_CASE("a CNN with BatchNorm from savez_compressed predicts as in PyTorch", "[nn][state_dict]") {
    dtrain::Model<float> m = cnn();
    CHECK(diff_from_torch(m, "torch_cnn.npz", "cnn_x", "cnn_y") <= 1e-5);
    // The running statistics went to the state buffer (mean, then variance); num_batches_tracked was left.
    for (const auto& a : dtrain::detail::read_npz(data("torch_cnn.npz"), "test")) {
        if (a.name != "bn.running_mean" && a.name != "bn.running_var") continue;
        std::vector<float> v(4);
        dtrain::detail::npy_values(a, v.data(), "torch_cnn.npz", "test");
        CHECK(std::equal(v.begin(), v.end(), m.state().begin() + (a.name == "bn.running_var" ? 4 : 0)));
        CHECK(v != std::vector<float>(4, a.name == "bn.running_var" ? 1.0f : 0.0f));
    }

    // Without the head, the head's entries are skipped by name; the rest loads as in the whole model.
    dtrain::Model<float> body = cnn(false);
    dtrain::load_state_dict(body, data("torch_cnn.npz"), {"fc.weight", "fc.bias"});
    CHECK(std::equal(body.parameters().begin(), body.parameters().end(), m.parameters().begin()));
    CHECK(std::equal(body.state().begin(), body.state().end(), m.state().begin()));
}

TEST_CASE("load_state_dict names both sides of a mismatch and leaves the model unchanged",
          "[nn][state_dict]") {
    const std::string mlp_file = data("torch_mlp.npz"), cnn_file = data("torch_cnn.npz");
    dtrain::Model<float> wide = mlp<float>(4);
    check_refused(wide, mlp_file,
                  "load_state_dict: layer 2 Dense(16, 4) weight has shape [4, 16] but 'fc2.weight' in " +
                      mlp_file + " has [3, 16]");

    dtrain::Model<float> deeper = mlp<float>();
    deeper.add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(3, 2));
    check_refused(
        deeper, mlp_file,
        "load_state_dict: " + mlp_file +
            " has 4 tensors (num_batches_tracked not counted) but the model takes 6: nothing for layer 4 "
            "Dense(3, 2) weight [2, 3]");

    dtrain::Model<float> body = cnn(false);
    check_refused(
        body, cnn_file,
        "load_state_dict: " + cnn_file +
            " has 8 tensors (num_batches_tracked not counted) but the model takes 6: 'fc.weight' [5, 64] "
            "and the entries after it have no layer in the model");
    check_refused(body, cnn_file, "load_state_dict: 'fc.bias2' is to be skipped but is not in " + cnn_file,
                  {"fc.weight", "fc.bias2"});
    // Every shape fits when conv.bias is left out, but bn.bias would meet bn.running_mean.
    dtrain::Model<float> whole = cnn();
    check_refused(whole, cnn_file,
                  "load_state_dict: layer 1 BatchNorm2d(4) bias meets 'bn.running_mean' in " + cnn_file +
                      ", a running statistic: the model and the state_dict do not have the same layers",
                  {"conv.bias"});

    dtrain::Model<float> m = mlp<float>();
    check_refused(m, data("torch_mlp_f16.npz"),
                  "load_state_dict: 'fc1.weight' in " + data("torch_mlp_f16.npz") + " has dtype '<f2'");
    check_refused(
        m, data("torch_mlp_fortran.npz"),
        "load_state_dict: 'fc1.weight' in " + data("torch_mlp_fortran.npz") + " is stored in Fortran order");
    check_refused(m, data("make_torch_weights.py"),
                  "load_state_dict: '" + data("make_torch_weights.py") + "' is not an .npz file");
    check_refused(m, data("missing.npz"), "load_state_dict: cannot open '" + data("missing.npz") + "'");

    // A damaged copy of the compressed file: one byte of its first entry's deflate data changed.
    std::ifstream in(cnn_file, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(bytes.size() > 200);
    bytes[100] = char(bytes[100] ^ 0x55);
    const std::string damaged = dtrain::test::shared_temp_path("dtrain_state_dict", "damaged.npz");
    std::ofstream(damaged, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
    dtrain::Model<float> c = cnn();
    check_refused(c, damaged, "load_state_dict: ");
    check_refused(c, damaged, "conv.weight.npy");
    std::remove(damaged.c_str());
}

// Runs dtrain's float layers on fixed inputs and writes inputs and results as raw float32 files, for
// accuracy.py to compare with float64 and with PyTorch: Dense at fan-in 2,304 and 16,384, Conv2d 3x3 at
// fan-in 2,304 (padded: implicit GEMM; unpadded: GEMM) and 4,608, a first layer of fan-in 27 whose weight
// gradient sums over 65,536 positions (direct kernels), and BatchNorm2d on an input whose mean is 500 times
// its spread. The kernels are the environment's (DTRAIN_KERNELS).
//
// Usage: bench_accuracy <directory>
// Writes <directory>/<case>.<tensor>.f32 for the inputs (x, w, b, dy) and the results (y, dx, dw, db).

#include <dtrain/dtrain.hpp>

#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using dtrain::Layer;
using dtrain::Shape;
using dtrain::Tensor;

std::string dir;

void save(const std::string& name, const float* p, std::size_t n) {
    std::ofstream f(dir + "/" + name + ".f32", std::ios::binary);
    f.write(reinterpret_cast<const char*>(p), std::streamsize(n * sizeof(float)));
    if (!f) throw std::runtime_error("cannot write " + dir + "/" + name + ".f32");
}

void fill_normal(float* p, std::size_t n, std::mt19937_64& gen, double mean, double stddev) {
    std::normal_distribution<double> d(mean, stddev);
    for (std::size_t i = 0; i < n; ++i)
        p[i] = float(d(gen));
}

// One case: `layer` on a batch of shape `in_shape`; x ~ N(x_mean, 1), parameters ~ N(0, param_std) (for
// BatchNorm: gamma ~ N(1, 0.1), beta ~ N(0, 0.1)), dy ~ N(0, 1). Writes inputs, y, dx and the parameter
// gradient (dw, db: the layer's two parameter tensors in order).
void run(const std::string& name, Layer<float>& layer, const Shape& in_shape, double x_mean, double param_std,
         std::size_t n_w, std::uint64_t seed) {
    std::mt19937_64 gen(seed);
    const std::size_t np = layer.num_params(), ns = layer.num_state();
    std::vector<float> params(np), grads(np, 0.0f), state(ns, 0.0f);
    layer.bind(params.data(), grads.data(), state.data());
    dtrain::Rng rng(seed);
    layer.init_params(rng);  // the state (BatchNorm's running statistics)
    if (param_std > 0) {
        fill_normal(params.data(), np, gen, 0.0, param_std);
    } else {  // BatchNorm: gamma then beta
        fill_normal(params.data(), n_w, gen, 1.0, 0.1);
        fill_normal(params.data() + n_w, np - n_w, gen, 0.0, 0.1);
    }
    Tensor<float> x, y, dy, dx;
    x.resize(in_shape);
    fill_normal(x.data(), x.size(), gen, x_mean, 1.0);
    layer.forward(x, y, true);
    dy.resize(std::vector<std::size_t>(y.shape().begin(), y.shape().end()));
    fill_normal(dy.data(), dy.size(), gen, 0.0, 1.0);
    layer.backward(x, y, dy, dx, true);
    save(name + ".x", x.data(), x.size());
    save(name + ".w", params.data(), n_w);
    save(name + ".b", params.data() + n_w, np - n_w);
    save(name + ".dy", dy.data(), dy.size());
    save(name + ".y", y.data(), y.size());
    save(name + ".dx", dx.data(), dx.size());
    save(name + ".dw", grads.data(), n_w);
    save(name + ".db", grads.data() + n_w, np - n_w);
    std::printf("%-12s %s\n", name.c_str(), layer.name().c_str());
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <directory>\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    {
        dtrain::Dense<float> d(2304, 64);
        run("dense2304", d, {64, 2304}, 0.0, 0.02, 64 * 2304, 1);
    }
    {
        dtrain::Dense<float> d(16384, 64);
        run("dense16384", d, {64, 16384}, 0.0, 0.01, 64 * 16384, 2);
    }
    {
        dtrain::Conv2d<float> c(256, 256, 3, 1, 1);
        run("conv256", c, {16, 256, 8, 8}, 0.0, 0.02, 256 * 256 * 9, 3);
    }
    {
        dtrain::Conv2d<float> c(256, 256, 3, 1, 0);
        run("conv256_nopad", c, {16, 256, 8, 8}, 0.0, 0.02, 256 * 256 * 9, 4);
    }
    {
        dtrain::Conv2d<float> c(512, 512, 3, 1, 1);
        run("conv512", c, {16, 512, 4, 4}, 0.0, 0.015, 512 * 512 * 9, 5);
    }
    {
        dtrain::Conv2d<float> c(3, 16, 3, 1, 0);
        run("conv3", c, {64, 3, 34, 34}, 0.0, 0.2, 16 * 3 * 9, 7);
    }
    {
        dtrain::BatchNorm2d<float> b(16);
        run("batchnorm", b, {32, 16, 8, 8}, 500.0, 0.0, 16, 6);
    }
    return 0;
}

// Milliseconds per step (zero_grad, forward, backward; inference: forward; after one step not timed) of
// the SINGA CNN, the MLP 784-512-256-10 and ResNet9 at batch 64 with the kernel set of the environment
// (DTRAIN_KERNELS): run it once per set, interleaved, and compare medians (benchmarks/onednn/README.md).
//
// Usage: DTRAIN_KERNELS=<native|avx2|onednn|reference> bench_kernel_sets <label>
// Prints: <label> cnn_train <ms> cnn_infer <ms> mlp_train <ms> mlp_infer <ms> resnet9_train <ms>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <dtrain/nn/model.hpp>
#include <dtrain/nn/zoo.hpp>
#include <vector>
template <class M>
double step_ms(M& model, std::vector<std::size_t> shape, std::size_t batch, int steps, bool train) {
    dtrain::Rng rng(7);
    shape.insert(shape.begin(), batch);
    dtrain::Tensor<float> x(shape);
    for (auto& v : x)
        v = float(rng.uniform() - 0.5);
    std::chrono::steady_clock::time_point t0;
    for (int s = -1; s < steps; ++s) {  // step -1, not timed, chooses and prepares the algorithms
        if (s == 0) t0 = std::chrono::steady_clock::now();
        model.zero_grad();
        const auto& y = model.forward(x);
        if (train) {
            dtrain::Tensor<float> g = y * 0.01f;
            model.backward(g);
        }
    }
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / steps;
}
int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: DTRAIN_KERNELS=<set> bench_kernel_sets <label>\n");
        return 2;
    }
    auto cnn = dtrain::zoo::singa_cnn<float>(1);
    auto mlp = dtrain::zoo::mlp<float>({784, 512, 256, 10}, 1);
    auto res = dtrain::zoo::resnet9<float>(1);
    std::printf("%s cnn_train %.3f cnn_infer %.3f mlp_train %.3f mlp_infer %.3f resnet9_train %.3f\n",
                argv[1], step_ms(cnn, {1, 28, 28}, 64, 40, true), step_ms(cnn, {1, 28, 28}, 64, 40, false),
                step_ms(mlp, {784}, 64, 200, true), step_ms(mlp, {784}, 64, 400, false),
                step_ms(res, {3, 32, 32}, 64, 20, true));
}

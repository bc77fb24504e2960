// Forward and backward time of every top-level layer of a zoo model on one thread: the per-layer view
// behind bench_train_throughput's whole-step figures (where a change to one layer's kernels shows).
//
// Usage: OPENBLAS_NUM_THREADS=1 bench_layer_times [--model cnn|mlp|resnet9] [--batch B] [--steps N]
//                                                 [--reps R] [--layer I] [--in-step]
// Each layer runs N forward passes (training mode), then N backward passes, on the activations and
// gradients of one real forward and backward of random data, R times; printed are the medians per pass:
//   layer <i> <name> fwd_us <us> bwd_us <us>
//   total fwd_us <sum> bwd_us <sum>
// With --in-step, each layer is timed instead inside N whole training steps (zero_grad, forward, softmax
// cross-entropy, backward, SGD as bench_train_throughput sets it), R times, so that it finds its weights
// and activations where the rest of the step left them; one more line gives the rest of the step:
//   step zero_grad_us <us> loss_us <us> sgd_us <us>
// The first layer computes no input gradient (as in training). Composite layers (Residual) count as one.
#include <dtrain/dtrain.hpp>
#include <support/stats.hpp>
#include <support/step_layer_times.hpp>
#include <support/zoo_models.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double micros_per(Clock::time_point t0, Clock::time_point t1, int n) {
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
}

}  // namespace

int main(int argc, char** argv) {
    std::string model = "resnet9";
    std::size_t batch = 0;
    int steps = 100, reps = 5;
    long only = -1;
    bool in_step = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (a == "--model" && v)
            model = argv[++i];
        else if (a == "--batch" && v)
            batch = std::stoul(argv[++i]);
        else if (a == "--steps" && v)
            steps = std::stoi(argv[++i]);
        else if (a == "--reps" && v)
            reps = std::stoi(argv[++i]);
        else if (a == "--layer" && v)
            only = std::stol(argv[++i]);
        else if (a == "--in-step")
            in_step = true;
        else {
            std::fprintf(stderr,
                         "usage: bench_layer_times [--model cnn|mlp|resnet9] [--batch B] [--steps N] "
                         "[--reps R] [--layer I] [--in-step]\n(unknown or incomplete argument '%s')\n",
                         a.c_str());
            return 2;
        }
    }
    if (!dtrain::bench::is_zoo_model(model)) {
        std::fprintf(stderr, "bench_layer_times: --model must be cnn, mlp or resnet9, got '%s'\n",
                     model.c_str());
        return 2;
    }
    if (steps < 1 || reps < 1) {
        std::fprintf(stderr, "bench_layer_times: --steps and --reps must be at least 1\n");
        return 2;
    }
    dtrain::Model<float> m = dtrain::bench::zoo_model<float>(model, 1);
    if (batch == 0) batch = dtrain::bench::zoo_default_batch(model);
    dtrain::Shape shape{batch};
    for (std::size_t d : m.input_shape())
        shape.push_back(d);
    dtrain::Rng rng(3);
    const std::size_t layers = m.num_layers();
    std::vector<dtrain::Tensor<float>> acts(layers + 1), grads(layers + 1);
    acts[0] = dtrain::Tensor<float>::from_shape(shape);
    for (auto& v : acts[0])
        v = float(rng.uniform(-1, 1));
    for (std::size_t i = 0; i < layers; ++i)
        m.layer(i).forward(acts[i], acts[i + 1], true);
    grads[layers] = acts[layers];
    for (auto& v : grads[layers])
        v = 0.01f * float(rng.uniform(-1, 1));
    for (std::size_t i = layers; i-- > 0;)
        m.layer(i).backward(acts[i], acts[i + 1], grads[i + 1], grads[i], i > 0);

    double total_f = 0, total_b = 0;
    auto print = [&](std::size_t i, double mf, double mb) {
        if (only >= 0 && std::size_t(only) != i) return;
        total_f += mf;
        total_b += mb;
        std::printf("layer %zu %s fwd_us %.1f bwd_us %.1f\n", i, m.layer(i).name().c_str(), mf, mb);
    };
    if (in_step) {  // bench_train_throughput's optimizer settings, random labels
        dtrain::SGD<float> opt(dtrain::bench::zoo_sgd_options(model));
        dtrain::SoftmaxCrossEntropy<float> loss;
        dtrain::Labels y = dtrain::Labels::from_shape({batch});
        for (auto& v : y)
            v = std::int32_t(rng.below(10));
        const dtrain::bench::StepLayerTimes t =
            dtrain::bench::step_layer_times(m, opt, loss, acts[0], y, steps, reps);
        for (std::size_t i = 0; i < layers; ++i)
            print(i, t.forward[i], t.backward[i]);
        std::printf("total fwd_us %.1f bwd_us %.1f\n", total_f, total_b);
        std::printf("step zero_grad_us %.1f loss_us %.1f sgd_us %.1f\n", t.zero_grad, t.loss, t.update);
        return 0;
    }
    for (std::size_t i = 0; i < layers; ++i) {
        if (only >= 0 && std::size_t(only) != i) continue;
        auto& layer = m.layer(i);
        std::vector<double> f, b;
        for (int r = 0; r < reps; ++r) {
            const auto t0 = Clock::now();
            for (int s = 0; s < steps; ++s)
                layer.forward(acts[i], acts[i + 1], true);
            const auto t1 = Clock::now();
            for (int s = 0; s < steps; ++s)
                layer.backward(acts[i], acts[i + 1], grads[i + 1], grads[i], i > 0);
            const auto t2 = Clock::now();
            f.push_back(micros_per(t0, t1, steps));
            b.push_back(micros_per(t1, t2, steps));
        }
        print(i, dtrain::bench::median(f), dtrain::bench::median(b));
    }
    std::printf("total fwd_us %.1f bwd_us %.1f\n", total_f, total_b);
    return 0;
}

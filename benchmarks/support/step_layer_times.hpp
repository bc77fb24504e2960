#pragma once

// Per-layer times of dtrain's training step measured inside whole steps, as a training loop meets them: the
// weights and activations each layer finds are where the rest of the step left them (after the SGD update
// and the other layers, often no longer in L2). Shared by bench_layer_times (--in-step) and bench_onednn,
// whose oneDNN side is timed the same way.

#include <chrono>
#include <cstddef>
#include <vector>

#include <dtrain/dtrain.hpp>
#include <dtrain/nn/layer_fusion.hpp>
#include <support/stats.hpp>

namespace dtrain::bench {

/// Medians, in microseconds per step, of each part of a training step.
struct StepLayerTimes {
    std::vector<double> forward;   ///< per top-level layer
    std::vector<double> backward;  ///< per top-level layer (the first computes no input gradient)
    double zero_grad = 0;          ///< Model::zero_grad()
    double loss = 0;               ///< the loss and its gradient
    double update = 0;             ///< the optimizer's step over the flat buffers
};

/// Runs `reps` x `steps` training steps of `model` on (x, y), layer by layer as Model::forward() and
/// Model::backward() run them: zero_grad(), every layer's forward, the loss, every layer's backward (last
/// first), then opt.step(). Two layers that Model runs as one pass (runs_fused(): a ReLU before a
/// MaxPool2d, a BatchNorm before a ReLU) run so here too, their time counted for the layer that runs the
/// pair (the MaxPool2d, the BatchNorm) and 0 for the other. Returns the median
/// over the reps of each part's mean time per step. Trains the model (its weights and the optimizer's
/// state change).
template <class Opt, class Loss>
StepLayerTimes step_layer_times(dtrain::Model<float>& model, Opt& opt, Loss& loss,
                                const dtrain::Tensor<float>& x, const dtrain::Labels& y, int steps,
                                int reps) {
    using Clock = std::chrono::steady_clock;
    const std::size_t n = model.num_layers();
    std::vector<dtrain::Tensor<float>> acts(n + 1), grads(n + 1);
    acts[0] = x;
    // The pairs Model runs as one pass, found in Sequential's order: with_previous[i] when layer i runs
    // layers i - 1 and i (FusesWithPrevious), with_next[i] when layer i runs layers i and i + 1
    // (FusesWithNext).
    std::vector<FusesWithPrevious<float>*> with_previous(n + 1, nullptr);
    std::vector<FusesWithNext<float>*> with_next(n + 1, nullptr);
    for (std::size_t i = 0; i + 1 < n; ++i) {
        auto* p = dynamic_cast<FusesWithPrevious<float>*>(&model.layer(i + 1));
        auto* q = dynamic_cast<FusesWithNext<float>*>(&model.layer(i));
        if (runs_fused(model.layer(i), model.layer(i + 1), p))
            with_previous[++i] = p;
        else if (runs_fused(model.layer(i), model.layer(i + 1), q))
            with_next[i++] = q;
    }
    std::vector<std::vector<double>> f(n), b(n);
    std::vector<double> z, l, u;
    model.train();
    Clock::time_point t = Clock::now();
    auto lap = [&t](double& sum) {
        const Clock::time_point now = Clock::now();
        sum += std::chrono::duration<double, std::micro>(now - t).count();
        t = now;
    };
    for (int r = 0; r < reps; ++r) {
        std::vector<double> fs(n, 0.0), bs(n, 0.0);
        double zs = 0, ls = 0, us = 0;
        for (int s = 0; s < steps; ++s) {
            t = Clock::now();
            model.zero_grad();
            lap(zs);
            for (std::size_t i = 0; i < n; ++i) {
                if (with_previous[i + 1] != nullptr) {
                    with_previous[i + 1]->forward_with_previous(acts[i], acts[i + 2], true);
                    lap(fs[++i]);
                } else if (with_next[i] != nullptr) {
                    with_next[i]->forward_with_next(acts[i], acts[i + 2], true);
                    lap(fs[i++]);
                } else {
                    model.layer(i).forward(acts[i], acts[i + 1], true);
                    lap(fs[i]);
                }
            }
            loss.compute(acts[n], y, grads[n]);
            lap(ls);
            for (std::size_t i = n; i-- > 0;) {
                // A pair skips grads[i] (the gradient of its first layer's output); as in Sequential, the
                // model's input needs no gradient.
                if (with_previous[i] != nullptr) {
                    if (i > 1)
                        with_previous[i]->backward_with_previous(acts[i - 1], acts[i + 1], grads[i + 1],
                                                                 grads[i - 1]);
                    lap(bs[i--]);
                    continue;
                }
                if (i > 0 && with_next[i - 1] != nullptr) {
                    with_next[i - 1]->backward_with_next(acts[i - 1], acts[i + 1], grads[i + 1], grads[i - 1],
                                                         i > 1);
                    lap(bs[--i]);
                    continue;
                }
                model.layer(i).backward(acts[i], acts[i + 1], grads[i + 1], grads[i], i > 0);
                lap(bs[i]);
            }
            opt.step(model.parameters(), model.gradients());
            lap(us);
        }
        for (std::size_t i = 0; i < n; ++i) {
            f[i].push_back(fs[i] / steps);
            b[i].push_back(bs[i] / steps);
        }
        z.push_back(zs / steps);
        l.push_back(ls / steps);
        u.push_back(us / steps);
    }
    StepLayerTimes out;
    for (std::size_t i = 0; i < n; ++i) {
        out.forward.push_back(median(f[i]));
        out.backward.push_back(median(b[i]));
    }
    out.zero_grad = median(z);
    out.loss = median(l);
    out.update = median(u);
    return out;
}

}  // namespace dtrain::bench

#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <dtrain/core/rng.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/layers/detail/kernel_set.hpp>
#include <dtrain/nn/model.hpp>

#include "support/test_utils.hpp"

namespace dtrain::test {

/// The kernel set a test compares with `set` (DTRAIN_KERNELS): native without its AVX-512 kernels, the
/// others themselves.
inline detail::KernelSet without_avx512(detail::KernelSet set) {
    return set == detail::KernelSet::native ? detail::KernelSet::avx2 : set;
}

/// Outcome of a finite-difference check: the largest mismatch between analytic and numerical
/// derivatives (|a - n| / max(1e-3, |a| + |n|)) for the input and for the parameters, and the largest
/// analytic magnitudes (so a test can insist the gradients are not trivially zero).
struct GradCheck {
    double input_err = 0.0;
    double param_err = 0.0;
    double input_max = 0.0;
    double param_max = 0.0;
    std::size_t checked = 0;
};

/// Mismatch measure used by the checks.
inline double grad_err(double analytic, double numeric) {
    return std::abs(analytic - numeric) / std::max(1e-3, std::abs(analytic) + std::abs(numeric));
}

/// Central-difference check of Model::backward in double precision. The scalar loss is
/// L = sum(out * r) for a fixed random r, so dL/dout = r. `before_forward`, if set, runs before every
/// forward pass (e.g. to reseed a dropout mask so that every pass uses the same mask).
inline GradCheck check_model_gradients(Model<double>& model, Tensor<double> x, Rng& rng,
                                       const std::function<void()>& before_forward = {}, double h = 1e-5) {
    GradCheck res;
    auto run = [&]() -> const Tensor<double>& {
        if (before_forward) before_forward();
        return model.forward(x);
    };
    const Tensor<double> out = run();
    const Tensor<double> r =
        random_tensor<double>(std::vector<std::size_t>(out.shape().begin(), out.shape().end()), rng);
    auto loss = [&]() {
        const Tensor<double>& o = run();
        double s = 0.0;
        for (std::size_t i = 0; i < o.size(); ++i)
            s += o.data()[i] * r.data()[i];
        return s;
    };
    model.zero_grad();
    run();
    const Tensor<double> dx = model.backward(r, true);
    const std::vector<double> dp(model.gradients().begin(), model.gradients().end());

    for (std::size_t i = 0; i < x.size(); ++i) {
        const double v = x.data()[i];
        x.data()[i] = v + h;
        const double lp = loss();
        x.data()[i] = v - h;
        const double lm = loss();
        x.data()[i] = v;
        const double num = (lp - lm) / (2 * h);
        res.input_err = std::max(res.input_err, grad_err(dx.data()[i], num));
        res.input_max = std::max(res.input_max, std::abs(dx.data()[i]));
        ++res.checked;
    }
    auto p = model.parameters();
    for (std::size_t i = 0; i < p.size(); ++i) {
        const double v = p[i];
        p[i] = v + h;
        const double lp = loss();
        p[i] = v - h;
        const double lm = loss();
        p[i] = v;
        const double num = (lp - lm) / (2 * h);
        res.param_err = std::max(res.param_err, grad_err(dp[i], num));
        res.param_max = std::max(res.param_max, std::abs(dp[i]));
        ++res.checked;
    }
    return res;
}

/// Central-difference check of a loss gradient: `f(logits, grad)` returns the loss and writes
/// dLoss/dlogits into grad. Returns the largest mismatch; `max_grad` receives the largest |analytic|.
template <class F>
double check_loss_gradient(F&& f, Tensor<double> logits, double& max_grad, double h = 1e-6) {
    Tensor<double> grad, scratch;
    f(logits, grad);
    double err = 0.0;
    max_grad = 0.0;
    for (std::size_t i = 0; i < logits.size(); ++i) {
        const double v = logits.data()[i];
        logits.data()[i] = v + h;
        const double lp = f(logits, scratch);
        logits.data()[i] = v - h;
        const double lm = f(logits, scratch);
        logits.data()[i] = v;
        err = std::max(err, grad_err(grad.data()[i], (lp - lm) / (2 * h)));
        max_grad = std::max(max_grad, std::abs(grad.data()[i]));
    }
    return err;
}

/// A model's parameters as a vector (a snapshot).
template <class T>
std::vector<T> params_of(const Model<T>& m) {
    return std::vector<T>(m.parameters().begin(), m.parameters().end());
}

/// True when `s` contains `part`.
inline bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

}  // namespace dtrain::test

#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include <dtrain/core/span.hpp>
#include <support/test_utils.hpp>

namespace dtrain::test {

/// True when `text` contains every one of `parts`.
inline bool contains_all(const std::string& text, const std::vector<std::string>& parts) {
    for (const auto& p : parts)
        if (text.find(p) == std::string::npos) return false;
    return true;
}

/// A mutable span over a vector.
template <class T>
Span<T> span_of(std::vector<T>& v) {
    return Span<T>(v.data(), v.size());
}

/// A read-only span over a vector.
template <class T>
Span<const T> cspan_of(const std::vector<T>& v) {
    return Span<const T>(v.data(), v.size());
}

/// Converts a vector of doubles to T.
template <class T>
std::vector<T> cast_vec(const std::vector<double>& v) {
    return std::vector<T>(v.begin(), v.end());
}

/// Adam / AdamW written out independently in double, in the paper's bias-corrected form
/// (m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t), p -= lr * m_hat / (sqrt(v_hat) + eps)), with
/// L2 weight decay added to the gradient (Adam) or decoupled p *= 1 - lr * wd (AdamW). `lrs[t]` is the
/// rate of step t (size >= grads.size()).
inline std::vector<double> reference_adam(std::vector<double> p,
                                          const std::vector<std::vector<double>>& grads,
                                          const std::vector<double>& lrs, double b1, double b2, double eps,
                                          double wd, bool decoupled) {
    std::vector<double> m(p.size(), 0.0), v(p.size(), 0.0);
    for (std::size_t t = 1; t <= grads.size(); ++t) {
        const double lr = lrs[t - 1];
        for (std::size_t i = 0; i < p.size(); ++i) {
            double g = grads[t - 1][i];
            if (decoupled)
                p[i] -= lr * wd * p[i];
            else
                g += wd * p[i];
            m[i] = b1 * m[i] + (1 - b1) * g;
            v[i] = b2 * v[i] + (1 - b2) * g * g;
            const double m_hat = m[i] / (1 - std::pow(b1, double(t)));
            const double v_hat = v[i] / (1 - std::pow(b2, double(t)));
            p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
        }
    }
    return p;
}

/// Runs `opt` on one parameter p = 1 with the given gradients; returns p after each step.
template <class Opt>
std::vector<double> run_unit(Opt opt, const std::vector<double>& grads) {
    using T = typename Opt::value_type;
    std::vector<T> p{T(1)};
    std::vector<double> out;
    for (double g : grads) {
        const std::vector<T> gv{T(g)};
        opt.step(span_of(p), cspan_of(gv));
        out.push_back(double(p[0]));
    }
    return out;
}

/// Five starting parameters and three steps of gradients shared by the reference-loop tests.
inline const std::vector<double> p0{1.0, -2.0, 0.5, 3.0, -0.25};
/// See p0.
inline const std::vector<std::vector<double>> grads3{
    {0.1, 0.2, -0.3, 1.5, 0.0}, {-0.2, 0.1, 0.4, -1.0, 0.7}, {0.3, -0.1, 0.0, 0.25, -0.6}};

/// Steps `a` once, copies it, then steps original and copy three more times on the same gradients (float
/// parameters p0, gradients grads3): both must end with equal parameters, state, step count and rate, and
/// the copy must own its state.
template <class Opt>
void check_copy_continues_identically(Opt a) {
    auto pa = cast_vec<float>(p0);
    const auto g0 = cast_vec<float>(grads3[0]);
    const auto g1 = cast_vec<float>(grads3[1]);
    const auto g2 = cast_vec<float>(grads3[2]);
    a.step(span_of(pa), cspan_of(g0));
    Opt b = a;
    auto pb = pa;
    for (const auto* g : {&g1, &g2, &g0}) {
        a.step(span_of(pa), cspan_of(*g));
        b.step(span_of(pb), cspan_of(*g));
    }
    CHECK(pa == pb);
    CHECK(std::vector<float>(a.state().begin(), a.state().end()) ==
          std::vector<float>(b.state().begin(), b.state().end()));
    CHECK(a.steps() == 4);
    CHECK(b.steps() == 4);
    CHECK(a.learning_rate() == b.learning_rate());
    CHECK(a.state().data() != b.state().data());
}

}  // namespace dtrain::test

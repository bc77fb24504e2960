#pragma once

#include <cmath>
#include <cstddef>

#include <dtrain/core/error.hpp>
#include <dtrain/core/rng.hpp>

namespace dtrain {

/// Weight initialisation schemes. fan_in/fan_out are those of PyTorch: for Dense (in, out); for a
/// convolution (in_channels * kh * kw, out_channels * kh * kw).
enum class Init {
    GlorotUniform,  ///< U(-a, a), a = sqrt(6 / (fan_in + fan_out)) (Xavier).
    GlorotNormal,   ///< N(0, 2 / (fan_in + fan_out)).
    HeUniform,      ///< U(-a, a), a = sqrt(6 / fan_in) (Kaiming, ReLU gain).
    HeNormal,       ///< N(0, 2 / fan_in).
};

/// Fills `n` values at `w` according to `scheme` from `rng`; requires fan_in, fan_out > 0.
template <class T>
void init_weights(T* w, std::size_t n, Init scheme, std::size_t fan_in, std::size_t fan_out, Rng& rng) {
    DTRAIN_CHECK(fan_in > 0 && fan_out > 0, "init_weights: fan_in and fan_out must be positive");
    const double fi = double(fan_in), fo = double(fan_out);
    switch (scheme) {
        case Init::GlorotUniform: {
            const double a = std::sqrt(6.0 / (fi + fo));
            for (std::size_t i = 0; i < n; ++i)
                w[i] = T(rng.uniform(-a, a));
            break;
        }
        case Init::GlorotNormal: {
            const double s = std::sqrt(2.0 / (fi + fo));
            for (std::size_t i = 0; i < n; ++i)
                w[i] = T(rng.normal(0.0, s));
            break;
        }
        case Init::HeUniform: {
            const double a = std::sqrt(6.0 / fi);
            for (std::size_t i = 0; i < n; ++i)
                w[i] = T(rng.uniform(-a, a));
            break;
        }
        case Init::HeNormal: {
            const double s = std::sqrt(2.0 / fi);
            for (std::size_t i = 0; i < n; ++i)
                w[i] = T(rng.normal(0.0, s));
            break;
        }
    }
}

}  // namespace dtrain

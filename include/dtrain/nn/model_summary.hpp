#pragma once

/// @file
/// The table Model::summary() writes: layer, output shape and parameter count per layer, the totals, then
/// the kernels of the layers that have several ways to compute.

#include <algorithm>
#include <array>
#include <cstddef>
#include <iomanip>
#include <ostream>
#include <string>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/core/tensor.hpp>
#include <dtrain/nn/kernel_description.hpp>

namespace dtrain::detail {

/// Writes Model::summary()'s table of `model` (a Model<T>, through its public interface) to `os`. Each column
/// is as wide as its longest entry needs (at least 28, 22 and 12 characters), so columns stay at least two
/// spaces apart however long a layer's name or shape is.
template <class M>
void write_model_summary(std::ostream& os, const M& model) {
    auto batch = [](const Shape& s) { return "[batch, " + shape_str(s).substr(1); };
    std::vector<std::array<std::string, 3>> rows = {{"Layer", "Output shape", "Params"},
                                                    {"Input", batch(model.input_shape()), "0"}};
    for (std::size_t i = 0; i < model.num_layers(); ++i)
        rows.push_back({model.layer(i).name(), batch(model.layer_output_shape(i)),
                        std::to_string(model.parameter_ranges()[i].size)});
    std::array<std::size_t, 3> w = {28, 22, 12};
    for (const auto& r : rows)
        for (std::size_t c = 0; c < 3; ++c)
            w[c] = std::max(w[c], r[c].size() + 2);
    const std::size_t width = w[0] + w[1] + w[2];
    for (std::size_t k = 0; k < rows.size(); ++k) {
        os << std::left << std::setw(int(w[0])) << rows[k][0] << std::setw(int(w[1])) << rows[k][1]
           << std::right << std::setw(int(w[2])) << rows[k][2] << '\n';
        if (k == 0) os << std::string(width, '-') << '\n';
    }
    os << std::string(width, '=') << '\n'
       << "Total parameters: " << model.num_parameters() << "  (non-trainable state: " << model.state().size()
       << ")\n";
    for (std::size_t i = 0; i < model.num_layers(); ++i) {
        const std::string k =
            kernels_of(model.layer(i), i == 0 ? model.input_shape() : model.layer_output_shape(i - 1));
        if (!k.empty()) os << "Kernels of " << model.layer(i).name() << ": " << k << '\n';
    }
}

}  // namespace dtrain::detail

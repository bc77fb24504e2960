#pragma once

// Command-line helpers shared by the benchmark programs (benchmarks/*; not part of the library).

#include <sstream>
#include <string>
#include <vector>

namespace dtrain::bench {

/// The items of a `delimiter`-separated list on the command line ("cnn,mlp" -> {"cnn", "mlp"}), as
/// std::getline cuts them: "" gives no item, an empty item between two delimiters stays (""), a trailing
/// delimiter adds none.
inline std::vector<std::string> split(const std::string& s, char delimiter = ',') {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, delimiter))
        out.push_back(item);
    return out;
}

}  // namespace dtrain::bench

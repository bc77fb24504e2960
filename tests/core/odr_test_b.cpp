#include <dtrain/dtrain.hpp>

std::size_t odr_params_b() {
    dtrain::Model<float> m({4}, 3);
    m.add(dtrain::Dense<float>(4, 3));
    return m.num_parameters();
}

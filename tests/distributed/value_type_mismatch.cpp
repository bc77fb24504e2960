// Must NOT compile: an optimizer of doubles wrapped around a model of floats. The test
// distributed_value_type_mismatch.compile passes when the compiler prints DistOptimizer's static_assert
// sentence instead of a bare "no matching function".
#include <dtrain/comm/ring.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/optim/adam.hpp>

int main() {
    dtrain::Model<float> model({4}, 1);
    dtrain::DistOptimizer<dtrain::Ring, dtrain::Adam<double>> opt(model, dtrain::Adam<double>());
    return 0;
}

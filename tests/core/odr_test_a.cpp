#include <catch2/catch.hpp>

#include <dtrain/dtrain.hpp>

std::size_t odr_params_b();

TEST_CASE("two translation units including dtrain.hpp link and agree", "[core][odr]") {
    dtrain::Model<float> m({4}, 3);
    m.add(dtrain::Dense<float>(4, 3));
    CHECK(m.num_parameters() == odr_params_b());
}

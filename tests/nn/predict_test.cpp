// predict / predict_classes: eval-mode outputs for a whole tensor, batch by batch.
#include <catch2/catch.hpp>

#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/dropout.hpp>
#include <dtrain/nn/predict.hpp>
#include <support/test_utils.hpp>

TEST_CASE("predict equals one eval-mode forward pass, whatever the batch size, and restores the mode",
          "[nn][predict]") {
    dtrain::Model<float> m({3}, 5);
    m.add(dtrain::Dense<float>(3, 6)).add(dtrain::ReLU<float>()).add(dtrain::Dropout<float>(0.5, 1));
    m.add(dtrain::Dense<float>(6, 4));
    dtrain::Rng rng(2);
    const auto x = dtrain::test::random_tensor<float>({10, 3}, rng);
    m.eval();
    const dtrain::Tensor<float> whole = m.forward(x);
    m.train();
    for (std::size_t batch : {1, 3, 10, 64}) {
        INFO("batch " << batch);
        const dtrain::Tensor<float> y = dtrain::predict(m, x, batch);
        CHECK(y.shape() == whole.shape());
        CHECK(dtrain::test::max_rel_diff(y, whole) <= 1e-6);
        CHECK(m.training());
    }
    const dtrain::Labels c = dtrain::predict_classes(m, x, 4);
    for (std::size_t r = 0; r < 10; ++r) {
        std::int32_t best = 0;
        for (std::int32_t j = 1; j < 4; ++j)
            if (whole(r, std::size_t(j)) > whole(r, std::size_t(best))) best = j;
        CHECK(c(r) == best);
    }
    CHECK_THROWS_WITH(dtrain::predict(m, dtrain::test::random_tensor<float>({2, 4}, rng)),
                      Catch::Contains("predict: expected input of shape [batch, 3]"));
    CHECK_THROWS_WITH(dtrain::predict(m, x, 0), Catch::Contains("batch_size must be > 0"));
}

// DatasetView: what it points at for a Dataset and for user tensors (labels, targets as [N] or [N, k]), and
// the arrays it refuses.
#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

#include <dtrain/data/dataset.hpp>
#include <dtrain/data/dataset_view.hpp>

#include "data_test_utils.hpp"

using dtrain::DatasetView;
using dtrain::test::contains;
using dtrain::test::error_message;

TEST_CASE("DatasetView points at the features and the labels or targets it views", "[data][view]") {
    const auto x = dtrain::Tensor<float>::from_shape({4, 2, 3});
    const dtrain::Labels y = {0, 1, 2, 1};
    const DatasetView labelled(x, y);
    CHECK(labelled.features == x.data());
    CHECK(labelled.labels == y.data());
    CHECK(labelled.targets == nullptr);
    CHECK(labelled.target_columns == 0);
    CHECK(labelled.size == 4);
    CHECK(labelled.sample_shape == dtrain::Shape{2, 3});
    CHECK(labelled.sample_size() == 6);

    const auto one = dtrain::Tensor<float>::from_shape({4});
    const DatasetView column(x, one);
    CHECK(column.labels == nullptr);
    CHECK(column.targets == one.data());
    CHECK(column.target_columns == 1);
    const auto three = dtrain::Tensor<float>::from_shape({4, 3});
    CHECK(DatasetView(x, three).target_columns == 3);

    dtrain::Dataset d;
    d.features = dtrain::Tensor<float>::from_shape({4, 5});
    d.targets = dtrain::Tensor<float>::from_shape({4, 2});
    const DatasetView of_dataset(d);
    CHECK(of_dataset.features == d.features.data());
    CHECK(of_dataset.targets == d.targets.data());
    CHECK(of_dataset.target_columns == 2);
    CHECK(of_dataset.sample_shape == dtrain::Shape{5});
}

TEST_CASE("DatasetView refuses targets without columns and features without a batch axis", "[data][view]") {
    const auto x = dtrain::Tensor<float>::from_shape({4, 2});
    const auto no_columns = dtrain::Tensor<float>::from_shape({4, 0});
    CHECK(contains(error_message([&] { DatasetView(x, no_columns); }),
                   "targets of shape [4, 0] have no columns"));
    const auto flat = dtrain::Tensor<float>::from_shape({4});
    const dtrain::Labels y = {0, 1, 2, 1};
    CHECK(contains(error_message([&] { DatasetView(flat, y); }),
                   "features must be batch-first with rank >= 2"));
}

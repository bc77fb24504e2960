// A NaN or an infinity in a step's gradient: every policy stops on every rank naming the step and the layer
// (NonFinite::Stop, the default), or skips the step alike on every rank (NonFinite::Skip); NonFinite::Ignore
// leaves the check out. End to end: a NaN in one data row of one rank's shard reaches the loss through ReLU,
// the loss returns NaN (a rank-local error there would be out of NonFinite::Skip's reach) and its NaN
// gradient is what the check finds.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <mpi.h>

#include <dtrain/comm/collective.hpp>
#include <dtrain/comm/naive.hpp>
#include <dtrain/comm/ring.hpp>
#include <dtrain/distributed/async.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/losses/cross_entropy.hpp>
#include <dtrain/optim/sgd.hpp>
#include <support/test_utils.hpp>

namespace {

using dtrain::Model;
using dtrain::Tensor;

Model<float> mlp() {  // layer 0: Dense(4, 8), 40 values; layer 1: ReLU; layer 2: Dense(8, 3), values 40..66
    Model<float> m({4}, 3);
    m.add(dtrain::Dense<float>(4, 8)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(8, 3));
    return m;
}

// Forward and backward of a fixed batch; then `poison` (a flat index, or -1) is set to NaN in the last
// rank's gradient, as an overflow in one rank's backward would.
void backward(Model<float>& m, long poison) {
    Tensor<float> x = Tensor<float>::from_shape({4, 4}), grad;
    for (std::size_t i = 0; i < x.size(); ++i)
        x.data()[i] = float(i % 7) * 0.25f;
    dtrain::Labels y = dtrain::Labels::from_shape({4});
    y.fill(2);
    dtrain::SoftmaxCrossEntropy<float> loss;
    loss.compute(m.forward(x), y, grad);
    m.backward(grad);
    if (poison >= 0 && dtrain::test::world_rank() == dtrain::test::world_size() - 1)
        m.gradients()[std::size_t(poison)] = std::numeric_limits<float>::quiet_NaN();
}

template <class Comm>
void check_policy(bool overlap) {
    INFO((overlap ? "overlap" : "no overlap"));
    Model<float> m = mlp();
    dtrain::SyncOptions o;
    o.overlap = overlap;
    dtrain::DistOptimizer<Comm, dtrain::SGD<float>> opt(m, dtrain::SGD<float>(0.1), o);
    opt.zero_grad();
    backward(m, -1);
    opt.step();  // a healthy step first
    opt.zero_grad();
    backward(m, 45);
    const std::string what = dtrain::test::error_message([&] { opt.step(); });
    INFO(what);
    CHECK(what.find("gradient of step 1 is not finite: nan at index 45, in layer 2 (Dense(8, 3))") !=
          std::string::npos);
    CHECK(what.find("NonFinite::Skip") != std::string::npos);
    CHECK(dtrain::test::all_ranks(!what.empty()));
    opt.zero_grad();  // the optimizer goes on after a caught error
    backward(m, -1);
    CHECK_NOTHROW(opt.step());
}

// What train_with_nan_row() saw on this rank.
struct NanRowRun {
    std::string what;  // the dtrain::Error's message, or empty
    std::uint64_t steps = 0, skipped = 0;
    bool nan_loss_seen = false;  // this rank's loss returned NaN (no throw) for the poisoned batch
    std::vector<float> params;
};

// The case: every rank trains an MLP with ReLU on its own shard of 16 rows in batches of 4, for 2
// epochs; the last rank's shard holds a NaN in row 5 (batch 1, so steps 1 and 5 see it).
template <class Comm>
NanRowRun train_with_nan_row(dtrain::NonFinite mode, bool overlap) {
    Model<float> m = mlp();
    dtrain::SyncOptions o;
    o.nonfinite = mode;
    o.overlap = overlap;
    o.stall_timeout = 20;  // a rank-local error (the losses used to throw one) leaves the others waiting
    dtrain::DistOptimizer<Comm, dtrain::SGD<float>> opt(m, dtrain::SGD<float>(0.1), o);
    const int rank = dtrain::test::world_rank();
    Tensor<float> shard = Tensor<float>::from_shape({16, 4});
    for (std::size_t i = 0; i < shard.size(); ++i)
        shard.data()[i] = float((i * 7 + std::size_t(rank) * 3) % 11) * 0.2f - 1.0f;
    if (rank == dtrain::test::world_size() - 1) shard(5, 2) = std::numeric_limits<float>::quiet_NaN();
    dtrain::SoftmaxCrossEntropy<float> loss;
    Tensor<float> x = Tensor<float>::from_shape({4, 4}), grad;
    dtrain::Labels y = dtrain::Labels::from_shape({4});
    NanRowRun r;
    r.what = dtrain::test::error_message([&] {
        opt.run([&] {
            for (int epoch = 0; epoch < 2; ++epoch)
                for (std::size_t b = 0; b < 4; ++b) {
                    for (std::size_t i = 0; i < x.size(); ++i)
                        x.data()[i] = shard.data()[b * x.size() + i];
                    for (std::size_t i = 0; i < 4; ++i)
                        y(i) = std::int32_t((b * 4 + i) % 3);
                    opt.zero_grad();
                    const float l = loss.compute(m.forward(x), y, grad);
                    r.nan_loss_seen = r.nan_loss_seen || std::isnan(l);
                    m.backward(grad);
                    opt.step();
                }
        });
    });
    r.steps = opt.optimizer().steps();
    r.skipped = opt.skipped_steps();
    r.params.assign(m.parameters().begin(), m.parameters().end());
    return r;
}

// True on every rank when `v` holds only finite values on every rank and equals rank 0's `v`.
bool finite_and_identical(std::vector<float> v) {
    bool ok = true;
    for (float p : v)
        ok = ok && std::isfinite(p);
    std::vector<float> root = v;
    DTRAIN_MPI_CHECK(MPI_Bcast(root.data(), int(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD));
    return dtrain::test::all_ranks(ok && root == v);
}

}  // namespace

TEMPLATE_TEST_CASE("A NaN in one data row of one rank's shard stops every rank at that step, or is skipped",
                   "[dist][nonfinite]", dtrain::Collective, dtrain::Ring) {
    const bool poisoned = dtrain::test::world_rank() == dtrain::test::world_size() - 1;
    for (bool overlap : {true, false}) {
        INFO((overlap ? "overlap" : "no overlap"));
        // Default options: a dtrain::Error on every rank naming step 1 and a layer; no update was applied.
        const NanRowRun stop = train_with_nan_row<TestType>(dtrain::NonFinite::Stop, overlap);
        INFO(stop.what);
        CHECK(stop.what.find("gradient of step 1 is not finite: nan at index ") != std::string::npos);
        CHECK(stop.what.find(", in layer ") != std::string::npos);
        CHECK(stop.what.find("(Dense(") != std::string::npos);
        CHECK(dtrain::test::all_ranks(!stop.what.empty()));
        CHECK(stop.nan_loss_seen == poisoned);
        CHECK(finite_and_identical(stop.params));

        // NonFinite::Skip: steps 1 and 5 are skipped and counted alike on every rank; the run ends normally
        // (run() checks that the parameters agree) with finite parameters, identical everywhere.
        const NanRowRun skip = train_with_nan_row<TestType>(dtrain::NonFinite::Skip, overlap);
        INFO(skip.what);
        CHECK(skip.what.empty());
        CHECK(skip.nan_loss_seen == poisoned);
        CHECK(skip.skipped == 2);
        CHECK(skip.steps == 6);
        CHECK(finite_and_identical(skip.params));
    }
}

TEMPLATE_TEST_CASE("A non-finite gradient stops every rank, naming the step, the value and the layer",
                   "[dist][nonfinite]", dtrain::Collective, dtrain::Ring, dtrain::Naive) {
    check_policy<TestType>(true);
    check_policy<TestType>(false);
}

TEST_CASE("NonFinite::Skip skips the step on every rank alike and counts it", "[dist][nonfinite]") {
    Model<float> m = mlp();
    dtrain::SyncOptions o;
    o.nonfinite = dtrain::NonFinite::Skip;
    dtrain::DistOptimizer<dtrain::Ring, dtrain::SGD<float>> opt(m, dtrain::SGD<float>(0.1), o);
    opt.zero_grad();
    backward(m, 3);
    const std::vector<float> before(m.parameters().begin(), m.parameters().end());
    opt.step();
    CHECK(opt.skipped_steps() == 1);
    CHECK(opt.optimizer().steps() == 0);
    const std::vector<float> after(m.parameters().begin(), m.parameters().end());
    CHECK(after == before);
    opt.zero_grad();
    backward(m, -1);
    opt.step();
    CHECK(opt.skipped_steps() == 1);
    CHECK(opt.optimizer().steps() == 1);
    CHECK(std::isfinite(m.parameters()[3]));
}

TEST_CASE("NonFinite::Ignore applies the step unchecked: the NaN reaches the parameters",
          "[dist][nonfinite]") {
    for (bool overlap : {false, true}) {
        INFO((overlap ? "overlap" : "no overlap"));
        Model<float> m = mlp();
        dtrain::SyncOptions o;
        o.nonfinite = dtrain::NonFinite::Ignore;
        o.overlap = overlap;
        dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>> opt(m, dtrain::SGD<float>(0.1), o);
        opt.zero_grad();
        backward(m, 45);
        CHECK_NOTHROW(opt.step());
        CHECK(opt.skipped_steps() == 0);
        CHECK(opt.optimizer().steps() == 1);
        CHECK(std::isnan(m.parameters()[45]));  // what Stop and Skip exist to prevent
        CHECK(std::isfinite(m.parameters()[3]));
    }
}

TEST_CASE("Async: a worker's non-finite gradient ends run() on every rank with its message, or is skipped",
          "[dist][async][nonfinite]") {
    if (dtrain::test::world_size() < 2) return;
    for (auto mode : {dtrain::NonFinite::Stop, dtrain::NonFinite::Skip}) {
        Model<float> m = mlp();
        dtrain::AsyncOptions o;
        o.nonfinite = mode;
        dtrain::DistOptimizer<dtrain::Async, dtrain::SGD<float>> opt(m, dtrain::SGD<float>(0.1), o);
        const std::string what = dtrain::test::error_message([&] {
            opt.run([&] {
                for (int s = 0; s < 4; ++s) {
                    opt.zero_grad();
                    backward(m, s == 2 ? 45 : -1);
                    opt.step();
                }
            });
        });
        INFO(what);
        if (mode == dtrain::NonFinite::Stop) {
            CHECK(what.find("gradient of step 2 is not finite: nan at index 45, in layer 2 (Dense(8, 3))") !=
                  std::string::npos);
            CHECK(dtrain::test::all_ranks(!what.empty()));
        } else {
            CHECK(what.empty());
            const bool poisoned = opt.is_worker() && opt.worker_rank() == opt.num_workers() - 1;
            CHECK(opt.skipped_steps() == (poisoned ? 1u : 0u));
        }
    }
}

// PowerSGD as a communication hook (distributed/powersgd_hook.hpp): a gradient of rank r comes back exactly
// (up to rounding), the residual keeps what was not sent, the result is bitwise the same on every rank and
// from run to run, checkpoints resume bitwise, a skipped step keeps the state, and matrices too small to
// pay are sent as they are.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <mpi.h>

#include <dtrain/comm/collective.hpp>
#include <dtrain/comm/ring.hpp>
#include <dtrain/distributed/bucket.hpp>
#include <dtrain/distributed/checkpoint.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/distributed/powersgd_hook.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/losses/mse.hpp>
#include <dtrain/optim/sgd.hpp>
#include <optim/alloc_counter.hpp>
#include <support/test_utils.hpp>

#include "sync_training_run.hpp"

namespace {

using dtrain::Model;
using dtrain::PowerSgdHook;
using dtrain::PowerSgdOptions;
using dtrain::Tensor;

Model<float> make_model() {
    return dtrain::test::make_sync_model();
}

/// True when `v` is bitwise rank 0's on every rank.
bool same_on_all_ranks(const std::vector<float>& v) {
    std::vector<float> root = v;
    MPI_Bcast(root.data(), int(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
    return dtrain::test::all_ranks(root == v);
}

PowerSgdOptions options(std::size_t rank, std::uint64_t start) {
    PowerSgdOptions o;
    o.rank = rank;
    o.start_iter = start;
    return o;
}

template <class Opt>
void one_step(Opt& opt, Model<float>& model, int s, bool nan = false) {
    Tensor<float> x, y, grad;
    dtrain::test::sync_batch(opt.rank(), s, 0, x, y);
    opt.zero_grad();
    dtrain::MeanSquaredError<float>().compute(model.forward(x), y, grad);
    model.backward(grad);
    if (nan) model.gradients()[5] = std::numeric_limits<float>::quiet_NaN();
    opt.step();
}

/// `steps` steps of SGD with momentum and PowerSGD of `o` (sync_run()), bucket_bytes 400: the first layer in
/// two pieces.
template <class Comm>
dtrain::test::SyncRun train(const PowerSgdOptions& o, int steps, bool overlap = true) {
    dtrain::SyncOptions so;
    so.bucket_bytes = 400;
    so.overlap = overlap;
    return dtrain::test::sync_run<Comm>(so, steps, [&](auto& opt) {
        const auto matrices = dtrain::weight_matrices(make_model());  // the model's layout
        CHECK(opt.register_comm_hook(PowerSgdHook<float>(matrices, o)).compressed_matrices() == 3);
    });
}

/// A hook over one matrix of `rows` x `cols` at offset 0 of a buffer of rows * cols + extra values, one
/// bucket.
PowerSgdHook<float> direct_hook(std::size_t rows, std::size_t cols, std::size_t extra, std::size_t rank,
                                dtrain::Bucket& bucket) {
    PowerSgdHook<float> hook({dtrain::WeightMatrix{0, rows, cols}}, options(rank, 0));
    bucket = dtrain::Bucket{0, rows * cols + extra, 0, 0};
    hook.setup(dtrain::CommHookContext{{bucket}, bucket.size, dtrain::world_rank(), dtrain::world_size()});
    return hook;
}

}  // namespace

TEST_CASE("A gradient of rank r comes back exactly: the sum over ranks, with warm start",
          "[dist][powersgd]") {
    const std::size_t rows = 12, cols = 9, extra = 5, r = 2;
    dtrain::Bucket bucket;
    PowerSgdHook<float> hook = direct_hook(rows, cols, extra, r, bucket);
    CHECK(hook.describe() == "powersgd(rank=2,start=0)");
    CHECK(hook.compressed_matrices() == 1);
    CHECK(hook.wire_values(0) == (rows + cols) * r + extra);
    dtrain::Collective comm;
    const int n = dtrain::world_size(), me = dtrain::world_rank();
    for (int step = 0; step < 3; ++step) {
        // Every rank's matrix lies in the span of the same two columns u1, u2: the sum does too.
        std::vector<float> g(bucket.size), expect(bucket.size, 0.0f);
        for (int k = 0; k < n; ++k)
            for (std::size_t i = 0; i < rows; ++i)
                for (std::size_t j = 0; j < cols; ++j) {
                    const float u1 = float(i + 1) / 8.0f, u2 = float(i % 3) - 1.0f;
                    const float v = u1 * float(j % 4 + k + step) + u2 * float(int(j) - 3 * k) * 0.5f;
                    expect[i * cols + j] += v;
                    if (k == me) g[i * cols + j] = v;
                }
        for (std::size_t e = 0; e < extra; ++e) {
            g[rows * cols + e] = float(me + 1) * float(e);
            expect[rows * cols + e] = float(n * (n + 1) / 2) * float(e);
        }
        const std::size_t allocs = dtrain::test::allocation_count;
        hook.reduce(comm, dtrain::GradBucket<float>{dtrain::Span<float>(g.data(), g.size()), 0, bucket});
        INFO("step " << step);
        if (step > 0) CHECK(dtrain::test::allocation_count == allocs);
        CHECK(dtrain::test::max_rel_diff(g, expect) < 1e-4);
        for (std::size_t e = 0; e < extra; ++e)  // the raw values are the plain sum
            CHECK(g[rows * cols + e] == expect[rows * cols + e]);
        CHECK(same_on_all_ranks(g));
        hook.commit();
        // Each rank keeps its matrix minus the mean approximation: over the ranks nothing is left.
        std::vector<float> left(hook.residual().begin(), hook.residual().end());
        MPI_Allreduce(MPI_IN_PLACE, left.data(), int(left.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        for (float v : left)
            CHECK(std::fabs(v) < 1e-4f);
    }
}

TEST_CASE("Error feedback: the residual keeps what the rank-r approximation did not send",
          "[dist][powersgd]") {
    const std::size_t rows = 10, cols = 8, extra = 3;
    dtrain::Bucket bucket;
    PowerSgdHook<float> hook = direct_hook(rows, cols, extra, 1, bucket);
    dtrain::Collective comm;
    const float n = float(dtrain::world_size());
    dtrain::Rng rng(7 + std::uint64_t(dtrain::world_rank()));
    std::vector<float> g = dtrain::test::random_floats(bucket.size, rng), m = g;  // full rank
    hook.reduce(comm, dtrain::GradBucket<float>{dtrain::Span<float>(g.data(), g.size()), 0, bucket});
    hook.commit();
    std::vector<float> res(hook.residual().begin(), hook.residual().end());
    double left = 0.0;
    for (std::size_t i = 0; i < rows * cols; ++i) {
        CHECK(res[i] == m[i] - g[i] * (1.0f / n));  // residual = M - (P Q^T) / size
        left += double(res[i]) * res[i];
    }
    CHECK(left > 1e-3);  // a rank-1 approximation of a random matrix leaves something
    for (std::size_t e = rows * cols; e < bucket.size; ++e)
        CHECK(res[e] == 0.0f);  // raw values are sent whole
    // With a zero gradient the next step sends the residual: what is sent plus what is kept again is it.
    std::vector<float> zero(bucket.size, 0.0f);
    hook.reduce(comm, dtrain::GradBucket<float>{dtrain::Span<float>(zero.data(), zero.size()), 0, bucket});
    hook.commit();
    if (dtrain::world_size() == 1) {
        for (std::size_t i = 0; i < rows * cols; ++i)
            CHECK(std::fabs(zero[i] + hook.residual()[i] - res[i]) < 1e-5f);
    }
    // Sent over both steps plus kept is every rank's gradient summed: out1 + out2 + sum_k res2_k = sum_k M_k.
    std::vector<float> kept(hook.residual().begin(), hook.residual().end());
    MPI_Allreduce(MPI_IN_PLACE, kept.data(), int(kept.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    std::vector<float> total = m;
    MPI_Allreduce(MPI_IN_PLACE, total.data(), int(total.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (std::size_t i = 0; i < rows * cols; ++i)
        CHECK(std::fabs(g[i] + zero[i] + kept[i] - total[i]) < 1e-4f);
}

TEMPLATE_TEST_CASE("PowerSGD training is bitwise the same on every rank and from run to run, allocation-free",
                   "[dist][powersgd]", dtrain::Collective, dtrain::Ring) {
    const bool overlap = GENERATE(true, false);
    INFO("overlap " << overlap);
    const dtrain::test::SyncRun a = train<TestType>(options(1, 3), 10, overlap);
    const dtrain::test::SyncRun b = train<TestType>(options(1, 3), 10, overlap);
    CHECK(a.params == b.params);
    CHECK(a.state == b.state);
    CHECK(same_on_all_ranks(a.params));
    CHECK(a.allocations == 0);
    for (float v : a.params)
        CHECK(std::isfinite(v));
    // PowerSGD did change the training: the plain all-reduce (never started) gives other parameters.
    const dtrain::test::SyncRun plain = train<TestType>(options(1, 1000), 10, overlap);
    CHECK(plain.params != a.params);
    CHECK(a.loss < 1.5 * plain.loss);  // and still trains
    Model<float> untrained = make_model();
    CHECK(a.loss < dtrain::test::sync_eval_loss(untrained));
    CHECK(a.state.back() == 3.0f);  // the applied steps, counted up to start_iter
}

TEST_CASE("Checkpoints resume PowerSGD bitwise; a skipped step keeps its state",
          "[dist][powersgd][checkpoint]") {
    const std::string path = dtrain::test::shared_temp_path("dtrain_powersgd", "resume.ckpt");
    dtrain::SyncOptions so;
    so.bucket_bytes = 400;
    so.nonfinite = dtrain::NonFinite::Skip;
    const PowerSgdOptions o = options(1, 2);
    const auto sgd = [] { return dtrain::SGD<float>(dtrain::SGDOptions().lr(0.05).momentum(0.9)); };
    std::vector<float> straight, straight_state;
    {
        Model<float> model = make_model();
        dtrain::DistOptimizer<dtrain::Ring, dtrain::SGD<float>> opt(model, sgd(), so);
        PowerSgdHook<float>& hook = opt.register_comm_hook(PowerSgdHook<float>(model, o));
        for (int s = 0; s < 4; ++s)
            one_step(opt, model, s);
        CHECK(hook.started());
        const std::vector<float> before(hook.state().begin(), hook.state().end());
        one_step(opt, model, 99, /*nan=*/true);  // skipped: the state stays
        CHECK(opt.skipped_steps() == 1);
        CHECK(std::vector<float>(hook.state().begin(), hook.state().end()) == before);
        dtrain::save_checkpoint(path, opt, {0, 0, 4});
        for (int s = 4; s < 8; ++s)
            one_step(opt, model, s);
        straight.assign(model.parameters().begin(), model.parameters().end());
        straight_state.assign(hook.state().begin(), hook.state().end());
    }
    {
        Model<float> model = make_model();
        dtrain::DistOptimizer<dtrain::Ring, dtrain::SGD<float>> opt(model, sgd(), so);
        opt.register_comm_hook(PowerSgdHook<float>(model, o));
        dtrain::load_checkpoint(path, opt);
        for (int s = 4; s < 8; ++s)
            one_step(opt, model, s);
        CHECK(std::vector<float>(model.parameters().begin(), model.parameters().end()) == straight);
        CHECK(std::vector<float>(opt.comm_hook_state().begin(), opt.comm_hook_state().end()) ==
              straight_state);
    }
    {  // another rank refuses the checkpoint, naming both
        Model<float> model = make_model();
        dtrain::DistOptimizer<dtrain::Ring, dtrain::SGD<float>> opt(model, sgd(), so);
        opt.register_comm_hook(PowerSgdHook<float>(model, options(2, 2)));
        CHECK_THAT(dtrain::test::error_message([&] { dtrain::load_checkpoint(path, opt); }),
                   Catch::Contains("powersgd(rank=1,start=2)"));
    }
    if (dtrain::world_rank() == 0) std::remove(path.c_str());
}

TEST_CASE("Matrices too small to pay, and biases, are sent as they are", "[dist][powersgd]") {
    Model<float> model({6}, 1);
    model.add(dtrain::Dense<float>(6, 2)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(2, 40));
    const std::vector<dtrain::WeightMatrix> w = dtrain::weight_matrices(model);
    REQUIRE(w.size() == 2);
    CHECK(w[0].offset == 0);
    CHECK(w[0].rows == 2);
    CHECK(w[0].cols == 6);
    CHECK(w[1].offset == 14);
    CHECK(w[1].rows == 40);
    CHECK(w[1].cols == 2);
    // 2 x 6 at rank 1: (2 + 6) * 2 >= 12; 40 x 2: (40 + 2) * 2 >= 80 -- nothing pays, every value is raw.
    dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>> opt(model, dtrain::SGD<float>(0.1));
    PowerSgdHook<float>& hook = opt.register_comm_hook(PowerSgdHook<float>(model, options(1, 0)));
    CHECK(hook.compressed_matrices() == 0);
    CHECK(hook.wire_values(0) == model.parameters().size());
    // A lower min_compression_rate lets the 40 x 2 matrix through (42 * 1.5 < 80), not the 2 x 6 one.
    PowerSgdOptions lax = options(1, 0);
    lax.min_compression_rate = 1.5;
    PowerSgdHook<float>& lax_hook = opt.register_comm_hook(PowerSgdHook<float>(model, lax));
    CHECK(lax_hook.compressed_matrices() == 1);
    CHECK(lax_hook.wire_values(0) == model.parameters().size() - 80 + 42);
    CHECK(lax_hook.describe() == "powersgd(rank=1,start=0,min_rate=1.5)");
    // Nothing compressed: training is bitwise the plain all-reduce's.
    PowerSgdOptions never = options(1, 0);
    never.min_compression_rate = 1e9;
    Model<float> a = make_model(), b = make_model();
    dtrain::DistOptimizer<dtrain::Ring, dtrain::SGD<float>> oa(a, dtrain::SGD<float>(0.1));
    dtrain::DistOptimizer<dtrain::Ring, dtrain::SGD<float>> ob(b, dtrain::SGD<float>(0.1));
    ob.register_comm_hook(PowerSgdHook<float>(b, never));
    for (int s = 0; s < 3; ++s) {
        one_step(oa, a, s);
        one_step(ob, b, s);
    }
    CHECK(std::vector<float>(a.parameters().begin(), a.parameters().end()) ==
          std::vector<float>(b.parameters().begin(), b.parameters().end()));
    CHECK_THAT(dtrain::test::error_message([] { PowerSgdHook<float>({}, options(0, 0)); }),
               Catch::Contains("rank must be at least 1"));
}

// DistOptimizer<Async, Opt>: invalid configurations fail with a clear message on every rank, before training;
// misuse during training (nested run(), global_sum on a master) fails with a message naming the rank.
#include <catch2/catch.hpp>

#include <string>

#include <dtrain/distributed/async.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/optim/sgd.hpp>
#include <support/test_utils.hpp>

namespace {

using dtrain::test::all_ranks;
using dtrain::test::world_rank;
using dtrain::test::world_size;
using AsyncSgd = dtrain::DistOptimizer<dtrain::Async, dtrain::SGD<float>>;

dtrain::Model<float> mlp(std::size_t hidden) {
    dtrain::Model<float> m({4}, 1);
    m.add(dtrain::Dense<float>(4, hidden)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(hidden, 3));
    return m;
}

// The message the constructor throws on this rank ("" when it does not throw).
std::string construct(dtrain::Model<float>& model, const dtrain::AsyncOptions& options) {
    return dtrain::test::error_message([&] { AsyncSgd opt(model, dtrain::SGD<float>(0.1), options); });
}

}  // namespace

TEST_CASE("Async: fewer than masters + 1 ranks fails on every rank", "[dist][async]") {
    dtrain::Model<float> model = mlp(8);
    dtrain::AsyncOptions options;
    options.masters = world_size();  // no rank left for a worker
    const std::string what = construct(model, options);
    INFO(what);
    CHECK(what.find(std::to_string(world_size()) + " master(s) need at least " +
                    std::to_string(world_size() + 1) + " ranks") != std::string::npos);
    CHECK(all_ranks(!what.empty()));

    options.masters = 0;
    const std::string zero = construct(model, options);
    CHECK(zero.find("options.masters must be at least 1, got 0") != std::string::npos);
}

TEST_CASE("Async: ranks that disagree on the model or the options fail on every rank", "[dist][async]") {
    if (world_size() < 2) return;
    dtrain::Model<float> model = mlp(world_rank() == 1 ? 9 : 8);
    const std::string what = construct(model, dtrain::AsyncOptions{});
    INFO(what);
    CHECK(what.find("the models differ across ranks: layer 0 is Dense(4, 8) (40 parameters) on rank 0 but "
                    "Dense(4, 9) (45 parameters) on rank 1") != std::string::npos);

    dtrain::Model<float> same = mlp(8);
    dtrain::AsyncOptions options;
    options.staleness = world_rank() == 0 ? 3 : 4;
    const std::string opts = construct(same, options);
    INFO(opts);
    CHECK(opts.find("the options differ across ranks: staleness is 3 on rank 0 but 4 on rank 1") !=
          std::string::npos);

    // After the failures, a valid configuration still works (nothing was left pending).
    dtrain::Model<float> ok = mlp(8);
    CHECK(construct(ok, dtrain::AsyncOptions{}).empty());
}

TEST_CASE("Async: ranks whose models differ only in their layer layout fail on every rank", "[dist][async]") {
    if (world_size() < 2) return;
    // Same parameter count (51), state size (0) and layer count (3), different per-layer split: only the
    // layout hash tells the models apart. The last rank builds the second one.
    dtrain::Model<float> model({4}, 1);
    if (world_rank() == world_size() - 1)
        model.add(dtrain::Dense<float>(4, 3)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(3, 9));
    else
        model.add(dtrain::Dense<float>(4, 6)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(6, 3));
    REQUIRE(model.num_parameters() == 51);
    const std::string what = construct(model, dtrain::AsyncOptions{});
    INFO(what);
    CHECK(what.find("the models differ across ranks: layer 0 is Dense(4, 6) (30 parameters) on rank 0 but "
                    "Dense(4, 3) (15 parameters) on rank " +
                    std::to_string(world_size() - 1)) != std::string::npos);
}

TEST_CASE("Async: a root that is not a rank or accumulation_steps 0 fails on every rank", "[dist][async]") {
    if (world_size() < 2) return;  // one rank fails earlier: no rank is left for a worker
    const int size = world_size();
    dtrain::Model<float> model = mlp(8);
    dtrain::AsyncOptions options;
    options.root = size;
    const std::string root = construct(model, options);
    INFO(root);
    CHECK(root.find("DistOptimizer<Async>: root " + std::to_string(size) +
                    " is not a rank of a communicator of size " + std::to_string(size)) != std::string::npos);
    options.root = -1;
    CHECK(construct(model, options).find("root -1 is not a rank") != std::string::npos);

    options = dtrain::AsyncOptions{};
    options.accumulation_steps = 0;
    const std::string accum = construct(model, options);
    INFO(accum);
    CHECK(accum.find("options.accumulation_steps must be at least 1, got 0") != std::string::npos);
}

TEST_CASE("Async: run() called from the worker loop and global_sum() on a master throw", "[dist][async]") {
    if (world_size() < 2) return;
    dtrain::Model<float> model = mlp(8);
    AsyncSgd opt(model, dtrain::SGD<float>(0.1), dtrain::AsyncOptions{});
    std::string nested;
    double sum = 0.0;
    opt.run([&] {
        nested = dtrain::test::error_message([&] { opt.run([] {}); });
        sum = opt.global_sum(1.0);  // collective over the workers only
    });
    INFO(nested);
    if (opt.is_worker()) {
        CHECK(nested.find("run() is not reentrant") != std::string::npos);
        CHECK(sum == double(opt.num_workers()));
    } else {
        CHECK(nested.empty());  // masters never run the worker loop
        CHECK_THROWS_WITH(
            opt.global_sum(1.0),
            Catch::Contains("global_sum: rank " + std::to_string(world_rank()) + " is a master"));
    }
}

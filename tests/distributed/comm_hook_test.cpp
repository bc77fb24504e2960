// Communication hooks (distributed/comm_hook.hpp, DistOptimizer::register_comm_hook): the built-in hooks
// registered explicitly train bitwise as SyncOptions::compression does, with and without overlap; user
// hooks of the nonblocking and of the blocking form give the plain all-reduce's parameters; a stateful hook
// commits only applied steps and its state goes through checkpoints; registration is checked on every rank.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <mpi.h>

#include <dtrain/comm/collective.hpp>
#include <dtrain/comm/ring.hpp>
#include <dtrain/core/hash.hpp>
#include <dtrain/distributed/checkpoint.hpp>
#include <dtrain/distributed/comm_hook.hpp>
#include <dtrain/distributed/compression_hook.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/losses/mse.hpp>
#include <dtrain/optim/sgd.hpp>
#include <support/test_utils.hpp>

#include "sync_training_run.hpp"

namespace {

using dtrain::Compression;
using dtrain::GradBucket;
using dtrain::Model;
using dtrain::Tensor;

using Run = dtrain::test::SyncRun;
using dtrain::test::sync_batch;

Model<float> make_model() {
    return dtrain::test::make_sync_model();
}

/// A user hook of the nonblocking form: the plain all-reduce, counting the buckets it finished.
struct PlainHook {
    std::size_t finished = 0;
    std::string describe() const { return "plain"; }
    template <class Comm>
    typename Comm::Request start(Comm& comm, const GradBucket<float>& b) {
        return comm.iallreduce_sum(b.grads);
    }
    void finish(const GradBucket<float>&) { ++finished; }
};

/// A user hook of the blocking form only, which also runs under overlap.
struct BlockingHook {
    std::string describe() const { return "blocking"; }
    template <class Comm>
    void reduce(Comm& comm, const GradBucket<float>& b) {
        comm.allreduce_sum(b.grads);
    }
};

/// A stateful hook: its state counts the applied steps (commit()), saved by checkpoints.
struct CountingHook {
    std::vector<float> count;
    std::size_t buckets = 0;
    void setup(const dtrain::CommHookContext& ctx) {
        count.assign(1, 0.0f);
        buckets = ctx.buckets.size();
    }
    std::string describe() const { return "counting"; }
    template <class Comm>
    void reduce(Comm& comm, const GradBucket<float>& b) {
        comm.allreduce_sum(b.grads);
    }
    void commit() { count[0] += 1.0f; }
    dtrain::Span<float> state() { return dtrain::Span<float>(count.data(), count.size()); }
};

/// `steps` steps of SGD with momentum under `o`; `install(opt)` registers a hook first.
template <class Comm, class Install>
Run train(const dtrain::SyncOptions& o, int steps, Install&& install) {
    return dtrain::test::sync_run<Comm>(o, steps, std::forward<Install>(install));
}

dtrain::CompressionHook<float> builtin(Compression c, double ratio) {
    switch (c) {
        case Compression::Fp16:
            return dtrain::fp16_compress_hook<float>();
        case Compression::Bf16:
            return dtrain::bf16_compress_hook<float>();
        case Compression::TopK:
            return dtrain::topk_compress_hook<float>(ratio);
        default:
            return dtrain::allreduce_hook<float>();
    }
}

}  // namespace

TEMPLATE_TEST_CASE("The built-in hooks registered explicitly train bitwise as SyncOptions::compression",
                   "[dist][comm_hook]", dtrain::Collective, dtrain::Ring) {
    const bool overlap = GENERATE(true, false);
    const std::size_t accum = GENERATE(1, 2);
    dtrain::SyncOptions o;
    o.bucket_bytes = 256;  // five buckets, the first layer split in pieces
    o.overlap = overlap;
    o.accumulation_steps = accum;
    constexpr double ratio = 0.25;
    for (Compression c : {Compression::None, Compression::Fp16, Compression::Bf16, Compression::TopK}) {
        INFO(dtrain::compression_name(c) << ", overlap " << overlap << ", accumulation_steps " << accum);
        dtrain::SyncOptions by_options = o;
        by_options.compression = c;
        by_options.topk_ratio = ratio;
        const Run a = train<TestType>(by_options, 8, [](auto&) {});
        const Run b = train<TestType>(o, 8, [&](auto& opt) {
            auto& hook = opt.register_comm_hook(builtin(c, ratio));
            CHECK(&hook == opt.template comm_hook<dtrain::CompressionHook<float>>());
            CHECK(&hook.compressor() == &opt.compressor());
            CHECK(opt.comm_hook_description() == dtrain::describe_compression(c, ratio));
        });
        CHECK(a.params == b.params);
        CHECK(a.state == b.state);  // top-k residuals; empty otherwise
        CHECK(a.state.size() == (c == Compression::TopK ? a.params.size() : 0));
        CHECK(b.allocations == 0);
        CHECK(dtrain::test::all_ranks(a.params == b.params));
    }
}

TEST_CASE(
    "User hooks, nonblocking and blocking, give the plain all-reduce's parameters with and without "
    "overlap",
    "[dist][comm_hook]") {
    const bool overlap = GENERATE(true, false);
    dtrain::SyncOptions o;
    o.bucket_bytes = 256;
    o.overlap = overlap;
    INFO("overlap " << overlap);
    const Run plain = train<dtrain::Ring>(o, 6, [](auto&) {});
    std::size_t buckets = 0, finished = 0;
    const Run nonblocking = train<dtrain::Ring>(o, 6, [&](auto& opt) {
        opt.register_comm_hook(PlainHook{});
        buckets = opt.buckets().size();
        CHECK(opt.template comm_hook<dtrain::CompressionHook<float>>() == nullptr);
        CHECK(opt.compressor().setting() == Compression::None);  // the idle one
    });
    const Run blocking =
        train<dtrain::Ring>(o, 6, [&](auto& opt) { opt.register_comm_hook(BlockingHook{}); });
    CHECK(nonblocking.params == plain.params);
    CHECK(blocking.params == plain.params);
    // Every bucket is finished once per step, also at one rank (reduce(): start(), wait(), finish()).
    Model<float> model = make_model();
    dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>> opt(model, dtrain::SGD<float>(0.1), o);
    PlainHook& hook = opt.register_comm_hook(PlainHook{});
    Tensor<float> x, y, grad;
    sync_batch(opt.rank(), 0, 0, x, y);
    opt.zero_grad();
    dtrain::MeanSquaredError<float>().compute(model.forward(x), y, grad);
    model.backward(grad);
    opt.step();
    finished = hook.finished;
    CHECK(buckets == 5);
    CHECK(finished == opt.buckets().size());
}

TEST_CASE("A stateful hook commits applied steps only, and checkpoints save and restore its state",
          "[dist][comm_hook][checkpoint]") {
    const std::string path = dtrain::test::shared_temp_path("dtrain_comm_hook", "counting.ckpt");
    {
        Model<float> model = make_model();
        dtrain::SyncOptions o;
        o.nonfinite = dtrain::NonFinite::Skip;
        dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>> opt(model, dtrain::SGD<float>(0.1), o);
        CountingHook& hook = opt.register_comm_hook(CountingHook{});
        CHECK(hook.buckets == opt.buckets().size());
        Tensor<float> x, y, grad;
        for (int s = 0; s < 4; ++s) {
            sync_batch(opt.rank(), s, 0, x, y);
            opt.zero_grad();
            dtrain::MeanSquaredError<float>().compute(model.forward(x), y, grad);
            model.backward(grad);
            if (s == 2) model.gradients()[3] = std::numeric_limits<float>::quiet_NaN();
            opt.step();
        }
        CHECK(opt.skipped_steps() == 1);
        CHECK(hook.count[0] == 3.0f);
        dtrain::save_checkpoint(path, opt, {0, 0, 4});
    }
    {
        Model<float> model = make_model();
        dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>> opt(model, dtrain::SGD<float>(0.1));
        CountingHook& hook = opt.register_comm_hook(CountingHook{});
        dtrain::load_checkpoint(path, opt);
        CHECK(hook.count[0] == 3.0f);
    }
    {  // a run without the hook refuses its checkpoint, naming both
        Model<float> model = make_model();
        dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>> opt(model, dtrain::SGD<float>(0.1));
        CHECK_THAT(
            dtrain::test::error_message([&] { dtrain::load_checkpoint(path, opt); }),
            Catch::Contains("written with gradient compression counting, this DistOptimizer uses none"));
    }
    if (dtrain::world_rank() == 0) std::remove(path.c_str());
}

TEST_CASE("A checkpoint of the top-k options loads into a run with the top-k hook registered, and back",
          "[dist][comm_hook][checkpoint]") {
    const std::string path = dtrain::test::shared_temp_path("dtrain_comm_hook", "topk.ckpt");
    const auto one_step = [&](auto& opt, Model<float>& model) {
        Tensor<float> x, y, grad;
        sync_batch(opt.rank(), 0, 0, x, y);
        opt.zero_grad();
        dtrain::MeanSquaredError<float>().compute(model.forward(x), y, grad);
        model.backward(grad);
        opt.step();
    };
    dtrain::SyncOptions o;
    o.compression = Compression::TopK;
    o.topk_ratio = 0.1;
    std::vector<float> residual;
    {
        Model<float> model = make_model();
        dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>> opt(model, dtrain::SGD<float>(0.1), o);
        one_step(opt, model);
        residual.assign(opt.comm_hook_state().begin(), opt.comm_hook_state().end());
        dtrain::save_checkpoint(path, opt, {0, 0, 1});
    }
    {
        Model<float> model = make_model();
        dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>> opt(model, dtrain::SGD<float>(0.1));
        opt.register_comm_hook(dtrain::topk_compress_hook<float>(0.1));
        dtrain::load_checkpoint(path, opt);
        CHECK(std::vector<float>(opt.compressor().residual().begin(), opt.compressor().residual().end()) ==
              residual);
        dtrain::save_checkpoint(path, opt, {0, 0, 1});
    }
    Model<float> model = make_model();
    dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>> opt(model, dtrain::SGD<float>(0.1), o);
    dtrain::load_checkpoint(path, opt);
    CHECK(std::vector<float>(opt.compressor().residual().begin(), opt.compressor().residual().end()) ==
          residual);
    if (dtrain::world_rank() == 0) std::remove(path.c_str());
}

TEST_CASE("Registration is checked on every rank: the same hook, between steps", "[dist][comm_hook]") {
    Model<float> model = make_model();
    dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>> opt(model, dtrain::SGD<float>(0.1));
    if (dtrain::world_size() > 1) {
        const std::string what = dtrain::test::error_message([&] {
            if (opt.rank() == 0)
                opt.register_comm_hook(dtrain::fp16_compress_hook<float>());
            else
                opt.register_comm_hook(dtrain::bf16_compress_hook<float>());
        });
        CHECK_THAT(what,
                   Catch::Contains("register_comm_hook: the communication hooks differ across ranks: the "
                                   "hook is fp16 on rank 0 but bf16 on rank 1"));
        CHECK(opt.comm_hook_description() == "none");  // the hook before stays
    }
    Tensor<float> x, y, grad;
    sync_batch(opt.rank(), 0, 0, x, y);
    opt.zero_grad();
    dtrain::MeanSquaredError<float>().compute(model.forward(x), y, grad);
    model.backward(grad);
    CHECK_THAT(dtrain::test::error_message([&] { opt.register_comm_hook(PlainHook{}); }),
               Catch::Contains("call it between steps"));
    opt.step();
    CHECK_THAT(
        dtrain::test::error_message([&] { opt.register_comm_hook(dtrain::topk_compress_hook<float>(2.0)); }),
        Catch::Contains("topk_ratio must be in (0, 1]"));
    CHECK(opt.comm_hook_description() == "none");
    CHECK(dtrain::is_comm_hook_v<PlainHook, dtrain::Ring, float>);
    CHECK(dtrain::is_comm_hook_v<BlockingHook, dtrain::Ring, float>);
    CHECK(!dtrain::is_comm_hook_v<PlainHook, dtrain::Ring, double>);
    CHECK(!dtrain::is_comm_hook_v<Run, dtrain::Ring, float>);
}

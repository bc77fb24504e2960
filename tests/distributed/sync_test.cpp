// Synchronous DistOptimizer: equivalence with single-process training on the concatenated batch (every
// policy, with and without bucketing, overlap and gradient accumulation), determinism, bitwise-identical
// ranks, layout and option mismatches, accumulation misuse, model-state synchronisation and metrics.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <dtrain/comm/collective.hpp>
#include <dtrain/comm/naive.hpp>
#include <dtrain/comm/ring.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/batchnorm.hpp>
#include <dtrain/nn/layers/conv2d.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/flatten.hpp>
#include <dtrain/nn/layers/pool2d.hpp>
#include <dtrain/nn/losses/cross_entropy.hpp>
#include <dtrain/optim/adam.hpp>
#include <dtrain/optim/adamw.hpp>
#include <dtrain/optim/schedule.hpp>
#include <dtrain/optim/sgd.hpp>
#include <support/test_utils.hpp>

namespace {

using dtrain::Model;
using dtrain::Tensor;
using Factory = std::function<Model<float>(std::uint64_t seed)>;

constexpr std::size_t kClasses = 3;

Model<float> make_mlp(std::uint64_t seed) {
    Model<float> m({6}, seed);
    m.add(dtrain::Dense<float>(6, 16)).add(dtrain::ReLU<float>());
    m.add(dtrain::Dense<float>(16, 8)).add(dtrain::Tanh<float>());
    m.add(dtrain::Dense<float>(8, kClasses));
    return m;
}

Model<float> make_cnn(std::uint64_t seed) {
    Model<float> m({1, 6, 6}, seed);
    m.add(dtrain::Conv2d<float>(1, 3, 3)).add(dtrain::ReLU<float>()).add(dtrain::MaxPool2d<float>(2));
    m.add(dtrain::Flatten<float>()).add(dtrain::Dense<float>(12, kClasses));
    return m;
}

/// The global batch of step `step`: `n` samples of `shape` and their labels, identical on every rank.
struct Batch {
    Tensor<float> x;
    dtrain::Labels y;
};

Batch global_batch(std::size_t step, std::size_t n, const dtrain::Shape& shape) {
    dtrain::Rng rng(1000 + step);
    Batch b{dtrain::test::random_tensor<float>(dtrain::batch_shape(n, shape), rng),
            dtrain::Labels::from_shape({n})};
    for (std::size_t i = 0; i < n; ++i)
        b.y(i) = std::int32_t(rng.below(kClasses));
    return b;
}

/// Rows [first, first + count) of a batch.
Batch rows(const Batch& b, std::size_t first, std::size_t count) {
    auto shape = b.x.shape();
    const std::size_t per = b.x.size() / shape[0];
    std::vector<std::size_t> s(shape.begin(), shape.end());
    s[0] = count;
    Batch r{Tensor<float>::from_shape(s), dtrain::Labels::from_shape({count})};
    std::copy(b.x.data() + first * per, b.x.data() + (first + count) * per, r.x.data());
    for (std::size_t i = 0; i < count; ++i)
        r.y(i) = b.y(first + i);
    return r;
}

dtrain::SGD<float> make_sgd() {
    return dtrain::SGD<float>(dtrain::SGDOptions().lr(0.05).momentum(0.9));
}

/// The message of the dtrain::Error that constructing DistOptimizer<Comm, SGD<float>> over `model` with
/// `options` throws on this rank ("" when it does not throw).
template <class Comm = dtrain::Collective>
std::string construction_error(Model<float>& model, const dtrain::SyncOptions& options = {}) {
    return dtrain::test::error_message(
        [&] { dtrain::DistOptimizer<Comm, dtrain::SGD<float>> opt(model, make_sgd(), options); });
}

constexpr std::size_t kSteps = 20;
constexpr std::size_t kBatch = 4;  // per rank and per backward pass

/// Single-process reference: kSteps steps on the whole global batch of p * k * kBatch samples.
std::vector<float> train_reference(const Factory& make, std::size_t accum) {
    const std::size_t p = std::size_t(dtrain::test::world_size());
    Model<float> model = make(7);  // the root's seed
    auto opt = make_sgd();
    dtrain::SoftmaxCrossEntropy<float> loss;
    Tensor<float> grad;
    for (std::size_t s = 0; s < kSteps; ++s) {
        const Batch b = global_batch(s, p * accum * kBatch, model.input_shape());
        model.zero_grad();
        loss.compute(model.forward(b.x), b.y, grad);
        model.backward(grad);
        opt.step(model.parameters(), model.gradients());
    }
    return {model.parameters().begin(), model.parameters().end()};
}

/// kSteps distributed steps; every rank starts from a different model (seed 7 + rank), so the initial
/// broadcast from the root matters. Backward pass j of rank r uses rows ((j * p + r) * kBatch, ...].
template <class Comm, class Opt = dtrain::SGD<float>>
std::vector<float> train_dist(const Factory& make, dtrain::SyncOptions options, Opt local = make_sgd()) {
    const int rank = dtrain::test::world_rank();
    const std::size_t p = std::size_t(dtrain::test::world_size());
    Model<float> model = make(7 + std::uint64_t(rank));
    dtrain::DistOptimizer<Comm, Opt> opt(model, std::move(local), options);
    dtrain::SoftmaxCrossEntropy<float> loss;
    Tensor<float> grad;
    const std::size_t k = options.accumulation_steps;
    opt.run([&] {
        for (std::size_t s = 0; s < kSteps; ++s) {
            const Batch g = global_batch(s, p * k * kBatch, model.input_shape());
            opt.zero_grad();
            for (std::size_t j = 0; j < k; ++j) {
                const Batch b = rows(g, (j * p + std::size_t(rank)) * kBatch, kBatch);
                loss.compute(model.forward(b.x), b.y, grad);
                model.backward(grad);
            }
            opt.step();
        }
    });
    return {model.parameters().begin(), model.parameters().end()};
}

/// True on every rank when every rank's `v` is bitwise equal to rank 0's.
bool bitwise_equal_across_ranks(const std::vector<float>& v) {
    std::vector<float> root = v;
    MPI_Bcast(root.data(), int(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
    return dtrain::test::all_ranks(std::memcmp(root.data(), v.data(), v.size() * sizeof(float)) == 0);
}

dtrain::SyncOptions make_options(std::size_t bucket_bytes, bool overlap, std::size_t accum) {
    dtrain::SyncOptions o;
    o.bucket_bytes = bucket_bytes;
    o.overlap = overlap;
    o.accumulation_steps = accum;
    return o;
}

template <class Comm>
void check_equivalence(const Factory& make, const dtrain::SyncOptions& o) {
    INFO("bucket_bytes " << o.bucket_bytes << ", overlap " << o.overlap << ", accumulation_steps "
                         << o.accumulation_steps);
    const auto ref = train_reference(make, o.accumulation_steps);
    const auto got = train_dist<Comm>(make, o);
    REQUIRE(got.size() == ref.size());
    CHECK(dtrain::test::max_rel_diff(got, ref) <= 1e-5);
    // The reference moved: the test would pass trivially if training did nothing.
    const Model<float> init = make(7);
    CHECK(dtrain::test::max_rel_diff(got, init.parameters()) > 1e-3);
    CHECK(bitwise_equal_across_ranks(got));
}

}  // namespace

TEMPLATE_TEST_CASE("DistOptimizer on p ranks with batch b equals one process with batch p*b (MLP)",
                   "[dist][sync]", dtrain::Collective, dtrain::Ring, dtrain::Naive) {
    // One bucket (default size, overlap), one bucket per layer with and without overlap, and gradient
    // accumulation over 3 backward passes with per-layer buckets and overlap, and with one blocking bucket.
    check_equivalence<TestType>(make_mlp, make_options(std::size_t(4) << 20, true, 1));
    check_equivalence<TestType>(make_mlp, make_options(0, true, 1));
    check_equivalence<TestType>(make_mlp, make_options(0, false, 1));
    check_equivalence<TestType>(make_mlp, make_options(0, true, 3));
    check_equivalence<TestType>(make_mlp, make_options(std::size_t(4) << 20, false, 3));
    // 64-value buckets: every Dense layer is split into pieces, updated one by one by the pipelined step.
    check_equivalence<TestType>(make_mlp, make_options(256, true, 1));
}

TEMPLATE_TEST_CASE("DistOptimizer on p ranks with batch b equals one process with batch p*b (CNN)",
                   "[dist][sync]", dtrain::Collective, dtrain::Ring, dtrain::Naive) {
    check_equivalence<TestType>(make_cnn, make_options(0, true, 1));
    check_equivalence<TestType>(make_cnn, make_options(std::size_t(4) << 20, false, 2));
}

TEST_CASE("DistOptimizer training is deterministic and bitwise identical on every rank", "[dist][sync]") {
    const auto o = make_options(64, true, 1);  // several small buckets, overlapped
    const auto a = train_dist<dtrain::Ring>(make_mlp, o);
    const auto b = train_dist<dtrain::Ring>(make_mlp, o);
    CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    CHECK(bitwise_equal_across_ranks(a));
    const auto c = train_dist<dtrain::Collective>(make_cnn, make_options(0, true, 2));
    const auto d = train_dist<dtrain::Collective>(make_cnn, make_options(0, true, 2));
    CHECK(std::memcmp(c.data(), d.data(), c.size() * sizeof(float)) == 0);
    CHECK(bitwise_equal_across_ranks(c));
}

TEST_CASE(
    "DistOptimizer's pipelined step (optimizer per bucket during the reductions) is bitwise the plain "
    "one with whole-layer buckets, within 1e-6 with split layers",
    "[dist][sync]") {
    // With overlap, step() updates bucket by bucket with step_range() while the next bucket is reduced;
    // without, it reduces everything and then calls step(). Ring's blocking and nonblocking reductions add
    // in the same order and step_range() is bitwise step() (optim tests), so with bucket_bytes = 0 (whole
    // layers, no partial-gradient hook) the two are bitwise equal. With bucket_bytes > 0, Dense computes
    // its weight gradient in parts with overlap, and the split GEMM may round differently. Both for SGD and
    // for Adam (which also needs its step count to advance once per step, not per bucket).
    for (std::size_t bucket_bytes : {std::size_t(0), std::size_t(256)}) {
        INFO("bucket_bytes " << bucket_bytes);
        const auto a = train_dist<dtrain::Ring>(make_mlp, make_options(bucket_bytes, true, 1));
        const auto b = train_dist<dtrain::Ring>(make_mlp, make_options(bucket_bytes, false, 1));
        const dtrain::Adam<float> adam(dtrain::AdamOptions().lr(0.01));
        const auto c = train_dist<dtrain::Ring>(make_mlp, make_options(bucket_bytes, true, 1), adam);
        const auto d = train_dist<dtrain::Ring>(make_mlp, make_options(bucket_bytes, false, 1), adam);
        REQUIRE(a.size() == b.size());
        REQUIRE(c.size() == d.size());
        if (bucket_bytes == 0) {
            CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
            CHECK(std::memcmp(c.data(), d.data(), c.size() * sizeof(float)) == 0);
        } else {
            CHECK(dtrain::test::max_rel_diff(a, b) <= 1e-6);
            CHECK(dtrain::test::max_rel_diff(c, d) <= 1e-6);
        }
        CHECK(bitwise_equal_across_ranks(c));
        CHECK(dtrain::test::max_rel_diff(c, a) > 1e-3);  // Adam did something different from SGD
    }
}

TEST_CASE("DistOptimizer with the progress thread forced on and off gives the same result", "[dist][sync]") {
    // On a node with fewer than two CPUs per rank (CI machines) the progress thread is off by default;
    // DTRAIN_PROGRESS_THREAD=1 forces it whenever it can run at all (more than one rank and bucket,
    // overlap, MPI_THREAD_MULTIPLE, which the test main requests), so at np >= 2 its code path runs here
    // even on such machines; progress_thread() shows whether it was started.
    const auto o = make_options(256, true, 1);
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    const bool can_run = dtrain::test::world_size() > 1 && provided == MPI_THREAD_MULTIPLE;
    if (dtrain::test::world_size() > 1 && !can_run) WARN("MPI does not provide MPI_THREAD_MULTIPLE");
    auto started = [](const dtrain::SyncOptions& opts) {
        Model<float> model = make_mlp(1);
        dtrain::DistOptimizer<dtrain::Ring, dtrain::SGD<float>> opt(model, make_sgd(), opts);
        return opt.progress_thread();
    };
    ::setenv("DTRAIN_PROGRESS_THREAD", "1", 1);
    CHECK(started(o) == can_run);
    CHECK_FALSE(started(make_options(256, false, 1)));                  // no overlap: nothing to progress
    CHECK_FALSE(started(make_options(std::size_t(1) << 20, true, 1)));  // one bucket: reduced by step()
    const auto with = train_dist<dtrain::Ring>(make_mlp, o);
    const auto with_collective = train_dist<dtrain::Collective>(make_cnn, make_options(0, true, 1));
    ::setenv("DTRAIN_PROGRESS_THREAD", "0", 1);
    CHECK_FALSE(started(o));
    const auto without = train_dist<dtrain::Ring>(make_mlp, o);
    const auto without_collective = train_dist<dtrain::Collective>(make_cnn, make_options(0, true, 1));
    ::unsetenv("DTRAIN_PROGRESS_THREAD");
    CHECK(std::memcmp(with.data(), without.data(), with.size() * sizeof(float)) == 0);
    CHECK(dtrain::test::max_rel_diff(with_collective, without_collective) <= 1e-6);
    CHECK(bitwise_equal_across_ranks(with));
    ::setenv("DTRAIN_PROGRESS_THREAD", "yes", 1);
    const std::string msg = dtrain::test::error_message([&] { train_dist<dtrain::Ring>(make_mlp, o); });
    ::unsetenv("DTRAIN_PROGRESS_THREAD");
    if (dtrain::test::world_size() > 1)
        CHECK(msg.find("DTRAIN_PROGRESS_THREAD must be 0, 1 or auto, got 'yes'") != std::string::npos);
}

TEST_CASE("DistOptimizer builds buckets from whole layers and broadcasts the optimizer state",
          "[dist][sync]") {
    const int rank = dtrain::test::world_rank();
    Model<float> model = make_mlp(3);
    dtrain::SyncOptions o;
    o.bucket_bytes = 0;
    auto sgd = make_sgd();
    // Rank-dependent optimizer state and step count: the root's must win.
    sgd.reset(model.num_parameters());
    for (auto& v : sgd.state())
        v = float(rank + 1);
    sgd.set_steps(std::uint64_t(10 + rank));
    dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>> opt(model, std::move(sgd), o);
    REQUIRE(opt.buckets().size() == 3);  // three Dense layers, last first
    CHECK(opt.buckets()[0].first_layer == 4);
    CHECK(opt.buckets()[2].first_layer == 0);
    CHECK(opt.buckets()[2].offset == 0);
    CHECK(opt.optimizer().steps() == 10);
    bool all_one = true;
    for (float v : opt.optimizer().state())
        all_one = all_one && v == 1.0f;
    CHECK(all_one);
    CHECK(opt.optimizer().state().size() == model.num_parameters());
    CHECK(opt.is_worker());
    CHECK(opt.worker_rank() == rank);
    CHECK(opt.num_workers() == dtrain::test::world_size());
}

TEST_CASE("DistOptimizer throws on every rank when the models differ", "[dist][sync]") {
    const int rank = dtrain::test::world_rank(), size = dtrain::test::world_size();
    if (size < 2) return;
    // The last rank builds a wider hidden layer.
    const std::size_t hidden = rank == size - 1 ? 9 : 8;
    Model<float> model({4}, 1);
    model.add(dtrain::Dense<float>(4, hidden)).add(dtrain::Dense<float>(hidden, 2));
    const std::string what = construction_error(model);
    INFO(what);
    CHECK(what.find("the models differ across ranks: layer 0 is Dense(4, 8) (40 parameters) on rank 0 but "
                    "Dense(4, 9) (45 parameters) on rank " +
                    std::to_string(size - 1)) != std::string::npos);
}

TEST_CASE("DistOptimizer names the first differing layer when the models differ only in their layer layout",
          "[dist][sync]") {
    const int rank = dtrain::test::world_rank(), size = dtrain::test::world_size();
    if (size < 2) return;
    // Same parameter count (51), state size (0) and layer count (3), different per-layer split: only the
    // layout hash tells the models apart. The last rank builds the second one.
    Model<float> model({4}, 1);
    if (rank == size - 1)
        model.add(dtrain::Dense<float>(4, 3)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(3, 9));
    else
        model.add(dtrain::Dense<float>(4, 6)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(6, 3));
    REQUIRE(model.num_parameters() == 51);
    const std::string what = construction_error(model);
    INFO(what);
    CHECK(what.find("the models differ across ranks: layer 0 is Dense(4, 6) (30 parameters) on rank 0 but "
                    "Dense(4, 3) (15 parameters) on rank " +
                    std::to_string(size - 1)) != std::string::npos);
}

TEST_CASE("DistOptimizer names another activation or learning rate on one rank at construction",
          "[dist][sync]") {
    const int rank = dtrain::test::world_rank(), size = dtrain::test::world_size();
    if (size < 2) return;
    Model<float> model({4}, 1);
    model.add(dtrain::Dense<float>(4, 6));
    if (rank == 1)
        model.add(dtrain::Tanh<float>());
    else
        model.add(dtrain::ReLU<float>());
    model.add(dtrain::Dense<float>(6, 3));
    const std::string activation = construction_error(model);
    INFO(activation);
    CHECK(activation.find(
              "the models differ across ranks: layer 1 is ReLU (0 parameters) on rank 0 but Tanh (0 "
              "parameters) on rank 1") != std::string::npos);

    Model<float> same = make_mlp(1);
    const std::string lr = dtrain::test::error_message([&] {
        dtrain::DistOptimizer<dtrain::Ring, dtrain::SGD<float>> opt(
            same, dtrain::SGD<float>(dtrain::SGDOptions().lr(rank == 1 ? 0.1 : 0.05).momentum(0.9)));
    });
    INFO(lr);
    CHECK(lr.find(
              "the optimizers differ across ranks: the optimizer is SGD(lr=0.05, momentum=0.9, dampening=0, "
              "nesterov=false, weight_decay=0) on rank 0 but SGD(lr=0.1, momentum=0.9") != std::string::npos);
    CHECK(dtrain::test::all_ranks(!activation.empty() && !lr.empty()));
}

TEST_CASE("DistOptimizer names Adam on one rank and AdamW on another at construction", "[dist][sync]") {
    // Same learning rate, betas, eps, weight decay and state slots: only the kind of optimizer differs
    // (it used to be caught only after the whole run, when the parameters disagreed).
    const int rank = dtrain::test::world_rank(), size = dtrain::test::world_size();
    if (size < 2) return;
    Model<float> model = make_mlp(1);
    const std::string what = dtrain::test::error_message([&] {
        if (rank == 1) {
            dtrain::DistOptimizer<dtrain::Ring, dtrain::AdamW<float>> opt(
                model, dtrain::AdamW<float>(dtrain::AdamWOptions().lr(0.001).weight_decay(0.01)));
        } else {
            dtrain::DistOptimizer<dtrain::Ring, dtrain::Adam<float>> opt(
                model, dtrain::Adam<float>(dtrain::AdamOptions().lr(0.001).weight_decay(0.01)));
        }
    });
    INFO(what);
    CHECK(what.find(
              "the optimizers differ across ranks: the optimizer is Adam(lr=0.001, beta1=0.9, beta2=0.999, "
              "eps=1e-08, weight_decay=0.01) on rank 0 but AdamW(lr=0.001, beta1=0.9, beta2=0.999, "
              "eps=1e-08, weight_decay=0.01) on rank 1") != std::string::npos);
    CHECK(dtrain::test::all_ranks(!what.empty()));
}

TEST_CASE("DistOptimizer names a policy that differs across ranks at construction", "[dist][sync]") {
    // A Ring rank facing a Collective rank used to wait for the other's messages until the stall timeout.
    const int rank = dtrain::test::world_rank(), size = dtrain::test::world_size();
    if (size < 2) return;
    Model<float> model = make_mlp(1);
    const dtrain::SGD<float> sgd(dtrain::SGDOptions().lr(0.05));
    const std::string what = dtrain::test::error_message([&] {
        if (rank == 1)
            dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>> opt(model, sgd);
        else
            dtrain::DistOptimizer<dtrain::Ring, dtrain::SGD<float>> opt(model, sgd);
    });
    INFO(what);
    CHECK(
        what.find("DistOptimizer: the policies differ across ranks: policy is Ring on rank 0 but Collective "
                  "on rank 1") != std::string::npos);
    CHECK(dtrain::test::all_ranks(!what.empty()));
}

TEST_CASE("DistOptimizer rejects accumulation_steps 0 and a root that is not a rank on every rank",
          "[dist][sync]") {
    const int size = dtrain::test::world_size();
    Model<float> model = make_mlp(1);
    using Opt = dtrain::DistOptimizer<dtrain::Ring, dtrain::SGD<float>>;
    dtrain::SyncOptions o;
    o.accumulation_steps = 0;
    CHECK_THROWS_WITH(Opt(model, make_sgd(), o), Catch::Contains("accumulation_steps must be >= 1, got 0"));
    o = dtrain::SyncOptions{};
    o.root = size;
    CHECK_THROWS_WITH(Opt(model, make_sgd(), o),
                      Catch::Contains("root " + std::to_string(size) +
                                      " is not a rank of a communicator of size " + std::to_string(size)));
    o.root = -1;
    CHECK_THROWS_WITH(Opt(model, make_sgd(), o), Catch::Contains("root -1 is not a rank"));
    // Nothing was left half-done: a valid configuration still works.
    CHECK_NOTHROW(Opt(model, make_sgd(), dtrain::SyncOptions{}));
}

TEST_CASE(
    "DistOptimizer keeps the root's step count of an optimizer without state, so the first update "
    "uses the scheduled rate",
    "[dist][sync]") {
    const int rank = dtrain::test::world_rank();
    // Plain SGD (no state slots) and SGD with momentum whose state was never sized: both are reset() to
    // the model's size by the constructor, which must keep the step count set before wrapping.
    for (double momentum : {0.0, 0.9}) {
        INFO("momentum " << momentum);
        Model<float> model = make_mlp(7 + std::uint64_t(rank));
        dtrain::SGD<float> sgd(dtrain::SGDOptions().lr(0.5).momentum(momentum));
        sgd.set_schedule(dtrain::Schedule::step_decay(5, 0.1));   // rate 0.5 for steps 0-4, 0.05 from 5
        sgd.set_steps(rank == 0 ? 5 : std::uint64_t(50 + rank));  // the root's count must win
        dtrain::DistOptimizer<dtrain::Ring, dtrain::SGD<float>> opt(model, std::move(sgd),
                                                                    make_options(0, true, 1));
        CHECK(opt.optimizer().steps() == 5);
        CHECK(opt.optimizer().learning_rate() == Approx(0.05));
        const std::vector<float> before(model.parameters().begin(), model.parameters().end());
        const Batch b = global_batch(std::size_t(rank), kBatch, model.input_shape());
        dtrain::SoftmaxCrossEntropy<float> loss;
        Tensor<float> grad;
        opt.zero_grad();
        loss.compute(model.forward(b.x), b.y, grad);
        model.backward(grad);
        opt.step();
        CHECK(opt.optimizer().steps() == 6);
        // step() leaves the averaged gradient in model.gradients(). With steps() = 5 the momentum buffer
        // (zero after reset) is not taken as fresh but 0.9 * 0 + g = g, so both variants update p -= lr g.
        const auto g = model.gradients();
        std::vector<float> expected(before.size());
        for (std::size_t i = 0; i < before.size(); ++i)
            expected[i] = before[i] - 0.05f * g[i];
        const std::vector<float> after(model.parameters().begin(), model.parameters().end());
        CHECK(dtrain::test::max_rel_diff(after, expected) <= 1e-6);
        CHECK(dtrain::test::max_rel_diff(after, before) > 1e-4);  // the update is not negligible
        CHECK(bitwise_equal_across_ranks(after));
    }
}

TEST_CASE("DistOptimizer throws on every rank when the options differ", "[dist][sync]") {
    const int rank = dtrain::test::world_rank(), size = dtrain::test::world_size();
    if (size < 2) return;
    Model<float> model = make_mlp(1);
    dtrain::SyncOptions o;
    o.accumulation_steps = rank == 1 ? 2 : 1;
    const std::string what = construction_error<dtrain::Ring>(model, o);
    INFO(what);
    CHECK(what.find("the options differ across ranks: accumulation_steps is 1 on rank 0 but 2 on rank 1") !=
          std::string::npos);
}

TEST_CASE("DistOptimizer rejects a wrong number of backward passes per step", "[dist][sync]") {
    Model<float> model = make_mlp(1);
    dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>> opt(model, make_sgd(),
                                                                      make_options(0, true, 2));
    const Batch b = global_batch(0, kBatch, model.input_shape());
    dtrain::SoftmaxCrossEntropy<float> loss;
    Tensor<float> grad;
    loss.compute(model.forward(b.x), b.y, grad);
    opt.zero_grad();
    model.backward(grad);
    CHECK_THROWS_WITH(opt.step(), Catch::Contains("1 backward passes since the last step") &&
                                      Catch::Contains("accumulation_steps is 2"));
    model.backward(grad);
    CHECK_THROWS_WITH(model.backward(grad), Catch::Contains("backward pass 3"));
    // The reductions of the second pass may be in flight: zero_grad() completes and discards them and
    // restarts the count, after which a regular step works.
    CHECK_NOTHROW(opt.zero_grad());
    CHECK_THROWS_WITH(opt.step(), Catch::Contains("0 backward passes"));
    const std::vector<float> before(model.parameters().begin(), model.parameters().end());
    model.backward(grad);
    model.backward(grad);
    CHECK_NOTHROW(opt.step());
    const std::vector<float> after(model.parameters().begin(), model.parameters().end());
    CHECK(dtrain::test::max_rel_diff(after, before) > 0);
    CHECK(bitwise_equal_across_ranks(after));
}

TEST_CASE("DistOptimizer keeps BatchNorm running statistics consistent", "[dist][sync]") {
    const int rank = dtrain::test::world_rank(), size = dtrain::test::world_size();
    const auto mode =
        GENERATE(dtrain::StateSync::Broadcast, dtrain::StateSync::Average, dtrain::StateSync::None);
    INFO("state_sync " << int(mode));
    Model<float> model({6}, 5);
    model.add(dtrain::Dense<float>(6, 8)).add(dtrain::BatchNorm1d<float>(8)).add(dtrain::ReLU<float>());
    model.add(dtrain::Dense<float>(8, kClasses));
    dtrain::SyncOptions o;
    o.state_sync = mode;
    o.root = size - 1;
    dtrain::DistOptimizer<dtrain::Ring, dtrain::SGD<float>> opt(model, make_sgd(), o);
    dtrain::SoftmaxCrossEntropy<float> loss;
    Tensor<float> grad;
    std::vector<float> before, mean(model.state().size());
    for (std::size_t s = 0; s < 3; ++s) {
        // Different data on every rank, so the running statistics differ before synchronisation.
        const Batch b = global_batch(100 * s + std::size_t(rank), 8, model.input_shape());
        opt.zero_grad();
        loss.compute(model.forward(b.x), b.y, grad);
        model.backward(grad);
        before.assign(model.state().begin(), model.state().end());
        std::vector<double> sum(before.begin(), before.end());
        MPI_Allreduce(MPI_IN_PLACE, sum.data(), int(sum.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        for (std::size_t i = 0; i < sum.size(); ++i)
            mean[i] = float(sum[i] / size);
        opt.step();
    }
    const std::vector<float> after(model.state().begin(), model.state().end());
    if (mode == dtrain::StateSync::None) {
        CHECK(after == before);
    } else {
        CHECK(bitwise_equal_across_ranks(after));
        if (mode == dtrain::StateSync::Average) CHECK(dtrain::test::max_rel_diff(after, mean) <= 1e-6);
        if (mode == dtrain::StateSync::Broadcast) {
            std::vector<float> root = before;
            MPI_Bcast(root.data(), int(root.size()), MPI_FLOAT, size - 1, MPI_COMM_WORLD);
            CHECK(after == root);
        }
        // Evaluation on any rank gives the same output.
        model.eval();
        const Batch e = global_batch(999, 5, model.input_shape());
        const Tensor<float>& out = model.forward(e.x);
        CHECK(bitwise_equal_across_ranks({out.begin(), out.end()}));
    }
    if (size > 1 && mode == dtrain::StateSync::None) {
        CHECK_FALSE(bitwise_equal_across_ranks(after));
    }
}

TEST_CASE("DistOptimizer metrics: global_sum and global_mean over workers", "[dist][sync]") {
    const int rank = dtrain::test::world_rank(), size = dtrain::test::world_size();
    Model<float> model = make_mlp(1);
    dtrain::DistOptimizer<dtrain::Naive, dtrain::SGD<float>> opt(model, make_sgd());
    CHECK(opt.global_sum(rank + 1.0) == Approx(size * (size + 1) / 2.0));
    CHECK(opt.global_mean(rank + 1.0) == Approx((size + 1) / 2.0));
    int cmp = MPI_UNEQUAL;
    MPI_Comm_compare(opt.worker_comm(), MPI_COMM_WORLD, &cmp);
    CHECK(cmp == MPI_CONGRUENT);
}

TEST_CASE("DistOptimizer::run detects parameters that diverged across ranks", "[dist][sync]") {
    const int rank = dtrain::test::world_rank(), size = dtrain::test::world_size();
    Model<float> model = make_mlp(1);
    dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>> opt(model, make_sgd());
    bool ran = false;
    CHECK_NOTHROW(opt.run([&] { ran = true; }));
    CHECK(ran);
    if (size < 2) return;
    CHECK_THROWS_WITH(opt.run([&] {
        if (rank == size - 1) model.parameters()[0] += 1.0f;
    }),
                      Catch::Contains("parameters differ across ranks"));
}

// Gradient compression (distributed/compression.hpp, SyncOptions::compression): top-k selection (the radix
// select against std::nth_element on data with many ties and edge cases) and error feedback on hand-made
// gradients (exact residuals), compressed training under every policy with and without overlap and
// accumulation (bitwise identical on every rank, close to the uncompressed run, no allocation in steady
// state), non-finite gradients, construction errors, and checkpoints that resume a top-k run bitwise and
// refuse another setting.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <mpi.h>

#include <dtrain/comm/collective.hpp>
#include <dtrain/comm/naive.hpp>
#include <dtrain/comm/ring.hpp>
#include <dtrain/core/hash.hpp>
#include <dtrain/distributed/checkpoint.hpp>
#include <dtrain/distributed/compression.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/losses/mse.hpp>
#include <dtrain/optim/sgd.hpp>
#include <support/test_utils.hpp>

#include "sync_training_run.hpp"

namespace {

using dtrain::Compression;
using dtrain::GradientCompressor;
using dtrain::Model;
using dtrain::Span;
using dtrain::Tensor;

constexpr Compression all_settings[] = {Compression::None, Compression::Fp16, Compression::Bf16,
                                        Compression::TopK};

using Run = dtrain::test::SyncRun;
using dtrain::test::sync_batch;

Model<float> make_model(std::uint64_t seed = 1) {
    return dtrain::test::make_sync_model(seed);
}
double eval_loss(Model<float>& model) {
    return dtrain::test::sync_eval_loss(model);
}

/// `steps` steps of SGD with momentum under `o` on DistOptimizer<Comm>.
template <class Comm>
Run train(const dtrain::SyncOptions& o, int steps) {
    return dtrain::test::sync_run<Comm>(o, steps);
}

std::uint64_t hash(const std::vector<float>& v) {
    return dtrain::detail::fnv1a(v.data(), v.size() * sizeof(float));
}

}  // namespace

TEST_CASE("topk_count and the setting's names", "[dist][compression]") {
    CHECK(dtrain::topk_count(1000, 0.01) == 10);
    CHECK(dtrain::topk_count(1000, 0.0149) == 15);
    CHECK(dtrain::topk_count(10, 0.01) == 1);  // at least one value
    CHECK(dtrain::topk_count(10, 1.0) == 10);
    CHECK(dtrain::topk_count(0, 0.5) == 0);
    CHECK(dtrain::describe_compression(Compression::TopK, 0.01) == "topk(ratio=0.01)");
    CHECK(dtrain::describe_compression(Compression::Bf16, 0.01) == "bf16");
    for (Compression c : all_settings)
        CHECK(dtrain::compression_from_name(dtrain::compression_name(c)) == c);
    CHECK_THROWS_WITH(dtrain::compression_from_name("int8"), Catch::Contains("none, fp16, bf16 or topk"));
}

namespace {

/// TopKSelector<T> against top_k_by_nth_element on `x` for every k in `ks` (clamped to n).
template <class T>
void check_selection(const std::vector<T>& x, std::initializer_list<std::size_t> ks) {
    const std::size_t n = x.size();
    dtrain::detail::TopKSelector<T> select(n + 3);
    std::vector<std::uint32_t> want(n), got(n + 1);
    for (std::size_t k : ks) {
        k = std::min(k, n);
        std::fill(got.begin(), got.end(), 0xdeadbeefu);
        INFO("n = " << n << ", k = " << k << (sizeof(T) == 4 ? ", float" : ", double"));
        dtrain::detail::top_k_by_nth_element(x.data(), n, k, want.data());
        select.select(x.data(), n, k, got.data());
        CHECK(std::equal(want.begin(), want.begin() + long(k), got.begin()));
        CHECK(got[k] == 0xdeadbeefu);  // nothing written past k
    }
}

/// Values of random signs drawn from `levels` distinct magnitudes (many ties), plus some from everywhere.
template <class T>
std::vector<T> tied_values(std::size_t n, int levels, dtrain::Rng& rng) {
    std::vector<T> x(n);
    for (std::size_t i = 0; i < n; ++i) {
        const T v = i % 17 == 0 ? T(rng.uniform(-4.0, 4.0)) : T(int(rng.below(std::uint64_t(levels)))) / T(8);
        x[i] = rng.below(2) ? -v : v;
    }
    return x;
}

template <class T>
void check_selections() {
    dtrain::Rng rng(42);
    for (std::size_t n : {1, 2, 7, 100, 4097, 100000})
        for (int levels : {1, 2, 3, 50, 5000})
            check_selection(tied_values<T>(n, levels, rng), {0, 1, 2, n / 100, n / 3, n - 1, n});
    const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
    check_selection(std::vector<T>(1000, T(0)), {1, 10, 999, 1000});  // all zero
    std::vector<T> z(1000, T(0));
    for (std::size_t i = 0; i < z.size(); i += 3)
        z[i] = -T(0);  // -0 and +0 have the same magnitude
    check_selection(z, {1, 500, 999});
    std::vector<T> special = tied_values<T>(3000, 4, rng);
    for (std::size_t i = 5; i < special.size(); i += 97)
        special[i] = i % 2 ? inf : -inf;
    for (std::size_t i = 11; i < special.size(); i += 131)
        special[i] = i % 3 ? nan : -nan;
    special[2000] = std::numeric_limits<T>::denorm_min();
    special[2001] = std::numeric_limits<T>::max();
    check_selection(special, {1, 5, 30, 31, 60, 61, 62, 2999});
    std::vector<T> spread(5000);  // distinct magnitudes over the whole exponent range, and adjacent ones
    for (std::size_t i = 0; i < spread.size(); ++i)
        spread[i] = i % 2 ? T(rng.uniform(-1.0, 1.0)) * std::pow(T(2), T(int(rng.below(200)) - 100))
                          : std::nextafter(T(1), T(2)) * T(1 + i % 3);
    check_selection(spread, {1, 50, 1666, 1667, 2500, 4999});
}

}  // namespace

TEST_CASE("Top-k selection by radix select picks the indices of nth_element (ties to the lower index)",
          "[dist][compression]") {
    check_selections<float>();
    check_selections<double>();
}

TEMPLATE_TEST_CASE("Fp16 and Bf16 at one rank round every value once, float and double gradients alike",
                   "[dist][compression]", float, double) {
    dtrain::Collective self(MPI_COMM_SELF);
    dtrain::Rng rng(3);
    const std::size_t n = 1001;  // several of the 256-value blocks of a double gradient, and a tail
    std::vector<TestType> orig(n);
    for (std::size_t i = 0; i < n; ++i)
        orig[i] = TestType(rng.uniform(-2.0, 2.0) * std::ldexp(1.0, int(rng.below(40)) - 30));
    orig[7] = std::numeric_limits<TestType>::infinity();
    orig[300] = TestType(1e6);  // beyond fp16's range
    for (Compression c : {Compression::Fp16, Compression::Bf16}) {
        INFO(dtrain::compression_name(c));
        std::vector<TestType> g = orig;
        const Span<TestType> grads(g.data(), n);
        GradientCompressor<TestType> comp(c, 0.01, {{0, n, 0, 0}}, n, 0, 1);
        comp.reduce(self, grads, grads);
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < n; ++i) {
            const float f = float(orig[i]);
            const float want = c == Compression::Fp16 ? float(dtrain::Half(f)) : float(dtrain::BFloat16(f));
            wrong += g[i] != TestType(want);  // T(float(wire value)), exactly
        }
        CHECK(wrong == 0);
    }
}

TEST_CASE("Top-k sends the k largest magnitudes (ties to the lower index) and feeds the rest back",
          "[dist][compression]") {
    dtrain::Collective self(MPI_COMM_SELF);
    std::vector<float> g = {0.5f, -3.0f, 1.0f, 2.0f, -2.0f, 0.1f, 0.0f, 2.0f};
    const Span<float> grads(g.data(), g.size());
    GradientCompressor<float> c(Compression::TopK, 0.25, {{0, 8, 0, 0}}, 8, 0, 1);  // k = 2
    REQUIRE(c.topk_count_of(0) == 2);
    c.reduce(self, grads, grads);
    CHECK(g == std::vector<float>{0, -3, 0, 2, 0, 0, 0, 0});  // 2 at index 3 wins the tie with -2 and 2
    const std::vector<float> zeros(8, 0.0f);
    CHECK(std::vector<float>(c.residual().begin(), c.residual().end()) == zeros);  // not committed yet
    c.commit();
    CHECK(std::vector<float>(c.residual().begin(), c.residual().end()) ==
          std::vector<float>{0.5f, 0, 1, 0, -2, 0.1f, 0, 2});

    g = {0.25f, 0.0f, 0.0f, 0.0f, -0.5f, 0.0f, 0.0f, 0.25f};  // acc = {0.75, 0, 1, 0, -2.5, 0.1, 0, 2.25}
    c.reduce(self, grads, grads);
    CHECK(g == std::vector<float>{0, 0, 0, 0, -2.5f, 0, 0, 2.25f});
    c.commit();
    CHECK(std::vector<float>(c.residual().begin(), c.residual().end()) ==
          std::vector<float>{0.75f, 0, 1, 0, 0, 0.1f, 0, 0});

    // A step that is not applied (skipped, or discarded by zero_grad) keeps the residuals.
    g = {9.0f, 0, 0, 0, 0, 0, 0, 0};
    c.reduce(self, grads, grads);
    CHECK(std::vector<float>(c.residual().begin(), c.residual().end()) ==
          std::vector<float>{0.75f, 0, 1, 0, 0, 0.1f, 0, 0});

    // NaN ranks above infinity: a non-finite value is always sent, so the check after the sum sees it.
    g = {std::numeric_limits<float>::infinity(), 0, 0, 0, 0, 0, std::numeric_limits<float>::quiet_NaN(), 0};
    GradientCompressor<float> one(Compression::TopK, 0.1, {{0, 8, 0, 0}}, 8, 0, 1);  // k = 1
    one.reduce(self, grads, grads);
    CHECK(std::isnan(g[6]));
    CHECK(g[0] == 0.0f);
}

TEST_CASE("Top-k over all ranks: every rank's pairs summed into the bucket in rank order",
          "[dist][compression]") {
    dtrain::Collective world;
    const int p = world.size(), me = world.rank();
    // Two buckets over 10 values (bucket 0 holds the end of the buffer); rank r's largest values sit at
    // r and 6 + r % 4, so ranks overlap at some indices.
    auto gradient = [](int r) {
        std::vector<float> g(10, 0.0f);
        for (std::size_t i = 0; i < 10; ++i)
            g[i] = 0.01f * float(i + 1) * (r % 2 ? -1.0f : 1.0f);
        g[std::size_t(r) % 4] = 5.0f + float(r);
        g[6 + std::size_t(r) % 4] = -7.0f - float(r);
        return g;
    };
    std::vector<float> g = gradient(me);
    const Span<float> grads(g.data(), g.size());
    GradientCompressor<float> c(Compression::TopK, 0.2, {{4, 6, 1, 1}, {0, 4, 0, 0}}, 10, me, p);  // k 1, 1
    c.reduce(world, grads, grads.subspan(4, 6));
    c.reduce(world, grads, grads.subspan(0, 4));
    std::vector<float> want(10, 0.0f);
    for (int r = 0; r < p; ++r) {
        want[std::size_t(r) % 4] += 5.0f + float(r);
        want[6 + std::size_t(r) % 4] += -7.0f - float(r);
    }
    CHECK(g == want);
    c.commit();
    std::vector<float> residual = gradient(me);
    residual[std::size_t(me) % 4] = 0.0f;
    residual[6 + std::size_t(me) % 4] = 0.0f;
    CHECK(std::vector<float>(c.residual().begin(), c.residual().end()) == residual);
}

TEMPLATE_TEST_CASE(
    "Compressed training: bitwise identical on every rank, close to the uncompressed run, "
    "no allocation in steady state",
    "[dist][compression]", dtrain::Collective, dtrain::Ring, dtrain::Naive) {
    const bool overlap = GENERATE(true, false);
    const std::size_t accum = GENERATE(1, 2);
    dtrain::SyncOptions o;
    o.bucket_bytes = 256;  // five buckets, the first layer split in pieces
    o.overlap = overlap;
    o.accumulation_steps = accum;
    o.topk_ratio = 0.25;
    constexpr int steps = 25;
    const Run plain = train<TestType>(o, steps);
    const double start = [] {
        Model<float> m = make_model();
        return eval_loss(m);
    }();
    for (Compression c : all_settings) {
        o.compression = c;
        INFO(dtrain::compression_name(c) << ", overlap " << overlap << ", accumulation_steps " << accum);
        const Run run = train<TestType>(o, steps);
        CHECK(dtrain::detail::same_everywhere(hash(run.params), MPI_COMM_WORLD));
        CHECK(run.allocations == 0);
        INFO("loss " << run.loss << ", uncompressed " << plain.loss << ", initial " << start);
        if (c == Compression::None) CHECK(run.params == plain.params);
        if (c == Compression::Fp16 || c == Compression::Bf16) {
            CHECK(dtrain::test::max_rel_diff(run.params, plain.params) <
                  (c == Compression::Fp16 ? 1e-2 : 5e-2));
            CHECK(std::fabs(run.loss - plain.loss) < 0.02 * plain.loss + 1e-3);
        }
        if (c == Compression::TopK) CHECK(run.loss < 0.5 * start);      // a quarter per step still learns
        CHECK((c == Compression::None || run.params != plain.params));  // the setting took effect
    }
}

TEST_CASE("Compression with a non-finite gradient: Stop names fp16's range, Skip keeps the residuals",
          "[dist][compression]") {
    for (Compression c : {Compression::Fp16, Compression::TopK}) {
        Model<float> model = make_model();
        dtrain::SyncOptions o;
        o.compression = c;
        o.nonfinite = c == Compression::TopK ? dtrain::NonFinite::Skip : dtrain::NonFinite::Stop;
        dtrain::DistOptimizer<dtrain::Ring, dtrain::SGD<float>> opt(model, dtrain::SGD<float>(0.01), o);
        dtrain::MeanSquaredError<float> mse;
        Tensor<float> x, y, grad;
        sync_batch(opt.rank(), 0, 0, x, y);
        opt.zero_grad();
        mse.compute(model.forward(x), y, grad);
        model.backward(grad);
        opt.step();
        const std::vector<float> residual(opt.compressor().residual().begin(),
                                          opt.compressor().residual().end());
        const std::vector<float> params(model.parameters().begin(), model.parameters().end());
        opt.zero_grad();
        mse.compute(model.forward(x), y, grad);
        model.backward(grad);
        model.gradients()[5] = c == Compression::Fp16 ? 1e5f : std::numeric_limits<float>::quiet_NaN();
        const std::string what = dtrain::test::error_message([&] { opt.step(); });
        INFO(what);
        if (c == Compression::Fp16) {
            CHECK(what.find("gradient of step 1 is not finite: inf at index 5") != std::string::npos);
            CHECK(what.find("beyond fp16's largest value 65504") != std::string::npos);
        } else {
            CHECK(what.empty());
            CHECK(opt.skipped_steps() == 1);
            CHECK(std::vector<float>(opt.compressor().residual().begin(),
                                     opt.compressor().residual().end()) == residual);
            CHECK(std::vector<float>(model.parameters().begin(), model.parameters().end()) == params);
        }
    }
}

namespace {

/// A communicator that does not declare half_float_sums (a generic one would sum the bits as integers).
struct NoHalfComm : dtrain::Collective {
    using Collective::Collective;
    static constexpr bool half_float_sums = false;
};

std::string construction_error(const dtrain::SyncOptions& o) {
    Model<float> model = make_model();
    return dtrain::test::error_message([&] {
        dtrain::DistOptimizer<NoHalfComm, dtrain::SGD<float>> opt(model, dtrain::SGD<float>(0.1), o);
    });
}

}  // namespace

TEST_CASE("Compression settings are checked at construction on every rank", "[dist][compression]") {
    dtrain::SyncOptions o;
    o.compression = Compression::TopK;
    o.topk_ratio = 0.0;
    CHECK_THAT(construction_error(o),
               Catch::Contains("topk_ratio must be in (0, 1]") && Catch::Contains("got 0"));
    o.topk_ratio = 1.5;
    CHECK_THAT(construction_error(o), Catch::Contains("topk_ratio must be in (0, 1]"));
    o.topk_ratio = 0.5;
    CHECK(construction_error(o).empty());
    o.compression = Compression::Bf16;
    CHECK_THAT(construction_error(o),
               Catch::Contains("compression bf16 needs a communicator that sums Half"));
    if (dtrain::world_size() > 1) {
        o.compression = dtrain::world_rank() == 0 ? Compression::TopK : Compression::Bf16;
        CHECK_THAT(construction_error(o),
                   Catch::Contains("compression is topk(ratio=0.5) on rank 0 but bf16 on rank 1"));
    }
}

namespace {

constexpr int kSteps = 12;

dtrain::SGD<float> momentum_sgd() {
    return dtrain::SGD<float>(dtrain::SGDOptions().lr(0.05).momentum(0.9));
}

/// Top-k training of kSteps steps; with `save_after` it writes a checkpoint after that step and stops;
/// with `resume` it first loads one (into a model initialised from another seed).
template <class Comm>
std::vector<float> topk_run(const std::string& path, int save_after, bool resume) {
    Model<float> model = make_model(resume ? 77 : 1);
    dtrain::SyncOptions o;
    o.bucket_bytes = 256;
    o.compression = Compression::TopK;
    o.topk_ratio = 0.1;
    dtrain::DistOptimizer<Comm, dtrain::SGD<float>> opt(model, momentum_sgd(), o);
    int first = 0;
    if (resume) first = int(dtrain::load_checkpoint(path, opt).step);
    dtrain::MeanSquaredError<float> mse;
    Tensor<float> x, y, grad;
    for (int s = first; s < kSteps; ++s) {
        sync_batch(opt.rank(), s, 0, x, y);
        opt.zero_grad();
        mse.compute(model.forward(x), y, grad);
        model.backward(grad);
        opt.step();
        if (s + 1 == save_after) {
            dtrain::save_checkpoint(path, opt, {0, 0, std::uint64_t(s + 1)});
            return {};
        }
    }
    std::vector<float> out(model.parameters().begin(), model.parameters().end());
    out.insert(out.end(), opt.compressor().residual().begin(), opt.compressor().residual().end());
    return out;
}

std::string load_error(const std::string& path, Compression c, double ratio, MPI_Comm comm = MPI_COMM_WORLD) {
    Model<float> model = make_model();
    dtrain::SyncOptions o;
    o.compression = c;
    o.topk_ratio = ratio;
    dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>> opt(model, momentum_sgd(), o, comm);
    return dtrain::test::error_message([&] { dtrain::load_checkpoint(path, opt); });
}

}  // namespace

TEMPLATE_TEST_CASE(
    "Checkpoints with top-k: the resumed run equals the uninterrupted one bitwise, residuals "
    "included",
    "[dist][compression][checkpoint]", dtrain::Collective, dtrain::Ring) {
    const std::string path = dtrain::test::shared_temp_path("dtrain_compression", "topk.ckpt");
    const std::vector<float> whole = topk_run<TestType>(path, 0, false);
    topk_run<TestType>(path, 5, false);
    const std::vector<float> resumed = topk_run<TestType>(path, 0, true);
    CHECK(resumed == whole);
    CHECK(dtrain::test::all_ranks(resumed == whole));
    // The residuals are not all zero (the comparison above covers state that matters).
    CHECK(std::count(whole.end() - 243, whole.end(), 0.0f) < 200);
    if (dtrain::world_rank() == 0) std::remove(path.c_str());
}

TEST_CASE("Checkpoints of another compression setting are refused, naming both",
          "[dist][compression][checkpoint]") {
    const std::string path = dtrain::test::shared_temp_path("dtrain_compression", "mismatch.ckpt");
    topk_run<dtrain::Collective>(path, 3, false);  // topk(ratio=0.1)
    CHECK_THAT(
        load_error(path, Compression::Fp16, 0.1),
        Catch::Contains("written with gradient compression topk(ratio=0.1), this DistOptimizer uses fp16"));
    CHECK_THAT(load_error(path, Compression::TopK, 0.2),
               Catch::Contains("topk(ratio=0.1), this DistOptimizer uses topk(ratio=0.2)"));
    CHECK(load_error(path, Compression::TopK, 0.1).empty());
    {  // without a DistOptimizer the residuals have nowhere to go
        Model<float> model = make_model();
        dtrain::SGD<float> sgd = momentum_sgd();
        CHECK_THROWS_WITH(dtrain::load_checkpoint(path, model, sgd),
                          Catch::Contains("written with gradient compression topk(ratio=0.1) and holds every "
                                          "rank's error-feedback residuals"));
    }
    if (dtrain::world_size() > 1)  // each rank alone: another number of ranks than wrote the residuals
        CHECK_THAT(load_error(path, Compression::TopK, 0.1, MPI_COMM_SELF),
                   Catch::Contains("holds the top-k residuals of " + std::to_string(dtrain::world_size()) +
                                   " rank(s), this run has 1"));
    // A stateless setting: the DistOptimizer must match, the model-and-optimizer load takes it.
    {
        Model<float> model = make_model();
        dtrain::SyncOptions o;
        o.compression = Compression::Bf16;
        dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>> opt(model, momentum_sgd(), o);
        dtrain::save_checkpoint(path, opt, {0, 0, 0});
    }
    CHECK_THAT(load_error(path, Compression::None, 0.1),
               Catch::Contains("written with gradient compression bf16, this DistOptimizer uses none"));
    CHECK(load_error(path, Compression::Bf16, 0.1).empty());
    Model<float> model = make_model();
    dtrain::SGD<float> sgd = momentum_sgd();
    CHECK_NOTHROW(dtrain::load_checkpoint(path, model, sgd));
    if (dtrain::world_rank() == 0) std::remove(path.c_str());
}

TEST_CASE("A version-2 checkpoint (written before compression existed) loads as compression none",
          "[dist][compression][checkpoint]") {
    const std::string path = dtrain::test::shared_temp_path("dtrain_compression", "v2.ckpt");
    Model<float> model = make_model();
    dtrain::SGD<float> sgd = momentum_sgd();
    sgd.reset(model.num_parameters());
    dtrain::save_checkpoint(path, model, sgd, {1, 2, 3});
    if (dtrain::world_rank() == 0) {  // drop the compression section: "none", 0 ranks, 0 residuals
        std::FILE* f = std::fopen(path.c_str(), "rb");
        std::vector<char> b(1 << 16);
        b.resize(std::fread(b.data(), 1, b.size(), f));
        std::fclose(f);
        const std::size_t tail = 8 + 4 + 8 + 8;
        REQUIRE(std::string(b.end() - 8 - tail + 8, b.end() - 8 - tail + 12) == "none");
        b.erase(b.end() - 8 - std::ptrdiff_t(tail), b.end() - 8);
        // and the position's fields after epoch, batch and step (samples, batch size, seed, ranks), which
        // later versions added: they follow the signature (24 bytes), two texts, the slots and the steps.
        std::size_t at = 24;
        for (int text = 0; text < 2; ++text) {
            std::uint64_t length = 0;
            std::memcpy(&length, b.data() + at, 8);
            at += 8 + std::size_t(length);
        }
        at += 8 + 8 + 24;
        b.erase(b.begin() + std::ptrdiff_t(at), b.begin() + std::ptrdiff_t(at + 32));
        const std::uint64_t version = 2;
        std::memcpy(b.data() + 8, &version, 8);
        const std::uint64_t sum = dtrain::detail::fnv1a(b.data(), b.size() - 8);
        std::memcpy(b.data() + b.size() - 8, &sum, 8);
        f = std::fopen(path.c_str(), "wb");
        std::fwrite(b.data(), 1, b.size(), f);
        std::fclose(f);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    Model<float> other = make_model(9);
    dtrain::SGD<float> sgd2 = momentum_sgd();
    const dtrain::TrainingPosition pos = dtrain::load_checkpoint(path, other, sgd2);
    CHECK(pos.step == 3);
    CHECK(std::vector<float>(other.parameters().begin(), other.parameters().end()) ==
          std::vector<float>(model.parameters().begin(), model.parameters().end()));
    CHECK(load_error(path, Compression::None, 0.1).empty());
    CHECK_THAT(load_error(path, Compression::Fp16, 0.1),
               Catch::Contains("written with gradient compression none, this DistOptimizer uses fp16"));
    if (dtrain::world_rank() == 0) std::remove(path.c_str());
}

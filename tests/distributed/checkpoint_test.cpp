// Checkpoints: a run interrupted mid-epoch and resumed from its checkpoint ends bitwise identical to the
// uninterrupted run (parameters, BatchNorm statistics, Adam or momentum state and step count, Dropout's
// masks, the data order), for two policies; and every bad file or misuse is a clear error on every rank.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <dtrain/comm/collective.hpp>
#include <dtrain/comm/ring.hpp>
#include <dtrain/data/dataset.hpp>
#include <dtrain/data/loader.hpp>
#include <dtrain/data/sampler.hpp>
#include <dtrain/distributed/checkpoint.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/batchnorm.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/dropout.hpp>
#include <dtrain/nn/losses/cross_entropy.hpp>
#include <dtrain/optim/adam.hpp>
#include <dtrain/optim/adamw.hpp>
#include <dtrain/optim/schedule.hpp>
#include <dtrain/optim/sgd.hpp>
#include <support/test_utils.hpp>

namespace {

using dtrain::Model;
using dtrain::TrainingPosition;

constexpr std::size_t kSamples = 44, kBatch = 4;
constexpr std::uint64_t kEpochs = 3;

dtrain::Dataset make_data() {
    dtrain::Rng rng(5);
    auto x = dtrain::test::random_tensor<float>({kSamples, 6}, rng);
    auto y = dtrain::Labels::from_shape({kSamples});
    for (auto& v : y)
        v = std::int32_t(rng.below(3));
    return dtrain::make_dataset(std::move(x), std::move(y));
}

Model<float> make_model(std::uint64_t seed) {
    Model<float> m({6}, seed);
    m.add(dtrain::Dense<float>(6, 16)).add(dtrain::BatchNorm1d<float>(16)).add(dtrain::ReLU<float>());
    m.add(dtrain::Dropout<float>(0.25, 7)).add(dtrain::Dense<float>(16, 3));
    return m;
}

std::string temp_path(const std::string& tag) {
    return dtrain::test::shared_temp_path("dtrain_ckpt", tag);
}

/// Parameters, model state and optimizer state of a finished run.
struct Final {
    std::vector<float> params, state, opt_state;
    std::uint64_t steps = 0;
};

/// Trains a fresh model (initialised from `seed`) for kEpochs epochs of a DistributedSampler-sharded data
/// set with DistOptimizer<Comm, Opt>. With `resume`, it first restores the checkpoint at `path` and
/// continues from its position; with `save_at`, it writes a checkpoint there and stops.
template <class Comm, class Opt>
Final train(const dtrain::Dataset& data, std::uint64_t seed, Opt opt_proto, const std::string& path,
            bool resume, const TrainingPosition* save_at) {
    Model<float> model = make_model(seed);
    Opt local = opt_proto;
    TrainingPosition pos;
    if (resume) pos = dtrain::load_checkpoint(path, model, local);
    dtrain::SyncOptions o;
    o.bucket_bytes = 256;  // several buckets, so the pipelined step is used
    dtrain::DistOptimizer<Comm, Opt> opt(model, std::move(local), o);
    dtrain::DataLoader loader(data, dtrain::DistributedSampler(data.size(), opt.rank(), opt.size()),
                              {kBatch});
    dtrain::SoftmaxCrossEntropy<float> loss;
    dtrain::Tensor<float> grad;
    std::uint64_t step = pos.step;
    for (std::uint64_t e = pos.epoch; e < kEpochs; ++e) {
        if (e == pos.epoch)
            loader.seek(e, pos.batch);
        else
            loader.start_epoch(e);
        for (;;) {
            if (save_at != nullptr && e == save_at->epoch && loader.batch_index() == save_at->batch) {
                dtrain::save_checkpoint(path, opt, {e, loader.batch_index(), step});
                return {};
            }
            if (!loader.next()) break;
            opt.zero_grad();
            loss.compute(model.forward(loader.features()), loader.labels(), grad);
            model.backward(grad);
            opt.step();
            ++step;
        }
    }
    Final f;
    f.params.assign(model.parameters().begin(), model.parameters().end());
    f.state.assign(model.state().begin(), model.state().end());
    f.opt_state.assign(opt.optimizer().state().begin(), opt.optimizer().state().end());
    f.steps = opt.optimizer().steps();
    return f;
}

template <class Comm, class Opt>
void check_exact_resume(const Opt& proto, const std::string& tag) {
    const auto data = make_data();
    const std::string path = temp_path(tag);
    const Final whole = train<Comm>(data, 1, proto, path, false, nullptr);
    const TrainingPosition at{1, 3, 0};  // mid-way through the second epoch
    train<Comm>(data, 1, proto, path, false, &at);
    // A different initialisation seed: everything must come from the checkpoint.
    const Final resumed = train<Comm>(data, 99, proto, path, true, nullptr);
    CHECK(whole.steps > 0);
    CHECK(resumed.steps == whole.steps);
    CHECK(resumed.params == whole.params);
    CHECK(resumed.state == whole.state);
    CHECK(resumed.opt_state == whole.opt_state);
    // Without the checkpoint the second run starts elsewhere: the comparison above is not vacuous.
    const Final other = train<Comm>(data, 99, proto, path, false, nullptr);
    CHECK(other.params != whole.params);
    if (dtrain::world_rank() == 0) std::remove(path.c_str());
}

/// Rank 0 rewrites the file at `path` with `edit` applied to its bytes.
template <class Edit>
void edit_file(const std::string& path, Edit&& edit) {
    if (dtrain::world_rank() == 0) {
        std::ifstream in(path, std::ios::binary);
        std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        in.close();
        edit(bytes);
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(bytes.data(), std::streamsize(bytes.size()));
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace

TEST_CASE(
    "resuming from a mid-epoch checkpoint is bitwise the uninterrupted run: Ring, Adam, Dropout, BatchNorm",
    "[checkpoint]") {
    check_exact_resume<dtrain::Ring>(dtrain::Adam<float>(dtrain::AdamOptions().lr(0.01)), "ring_adam");
}

TEST_CASE("resuming is bitwise the uninterrupted run: Collective, SGD with Nesterov momentum and a schedule",
          "[checkpoint]") {
    dtrain::SGD<float> sgd(dtrain::SGDOptions().lr(0.05).momentum(0.9).nesterov(true).weight_decay(1e-4));
    sgd.set_schedule(dtrain::Schedule::step_decay(5, 0.5));
    check_exact_resume<dtrain::Collective>(sgd, "coll_sgd");
}

TEST_CASE("checkpoint errors name the file and the problem on every rank", "[checkpoint]") {
    const std::string path = temp_path("errors");
    Model<float> model = make_model(3);
    dtrain::Adam<float> adam;
    adam.reset(model.num_parameters());
    adam.set_steps(4);
    dtrain::save_checkpoint(path, model, adam, {2, 1, 4});

    SECTION("round trip restores everything, including the step count and the position") {
        Model<float> other = make_model(4);
        dtrain::Adam<float> fresh;
        const TrainingPosition p = dtrain::load_checkpoint(path, other, fresh);
        CHECK(p.epoch == 2);
        CHECK(p.batch == 1);
        CHECK(p.step == 4);
        CHECK(fresh.steps() == 4);
        CHECK(std::equal(other.parameters().begin(), other.parameters().end(), model.parameters().begin()));
        CHECK(other.extra_state() == model.extra_state());
    }
    SECTION("a missing file") {
        CHECK(dtrain::checkpoint_exists(path));
        CHECK_FALSE(dtrain::checkpoint_exists(path + ".missing"));
        CHECK_THROWS_WITH(dtrain::load_checkpoint(path + ".missing", model, adam),
                          Catch::Contains("cannot open '" + path + ".missing'"));
    }
    SECTION("an unwritable place leaves no file and throws everywhere") {
        CHECK_THROWS_WITH(dtrain::save_checkpoint("/nonexistent-dir/ck.bin", model, adam, {}),
                          Catch::Contains("cannot write '/nonexistent-dir/ck.bin.tmp'"));
    }
    SECTION("another model with the same number of parameters and state values") {
        Model<float> moved({6}, 1);  // the same layers with BatchNorm after ReLU: another layout
        moved.add(dtrain::Dense<float>(6, 16)).add(dtrain::ReLU<float>()).add(dtrain::BatchNorm1d<float>(16));
        moved.add(dtrain::Dropout<float>(0.25, 7)).add(dtrain::Dense<float>(16, 3));
        REQUIRE(moved.num_parameters() == model.num_parameters());
        dtrain::Adam<float> a2;
        CHECK_THROWS_WITH(
            dtrain::load_checkpoint(path, moved, a2),
            Catch::Contains("was written for another model: layer 1 is BatchNorm1d(16) (32 "
                            "parameters, 32 state values) in the file but ReLU (0 parameters) in "
                            "this model"));
        Model<float> no_dropout({6}, 1);  // the same layout, but ReLU where Dropout was: no extra state
        no_dropout.add(dtrain::Dense<float>(6, 16))
            .add(dtrain::BatchNorm1d<float>(16))
            .add(dtrain::ReLU<float>());
        no_dropout.add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(16, 3));
        CHECK_THROWS_WITH(dtrain::load_checkpoint(path, no_dropout, a2),
                          Catch::Contains("layer 3 is Dropout(0.25) (0 parameters) in the file but ReLU (0 "
                                          "parameters) in this model"));
    }
    SECTION("a root that is not a rank") {
        const int size = dtrain::world_size();
        const std::string msg = "root " + std::to_string(size) + " is not a rank of a communicator of size " +
                                std::to_string(size);
        CHECK_THROWS_WITH(dtrain::save_checkpoint(path, model, adam, {}, MPI_COMM_WORLD, size),
                          Catch::Contains("save_checkpoint: " + msg));
        CHECK_THROWS_WITH(dtrain::load_checkpoint(path, model, adam, MPI_COMM_WORLD, size),
                          Catch::Contains("load_checkpoint: " + msg));
    }
    SECTION("another kind of optimizer, also one with as many state slots") {
        dtrain::SGD<float> sgd(dtrain::SGDOptions().momentum(0.9));
        CHECK_THROWS_WITH(dtrain::load_checkpoint(path, model, sgd),
                          Catch::Contains("holds the state of Adam(lr=0.001, beta1=0.9") &&
                              Catch::Contains("this optimizer is SGD(lr=0.001, momentum=0.9"));
        dtrain::AdamW<float> adamw;  // two slots, like Adam
        CHECK_THROWS_WITH(dtrain::load_checkpoint(path, model, adamw),
                          Catch::Contains("this optimizer is AdamW(lr=0.001"));
        dtrain::Adam<float> other_lr(dtrain::AdamOptions().lr(0.5));  // every hyper-parameter is compared
        CHECK_THROWS_WITH(
            dtrain::load_checkpoint(path, model, other_lr),
            Catch::Contains("'" + path + "' was written with lr=0.001, this optimizer has lr=0.5"));
        dtrain::Adam<float> same;
        CHECK_NOTHROW(dtrain::load_checkpoint(path, model, same));
    }
    SECTION("the same kind of optimizer with another hyper-parameter names it") {
        dtrain::SGD<float> saved(dtrain::SGDOptions().momentum(0.9));
        saved.reset(model.num_parameters());
        dtrain::save_checkpoint(path + ".sgd", model, saved, {});
        dtrain::SGD<float> other(dtrain::SGDOptions().momentum(0.5));
        CHECK_THROWS_WITH(dtrain::load_checkpoint(path + ".sgd", model, other),
                          Catch::Contains("load_checkpoint: '" + path +
                                          ".sgd' was written with momentum=0.9, this optimizer has "
                                          "momentum=0.5"));
        dtrain::SGD<float> nesterov(dtrain::SGDOptions().momentum(0.9).nesterov(true));
        CHECK_THROWS_WITH(
            dtrain::load_checkpoint(path + ".sgd", model, nesterov),
            Catch::Contains("was written with nesterov=false, this optimizer has nesterov=true"));
        dtrain::SGD<float> same(dtrain::SGDOptions().momentum(0.9));
        CHECK_NOTHROW(dtrain::load_checkpoint(path + ".sgd", model, same));
        MPI_Barrier(MPI_COMM_WORLD);
        if (dtrain::world_rank() == 0) std::remove((path + ".sgd").c_str());
    }
    SECTION("a .tmp left by a killed save is ignored by load and replaced by the next save") {
        if (dtrain::world_rank() == 0) {
            std::ofstream(path + ".tmp", std::ios::binary) << "half a checkpoint";
        }
        MPI_Barrier(MPI_COMM_WORLD);
        Model<float> other = make_model(4);
        dtrain::Adam<float> fresh;
        CHECK(dtrain::load_checkpoint(path, other, fresh).step == 4);
        dtrain::save_checkpoint(path, model, adam, {3, 0, 5});
        CHECK(dtrain::test::all_ranks(!std::filesystem::exists(path + ".tmp")));
        CHECK(dtrain::load_checkpoint(path, other, fresh).epoch == 3);
    }
    SECTION("a save that fails after writing its .tmp removes it") {
        const std::string dir = path + ".in_the_way";  // a non-empty directory: the rename fails
        if (dtrain::world_rank() == 0) {
            std::filesystem::create_directories(dir);
            std::ofstream(dir + "/file") << "x";
        }
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK_THROWS_WITH(dtrain::save_checkpoint(dir, model, adam, {}),
                          Catch::Contains("cannot rename '" + dir + ".tmp' to '" + dir + "'"));
        CHECK(dtrain::test::all_ranks(!std::filesystem::exists(dir + ".tmp")));
        MPI_Barrier(MPI_COMM_WORLD);
        if (dtrain::world_rank() == 0) std::filesystem::remove_all(dir);
    }
    SECTION("the running sums are stored summed over the ranks") {
        const int size = dtrain::world_size(), rank = dtrain::world_rank();
        dtrain::save_checkpoint(path, model, adam, {0, 2, 4, {double(rank + 1), 0.5, double(10 * rank)}});
        Model<float> other = make_model(4);
        dtrain::Adam<float> fresh;
        const TrainingPosition p = dtrain::load_checkpoint(path, other, fresh);
        CHECK(p.sums == std::vector<double>{size * (size + 1) / 2.0, 0.5 * size, 5.0 * size * (size - 1)});
        CHECK(p.ranks == std::uint64_t(size));
        if (size > 1) {  // a rank with another number of sums: an error on every rank, nothing written
            std::vector<double> sums(rank == 1 ? 2 : 3, 1.0);
            const std::string message = dtrain::test::error_message([&] {
                dtrain::save_checkpoint(path + ".sums", model, adam, {0, 2, 4, sums});
            });
            CHECK_THAT(message, Catch::Contains("save_checkpoint: rank ") &&
                                    Catch::Contains("running sum(s) in TrainingPosition::sums") &&
                                    Catch::Contains("no checkpoint was written to '" + path + ".sums'"));
            CHECK(dtrain::test::all_ranks(!std::filesystem::exists(path + ".sums")));
        }
    }
    SECTION("a corrupted file leaves the model as it was") {
        edit_file(path, [](std::vector<char>& b) { b[b.size() / 2] ^= 0x10; });
        Model<float> other = make_model(4);
        const std::vector<float> before(other.parameters().begin(), other.parameters().end());
        dtrain::Adam<float> a2;
        CHECK_THROWS_WITH(dtrain::load_checkpoint(path, other, a2), Catch::Contains("checksum"));
        CHECK(std::equal(before.begin(), before.end(), other.parameters().begin()));
        CHECK(a2.steps() == 0);
    }
    SECTION("a truncated file") {
        edit_file(path, [](std::vector<char>& b) { b.resize(b.size() - 100); });
        CHECK_THROWS_WITH(dtrain::load_checkpoint(path, model, adam), Catch::Contains("truncated"));
        edit_file(path, [](std::vector<char>& b) { b.resize(20); });
        CHECK_THROWS_WITH(dtrain::load_checkpoint(path, model, adam), Catch::Contains("truncated"));
    }
    SECTION("not a checkpoint, or another format version") {
        edit_file(path, [](std::vector<char>& b) { b[8] = 7; });  // the version word follows the signature
        CHECK_THROWS_WITH(dtrain::load_checkpoint(path, model, adam), Catch::Contains("format version 7"));
        edit_file(path, [](std::vector<char>& b) {
            b.assign({'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l'});
        });
        CHECK_THROWS_WITH(dtrain::load_checkpoint(path, model, adam),
                          Catch::Contains("not a dtrain checkpoint"));
    }
    SECTION("ranks that diverged are refused instead of saving rank 0's view") {
        if (dtrain::world_size() > 1) {
            if (dtrain::world_rank() == 1) model.parameters()[0] += 1.0f;
            CHECK_THROWS_WITH(dtrain::save_checkpoint(path + ".div", model, adam, {}),
                              Catch::Contains("ranks 0 and 1 hold different parameters, so the ranks have "
                                              "diverged"));
            CHECK_FALSE(std::filesystem::exists(path + ".div"));
        }
    }
    SECTION("Dropout seeded by rank is named as the difference, not called divergence") {
        if (dtrain::world_size() > 1) {
            // A common habit: the same model on every rank, but its Dropout seeded with the rank.
            const auto rank = std::uint64_t(dtrain::world_rank());
            Model<float> seeded({6}, 3);
            seeded.add(dtrain::Dense<float>(6, 16)).add(dtrain::ReLU<float>());
            seeded.add(dtrain::Dropout<float>(0.25, 100 + rank)).add(dtrain::Dense<float>(16, 3));
            dtrain::Adam<float> a2;
            const std::string message =
                dtrain::test::error_message([&] { dtrain::save_checkpoint(path + ".drop", seeded, a2, {}); });
            CHECK_THAT(message,
                       Catch::Contains("ranks 0 and 1 hold the same parameters, model state and "
                                       "optimizer state but different layers' extra state in layer 2 "
                                       "(Dropout(0.25))") &&
                           Catch::Contains("Dropout mask generator") &&
                           Catch::Contains("Seed every Dropout with the same value on every rank") &&
                           Catch::Contains("no checkpoint was written to '" + path + ".drop'"));
            CHECK(message.find("diverged") == std::string::npos);
            CHECK(dtrain::test::all_ranks(!message.empty()));
            CHECK_FALSE(std::filesystem::exists(path + ".drop"));
            // Seeded alike, the same model saves.
            static_cast<dtrain::Dropout<float>&>(seeded.layer(2)).reseed(100);
            CHECK_NOTHROW(dtrain::save_checkpoint(path + ".drop", seeded, a2, {}));
            MPI_Barrier(MPI_COMM_WORLD);
            if (dtrain::world_rank() == 0) std::remove((path + ".drop").c_str());
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (dtrain::world_rank() == 0) std::remove(path.c_str());
}

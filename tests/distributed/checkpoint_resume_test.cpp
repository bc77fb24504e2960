// Resuming a checkpoint at another number of ranks keeping the samples per step: the interrupted epoch's
// samples are each trained on exactly once (none skipped, none repeated), and the final parameters equal
// those of the run that never stopped, to float rounding (bitwise at the same number of ranks). Also what
// check_resume() refuses, naming the field. Figures (max parameter difference, samples per epoch) are
// printed by rank 0 for docs/checkpoints.md.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <dtrain/comm/collective.hpp>
#include <dtrain/data/dataset.hpp>
#include <dtrain/data/loader.hpp>
#include <dtrain/data/sampler.hpp>
#include <dtrain/distributed/checkpoint.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/losses/cross_entropy.hpp>
#include <dtrain/optim/sgd.hpp>
#include <support/test_utils.hpp>

namespace {

using dtrain::Model;
using dtrain::TrainingPosition;

// 48 samples, 12 per step over all ranks: 4 steps per epoch at 1, 2, 3 or 4 ranks.
constexpr std::size_t kResumeSamples = 48, kGlobal = 12;
constexpr std::uint64_t kResumeEpochs = 3, kSeed = 11;
constexpr std::uint64_t kStopStep = 6;  // two steps into the second epoch: 24 of its 48 samples

dtrain::Dataset make_resume_data() {
    dtrain::Rng rng(5);
    auto x = dtrain::test::random_tensor<float>({kResumeSamples, 6}, rng);
    auto y = dtrain::Labels::from_shape({kResumeSamples});
    for (auto& v : y)
        v = std::int32_t(rng.below(3));
    return dtrain::make_dataset(std::move(x), std::move(y));
}

// No BatchNorm or Dropout: their results depend on how a step's samples are split among the ranks.
Model<float> make_resume_model(std::uint64_t seed) {
    Model<float> m({6}, seed);
    m.add(dtrain::Dense<float>(6, 16)).add(dtrain::Tanh<float>()).add(dtrain::Dense<float>(16, 3));
    return m;
}

struct Run {
    std::vector<float> params;
    std::vector<int> visits;  // per sample, in the second epoch (index 1), over this run's ranks
    std::uint64_t steps = 0;
};

// Trains on the ranks of `comm` (kGlobal / size samples per rank and step) from scratch or from the
// checkpoint at `path`; with stop > 0 it saves there after step `stop` and returns.
Run train(MPI_Comm comm, const dtrain::Dataset& data, const std::string& path, bool resume,
          std::uint64_t stop) {
    const int size = dtrain::comm_size(comm), rank = dtrain::comm_rank(comm);
    const std::size_t batch = kGlobal / std::size_t(size);
    Model<float> model = make_resume_model(resume ? 99 : 1);
    dtrain::DistOptimizer<dtrain::Collective, dtrain::SGD<float>> opt(
        model, dtrain::SGD<float>(dtrain::SGDOptions().lr(0.2).momentum(0.9)), {}, comm);
    TrainingPosition pos;
    if (resume) {
        pos = dtrain::load_checkpoint(path, opt);
        dtrain::check_resume(path, pos, std::uint64_t(size), batch, kSeed);
    }
    dtrain::ShardOptions so;
    so.seed = kSeed;
    dtrain::DataLoader loader(data, dtrain::DistributedSampler(kResumeSamples, rank, size, so), {batch});
    std::map<float, int> id;  // a sample by its first feature (random, so distinct)
    for (std::size_t i = 0; i < kResumeSamples; ++i)
        id[data.features.data()[i * 6]] = int(i);
    dtrain::SoftmaxCrossEntropy<float> loss;
    dtrain::Tensor<float> grad;
    Run run;
    run.visits.assign(kResumeSamples, 0);
    std::uint64_t step = pos.step;
    for (std::uint64_t e = pos.epoch; e < kResumeEpochs; ++e) {
        std::uint64_t samples = 0;
        if (resume && e == pos.epoch) {
            loader.seek_samples(e, pos.samples, int(pos.ranks));
            samples = pos.samples;
        } else {
            loader.start_epoch(e);
        }
        while (loader.next()) {
            const auto& x = loader.features();
            if (e == 1)
                for (std::size_t k = 0; k < loader.current_batch_size(); ++k)
                    ++run.visits[std::size_t(id.at(x.data()[k * 6]))];
            opt.zero_grad();
            loss.compute(model.forward(x), loader.labels(), grad);
            model.backward(grad);
            opt.step();
            ++step;
            samples += kGlobal;
            if (step == stop) {
                TrainingPosition at(e, loader.batch_index(), step);
                at.samples = samples;
                at.batch_size = batch;
                at.seed = kSeed;
                dtrain::save_checkpoint(path, opt, at);
                e = kResumeEpochs;
                break;
            }
        }
    }
    MPI_Allreduce(MPI_IN_PLACE, run.visits.data(), int(kResumeSamples), MPI_INT, MPI_SUM, comm);
    run.params.assign(model.parameters().begin(), model.parameters().end());
    run.steps = opt.optimizer().steps();
    return run;
}

// The first `n` ranks of MPI_COMM_WORLD (MPI_COMM_NULL on the others); freed by the caller.
MPI_Comm first_ranks(int n) {
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, dtrain::world_rank() < n ? 0 : MPI_UNDEFINED, 0, &c);
    return c;
}

// Runs whole at `before` ranks, stops at `before` ranks after kStopStep, resumes at `after` ranks; checks
// on world rank 0 (a member of every group) and prints the figures.
void check_resume_at(int before, int after, const std::string& tag) {
    const auto data = make_resume_data();
    const std::string path = dtrain::test::shared_temp_path("dtrain_resume", tag);
    MPI_Comm a = first_ranks(before), b = first_ranks(after);
    Run whole, stopped, resumed;
    if (a != MPI_COMM_NULL) {
        whole = train(a, data, path, false, 0);
        stopped = train(a, data, path, false, kStopStep);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (b != MPI_COMM_NULL) resumed = train(b, data, path, true, 0);
    if (dtrain::world_rank() == 0) {
        double max_diff = 0, max_abs = 0;
        for (std::size_t i = 0; i < whole.params.size(); ++i) {
            max_diff = std::max(max_diff, double(std::fabs(whole.params[i] - resumed.params[i])));
            max_abs = std::max(max_abs, double(std::fabs(whole.params[i])));
        }
        int before_stop = 0, after_stop = 0, once = 0;
        for (std::size_t i = 0; i < kResumeSamples; ++i) {
            before_stop += stopped.visits[i];
            after_stop += resumed.visits[i];
            once += stopped.visits[i] + resumed.visits[i] == 1 ? 1 : 0;
        }
        std::printf(
            "resume %d -> %d ranks (%zu samples per step): interrupted epoch %d + %d samples, %d of "
            "%zu exactly once; max |parameter difference| to the uninterrupted run %.3g (largest "
            "|parameter| %.3g), %llu steps\n",
            before, after, kGlobal, before_stop, after_stop, once, kResumeSamples, max_diff, max_abs,
            static_cast<unsigned long long>(resumed.steps));
        CHECK(before_stop == 24);
        CHECK(after_stop == 24);
        CHECK(once == int(kResumeSamples));
        CHECK(resumed.steps == whole.steps);
        CHECK(whole.steps == kResumeEpochs * kResumeSamples / kGlobal);
        if (before == after)
            CHECK(resumed.params == whole.params);
        else
            CHECK(max_diff <= 1e-5 * std::max(1.0, max_abs));
        // Not vacuous: a fresh run from the resumed run's seed ends elsewhere.
        CHECK(max_abs > 0);
        std::remove(path.c_str());
    }
    if (a != MPI_COMM_NULL) MPI_Comm_free(&a);
    if (b != MPI_COMM_NULL) MPI_Comm_free(&b);
    MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace

TEST_CASE("a checkpoint resumes at another number of ranks keeping the samples per step", "[checkpoint]") {
    const int size = dtrain::world_size();
    if (size == 2) {
        check_resume_at(2, 2, "2to2");
        check_resume_at(2, 1, "2to1");
        check_resume_at(1, 2, "1to2");
    } else if (size == 3) {
        check_resume_at(2, 3, "2to3");
    } else {
        check_resume_at(1, 1, "1to1");
    }
}

TEST_CASE("check_resume names the field a resumed run would change", "[checkpoint]") {
    TrainingPosition saved(1, 2, 6);
    saved.samples = 48;
    saved.batch_size = 16;
    saved.seed = 7;
    saved.ranks = 3;
    CHECK_NOTHROW(dtrain::check_resume("ck", saved, 3, 16, 7));
    CHECK_NOTHROW(dtrain::check_resume("ck", saved, 2, 24, 7));
    CHECK_NOTHROW(dtrain::check_resume("ck", saved, 1, 48, 7));
    CHECK_THROWS_WITH(dtrain::check_resume("ck", saved, 3, 16, 8),
                      Catch::Contains("load_checkpoint: 'ck' was written with seed=7, this run has seed=8"));
    CHECK_THROWS_WITH(dtrain::check_resume("ck", saved, 3, 8, 7),
                      Catch::Contains("'ck' was written with batch_size=16, this run has batch_size=8"));
    CHECK_THROWS_WITH(dtrain::check_resume("ck", saved, 2, 16, 7),
                      Catch::Contains("'ck' was written with ranks=3 x batch_size=16 (48 samples per step), "
                                      "this run has ranks=2 x batch_size=16 (32)") &&
                          Catch::Contains("use batch_size=24 per rank at ranks=2"));
    CHECK_THROWS_WITH(dtrain::check_resume("ck", saved, 5, 16, 7),
                      Catch::Contains("run with a number of ranks that divides 48"));
    saved.batch_size = 0;  // not recorded: the same number of ranks only
    CHECK_NOTHROW(dtrain::check_resume("ck", saved, 3, 5, 7));
    CHECK_THROWS_WITH(dtrain::check_resume("ck", saved, 2, 5, 7),
                      Catch::Contains("was written with ranks=3 and no batch size, this run has ranks=2"));
}

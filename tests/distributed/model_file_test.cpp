// save_model / load_model: inference files without an optimizer, with extras kept next to the model.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <dtrain/data/transform.hpp>
#include <dtrain/distributed/model_file.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/batchnorm.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/dropout.hpp>
#include <dtrain/nn/predict.hpp>
#include <support/test_utils.hpp>

namespace {

using dtrain::Model;

Model<float> make_saved_model(std::uint64_t seed, bool tanh = false) {
    Model<float> m({5}, seed);
    m.add(dtrain::Dense<float>(5, 8)).add(dtrain::BatchNorm1d<float>(8));
    if (tanh)
        m.add(dtrain::Tanh<float>());
    else
        m.add(dtrain::ReLU<float>());
    m.add(dtrain::Dropout<float>(0.2, 3)).add(dtrain::Dense<float>(8, 2));
    return m;
}

std::string model_file_path(const std::string& tag) {
    return dtrain::test::shared_temp_path("dtrain_model", tag);
}

}  // namespace

TEST_CASE("save_model / load_model round trip: parameters, state, extra state, extras; predictions equal",
          "[model_file]") {
    const std::string path = model_file_path("round");
    Model<float> trained = make_saved_model(1);
    dtrain::Rng rng(9);
    for (auto& v : trained.state())  // BatchNorm running statistics as training would leave them
        v = float(rng.uniform(0.5, 1.5));
    dtrain::ModelExtras extras;
    extras.arrays = {{"standardizer", {1.5, -2.0, 0.5, 2.0}}, {"empty", {}}};
    extras.texts = {{"classes", "setosa\nversicolor\nvirginica"}, {"note", ""}};
    dtrain::save_model(path, trained, extras);

    Model<float> fresh = make_saved_model(2);  // other initial values
    const dtrain::ModelExtras read = dtrain::load_model(path, fresh);
    CHECK(read == extras);
    CHECK(read.texts.at("classes") == "setosa\nversicolor\nvirginica");
    CHECK(dtrain::read_model_extras(path) == extras);  // without a model
    CHECK(std::equal(fresh.parameters().begin(), fresh.parameters().end(), trained.parameters().begin()));
    CHECK(std::equal(fresh.state().begin(), fresh.state().end(), trained.state().begin()));
    CHECK(fresh.extra_state() == trained.extra_state());
    const auto x = dtrain::test::random_tensor<float>({7, 5}, rng);
    const auto a = dtrain::predict(trained, x), b = dtrain::predict(fresh, x);
    CHECK(std::equal(a.begin(), a.end(), b.begin()));
    MPI_Barrier(MPI_COMM_WORLD);
    if (dtrain::test::world_rank() == 0) std::remove(path.c_str());
}

TEST_CASE(
    "load_model names the first differing layer and leaves the model as it was; bad files fail everywhere",
    "[model_file]") {
    const std::string path = model_file_path("errors");
    Model<float> trained = make_saved_model(1);
    dtrain::save_model(path, trained);
    Model<float> other = make_saved_model(4, /*tanh=*/true);
    const std::vector<float> before(other.parameters().begin(), other.parameters().end());
    CHECK_THROWS_WITH(
        dtrain::load_model(path, other),
        Catch::Contains("holds another model: layer 2 is ReLU (0 parameters) in the file but Tanh (0 "
                        "parameters) in this model"));
    CHECK(std::equal(before.begin(), before.end(), other.parameters().begin()));
    Model<float> same = make_saved_model(4);
    CHECK_THROWS_WITH(dtrain::load_model(path + ".missing", same),
                      Catch::Contains("cannot open '" + path + ".missing'"));
    if (dtrain::test::world_rank() == 0) {
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(40);
        f.put('\x7f');
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_THROWS_WITH(dtrain::load_model(path, same), Catch::Contains("checksum mismatch"));
    CHECK_THROWS_WITH(dtrain::save_model("/nonexistent-dir/m.bin", same),
                      Catch::Contains("save_model: cannot write '/nonexistent-dir/m.bin.tmp'"));
    MPI_Barrier(MPI_COMM_WORLD);
    if (dtrain::test::world_rank() == 0) std::remove(path.c_str());
}

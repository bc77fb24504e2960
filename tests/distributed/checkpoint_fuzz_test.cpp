// The checkpoint loader and the model-file readers (load_model, read_model_extras), which share the file
// format, against hostile files: truncation at every position, a flipped byte at every position, every size
// field set to huge values with a valid checksum, an empty file and a directory. Each case must end in a
// dtrain::Error (never another exception, a crash or a large allocation) and leave the model and the
// optimizer as they were; read_model_extras may also load cleanly when the damage lies beyond the extras it
// reads, and must then return the extras that were saved. Own program: it replaces operator new
// (tests/support/fuzz.hpp) to bound every allocation.
#define DTRAIN_FUZZ_REPLACE_NEW
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <dtrain/core/hash.hpp>
#include <dtrain/distributed/checkpoint.hpp>
#include <dtrain/distributed/model_file.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/batchnorm.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/dropout.hpp>
#include <dtrain/optim/adam.hpp>
#include <support/fuzz.hpp>

namespace {

using dtrain::Model;

Model<float> make_model() {
    Model<float> m({6}, 1);
    m.add(dtrain::Dense<float>(6, 8)).add(dtrain::BatchNorm1d<float>(8)).add(dtrain::ReLU<float>());
    m.add(dtrain::Dropout<float>(0.25, 7)).add(dtrain::Dense<float>(8, 3));
    return m;
}

std::string path_for(const std::string& tag) {
    return (std::filesystem::temp_directory_path() /
            ("dtrain_ckfuzz_" + std::to_string(::getpid()) + "_" + tag))
        .string();
}

std::vector<char> read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_all(const std::string& path, const std::vector<char>& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
}

// Loads `bytes` as a checkpoint into a fresh model and optimizer; returns "" on success, the dtrain::Error's
// message otherwise, or "WRONG: ..." for anything else (another exception, a change to the model on failure).
std::string load(const std::vector<char>& bytes, const std::string& path) {
    write_all(path, bytes);
    Model<float> model = make_model();
    dtrain::Adam<float> adam;
    const std::vector<float> before(model.parameters().begin(), model.parameters().end());
    try {
        dtrain::load_checkpoint(path, model, adam, MPI_COMM_SELF);
        return "";
    } catch (const dtrain::Error& e) {
        const std::vector<float> after(model.parameters().begin(), model.parameters().end());
        if (after != before || adam.steps() != 0) return std::string("WRONG: the model changed: ") + e.what();
        return e.what();
    } catch (const std::exception& e) {
        return std::string("WRONG: ") + e.what();
    }
}

// The 64-bit word at byte `at` of `b` (native byte order, as the formats store it).
std::uint64_t u64_at(const std::vector<char>& b, std::size_t at) {
    std::uint64_t v = 0;
    std::memcpy(&v, b.data() + at, 8);
    return v;
}

// Offsets of the checkpoint's 64-bit size fields (the lengths of the strings and of the value arrays),
// found by walking the format as save_checkpoint() writes it.
std::vector<std::size_t> size_fields(const std::vector<char>& b) {
    auto u64 = [&](std::size_t at) { return u64_at(b, at); };
    std::vector<std::size_t> fields;
    std::size_t at = 24;                    // magic, version, value size
    for (int text = 0; text < 2; ++text) {  // the model's layers, the optimizer's description
        fields.push_back(at);
        at += 8 + u64(at);
    }
    at += 8 * 9;  // slots, steps, position (epoch, batch, step, samples, batch size, seed, ranks)
    for (std::size_t elem : {8, 4, 4, 4, 8}) {  // position's sums, parameters, state, optimizer state, extra
        fields.push_back(at);
        at += 8 + elem * u64(at);
    }
    fields.push_back(at);  // the gradient compression setting
    at += 8 + u64(at);
    at += 8;               // the number of ranks with residuals
    fields.push_back(at);  // the residuals
    at += 8 + 4 * u64(at);
    REQUIRE(at + 8 == b.size());
    return fields;
}

// Offsets of a model file's 64-bit size and count fields, walking the format as save_model() writes it:
// the layers' text, the number of extra arrays, each array's name and values, the number of extra texts,
// each text's name and text, then the parameters, the state and the layers' extra state.
std::vector<std::size_t> model_size_fields(const std::vector<char>& b) {
    auto u64 = [&](std::size_t at) { return u64_at(b, at); };
    std::vector<std::size_t> fields;
    std::size_t at = 24;  // magic, version, value size
    auto field = [&](std::size_t elem) {
        fields.push_back(at);
        at += 8 + elem * u64(at);
    };
    field(1);                               // the layers
    for (int kind = 0; kind < 2; ++kind) {  // arrays of doubles, then texts
        fields.push_back(at);
        const std::uint64_t n = u64(at);
        at += 8;
        for (std::uint64_t k = 0; k < n; ++k) {
            field(1);
            field(kind == 0 ? 8 : 1);
        }
    }
    for (std::size_t elem : {4, 4, 8})  // parameters, state, extra state
        field(elem);
    REQUIRE(at + 8 == b.size());
    return fields;
}

void set_checksum(std::vector<char>& b) {
    const std::uint64_t sum = dtrain::detail::fnv1a(b.data(), b.size() - 8);
    std::memcpy(b.data() + b.size() - 8, &sum, 8);
}

// Calls visit(bytes, what, field) for every hostile variant of the file `good`: each truncation and each
// flipped byte (field -1), then each size field at the offsets `fields` set to 4 hostile values with a valid
// checksum, as a crafted file has (field: the index in `fields`).
template <class Visit>
void for_each_variant(const std::vector<char>& good, const std::vector<std::size_t>& fields, Visit visit) {
    for (std::size_t n = 0; n < good.size(); ++n)
        visit(std::vector<char>(good.begin(), good.begin() + std::ptrdiff_t(n)),
              "truncated to " + std::to_string(n), -1);
    for (std::size_t i = 0; i < good.size(); ++i) {
        std::vector<char> b = good;
        b[i] = char(b[i] ^ 0x5a);
        visit(b, "byte " + std::to_string(i) + " flipped", -1);
    }
    for (std::size_t f = 0; f < fields.size(); ++f) {
        for (std::uint64_t v : {std::uint64_t(1) << 62, ~std::uint64_t(0), std::uint64_t(good.size()),
                                std::uint64_t(1) << 33}) {
            std::vector<char> b = good;
            std::memcpy(b.data() + fields[f], &v, 8);
            set_checksum(b);
            visit(b, "size field at " + std::to_string(fields[f]) + " set to " + std::to_string(v), int(f));
        }
    }
}

// The outcomes of a fuzz run. add() takes one reader's outcome ("" for a clean load, "WRONG: ..." or the
// dtrain::Error's message): wrong when it is "WRONG", a clean load where none may be, or an error that does
// not name `file`; the first five wrong cases fail with what went wrong.
struct Tally {
    std::size_t cases = 0, clean = 0, wrong = 0;
    void add(const std::string& r, const std::string& what, const std::string& file, bool may_load) {
        ++cases;
        if (r.empty() && may_load) {
            ++clean;
        } else if (r.empty() || r.rfind("WRONG", 0) == 0) {
            if (++wrong <= 5) FAIL_CHECK(what << ": " << (r.empty() ? "accepted" : r));
        } else if (r.find(file) == std::string::npos) {
            if (++wrong <= 5) FAIL_CHECK(what << ": the error does not name the file: " << r);
        }
    }
};

}  // namespace

TEST_CASE("load_checkpoint: every hostile variant of a checkpoint is a dtrain::Error", "[checkpoint][fuzz]") {
    const std::string path = path_for("seed"), work = path_for("case");
    {
        Model<float> model = make_model();
        dtrain::Adam<float> adam;
        adam.reset(model.num_parameters());
        dtrain::save_checkpoint(path, model, adam, {1, 2, 3}, MPI_COMM_SELF);
    }
    const std::vector<char> good = read_all(path);
    REQUIRE(load(good, work).empty());
    // Nothing beyond what the file justifies: a larger allocation is refused (and reported below).
    dtrain::test::fuzz::AllocationLimit limit(4 * good.size() + 4096);

    Tally t;
    for_each_variant(good, size_fields(good),
                     [&](const std::vector<char>& bytes, const std::string& what, int) {
                         t.add(load(bytes, work), what, work, false);
                     });
    CHECK(t.wrong == 0);
    CHECK(t.cases == 2 * good.size() + 36);  // truncations, flips, 9 size fields x 4 values
    CHECK(limit.violation() == "");

    std::filesystem::create_directory(work + ".dir");
    Model<float> model = make_model();
    dtrain::Adam<float> adam;
    CHECK_THROWS_WITH(dtrain::load_checkpoint(work + ".dir", model, adam, MPI_COMM_SELF),
                      Catch::Contains("load_checkpoint: cannot read '" + work + ".dir'"));
    write_all(work, {});
    CHECK_THROWS_WITH(dtrain::load_checkpoint(work, model, adam, MPI_COMM_SELF),
                      Catch::Contains("is truncated"));
    std::filesystem::remove(work + ".dir");
    std::filesystem::remove(work);
    std::filesystem::remove(path);
}

// What a model-file reader made of a hostile file: "" for a clean load (read_model_extras: of the extras
// that were saved), the dtrain::Error's message, or "WRONG: ..." (another exception, other extras accepted,
// a model changed by a failed load_model).
std::string read_model_file(const std::vector<char>& bytes, const std::string& path, bool with_model,
                            const dtrain::ModelExtras& saved) {
    write_all(path, bytes);
    Model<float> model = make_model();
    const std::vector<float> before(model.parameters().begin(), model.parameters().end());
    const std::vector<std::uint64_t> extra_before = model.extra_state();
    try {
        const dtrain::ModelExtras got = with_model ? dtrain::load_model(path, model, MPI_COMM_SELF)
                                                   : dtrain::read_model_extras(path, MPI_COMM_SELF);
        return got == saved ? "" : "WRONG: other extras accepted";
    } catch (const dtrain::Error& e) {
        const std::vector<float> after(model.parameters().begin(), model.parameters().end());
        if (after != before || model.extra_state() != extra_before)
            return std::string("WRONG: the model changed: ") + e.what();
        return e.what();
    } catch (const std::exception& e) {
        return std::string("WRONG: ") + e.what();
    }
}

TEST_CASE("load_model and read_model_extras: every hostile variant of a model file is a dtrain::Error",
          "[model_file][fuzz]") {
    const std::string path = path_for("model_seed"), work = path_for("model_case");
    dtrain::ModelExtras extras;
    extras.arrays["mean"] = {0.5, -1.25, 3.0};
    extras.arrays["std"] = {2.0};
    extras.texts["classes"] = "setosa\nversicolor\nvirginica";
    dtrain::save_model(path, make_model(), extras, MPI_COMM_SELF);
    const std::vector<char> good = read_all(path);
    REQUIRE(read_model_file(good, work, true, extras).empty());
    REQUIRE(read_model_file(good, work, false, extras).empty());
    dtrain::test::fuzz::AllocationLimit limit(4 * good.size() + 4096);

    const std::vector<std::size_t> fields = model_size_fields(good);
    CHECK(fields.size() == 12);  // layers; 2 arrays; 1 text; parameters, state, extra state (+ 2 counts)
    for (bool with_model : {true, false}) {
        INFO((with_model ? "load_model" : "read_model_extras"));
        // load_model must reject every variant; read_model_extras may read the saved extras when the damage
        // lies beyond them (the size fields of the parameters, the state and the extra state: 9, 10, 11).
        Tally t;
        for_each_variant(good, fields,
                         [&](const std::vector<char>& bytes, const std::string& what, int field) {
                             t.add(read_model_file(bytes, work, with_model, extras), what, work,
                                   !with_model && field >= 9);
                         });
        CHECK(t.wrong == 0);
        CHECK(t.cases == 2 * good.size() + 48);     // truncations, flips, 12 size fields x 4 values
        CHECK(t.clean == (with_model ? 0u : 12u));  // read_model_extras: the last 3 fields x 4 values
    }
    CHECK(limit.violation() == "");

    std::filesystem::create_directory(work + ".dir");
    Model<float> model = make_model();
    CHECK_THROWS_WITH(dtrain::load_model(work + ".dir", model, MPI_COMM_SELF),
                      Catch::Contains("load_model: cannot read '" + work + ".dir'"));
    CHECK_THROWS_WITH(dtrain::read_model_extras(work + ".dir", MPI_COMM_SELF),
                      Catch::Contains("read_model_extras: cannot read '" + work + ".dir'"));
    write_all(work, {});
    CHECK_THROWS_WITH(dtrain::load_model(work, model, MPI_COMM_SELF),
                      Catch::Contains("'" + work + "'") && Catch::Contains("truncated"));
    CHECK_THROWS_WITH(dtrain::read_model_extras(work, MPI_COMM_SELF),
                      Catch::Contains("'" + work + "'") && Catch::Contains("truncated"));
    std::filesystem::remove(work + ".dir");
    std::filesystem::remove(work);
    std::filesystem::remove(path);
}

TEST_CASE("load_checkpoint of a directory fails on every rank instead of hanging", "[checkpoint]") {
    const std::string dir = std::filesystem::temp_directory_path().string();
    Model<float> model = make_model();
    dtrain::Adam<float> adam;
    CHECK_THROWS_WITH(dtrain::load_checkpoint(dir, model, adam),
                      Catch::Contains("cannot read '" + dir + "'"));
}

TEST_CASE("a large file of another kind and /dev/zero are refused before they are read whole",
          "[checkpoint][model_file]") {
    const std::string big = path_for("big");
    {  // 1 GiB of zeros, sparse: not a dtrain file, but large enough that reading it whole would show
        std::ofstream(big, std::ios::binary).put('x');
        std::filesystem::resize_file(big, std::uintmax_t(1) << 30);
    }
    Model<float> model = make_model();
    dtrain::Adam<float> adam;
    {
        dtrain::test::fuzz::AllocationLimit limit(std::size_t(1) << 20, std::size_t(64) << 20);
        CHECK_THROWS_WITH(dtrain::load_checkpoint(big, model, adam, MPI_COMM_SELF),
                          Catch::Contains("load_checkpoint: '" + big + "' is not a dtrain checkpoint"));
        CHECK_THROWS_WITH(dtrain::load_model(big, model, MPI_COMM_SELF),
                          Catch::Contains("load_model: '" + big + "' is not a dtrain model file"));
        CHECK_THROWS_WITH(dtrain::read_model_extras(big, MPI_COMM_SELF),
                          Catch::Contains("read_model_extras: '" + big + "' is not a dtrain model file"));
        CHECK(limit.violation() == "");
    }
    std::filesystem::remove(big);
    // A device without end: refused by its kind, naming it, instead of growing until std::bad_alloc.
    CHECK_THROWS_WITH(dtrain::load_checkpoint("/dev/zero", model, adam, MPI_COMM_SELF),
                      Catch::Contains("load_checkpoint: cannot read '/dev/zero': it is not a regular file"));
    CHECK_THROWS_WITH(dtrain::load_model("/dev/zero", model),
                      Catch::Contains("load_model: cannot read '/dev/zero': it is not a regular file"));
    // A checkpoint too large for memory is a dtrain::Error naming the file, not std::bad_alloc.
    const std::string huge = path_for("huge");
    {
        std::ofstream out(huge, std::ios::binary);
        out.write(dtrain::detail::checkpoint_magic, 8);
    }
    std::filesystem::resize_file(huge, std::uintmax_t(1) << 30);
    {
        dtrain::test::fuzz::AllocationLimit limit(std::size_t(1) << 20, std::size_t(64) << 20);
        CHECK_THROWS_WITH(
            dtrain::load_checkpoint(huge, model, adam, MPI_COMM_SELF),
            Catch::Contains("load_checkpoint: cannot allocate 1073741824 bytes to read '" + huge + "'"));
    }
    std::filesystem::remove(huge);
}

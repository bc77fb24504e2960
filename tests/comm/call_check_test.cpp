// Checked collectives: a blocking all-reduce or broadcast whose ranks pass different lengths, element types,
// reduce operations or roots throws dtrain::Error on every rank naming the ranks, for Collective, Ring and
// Naive; matched calls still work afterwards; the checks can be turned off (set_collective_checks,
// DTRAIN_CHECK_COLLECTIVES), only alike on every rank.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <dtrain/comm.hpp>
#include <dtrain/comm/detail/call_check.hpp>
#include <support/test_utils.hpp>

namespace {

using dtrain::ReduceOp;
using dtrain::Span;
using dtrain::test::all_ranks;
using dtrain::test::error_message;

/// "rank 0 has A, rank 1 has B" at 2 ranks, "rank 0 has A, ranks 1 and 2 have B" at 3, ...: rank 0 holds
/// `a`, every other rank `b`.
std::string zero_vs_rest(const std::string& a, const std::string& b, int p) {
    std::string s = "rank 0 has " + a + ", ";
    if (p == 2) return s + "rank 1 has " + b;
    s += "ranks 1";
    for (int r = 2; r < p && r < 4; ++r)
        s += (r + 1 == p || r == 3 ? " and " : ", ") + std::to_string(r);
    if (p > 4) s += " and " + std::to_string(p - 4) + " more";
    return s + " have " + b;
}

/// True on every rank when every rank's message contains `want`.
bool everywhere_contains(const std::string& message, const std::string& want) {
    const bool ok = message.find(want) != std::string::npos;
    if (!ok) UNSCOPED_INFO("rank " << dtrain::test::world_rank() << " got: '" << message << "'");
    return all_ranks(ok);
}

/// Every rank sums its rank + 1 into a buffer of `n` floats: the communicator still works.
template <class Comm>
bool matched_sum_works(Comm& comm, std::size_t n = 37) {
    std::vector<float> v(n, float(comm.rank() + 1));
    comm.allreduce_sum(Span<float>(v.data(), v.size()));
    const float want = float(comm.size() * (comm.size() + 1) / 2);
    bool ok = true;
    for (float x : v)
        ok = ok && x == want;
    return all_ranks(ok);
}

/// Sets (value non-null) or clears DTRAIN_CHECK_COLLECTIVES on this rank.
void set_env(const char* value) {
    if (value != nullptr)
        setenv("DTRAIN_CHECK_COLLECTIVES", value, 1);
    else
        unsetenv("DTRAIN_CHECK_COLLECTIVES");
}

}  // namespace

TEMPLATE_TEST_CASE("mismatched blocking calls throw on every rank, naming the ranks", "[comm]",
                   dtrain::Collective, dtrain::Ring, dtrain::Naive) {
    TestType comm(MPI_COMM_WORLD);
    const std::string name = TestType::policy_name;
    const int p = comm.size(), r = comm.rank();
    CHECK(comm.collective_checks());
    CHECK(matched_sum_works(comm));
    if (p == 1) return;  // one rank cannot disagree with itself

    SECTION("element count of allreduce") {
        std::vector<float> v(r == 0 ? 1000 : 500, 1.0f);
        const std::string m =
            error_message([&] { comm.allreduce(Span<float>(v.data(), v.size()), ReduceOp::Sum); });
        CHECK(everywhere_contains(
            m, name + "::allreduce: ranks disagree on the element count: " + zero_vs_rest("1000", "500", p)));
        CHECK(all_ranks(v[0] == 1.0f));  // nothing was reduced
    }
    SECTION("element count of allreduce_sum, also when a rank passes no elements") {
        std::vector<float> v(r == 0 ? 0 : 3, 1.0f);
        const std::string m = error_message([&] { comm.allreduce_sum(Span<float>(v.data(), v.size())); });
        CHECK(everywhere_contains(
            m, name + "::allreduce_sum: ranks disagree on the element count: " + zero_vs_rest("0", "3", p)));
    }
    SECTION("reduce operation") {
        std::vector<float> v(16, float(r));
        const std::string m = error_message(
            [&] { comm.allreduce(Span<float>(v.data(), v.size()), r == 0 ? ReduceOp::Max : ReduceOp::Sum); });
        CHECK(everywhere_contains(m, name + "::allreduce: ranks disagree on the reduce operation: " +
                                         zero_vs_rest("max", "sum", p)));
    }
    SECTION("element type") {
        std::vector<float> f(8, 1.0f);
        std::vector<double> d(8, 1.0);
        const std::string m = error_message([&] {
            if (r == 0)
                comm.allreduce_sum(Span<float>(f.data(), f.size()));
            else
                comm.allreduce_sum(Span<double>(d.data(), d.size()));
        });
        CHECK(everywhere_contains(m, name + "::allreduce_sum: ranks disagree on the element type: " +
                                         zero_vs_rest("float", "double", p)));
    }
    SECTION("several fields at once are all named") {
        std::vector<float> v(r == 0 ? 4 : 5, 1.0f);
        const std::string m = error_message([&] {
            comm.allreduce(Span<float>(v.data(), v.size()), r == 0 ? ReduceOp::Min : ReduceOp::Prod);
        });
        CHECK(everywhere_contains(m, "the element count: " + zero_vs_rest("4", "5", p) +
                                         "; on the reduce operation: " + zero_vs_rest("min", "prod", p)));
    }
    SECTION("broadcast root") {
        std::vector<float> v(10, float(r));
        const int root = r == 0 ? 0 : 1;
        const std::string m = error_message([&] { comm.broadcast(Span<float>(v.data(), v.size()), root); });
        CHECK(everywhere_contains(
            m, name + "::broadcast: ranks disagree on the root: " + zero_vs_rest("0", "1", p)));
        CHECK(all_ranks(v[0] == float(r)));
    }
    SECTION("broadcast length") {
        std::vector<double> v(r == 0 ? 64 : 32, 2.0);
        const std::string m = error_message([&] { comm.broadcast(Span<double>(v.data(), v.size()), 0); });
        CHECK(everywhere_contains(
            m, name + "::broadcast: ranks disagree on the element count: " + zero_vs_rest("64", "32", p)));
    }
    SECTION("broadcast on one rank, allreduce on the others") {
        std::vector<float> v(6, 1.0f);
        const std::string m = error_message([&] {
            if (r == 0)
                comm.broadcast(Span<float>(v.data(), v.size()), 0);
            else
                comm.allreduce_sum(Span<float>(v.data(), v.size()));
        });
        CHECK(everywhere_contains(
            m, "ranks disagree on the operation: " + zero_vs_rest("broadcast", "allreduce", p)));
    }
    // Every section leaves the communicator usable: the failed call moved no data.
    CHECK(matched_sum_works(comm, 1000));
}

static_assert(dtrain::has_collective_checks_v<dtrain::Collective> &&
                  dtrain::has_collective_checks_v<dtrain::Ring> &&
                  dtrain::has_collective_checks_v<dtrain::Naive>,
              "the three policies let their checks be switched");
static_assert(!dtrain::has_collective_checks_v<int>, "has_collective_checks_v detects the members");

TEMPLATE_TEST_CASE("matched calls of every kind pass the check", "[comm]", dtrain::Collective, dtrain::Ring,
                   dtrain::Naive) {
    TestType comm(MPI_COMM_WORLD);
    const int p = comm.size(), r = comm.rank();
    std::vector<double> d(7, double(r));
    comm.allreduce(Span<double>(d.data(), d.size()), ReduceOp::Max);
    CHECK(all_ranks(d[6] == double(p - 1)));
    std::vector<dtrain::Half> h(5, dtrain::Half(1.0f));
    comm.allreduce_sum(Span<dtrain::Half>(h.data(), h.size()));
    CHECK(all_ranks(float(h[4]) == float(p)));
    std::vector<std::int32_t> i(3, r + 1);
    comm.broadcast(Span<std::int32_t>(i.data(), i.size()), p - 1);
    CHECK(all_ranks(i[0] == p));
    std::vector<float> empty;
    comm.allreduce_sum(Span<float>(empty.data(), 0));
    CHECK(matched_sum_works(comm));
}

TEMPLATE_TEST_CASE("the checks can be turned off, only alike on every rank", "[comm]", dtrain::Collective,
                   dtrain::Ring, dtrain::Naive) {
    const std::string name = TestType::policy_name;
    const int p = dtrain::test::world_size(), r = dtrain::test::world_rank();

    SECTION("set_collective_checks(false): a mismatched op is no longer caught") {
        TestType comm(MPI_COMM_WORLD);
        comm.set_collective_checks(false);
        CHECK(!comm.collective_checks());
        CHECK(matched_sum_works(comm));
        // Same length and type, different ops: the data moves as usual and nothing throws (the results are
        // then meaningless, which is what the check is for).
        std::vector<float> v(16, float(r));
        CHECK(all_ranks(error_message([&] {
                            comm.allreduce(Span<float>(v.data(), v.size()),
                                           r == 0 ? ReduceOp::Max : ReduceOp::Sum);
                        }).empty()));
        comm.set_collective_checks(true);
        CHECK(comm.collective_checks());
        if (p > 1) {
            const std::string m = error_message([&] {
                comm.allreduce(Span<float>(v.data(), v.size()), r == 0 ? ReduceOp::Max : ReduceOp::Sum);
            });
            CHECK(everywhere_contains(m, "disagree on the reduce operation"));
        }
    }
    SECTION("copies keep the setting") {
        TestType comm(MPI_COMM_WORLD);
        comm.set_collective_checks(false);
        TestType copy(comm);
        CHECK(!copy.collective_checks());
        CHECK(matched_sum_works(copy));
        TestType checked(MPI_COMM_WORLD);
        TestType checked_copy(checked);  // checks on the copy's own duplicate
        CHECK(checked_copy.collective_checks());
        CHECK(matched_sum_works(checked_copy));
        if (p > 1) {
            std::vector<float> v(r == 0 ? 2 : 3, 1.0f);
            const std::string m =
                error_message([&] { checked_copy.allreduce_sum(Span<float>(v.data(), v.size())); });
            CHECK(everywhere_contains(m, "disagree on the element count"));
        }
    }
    SECTION("DTRAIN_CHECK_COLLECTIVES=0 or off at construction") {
        for (const char* value : {"0", "off"}) {
            set_env(value);
            TestType comm(MPI_COMM_WORLD);
            set_env(nullptr);
            CHECK(!comm.collective_checks());
            CHECK(matched_sum_works(comm));
        }
        for (const char* value : {"1", "on", ""}) {
            set_env(value);
            TestType comm(MPI_COMM_WORLD);
            set_env(nullptr);
            CHECK(comm.collective_checks());
        }
    }
    if (p == 1) return;
    SECTION("ranks passing different settings get an error and keep the old setting") {
        TestType comm(MPI_COMM_WORLD);
        const std::string m = error_message([&] { comm.set_collective_checks(r != 0); });
        CHECK(everywhere_contains(m, name + ": ranks disagree on whether to check collective calls"));
        CHECK(all_ranks(comm.collective_checks()));
        CHECK(matched_sum_works(comm));
    }
    SECTION("DTRAIN_CHECK_COLLECTIVES set on one rank only") {
        set_env(r == 0 ? "0" : nullptr);
        const std::string m = error_message([&] { TestType comm(MPI_COMM_WORLD); });
        set_env(nullptr);
        CHECK(everywhere_contains(m, name + ": ranks disagree on whether to check collective calls"));
    }
    SECTION("an invalid DTRAIN_CHECK_COLLECTIVES on one rank") {
        set_env(r == p - 1 ? "maybe" : nullptr);
        const std::string m = error_message([&] { TestType comm(MPI_COMM_WORLD); });
        set_env(nullptr);
        CHECK(everywhere_contains(
            m, name + ": rank " + std::to_string(p - 1) + ": DTRAIN_CHECK_COLLECTIVES must be 1 or on"));
        CHECK(everywhere_contains(m, "got 'maybe'"));
    }
}

TEST_CASE("call signatures name types, ops and groups of ranks", "[comm]") {
    namespace d = dtrain::detail;
    CHECK(std::string(d::element_type_names[d::element_type_id<float>()]) == "float");
    CHECK(std::string(d::element_type_names[d::element_type_id<dtrain::BFloat16>()]) == "BFloat16");
    CHECK(std::string(d::element_type_names[d::element_type_id<std::uint8_t>()]) == "uint8");
    CHECK(d::element_type_id<dtrain::Half>() != d::element_type_id<std::uint16_t>());
    CHECK(d::element_type_id<const double>() == d::element_type_id<double>());
    // Seven ranks: counts 5,5,6,5,5,5,5 -> ranks 0, 1, 3, 4 and 2 more have 5, rank 2 has 6.
    std::vector<std::int64_t> all;
    for (int q = 0; q < 7; ++q) {
        const auto s = d::allreduce_signature<float>(q == 2 ? 6 : 5, ReduceOp::Sum);
        all.insert(all.end(), s.value, s.value + d::CallSignature::fields);
    }
    CHECK(d::describe_disagreement(d::CallSignature::Count, all, 7) ==
          "ranks 0, 1, 3, 4 and 2 more have 5, rank 2 has 6");
    CHECK(d::describe_disagreement(d::CallSignature::Op, all, 2) == "ranks 0 and 1 have sum");
    CHECK(zero_vs_rest("a", "b", 4) == "rank 0 has a, ranks 1, 2 and 3 have b");
    set_env("maybe");
    CHECK_THROWS_WITH(
        d::collective_checks_from_environment(),
        Catch::Contains("DTRAIN_CHECK_COLLECTIVES must be 1 or on") && Catch::Contains("'maybe'"));
    set_env(nullptr);
    CHECK(d::collective_checks_from_environment());
}

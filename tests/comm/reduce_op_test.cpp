// ReduceOp on the three communicator policies: allreduce(data, op) and iallreduce(data, op) against
// MPI_Allreduce of the same inputs for every op, element type and awkward length (0, 1, fewer than, as many
// as and more than the ranks, and a buffer of several of Ring's default 512 KiB segments per rank; exact for
// integers and Max/Min, within rounding for floating Sum/Prod), bitwise agreement across ranks, requests of
// different ops in flight together, NaN propagation in Ring and Naive, and the combine functions themselves.
// Also run across 2 and 3 simulated hosts (multihost.reduce_op, tests/multihost/CMakeLists.txt).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <dtrain/comm.hpp>
#include <dtrain/core/hash.hpp>
#include <support/test_utils.hpp>

namespace {

using dtrain::ReduceOp;
using dtrain::Span;

constexpr ReduceOp all_ops[] = {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod};

/// A 64-bit hash of (r, i, salt).
std::uint64_t mix(int r, std::size_t i, std::uint64_t salt = 0) {
    std::uint64_t h = (std::uint64_t(r) + 1) * 0x9E3779B97F4A7C15ull ^
                      (std::uint64_t(i) * 0xC2B2AE3D27D4EB4Full) ^ salt * 0x94D049BB133111EBull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return h;
}

/// Rank r's input at index i for `op`. Floating: [-8, 8) with an irregular fraction, so float sums round
/// differently by order. Signed: small enough that no sum or product overflows at 4 ranks (a signed
/// overflow is the caller's error, as in MPI). Unsigned: the full range, so Sum and Prod wrap.
template <class T>
T input(int r, std::size_t i, ReduceOp op) {
    const std::uint64_t h = mix(r, i, std::uint64_t(op));
    if constexpr (std::is_floating_point_v<T>) {
        return T(double(std::int64_t(h % 1000003) - 500001) / 62500.0 + 1.0 / 3.0);
    } else if constexpr (std::is_signed_v<T>) {
        if (op == ReduceOp::Prod) {  // |x|^4 <= 16 (8-bit) or 625
            return sizeof(T) == 1 ? T(std::int64_t(h % 5) - 2) : T(std::int64_t(h % 11) - 5);
        }
        const std::uint64_t range = std::uint64_t(std::numeric_limits<T>::max()) / 4;
        return T(std::int64_t(h % (2 * range)) - std::int64_t(range));
    } else {
        return T(h);
    }
}

template <class T>
std::vector<T> inputs(int r, std::size_t n, ReduceOp op) {
    std::vector<T> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = input<T>(r, i, op);
    return v;
}

/// The reference: MPI_Allreduce of this rank's inputs. Max and Min of unsigned integers are computed here
/// from every rank's inputs instead: MPICH 4.0.2 compares unsigned integers as signed (pmodels/mpich#6083).
template <class T>
std::vector<T> mpi_reference(std::size_t n, ReduceOp op) {
    std::vector<T> out(n);
    if constexpr (std::is_unsigned_v<T>) {
        // MPI libraries in use get these wrong (ReduceOp's documentation): the reference is computed here.
        if (op == ReduceOp::Max || op == ReduceOp::Min || (sizeof(T) < 4 && op == ReduceOp::Sum)) {
            for (std::size_t i = 0; i < n; ++i) {
                out[i] = input<T>(0, i, op);
                for (int r = 1; r < dtrain::world_size(); ++r) {
                    const T x = input<T>(r, i, op);
                    out[i] = op == ReduceOp::Max   ? std::max(out[i], x)
                             : op == ReduceOp::Min ? std::min(out[i], x)
                                                   : T(out[i] + x);
                }
            }
            return out;
        }
    }
    const std::vector<T> mine = inputs<T>(dtrain::world_rank(), n, op);
    MPI_Allreduce(mine.data(), out.data(), int(n), dtrain::mpi_type<T>(), dtrain::detail::mpi_op(op),
                  MPI_COMM_WORLD);
    return out;
}

/// True when `got` equals `want` exactly (integers, Max, Min) or within rounding of the association order
/// (floating Sum and Prod: 4 p eps times the sum or product of the magnitudes of the inputs).
template <class T>
bool matches(const std::vector<T>& got, const std::vector<T>& want, ReduceOp op, int p) {
    for (std::size_t i = 0; i < got.size(); ++i) {
        if (!std::is_floating_point_v<T> || op == ReduceOp::Max || op == ReduceOp::Min) {
            if (got[i] != want[i]) return false;
            continue;
        }
        double mag = op == ReduceOp::Sum ? 0.0 : 1.0;
        for (int r = 0; r < p; ++r) {
            const double a = std::abs(double(input<T>(r, i, op)));
            mag = op == ReduceOp::Sum ? mag + a : mag * a;
        }
        const double tol = 4.0 * p * double(std::numeric_limits<T>::epsilon()) * mag;
        if (!(std::abs(double(got[i]) - double(want[i])) <= tol)) return false;
    }
    return true;
}

/// The FNV-1a hash of the bytes of `v`.
template <class T>
std::uint64_t hash_of(const std::vector<T>& v) {
    return dtrain::detail::fnv1a(v.data(), v.size() * sizeof(T));
}

/// The awkward lengths at p ranks: empty, one element, fewer than, as many as and more than the ranks (Ring's
/// chunks of 0 and 1 elements), uneven chunks, and the longest (61) last.
std::vector<std::size_t> lengths(int p) {
    const std::size_t n = std::size_t(p);
    return {0, 1, n > 1 ? n - 1 : 0, n, n + 1, 5 * n + 3, 61};
}

/// A length whose every Ring chunk (one per rank) spans 2.5 of Ring's default 512 KiB segments plus one
/// element (1.25 MiB, the last chunk shorter): the default Ring's pipelined path with whole and partial
/// segments, and messages far beyond MPI's eager limits. 1.25 MiB times p per buffer for every element type.
template <class T>
std::size_t large_length(int p) {
    return std::size_t(p) * ((std::size_t(5) << 18) / sizeof(T)) + 1;
}

template <class... Ts, class F>
void for_each_type(F&& f) {
    (f(Ts{}), ...);
}

template <class F, class... Comms>
void for_each_comm(F&& f, Comms&... comms) {
    (f(comms), ...);
}

/// "float32", "int8", "uint64", ... for labels.
template <class T>
std::string type_name() {
    const char* kind = std::is_floating_point_v<T> ? "float" : std::is_signed_v<T> ? "int" : "uint";
    return kind + std::to_string(8 * sizeof(T));
}

/// Blocking allreduce(data, op) of every one of `ns` on `comm` against `want` (the reference of the longest
/// length: inputs do not depend on the length, so shorter results are its prefixes); returns `h` continued
/// by the hash of every result.
template <class T, class Comm>
std::uint64_t check_lengths(Comm& comm, const std::vector<std::size_t>& ns, ReduceOp op,
                            const std::vector<T>& want, const std::string& label, std::uint64_t h) {
    for (std::size_t n : ns) {
        std::vector<T> v = inputs<T>(comm.rank(), n, op);
        comm.allreduce(Span<T>(v.data(), v.size()), op);
        INFO(label << " " << dtrain::reduce_op_name(op) << " n=" << n << " p=" << comm.size());
        CHECK(matches(v, want, op, comm.size()));
        h = dtrain::detail::fnv1a(v.data(), v.size() * sizeof(T), h);
    }
    return h;
}

/// check_lengths of `ns` (longest last) with elements of type T for every op on every one of `comms` (one
/// MPI_Allreduce of reference per op, one comparison of the hash of every result across ranks at the end).
template <class T, class... Comms>
void check_blocking(const std::vector<std::size_t>& ns, Comms&... comms) {
    std::uint64_t h = dtrain::detail::fnv1a_basis;
    for (ReduceOp op : all_ops) {
        const std::vector<T> want = mpi_reference<T>(ns.back(), op);
        int k = 0;
        ((h = check_lengths<T>(
              comms, ns, op, want,
              std::string(Comms::policy_name) + " #" + std::to_string(k++) + " " + type_name<T>(), h)),
         ...);
    }
    INFO(type_name<T>() << ": the results differ between ranks");
    CHECK(dtrain::detail::same_everywhere(h, MPI_COMM_WORLD));
}

}  // namespace

static_assert(dtrain::has_reduce_ops_v<dtrain::Collective>);
static_assert(dtrain::has_reduce_ops_v<dtrain::Ring>);
static_assert(dtrain::has_reduce_ops_v<dtrain::Naive>);
static_assert(!dtrain::has_reduce_ops_v<int>);

TEST_CASE("allreduce(data, op) matches MPI_Allreduce for every policy, op, type and length", "[comm]") {
    dtrain::Collective collective(MPI_COMM_WORLD);
    dtrain::Naive naive(MPI_COMM_WORLD);
    dtrain::Ring ring(MPI_COMM_WORLD);
    dtrain::Ring ring_tiny(MPI_COMM_WORLD, {12, 2});  // #3: 3 floats or 1 double per segment
    for_each_type<float, double, std::int32_t, std::int64_t, std::uint64_t>([&](auto t) {
        check_blocking<decltype(t)>(lengths(dtrain::world_size()), collective, naive, ring, ring_tiny);
    });
}

TEST_CASE("allreduce(data, op) of several default Ring segments per rank matches MPI_Allreduce", "[comm]") {
    dtrain::Collective collective(MPI_COMM_WORLD);
    dtrain::Naive naive(MPI_COMM_WORLD);
    dtrain::Ring ring(MPI_COMM_WORLD);
    const int p = dtrain::world_size();
    for_each_type<float, double, std::int32_t, std::int64_t, std::uint64_t>([&](auto t) {
        using T = decltype(t);
        check_blocking<T>({large_length<T>(p)}, collective, naive, ring);
    });
}

TEST_CASE("allreduce of 8- and 16-bit integers and uint32 wraps and compares like MPI", "[comm]") {
    dtrain::Naive naive(MPI_COMM_WORLD);
    dtrain::Ring ring(MPI_COMM_WORLD, {6, 3});  // #2: many segments
    dtrain::Collective collective(MPI_COMM_WORLD);
    for_each_type<std::int8_t, std::uint8_t, std::int16_t, std::uint16_t, std::uint32_t>(
        [&](auto t) { check_blocking<decltype(t)>(lengths(dtrain::world_size()), collective, naive, ring); });
}

TEST_CASE("allreduce(data, Sum) is bitwise allreduce_sum", "[comm]") {
    const int rank = dtrain::world_rank();
    auto run = [&](auto& comm) {
        std::vector<float> a = inputs<float>(rank, 1001, ReduceOp::Sum), b = a;
        comm.allreduce_sum(Span<float>(a.data(), a.size()));
        comm.allreduce(Span<float>(b.data(), b.size()), ReduceOp::Sum);
        INFO(std::decay_t<decltype(comm)>::policy_name);
        CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    };
    dtrain::Collective collective(MPI_COMM_WORLD);
    dtrain::Naive naive(MPI_COMM_WORLD);
    dtrain::Ring ring(MPI_COMM_WORLD, {64, 2});
    for_each_comm(run, collective, naive, ring);
}

TEST_CASE("iallreduce(data, op): requests of different ops and types in flight together", "[comm]") {
    const int p = dtrain::world_size();
    const int rank = dtrain::world_rank();
    auto run = [&](auto& comm) {
        using Comm = std::decay_t<decltype(comm)>;
        const std::size_t na = 301, nb = std::size_t(p + 1), nc = 97, nd = 50, ne = 64;
        std::vector<float> a = inputs<float>(rank, na, ReduceOp::Max);
        std::vector<std::int64_t> b = inputs<std::int64_t>(rank, nb, ReduceOp::Prod);
        std::vector<double> c = inputs<double>(rank, nc, ReduceOp::Min);
        std::vector<std::uint64_t> d = inputs<std::uint64_t>(rank, nd, ReduceOp::Sum);
        std::vector<std::int32_t> e = inputs<std::int32_t>(rank, ne, ReduceOp::Min);
        typename Comm::Request ra = comm.iallreduce(Span<float>(a.data(), na), ReduceOp::Max);
        typename Comm::Request rb = comm.iallreduce(Span<std::int64_t>(b.data(), nb), ReduceOp::Prod);
        typename Comm::Request rc = comm.iallreduce(Span<double>(c.data(), nc), ReduceOp::Min);
        typename Comm::Request rd = comm.iallreduce_sum(Span<std::uint64_t>(d.data(), nd));
        // A blocking reduction while the others are in flight.
        comm.allreduce(Span<std::int32_t>(e.data(), ne), ReduceOp::Min);
        for (int i = 0; i < 3; ++i) {
            comm.test(ra);
            comm.test(rb);
            comm.test(rc);
            comm.test(rd);
        }
        comm.wait(rd);
        comm.wait(rc);
        while (!comm.test(rb)) {
        }
        comm.wait(ra);
        INFO(Comm::policy_name);
        CHECK(matches(a, mpi_reference<float>(na, ReduceOp::Max), ReduceOp::Max, p));
        CHECK(matches(b, mpi_reference<std::int64_t>(nb, ReduceOp::Prod), ReduceOp::Prod, p));
        CHECK(matches(c, mpi_reference<double>(nc, ReduceOp::Min), ReduceOp::Min, p));
        CHECK(matches(d, mpi_reference<std::uint64_t>(nd, ReduceOp::Sum), ReduceOp::Sum, p));
        CHECK(matches(e, mpi_reference<std::int32_t>(ne, ReduceOp::Min), ReduceOp::Min, p));
        const std::uint64_t h = hash_of(a) ^ hash_of(b) * 3 ^ hash_of(c) * 5 ^ hash_of(d) * 7 ^ hash_of(e);
        CHECK(dtrain::detail::same_everywhere(h, MPI_COMM_WORLD));
    };
    dtrain::Collective collective(MPI_COMM_WORLD);
    dtrain::Naive naive(MPI_COMM_WORLD);
    dtrain::Ring ring(MPI_COMM_WORLD, {40, 3});  // several segments per chunk
    for_each_comm(run, collective, naive, ring);
}

namespace {

/// Rank r's input for the NaN test: NaN at indices i with i % (p + 2) == r (one rank each, the others have
/// none), a NaN of a sign depending on the rank everywhere at i % 7 == 6, +inf on the last rank at
/// i % 5 == 2, and otherwise a finite value.
template <class T>
T nan_input(int r, int p, std::size_t i) {
    if (i % 7 == 6)
        return r % 2 == 0 ? std::numeric_limits<T>::quiet_NaN() : -std::numeric_limits<T>::quiet_NaN();
    if (i % std::size_t(p + 2) == std::size_t(r)) return std::numeric_limits<T>::quiet_NaN();
    if (i % 5 == 2 && r == p - 1) return std::numeric_limits<T>::infinity();
    return input<T>(r, i, ReduceOp::Max);
}

/// NaN when any rank's input is NaN, else the maximum (or minimum) over the ranks.
template <class T>
bool nan_result_ok(const std::vector<T>& got, ReduceOp op, int p) {
    for (std::size_t i = 0; i < got.size(); ++i) {
        bool any_nan = false;
        T want = (op == ReduceOp::Max ? -1 : 1) * std::numeric_limits<T>::infinity();
        for (int r = 0; r < p; ++r) {
            const T x = nan_input<T>(r, p, i);
            if (std::isnan(x))
                any_nan = true;
            else
                want = op == ReduceOp::Max ? std::max(want, x) : std::min(want, x);
        }
        if (any_nan ? !std::isnan(got[i]) : got[i] != want) return false;
    }
    return true;
}

template <class T, class Comm>
void check_nan(Comm& comm, const std::string& label) {
    const int p = comm.size();
    for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) {
        for (std::size_t n : {std::size_t(1), std::size_t(p + 1), std::size_t(7 * p + 3), std::size_t(150)}) {
            std::vector<T> v(n);
            for (std::size_t i = 0; i < n; ++i)
                v[i] = nan_input<T>(comm.rank(), p, i);
            typename Comm::Request r = comm.iallreduce(Span<T>(v.data(), n), op);
            comm.wait(r);
            INFO(label << " " << dtrain::reduce_op_name(op) << " n=" << n << " p=" << p);
            CHECK(nan_result_ok(v, op, p));
            CHECK(dtrain::detail::same_everywhere(hash_of(v), MPI_COMM_WORLD));
        }
    }
}

}  // namespace

TEST_CASE("Max and Min propagate NaN in Ring and Naive, bitwise identical on every rank", "[comm]") {
    dtrain::Naive naive(MPI_COMM_WORLD);
    dtrain::Ring ring(MPI_COMM_WORLD);
    dtrain::Ring ring_tiny(MPI_COMM_WORLD, {8, 2});
    check_nan<float>(naive, "Naive float");
    check_nan<double>(naive, "Naive double");
    check_nan<float>(ring, "Ring float");
    check_nan<float>(ring_tiny, "Ring 8 B float");
    check_nan<double>(ring_tiny, "Ring 8 B double");
}

TEST_CASE("ReduceOp: names, MPI operations, combine functions and invalid values", "[comm]") {
    using namespace dtrain::detail;
    CHECK(std::string(dtrain::reduce_op_name(ReduceOp::Prod)) == "prod");
    CHECK(mpi_op(ReduceOp::Sum) == MPI_SUM);
    CHECK(mpi_op(ReduceOp::Max) == MPI_MAX);
    CHECK(mpi_op(ReduceOp::Min) == MPI_MIN);
    CHECK(mpi_op(ReduceOp::Prod) == MPI_PROD);
    CHECK(dtrain::mpi_type<std::int16_t>() == MPI_INT16_T);
    CHECK(dtrain::mpi_type<std::uint16_t>() == MPI_UINT16_T);
    int long_bytes = 0;
    MPI_Type_size(dtrain::mpi_type<long>(), &long_bytes);
    CHECK(long_bytes == int(sizeof(long)));

    const float nan = std::numeric_limits<float>::quiet_NaN();
    CHECK(std::isnan(Larger{}(1.0f, nan)));
    CHECK(std::isnan(Larger{}(nan, 1.0f)));
    CHECK(std::isnan(Smaller{}(-1.0f, nan)));
    CHECK(std::isnan(Smaller{}(nan, -1.0f)));
    CHECK(Larger{}(-3, 2) == 2);
    CHECK(Smaller{}(std::uint64_t(5), std::uint64_t(7)) == 5);
    CHECK(Times{}(std::uint8_t(16), std::uint8_t(17)) == std::uint8_t(16));  // 272 wraps to 16
    CHECK(Plus{}(std::numeric_limits<std::uint64_t>::max(), std::uint64_t(2)) == 1);

    // The tail after the blocks of 8 uses the same combine as the blocks.
    std::vector<double> dst = {1, 5, nan, 2, 0, 9, 1, 1, 3, nan, 4},
                        src = {2, 4, 1, nan, 0, 8, 1, 2, nan, 7, 5};
    reduce_fn<double>(ReduceOp::Max)(dst.data(), src.data(), dst.size());
    const std::vector<double> want = {2, 5, nan, nan, 0, 9, 1, 2, nan, nan, 5};
    bool same = true;
    for (std::size_t i = 0; i < dst.size(); ++i)
        same = same && (std::isnan(want[i]) ? std::isnan(dst[i]) : dst[i] == want[i]);
    CHECK(same);

    // An invalid op throws on every rank before any message, naming the value.
    const auto bad = static_cast<ReduceOp>(7);
    float x = 1.0f;
    dtrain::Collective collective(MPI_COMM_WORLD);
    dtrain::Naive naive(MPI_COMM_WORLD);
    dtrain::Ring ring(MPI_COMM_WORLD);
    CHECK_THROWS_WITH(collective.allreduce(Span<float>(&x, 1), bad), Catch::Contains("invalid value 7"));
    CHECK_THROWS_WITH(naive.allreduce(Span<float>(&x, 1), bad), Catch::Contains("invalid value 7"));
    CHECK_THROWS_WITH(ring.iallreduce(Span<float>(&x, 1), bad), Catch::Contains("invalid value 7"));
    CHECK(x == 1.0f);
}

// All-reduce of the three communicator policies against a sequential sum computed locally from every rank's
// deterministic input, bitwise agreement across ranks, nonblocking requests in flight together, and scratch
// reuse.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <dtrain/comm.hpp>
#include <support/test_utils.hpp>

namespace {

using dtrain::Span;

/// Rank r's deterministic input value at index i: an integer hash of (r, i) scaled to [-8, 8) with an
/// irregular fraction, so float sums round differently by order. Cheap, so every rank can recompute all
/// ranks' inputs for the reference sum.
template <class T>
T input(int r, std::size_t i) {
    std::uint64_t h =
        (std::uint64_t(r) + 1) * 0x9E3779B97F4A7C15ull ^ (std::uint64_t(i) * 0xC2B2AE3D27D4EB4Full);
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return T(double(std::int64_t(h % 1000003) - 500001) / 62500.0 + 1.0 / 3.0);
}

template <class T>
std::vector<T> make_input(int r, std::size_t n) {
    std::vector<T> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = input<T>(r, i);
    return v;
}

/// The sum over ranks of the inputs at every index in double (exact to well below float rounding) and the
/// sum of magnitudes.
template <class T>
struct Reference {
    Reference(std::size_t n, int p) : exact(n), mag(n) {
        for (std::size_t i = 0; i < n; ++i) {
            for (int r = 0; r < p; ++r) {
                const double x = double(input<T>(r, i));
                exact[i] += x;
                mag[i] += std::abs(x);
            }
        }
    }
    /// Largest |got - exact| / (1 + sum_r |x_r|) over elements.
    double max_error(const std::vector<T>& got) const {
        double worst = 0.0;
        for (std::size_t i = 0; i < got.size(); ++i)
            worst = std::max(worst, std::abs(double(got[i]) - exact[i]) / (1 + mag[i]));
        return worst;
    }
    std::vector<double> exact, mag;
};

template <class T>
double max_error(const std::vector<T>& got, int p) {
    return Reference<T>(got.size(), p).max_error(got);
}

/// True on every rank when every rank holds bitwise the same bytes as rank 0.
template <class T>
bool bitwise_same_everywhere(const std::vector<T>& v) {
    std::vector<T> root = v;
    if (!root.empty()) MPI_Bcast(root.data(), int(root.size() * sizeof(T)), MPI_BYTE, 0, MPI_COMM_WORLD);
    const bool same = root.empty() || std::memcmp(root.data(), v.data(), v.size() * sizeof(T)) == 0;
    return dtrain::test::all_ranks(same);
}

template <class T>
double tolerance() {
    return std::is_same_v<T, float> ? 1e-5 : 1e-13;
}

std::vector<std::size_t> lengths(int p) {
    return {0, 1, std::size_t(p > 1 ? p - 1 : 0), std::size_t(p), std::size_t(p + 1), 37, 1000003};
}

template <class Comm, class T>
void check_blocking(Comm& comm, const Reference<T>& ref, const std::string& label) {
    const std::size_t n = ref.exact.size();
    std::vector<T> v = make_input<T>(comm.rank(), n);
    comm.allreduce_sum(Span<T>(v.data(), v.size()));
    INFO(label << " n=" << n << " p=" << comm.size());
    CHECK(ref.max_error(v) <= tolerance<T>());
    CHECK(bitwise_same_everywhere(v));
}

}  // namespace

TEST_CASE("all-reduce matches the sequential sum for every policy, length and segment size", "[comm]") {
    const int p = dtrain::test::world_size();
    dtrain::Collective collective(MPI_COMM_WORLD);
    dtrain::Naive naive(MPI_COMM_WORLD);
    dtrain::Ring ring(MPI_COMM_WORLD);
    dtrain::Ring ring_small(MPI_COMM_WORLD, {4096, 3});   // several segments per chunk
    dtrain::Ring ring_large(MPI_COMM_WORLD, {65536, 5});  // for the 1000003-element buffer
    for (std::size_t n : lengths(p)) {
        const Reference<float> ref(n, p);
        check_blocking(collective, ref, "Collective");
        check_blocking(naive, ref, "Naive");
        check_blocking(ring, ref, "Ring default");
        if (n < 100000) {
            check_blocking(ring_small, ref, "Ring 4 KiB x3");
        } else {
            check_blocking(ring_large, ref, "Ring 64 KiB x5");
        }
    }
    // Tiny segments (1 and 3 elements) and windows from 1 to 16 on lengths that do not divide by p.
    for (std::size_t seg : {1, 3}) {
        for (int window : {1, 2, 16}) {
            dtrain::Ring r(MPI_COMM_WORLD, {seg * sizeof(float), window});
            for (std::size_t n :
                 {std::size_t(1), std::size_t(p + 1), std::size_t(5 * p + 3), std::size_t(61)}) {
                check_blocking(r, Reference<float>(n, p),
                               "Ring seg=" + std::to_string(seg) + " window=" + std::to_string(window));
            }
        }
    }
}

TEST_CASE("all-reduce of doubles and int64 for every policy", "[comm]") {
    const int p = dtrain::test::world_size();
    dtrain::Collective collective(MPI_COMM_WORLD);
    dtrain::Naive naive(MPI_COMM_WORLD);
    dtrain::Ring ring(MPI_COMM_WORLD, {64, 2});
    for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(p + 1), std::size_t(10007)}) {
        const Reference<double> ref(n, p);
        check_blocking(collective, ref, "Collective double");
        check_blocking(naive, ref, "Naive double");
        check_blocking(ring, ref, "Ring double");
    }
    // Integers sum exactly.
    const int r = dtrain::test::world_rank();
    std::vector<std::int64_t> a(1003), b, c;
    for (std::size_t i = 0; i < a.size(); ++i)
        a[i] = std::int64_t(i) * 1000 + r * 7 - 3;
    b = a;
    c = a;
    ring.allreduce_sum(Span<std::int64_t>(a.data(), a.size()));
    naive.allreduce_sum(Span<std::int64_t>(b.data(), b.size()));
    collective.allreduce_sum(Span<std::int64_t>(c.data(), c.size()));
    bool exact = true;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const std::int64_t want = std::int64_t(i) * 1000 * p + 7 * std::int64_t(p) * (p - 1) / 2 - 3 * p;
        exact = exact && a[i] == want && b[i] == want && c[i] == want;
    }
    CHECK(exact);
}

TEST_CASE("Ring and Naive sum the same inputs to results within float rounding of Collective", "[comm]") {
    const int p = dtrain::test::world_size();
    const std::size_t n = 4099;
    dtrain::Collective collective(MPI_COMM_WORLD);
    dtrain::Naive naive(MPI_COMM_WORLD);
    dtrain::Ring ring(MPI_COMM_WORLD, {256, 4});
    std::vector<float> a = make_input<float>(collective.rank(), n), b = a, c = a;
    collective.allreduce_sum(Span<float>(a.data(), n));
    naive.allreduce_sum(Span<float>(b.data(), n));
    ring.allreduce_sum(Span<float>(c.data(), n));
    CHECK(dtrain::test::max_rel_diff(b, a) <= 1e-5 * p);
    CHECK(dtrain::test::max_rel_diff(c, a) <= 1e-5 * p);
    // The naive sum is taken in rank order x0 + x1 + ...: reproduce it exactly.
    bool in_rank_order = true;
    for (std::size_t i = 0; i < n; ++i) {
        float s = input<float>(0, i);
        for (int r = 1; r < p; ++r)
            s += input<float>(r, i);
        in_rank_order = in_rank_order && s == b[i];
    }
    CHECK(in_rank_order);
}

TEST_CASE("nonblocking all-reduce: three requests in flight at once", "[comm]") {
    const int p = dtrain::test::world_size();
    const int rank = dtrain::test::world_rank();
    auto run = [&](auto& comm, const std::string& label) {
        using Comm = std::decay_t<decltype(comm)>;
        std::vector<float> a = make_input<float>(rank, 70001),
                           b = make_input<float>(rank, std::size_t(p + 1));
        std::vector<double> c = make_input<double>(rank, 3001);
        typename Comm::Request ra = comm.iallreduce_sum(Span<float>(a.data(), a.size()));
        typename Comm::Request rb = comm.iallreduce_sum(Span<float>(b.data(), b.size()));
        typename Comm::Request rc = comm.iallreduce_sum(Span<double>(c.data(), c.size()));
        // Advance them round-robin with test(), then finish them in reverse order of starting.
        for (int i = 0; i < 5; ++i) {
            comm.test(ra);
            comm.test(rb);
            comm.test(rc);
        }
        comm.wait(rc);
        while (!comm.test(rb)) {
        }
        comm.wait(ra);
        CHECK(comm.test(ra));
        INFO(label);
        CHECK(max_error(a, p) <= 1e-5);
        CHECK(max_error(b, p) <= 1e-5);
        CHECK(max_error(c, p) <= 1e-13);
        CHECK(bitwise_same_everywhere(a));
        CHECK(bitwise_same_everywhere(c));
    };
    dtrain::Collective collective(MPI_COMM_WORLD);
    dtrain::Naive naive(MPI_COMM_WORLD);
    dtrain::Ring ring(MPI_COMM_WORLD, {1024, 2});
    run(collective, "Collective");
    run(naive, "Naive");
    run(ring, "Ring");

    // A blocking call while a nonblocking one is in flight on the same Ring.
    std::vector<float> x = make_input<float>(rank, 5003), y = make_input<float>(rank, 2001);
    dtrain::Ring::Request rx = ring.iallreduce_sum(Span<float>(x.data(), x.size()));
    ring.allreduce_sum(Span<float>(y.data(), y.size()));
    ring.wait(rx);
    CHECK(max_error(x, p) <= 1e-5);
    CHECK(max_error(y, p) <= 1e-5);

    // Requests are movable; an inactive request tests complete.
    dtrain::Ring::Request moved = ring.iallreduce_sum(Span<float>(x.data(), x.size()));
    dtrain::Ring::Request target(std::move(moved));
    CHECK_FALSE(moved.active());
    CHECK(ring.test(moved));
    ring.wait(target);
    CHECK_FALSE(target.active());
}

TEST_CASE("Ring and Naive reuse their scratch buffers across calls", "[comm]") {
    dtrain::Ring ring(MPI_COMM_WORLD, {512, 4});
    dtrain::Naive naive(MPI_COMM_WORLD);
    std::vector<float> v = make_input<float>(ring.rank(), 20000);
    ring.allreduce_sum(Span<float>(v.data(), v.size()));
    naive.allreduce_sum(Span<float>(v.data(), v.size()));
    const std::size_t ring_buffers = ring.scratch_buffers(), naive_buffers = naive.scratch_buffers();
    for (int i = 0; i < 5; ++i) {
        ring.allreduce_sum(Span<float>(v.data(), v.size()));
        naive.allreduce_sum(Span<float>(v.data(), v.size()));
        auto req = ring.iallreduce_sum(Span<float>(v.data(), v.size()));
        ring.wait(req);
    }
    CHECK(ring.scratch_buffers() == ring_buffers);
    CHECK(naive.scratch_buffers() == naive_buffers);
    CHECK(ring.scratch_buffers() <= 1);
}

TEST_CASE("Ring picks its segments for one node: every rank of an mpiexec on one machine", "[comm]") {
    // (tests/multihost/node_test.cpp checks the other side: one rank per simulated host.)
    dtrain::Ring ring(MPI_COMM_WORLD);
    CHECK_FALSE(ring.crosses_nodes());
    CHECK(ring.window() == 4);
    CHECK(ring.segment_elems(std::size_t(1) << 22, sizeof(float)) ==
          (std::size_t(512) << 10) / sizeof(float));
    CHECK(ring.segment_elems(1000, sizeof(float)) == 1000);  // a whole chunk up to the segment size
    dtrain::Ring copy(ring);
    CHECK(copy.crosses_nodes() == ring.crosses_nodes());
}

TEST_CASE("global_sum and global_mean of scalars", "[comm]") {
    dtrain::Ring ring(MPI_COMM_WORLD);
    dtrain::Collective collective(MPI_COMM_WORLD);
    const int p = ring.size(), r = ring.rank();
    CHECK(dtrain::global_sum(ring, double(r) + 0.5) == Approx(double(p) * (p - 1) / 2 + 0.5 * p));
    CHECK(dtrain::global_sum(collective, std::int64_t(r + 1)) == std::int64_t(p) * (p + 1) / 2);
    CHECK(dtrain::global_mean(ring, std::int64_t(2 * r)) == Approx(double(p - 1)));
}

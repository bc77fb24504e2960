// allreduce_compare: the all-reduce test of the MPI collectives exercise (README, References 3). Every rank
// fills a float buffer with values derived from (rank, index); Naive, Ring and the MPI library's
// MPI_Allreduce (Collective) each sum it in place. The program checks that the three results agree to float
// rounding with a sequential sum, that Naive and Ring are bitwise identical on every rank, and prints the
// median time of each algorithm per size.
//
//   mpiexec.mpich -n 4 ./allreduce_compare --sizes 1,1000,100000,4000000 --reps 5
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <dtrain/comm.hpp>
#include <dtrain/core/environment.hpp>

#include "../common/command_line.hpp"

namespace {

struct Options {
    std::vector<std::size_t> sizes = {1, 1000, 100000, 4000000};
    int reps = 5;
};

/// Rank r's input at index i.
float input(int r, std::size_t i) {
    return float(std::sin(0.001 * double(i) + r) + 0.01 * double(r + 1));
}

/// Times `reps` in-place sums of a fresh copy of `init` with `comm`; returns the median slowest-rank time
/// and leaves the last result in `out`.
template <class Comm>
double time_allreduce(Comm& comm, const std::vector<float>& init, std::vector<float>& out, int reps) {
    std::vector<double> t;
    for (int k = 0; k < reps; ++k) {
        out = init;
        comm.barrier();
        const double t0 = MPI_Wtime();
        comm.allreduce_sum(dtrain::Span<float>(out.data(), out.size()));
        double dt = MPI_Wtime() - t0;
        MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, comm.mpi_comm());
        t.push_back(dt);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

/// True on every rank when `v` is bitwise equal to rank 0's copy.
bool identical_on_all_ranks(const std::vector<float>& v, MPI_Comm comm) {
    std::vector<float> root = v;
    if (!root.empty()) MPI_Bcast(root.data(), int(root.size()), MPI_FLOAT, 0, comm);
    int same = root.empty() || std::memcmp(root.data(), v.data(), v.size() * sizeof(float)) == 0;
    MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_LAND, comm);
    return same != 0;
}

}  // namespace

int main(int argc, char** argv) {
    dtrain::Environment env(argc, argv);
    Options o;
    example::App app(
        "allreduce_compare",
        "Sums a float buffer over the ranks with Naive, Ring and MPI_Allreduce (Collective), checks\n"
        "that they agree and prints the median time of each (run under mpiexec.mpich -n P).\n");
    app.footer("Exit status 0 when every check passed, 1 when a result disagreed, 2 for bad flags.");
    app.add_option("--sizes", o.sizes, "comma-separated buffer lengths in floats")
        ->delimiter(',')
        ->check(example::number<std::size_t>(0, std::size_t(1) << 28));
    example::add_number(app, "--reps", o.reps, "timed repetitions per algorithm and size", 1, 1000);
    const int status = example::parse_command_line(app, argc, argv);
    if (status != example::keep_going) return status;
    dtrain::Naive naive(env.world());
    dtrain::Ring ring(env.world());
    dtrain::Collective collective(env.world());
    const int p = env.size();
    if (env.rank() == 0) {
        std::printf("all-reduce of float buffers on %d ranks, median of %d runs (slowest rank)\n", p, o.reps);
        std::printf("%10s %12s %12s %12s %14s %s\n", "floats", "naive_ms", "ring_ms", "mpi_ms", "max_rel_err",
                    "checks");
    }
    bool all_ok = true;
    for (std::size_t n : o.sizes) {
        std::vector<float> init(n), a, b, c;
        for (std::size_t i = 0; i < n; ++i)
            init[i] = input(env.rank(), i);
        const double tn = time_allreduce(naive, init, a, o.reps);
        const double tr = time_allreduce(ring, init, b, o.reps);
        const double tc = time_allreduce(collective, init, c, o.reps);
        // Each result against the sequential sum of every rank's input, to float rounding.
        double err = 0.0;
        for (std::size_t i = 0; i < n; ++i) {
            double exact = 0.0, mag = 0.0;
            for (int r = 0; r < p; ++r) {
                exact += input(r, i);
                mag += std::abs(input(r, i));
            }
            for (float v : {a[i], b[i], c[i]})
                err = std::max(err, std::abs(v - exact) / (1.0 + mag));
        }
        int close = err <= 1e-6 * p;
        MPI_Allreduce(MPI_IN_PLACE, &close, 1, MPI_INT, MPI_LAND, env.world());
        const bool same_naive = identical_on_all_ranks(a, env.world());
        const bool same_ring = identical_on_all_ranks(b, env.world());
        const bool ok = close && same_naive && same_ring;
        all_ok = all_ok && ok;
        MPI_Allreduce(MPI_IN_PLACE, &err, 1, MPI_DOUBLE, MPI_MAX, env.world());
        if (env.rank() == 0) {
            std::printf("%10zu %12.3f %12.3f %12.3f %14.2e %s%s%s\n", n, tn * 1e3, tr * 1e3, tc * 1e3, err,
                        close ? "agree" : "DISAGREE", same_naive ? "" : ", naive differs across ranks",
                        same_ring ? "" : ", ring differs across ranks");
        }
    }
    if (env.rank() == 0) std::printf(all_ok ? "all checks passed\n" : "SOME CHECKS FAILED\n");
    return all_ok ? 0 : 1;
}

// Cost of the collective-call check (Collective, Ring and Naive compare every rank's length, element type,
// reduce operation and root before each blocking all-reduce; set_collective_checks(false) or
// DTRAIN_CHECK_COLLECTIVES=0 turns it off). For each algorithm and size, one communicator with the check and
// one without run in interleaved rounds (their order alternating), each sample being the slowest rank's mean
// time per call over `reps` float all-reduce sums run back to back after one barrier. Prints the median
// over the rounds of both and their difference.
//
//   mpiexec.mpich -n 2 ./check_cost --rounds 31
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <dtrain/comm.hpp>
#include <dtrain/core/environment.hpp>
#include <support/cli.hpp>
#include <support/stats.hpp>

namespace {

const char* kUsage =
    "usage: check_cost [--rounds R] [--sizes B,B,...] [--algos naive,ring,collective]\n"
    "  --rounds R   interleaved rounds per size and algorithm (default 31)\n"
    "  --sizes L    buffer sizes in bytes, multiples of 4 (default 4,256,4096,65536,1048576,16777216)\n"
    "  --algos L    subset of naive,ring,collective (default all)\n";

struct Options {
    int rounds = 31;
    std::vector<std::size_t> sizes = {4, 256, 4096, 65536, std::size_t(1) << 20, std::size_t(16) << 20};
    std::vector<std::string> algos = {"naive", "ring", "collective"};
};

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--help" || a == "-h") {
            std::cout << kUsage;
            std::exit(0);
        }
        DTRAIN_CHECK(i + 1 < argc, "check_cost: ", a, " needs a value (or unknown flag); see --help");
        const std::string v = argv[++i];
        if (a == "--rounds") {
            o.rounds = std::atoi(v.c_str());
            DTRAIN_CHECK(o.rounds >= 1, "check_cost: --rounds must be at least 1, got '", v, "'");
        } else if (a == "--sizes") {
            o.sizes.clear();
            for (const std::string& s : dtrain::bench::split(v)) {
                const long long b = std::atoll(s.c_str());
                DTRAIN_CHECK(b >= 4 && b % 4 == 0, "check_cost: --sizes entry '", s,
                             "' is not a positive multiple of 4");
                o.sizes.push_back(std::size_t(b));
            }
        } else if (a == "--algos") {
            o.algos = dtrain::bench::split(v);
            for (const std::string& s : o.algos)
                DTRAIN_CHECK(s == "naive" || s == "ring" || s == "collective",
                             "check_cost: unknown algorithm '", s, "' in --algos (naive, ring, collective)");
        } else {
            DTRAIN_CHECK(false, "check_cost: unknown flag '", a, "'; see --help");
        }
    }
    return o;
}

/// A communicator of type Comm with the check and one without.
template <class Comm>
struct Pair {
    explicit Pair(MPI_Comm comm) : checked(comm), unchecked(comm) { unchecked.set_collective_checks(false); }
    Comm checked, unchecked;
};

/// The slowest rank's mean time per call of `reps` back-to-back allreduce_sum calls on `buf`.
template <class Comm>
double time_calls(Comm& comm, std::vector<float>& buf, int reps) {
    dtrain::Span<float> s(buf.data(), buf.size());
    MPI_Barrier(comm.mpi_comm());
    const double t0 = MPI_Wtime();
    for (int k = 0; k < reps; ++k)
        comm.allreduce_sum(s);
    double dt = (MPI_Wtime() - t0) / reps;
    MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, comm.mpi_comm());
    return dt;
}

/// Times both communicators of `pair` on every size and prints one line per size.
template <class Comm>
void run(const char* name, Pair<Comm>& pair, const Options& o, int rank) {
    for (std::size_t bytes : o.sizes) {
        std::vector<float> buf(bytes / sizeof(float), 0.0f);
        const int reps = int(std::clamp<std::size_t>((std::size_t(16) << 20) / bytes, 3, 200));
        time_calls(pair.checked, buf, 2);  // warm-up: scratch buffers, connections
        time_calls(pair.unchecked, buf, 2);
        std::vector<double> on, off;
        for (int round = 0; round < o.rounds; ++round) {
            if (round % 2 == 0) {
                on.push_back(time_calls(pair.checked, buf, reps));
                off.push_back(time_calls(pair.unchecked, buf, reps));
            } else {
                off.push_back(time_calls(pair.unchecked, buf, reps));
                on.push_back(time_calls(pair.checked, buf, reps));
            }
            std::fill(buf.begin(), buf.end(), 0.0f);
        }
        if (rank != 0) continue;
        const double m_on = dtrain::bench::median(on) * 1e6, m_off = dtrain::bench::median(off) * 1e6;
        std::printf("%-11s %10zu %6d %6d %12.2f %12.2f %10.2f %9.1f\n", name, bytes, o.rounds, reps, m_off,
                    m_on, m_on - m_off, 100.0 * (m_on - m_off) / m_off);
        std::fflush(stdout);
    }
}

}  // namespace

int main(int argc, char** argv) {
    dtrain::Environment env(argc, argv);
    Options o;
    try {
        o = parse(argc, argv);
    } catch (const dtrain::Error& e) {  // every rank parses the same flags, so all ranks leave here together
        if (env.rank() == 0) std::cerr << e.what() << '\n';
        return 2;
    }
    if (env.rank() == 0) {
        std::printf(
            "# float allreduce_sum, %d ranks; median over rounds of the slowest rank's mean time per call\n",
            env.size());
        std::printf("%-11s %10s %6s %6s %12s %12s %10s %9s\n", "algorithm", "bytes", "rounds", "reps",
                    "unchecked_us", "checked_us", "cost_us", "cost_%");
    }
    for (const std::string& a : o.algos) {
        if (a == "naive") {
            Pair<dtrain::Naive> pair(env.world());
            run("naive", pair, o, env.rank());
        } else if (a == "ring") {
            Pair<dtrain::Ring> pair(env.world());
            run("ring", pair, o, env.rank());
        } else {
            Pair<dtrain::Collective> pair(env.world());
            run("collective", pair, o, env.rank());
        }
    }
    return 0;
}

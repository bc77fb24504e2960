// All-reduce benchmark: Naive, Ring and Collective (MPI's in-place MPI_Allreduce) on float buffers
// from 4 B to 64 MiB. Per size and algorithm: the median over repetitions of the slowest rank's time, the
// algorithm bandwidth (bytes / time) and the bus bandwidth busbw = algbw * 2(p-1)/p (the nccl-tests
// convention: the per-rank traffic of a bandwidth-optimal all-reduce). Algorithms are interleaved in rounds
// per size so they see the same machine noise. Writes a CSV (one row per size and algorithm).
// With --back-to-back, each sample is instead the mean time of the round's repetitions run one after
// another after a single barrier, as a training step runs its buckets (a link never idle between calls).
//
//   mpiexec.mpich -n 2 ./allreduce_bench --csv allreduce_np2.csv
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include <dtrain/comm.hpp>
#include <dtrain/core/environment.hpp>
#include <support/cli.hpp>
#include <support/stats.hpp>

namespace {

using dtrain::bench::median;

struct Options {
    std::size_t min_bytes = 4;
    std::size_t max_bytes = std::size_t(64) << 20;
    std::size_t factor = 2;
    int rounds = 5;
    int reps = 0;  // per round; 0 = by size
    std::vector<std::string> algos = {"naive", "ring", "collective"};
    std::size_t segment_bytes = 0;
    int window = 0;
    std::string csv = "allreduce.csv";
    bool back_to_back = false;                  // one barrier per round, then the repetitions back to back
    bool time_barrier = false;                  // the timed region starts before the barrier
    std::vector<dtrain::RingOptions> variants;  // extra Ring configurations (--variants)
};

const char* kUsage =
    "usage: allreduce_bench [options]   (run under mpiexec.mpich -n P)\n"
    "  --min-bytes N      smallest message in bytes, a multiple of 4 (default 4)\n"
    "  --max-bytes N      largest message in bytes (default 67108864 = 64 MiB)\n"
    "  --factor F         size step factor, 2 or 4 (default 2)\n"
    "  --rounds R         interleaved rounds per size (default 5)\n"
    "  --reps K           repetitions per round and algorithm (default: by size, 2..100)\n"
    "  --algos LIST       comma-separated subset of naive,ring,collective (default all)\n"
    "  --segment-bytes B  Ring segment size in bytes (default: size-dependent)\n"
    "  --window W         Ring messages in flight, 1..16 (default: size-dependent)\n"
    "  --variants LIST    extra Ring configurations to compare, SEGMENT_BYTES:WINDOW,... (for tuning;\n"
    "                     reported as ring_s<bytes>_w<window>)\n"
    "  --csv FILE         output CSV (default allreduce.csv)\n"
    "  --back-to-back     time each round's repetitions back to back after one barrier (one sample per\n"
    "                     round: the mean per call) instead of a barrier before every call\n"
    "  --time-barrier     include the barrier before the call(s) in the timed region\n"
    "  --help             this text\n";

std::size_t parse_size(const std::string& flag, const std::string& v) {
    char* end = nullptr;
    const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
    DTRAIN_CHECK(!v.empty() && end && *end == '\0' && v[0] != '-', "allreduce_bench: ", flag,
                 " needs a non-negative integer, got '", v, "'");
    return std::size_t(x);
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--back-to-back" || a == "--time-barrier") {
            (a == "--back-to-back" ? o.back_to_back : o.time_barrier) = true;
            continue;
        }
        if (a == "--help" || a == "-h") {
            std::cout << kUsage;
            std::exit(0);
        }
        DTRAIN_CHECK(i + 1 < argc, "allreduce_bench: ", a, " needs a value (or unknown flag); see --help");
        const std::string v = argv[++i];
        if (a == "--min-bytes")
            o.min_bytes = parse_size(a, v);
        else if (a == "--max-bytes")
            o.max_bytes = parse_size(a, v);
        else if (a == "--factor")
            o.factor = parse_size(a, v);
        else if (a == "--rounds")
            o.rounds = int(parse_size(a, v));
        else if (a == "--reps")
            o.reps = int(parse_size(a, v));
        else if (a == "--segment-bytes")
            o.segment_bytes = parse_size(a, v);
        else if (a == "--window")
            o.window = int(parse_size(a, v));
        else if (a == "--csv")
            o.csv = v;
        else if (a == "--variants") {
            for (const std::string& s : dtrain::bench::split(v)) {
                const auto colon = s.find(':');
                DTRAIN_CHECK(colon != std::string::npos, "allreduce_bench: --variants entry '", s,
                             "' is not SEGMENT_BYTES:WINDOW");
                dtrain::RingOptions r{parse_size("--variants", s.substr(0, colon)),
                                      int(parse_size("--variants", s.substr(colon + 1)))};
                DTRAIN_CHECK(r.window >= 1 && r.window <= 16,
                             "allreduce_bench: --variants window must be 1..16, got ", r.window);
                o.variants.push_back(r);
            }
        } else if (a == "--algos") {
            o.algos.clear();
            for (const std::string& s : dtrain::bench::split(v)) {
                DTRAIN_CHECK(s == "naive" || s == "ring" || s == "collective",
                             "allreduce_bench: unknown algorithm '", s,
                             "' in --algos (naive, ring, collective)");
                o.algos.push_back(s);
            }
        } else {
            DTRAIN_CHECK(false, "allreduce_bench: unknown flag '", a, "'; see --help");
        }
    }
    for (const auto& r : o.variants)
        o.algos.push_back("ring_s" + std::to_string(r.segment_bytes) + "_w" + std::to_string(r.window));
    DTRAIN_CHECK(o.min_bytes >= 4 && o.min_bytes % 4 == 0,
                 "allreduce_bench: --min-bytes must be a positive multiple of 4, got ", o.min_bytes);
    DTRAIN_CHECK(o.max_bytes >= o.min_bytes, "allreduce_bench: --max-bytes ", o.max_bytes, " < --min-bytes ",
                 o.min_bytes);
    DTRAIN_CHECK(o.factor == 2 || o.factor == 4, "allreduce_bench: --factor must be 2 or 4, got ", o.factor);
    DTRAIN_CHECK(o.rounds >= 1, "allreduce_bench: --rounds must be at least 1");
    DTRAIN_CHECK(o.window <= 16, "allreduce_bench: --window must be in 1..16, got ", o.window);
    DTRAIN_CHECK(!o.algos.empty(), "allreduce_bench: --algos is empty");
    return o;
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
    const int p = env.size();
    dtrain::Naive naive(env.world());
    dtrain::Ring ring(env.world(), {o.segment_bytes, o.window});
    dtrain::Collective collective(env.world());
    std::map<std::string, dtrain::Ring> variants;
    for (const auto& r : o.variants)
        variants.emplace("ring_s" + std::to_string(r.segment_bytes) + "_w" + std::to_string(r.window),
                         dtrain::Ring(env.world(), r));

    std::ofstream csv;
    if (env.rank() == 0) {
        csv.open(o.csv);
        DTRAIN_CHECK(csv.good(), "allreduce_bench: cannot write '", o.csv, "'");
        csv << "algorithm,ranks,bytes,elements,samples,median_us,min_us,algbw_GBps,busbw_GBps,mean_us\n";
        std::printf("# all-reduce of float buffers, %d ranks, median of the slowest rank's time\n", p);
        std::printf("%-11s %12s %9s %11s %11s %10s %10s %11s\n", "algorithm", "bytes", "samples", "median_us",
                    "min_us", "algbw_GB/s", "busbw_GB/s", "mean_us");
    }
    std::vector<float> buf, init;
    for (std::size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.factor) {
        const std::size_t n = bytes / sizeof(float);
        buf.assign(n, 0.0f);
        init.resize(n);
        for (std::size_t i = 0; i < n; ++i)
            init[i] = float((i % 97) * 0.01 + env.rank());
        const int reps =
            o.reps > 0 ? o.reps : int(std::clamp<std::size_t>((std::size_t(32) << 20) / bytes, 2, 100));
        std::map<std::string, std::vector<double>> times;
        // `calls` all-reduces after one barrier; the slowest rank's mean time per call. Back to back the
        // buffer is reduced again each call (its values grow by a factor p per call; the time does not
        // depend on them).
        auto run_calls = [&](const std::string& algo, int calls) {
            std::memcpy(buf.data(), init.data(), bytes);
            dtrain::Span<float> s(buf.data(), n);
            const double before_barrier = MPI_Wtime();
            MPI_Barrier(env.world());
            const double t0 = o.time_barrier ? before_barrier : MPI_Wtime();
            for (int c = 0; c < calls; ++c) {
                if (algo == "naive")
                    naive.allreduce_sum(s);
                else if (algo == "ring")
                    ring.allreduce_sum(s);
                else if (algo == "collective")
                    collective.allreduce_sum(s);
                else
                    variants.at(algo).allreduce_sum(s);  // a --variants entry
            }
            double dt = (MPI_Wtime() - t0) / calls;
            MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, env.world());
            return dt;
        };
        for (const auto& algo : o.algos)
            run_calls(algo, 1);  // warm-up: scratch buffers, connections
        for (int round = 0; round < o.rounds; ++round) {
            for (const auto& algo : o.algos) {
                if (o.back_to_back)
                    times[algo].push_back(run_calls(algo, reps));
                else
                    for (int k = 0; k < reps; ++k)
                        times[algo].push_back(run_calls(algo, 1));
            }
        }
        if (env.rank() != 0) continue;
        for (const auto& algo : o.algos) {
            const std::vector<double>& t = times[algo];
            const double med = median(t), mn = *std::min_element(t.begin(), t.end());
            // The mean keeps the slow calls the median leaves out: what a sequence of these calls averages.
            const double mean = std::accumulate(t.begin(), t.end(), 0.0) / double(t.size());
            const double algbw = double(bytes) / med / 1e9;
            const double busbw = p > 1 ? algbw * 2.0 * (p - 1) / p : 0.0;
            std::printf("%-11s %12zu %9zu %11.2f %11.2f %10.3f %10.3f %11.2f\n", algo.c_str(), bytes,
                        t.size(), med * 1e6, mn * 1e6, algbw, busbw, mean * 1e6);
            csv << algo << ',' << p << ',' << bytes << ',' << n << ',' << t.size() << ',' << med * 1e6 << ','
                << mn * 1e6 << ',' << algbw << ',' << busbw << ',' << mean * 1e6 << '\n';
        }
        std::fflush(stdout);
    }
    return 0;
}

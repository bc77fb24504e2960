// bench_csv_memory: peak resident memory of read_csv on two inputs, against the size of what it returns.
//
// Usage: bench_csv_memory --make DIR         writes DIR/rows.csv (16 MiB of "1,0" rows) and DIR/commas.csv.gz
//                                            (64 MiB of commas on one line, gzip: about 65 KB)
//        bench_csv_memory FILE               reads FILE with read_csv and prints the peak resident set
//                                            (VmHWM) before and after, the wall time and the result or error
//
// One file per process, so that VmHWM belongs to that file alone. Single process; MPI is not initialised.

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include <zlib.h>

#include <dtrain/data/csv.hpp>

namespace {

/// The process's peak resident set in KiB (VmHWM of /proc/self/status), 0 when unknown.
long peak_rss_kib() {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
    return 0;
}

int make_files(const std::string& dir) {
    const std::string rows = dir + "/rows.csv", bomb = dir + "/commas.csv.gz";
    {
        std::ofstream out(rows, std::ios::binary);
        const std::size_t bytes = std::size_t(16) << 20;
        for (std::size_t i = 0; i < bytes / 4; ++i)
            out << "1,0\n";
    }
    gzFile gz = gzopen(bomb.c_str(), "wb9");
    if (gz == nullptr) return std::fprintf(stderr, "cannot write %s\n", bomb.c_str()), 1;
    const std::string commas(std::size_t(1) << 20, ',');
    for (int i = 0; i < 64; ++i)
        gzwrite(gz, commas.data(), static_cast<unsigned>(commas.size()));
    gzclose(gz);
    std::printf("wrote %s and %s\n", rows.c_str(), bomb.c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc == 3 && std::strcmp(argv[1], "--make") == 0) return make_files(argv[2]);
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s --make DIR | %s FILE\n", argv[0], argv[0]);
        return 2;
    }
    const long before = peak_rss_kib();
    const auto t0 = std::chrono::steady_clock::now();
    std::string outcome;
    std::size_t returned = 0;
    try {
        const dtrain::Dataset d = dtrain::read_csv(argv[1]);
        returned = d.features.size() * sizeof(float) + d.labels.size() * sizeof(std::int32_t);
        outcome = "loaded " + std::to_string(d.size()) + " samples of " + std::to_string(d.sample_size()) +
                  " features";
    } catch (const std::exception& e) {
        outcome = std::string("error: ") + std::string(e.what()).substr(0, 300);
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const long after = peak_rss_kib();
    std::printf(
        "%s\n  %s\n  peak RSS before %ld KiB, after %ld KiB (+%.1f MiB); returned data %.1f MiB; "
        "%.2f s\n",
        argv[1], outcome.c_str(), before, after, double(after - before) / 1024.0,
        double(returned) / (1024.0 * 1024.0), secs);
    return 0;
}

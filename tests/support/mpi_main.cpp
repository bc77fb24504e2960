// The one Catch2 main for dtrain's tests, under MPI. Rank 0 owns the console; every other rank writes
// its report to a per-rank file that is printed (prefixed with the rank) only when that rank failed.
// The exit code is the maximum over ranks, so a failure on any rank fails the test.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include <mpi.h>

#include <dtrain/core/environment.hpp>

int main(int argc, char** argv) {
    // The library's own Environment: MPI with MPI_THREAD_MULTIPLE, the stall watchdog, and a job that ends
    // (instead of hanging) when a rank throws outside a test case.
    dtrain::Environment env(argc, argv);
    const int rank = env.rank(), size = env.size();

    Catch::Session session;
    int rc = session.applyCommandLine(argc, argv);
    std::string log;
    if (rc == 0) {
        if (rank != 0) {
            const char* name = std::getenv("DTRAIN_TEST_NAME");
            log = std::string("dtrain-test-") + (name ? name : "run") + ".np" + std::to_string(size) +
                  ".rank" + std::to_string(rank) + ".log";
            session.configData().outputFilename = log;
        }
        rc = session.run();
    }
    int worst = 0;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank != 0 && !log.empty()) {
        if (rc != 0) {
            std::ifstream in(log);
            std::string line;
            while (std::getline(in, line))
                std::cerr << "[rank " << rank << "/" << size << "] " << line << '\n';
        }
        std::remove(log.c_str());
    }
    if (rank == 0 && worst != 0 && rc == 0)
        std::cerr << "[rank 0] passed, but another rank failed (see its report above)\n";
    return worst;
}

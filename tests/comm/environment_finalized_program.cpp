// dtrain::Environment after MPI_Finalize: MPI cannot restart, so the constructor must throw dtrain::Error
// saying so (instead of calling MPI_Init_thread, which is erroneous after finalisation). A program of its own
// because MPI cannot be used again in this process afterwards. Exits 0 only when that error was thrown.
#include <cstdio>
#include <string>

#include <mpi.h>

#include <dtrain/core/environment.hpp>

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Finalize();
    try {
        dtrain::Environment env;
    } catch (const dtrain::Error& e) {
        const std::string what = e.what();
        std::printf("dtrain::Error: %s\n", what.c_str());
        return what.find("dtrain::Environment: MPI has already been finalized and cannot restart") !=
                       std::string::npos
                   ? 0
                   : 1;
    }
    std::printf("FAILED: dtrain::Environment did not throw after MPI_Finalize\n");
    return 1;
}

// A program for the abort tests: rank 1 throws while rank 0 waits in a barrier (or, with "all", every rank
// throws its own message). dtrain::Environment's terminate handler must print each exception with its rank
// and end the whole job with MPI_Abort.
#include <string>

#include <mpi.h>

#include <dtrain/core/environment.hpp>
#include <dtrain/core/error.hpp>

int main(int argc, char** argv) {
    dtrain::Environment env(argc, argv);
    const bool all = argc > 1 && std::string(argv[1]) == "all";
    if (all) throw dtrain::Error("comm_abort_test: deliberate failure on rank " + std::to_string(env.rank()));
    if (env.size() > 1 && env.rank() == 1)
        throw dtrain::Error("comm_abort_test: deliberate failure on rank 1");
    if (env.size() == 1) throw dtrain::Error("comm_abort_test: deliberate failure on rank 0");
    MPI_Barrier(MPI_COMM_WORLD);  // would block forever without the abort
    return 0;
}

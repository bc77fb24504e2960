// A program for the abort test: rank 1 throws while rank 0 waits in a barrier. dtrain::Environment's
// terminate handler must print the exception with the rank and end the whole job with MPI_Abort.
#include <mpi.h>

#include <dtrain/core/environment.hpp>
#include <dtrain/core/error.hpp>

int main(int argc, char** argv) {
    dtrain::Environment env(argc, argv);
    if (env.size() > 1 && env.rank() == 1)
        throw dtrain::Error("comm_abort_test: deliberate failure on rank 1");
    if (env.size() == 1) throw dtrain::Error("comm_abort_test: deliberate failure on rank 0");
    MPI_Barrier(MPI_COMM_WORLD);  // would block forever without the abort
    return 0;
}

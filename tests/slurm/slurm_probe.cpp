// Run by the Slurm tests only (ranks started by srun, salloc + mpiexec or sbatch on the simulated Slurm
// cluster of scripts/slurm-cluster.sh): every rank prints one line with what dtrain::Environment sees, so the
// test script can check the world size, that every rank sits on a node of its own (host name, node-local
// rank and size) and that a message crossed the whole world:
//   slurm_probe: rank R of N on host H, node-local rank L of M, sum of ranks S
#include <unistd.h>

#include <cstdio>

#include <dtrain/core/environment.hpp>
#include <dtrain/core/mpi.hpp>

int main(int argc, char** argv) {
    dtrain::Environment env(argc, argv);
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    int rank = env.rank(), sum = 0;
    DTRAIN_MPI_CHECK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    std::printf("slurm_probe: rank %d of %d on host %s, node-local rank %d of %d, sum of ranks %d\n",
                env.rank(), env.size(), host, env.local_rank(), env.local_size(), sum);
    std::fflush(stdout);
    return 0;
}

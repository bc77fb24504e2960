// Latency of a small MPI_Allreduce, to compare MPI settings when there are more ranks than cores (see
// README.md): every rank sums `floats` floats `iterations` times; rank 0 prints the mean time per call.
// Usage: mpiexec -n <ranks> oversubscribed_allreduce [iterations (200)] [floats (1024)]
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include <dtrain/core/mpi.hpp>

int main(int argc, char** argv) {
    DTRAIN_MPI_CHECK(MPI_Init(&argc, &argv));
    int rank = 0, size = 0;
    DTRAIN_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    DTRAIN_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    const int iterations = argc > 1 ? std::atoi(argv[1]) : 200;
    const int floats = argc > 2 ? std::atoi(argv[2]) : 1024;
    if (iterations < 1 || floats < 1) {
        if (rank == 0) std::fprintf(stderr, "oversubscribed_allreduce: iterations and floats must be >= 1\n");
        MPI_Finalize();
        return 2;
    }
    const std::size_t n = static_cast<std::size_t>(floats);
    std::vector<float> in(n, 1.0f), out(n);
    DTRAIN_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    const double start = MPI_Wtime();
    for (int i = 0; i < iterations; ++i)
        DTRAIN_MPI_CHECK(MPI_Allreduce(in.data(), out.data(), floats, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
    const double seconds = MPI_Wtime() - start;
    if (rank == 0)
        std::printf("%d ranks, %d allreduce of %d floats: %.3f s, %.1f us each\n", size, iterations, floats,
                    seconds, 1e6 * seconds / iterations);
    DTRAIN_MPI_CHECK(MPI_Finalize());
    return 0;
}

// An MPI library whose MPI_Finalize never returns (as MPICH 4.0.2 with UCX over TCP sometimes does),
// simulated by linking with --wrap=MPI_Finalize: every rank does its work and returns from main, and must
// still exit, with status 0 and a line saying that MPI_Finalize hung (see tests/core/CMakeLists.txt).
#include <chrono>
#include <cstdio>
#include <thread>

#include <dtrain/core/environment.hpp>

extern "C" int __wrap_MPI_Finalize() {
    for (;;)
        std::this_thread::sleep_for(std::chrono::seconds(1));
}

int main(int argc, char** argv) {
    dtrain::Environment env(argc, argv);
    double sum = 0;
    for (int i = 0; i < 3; ++i) {
        const double one = 1.0;
        MPI_Allreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, env.world());
    }
    std::printf("rank %d finished: %g ranks\n", env.rank(), sum);
    return sum == env.size() ? 0 : 1;
}

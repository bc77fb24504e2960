// Failures at the start and at the end of a process's life (dtrain::Environment) and in who is named as not
// arrived, driven by tests/core/run_failure_test.cmake. Scenarios (argv[1]) with a policy (argv[2]:
// collective, ring, naive or async) train a small MLP with DistOptimizer<Policy> for 6 steps:
//   stop_end     rank 1 stops itself (SIGSTOP) after its last dtrain operation, before returning from main:
//                the others wait for it at the end of the job, which must end naming rank 1 and its host
//   compute_end  rank 1 computes forever after its last dtrain operation: named as computing
//   stop         rank 1 stops before step 3: exactly rank 1 is named as not arrived (run at 3 ranks)
//   stop0        rank 0 stops before step 3: exactly rank 0 is named as not arrived (run at 3 ranks)
//   stop2        ranks 1 and 2 stop before step 3: exactly ranks 1 and 2 are named (run at 4 ranks)
//   segv         rank 1 is killed by SIGSEGV after training: a line names the rank, its host and the signal
//   clean        nothing goes wrong: prints "rank R finished" and exits 0 (for the launch checks)
//   startup      (no policy) MPI is initialised by the program and rank 1 stops before its
//                dtrain::Environment: the others' start-up must end naming the wait
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include <dtrain/core/environment.hpp>
#include <dtrain/distributed/async.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/distributed/policy_name.hpp>
#include <dtrain/nn.hpp>
#include <dtrain/optim.hpp>

namespace {

template <class Policy>
void train(const std::string& scenario, int rank) {
    dtrain::Model<float> model({4}, 1);
    model.add(dtrain::Dense<float>(4, 8)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(8, 3));
    dtrain::options_for<Policy> options;
    if constexpr (std::is_same_v<Policy, dtrain::Async>) options.masters = 1;
    dtrain::DistOptimizer<Policy, dtrain::SGD<float>> opt(model, dtrain::SGD<float>(0.01), options);
    dtrain::SoftmaxCrossEntropy<float> loss;
    dtrain::Tensor<float> x = dtrain::Tensor<float>::from_shape({4, 4}), grad;
    x.fill(0.5f);
    dtrain::Labels y = dtrain::Labels::from_shape({4});
    y.fill(1);
    opt.run([&] {
        for (int s = 0; s < 6; ++s) {
            if (s == 3 && rank == 1 && scenario == "stop") std::raise(SIGSTOP);
            if (s == 3 && rank == 0 && scenario == "stop0") std::raise(SIGSTOP);
            if (s == 3 && (rank == 1 || rank == 2) && scenario == "stop2") std::raise(SIGSTOP);
            opt.zero_grad();
            loss.compute(model.forward(x), y, grad);
            model.backward(grad);
            opt.step();
        }
    });
}

}  // namespace

int main(int argc, char** argv) {
    const std::string scenario = argc > 1 ? argv[1] : "", policy = argc > 2 ? argv[2] : "ring";
    if (scenario == "startup") {
        int provided = 0, rank = 0;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (rank == 1) std::raise(SIGSTOP);
        { dtrain::Environment env; }
        MPI_Finalize();
        return 0;
    }
    dtrain::Environment env(argc, argv);
    const int rank = env.rank();
    if (scenario != "clean")
        dtrain::with_policy(policy, [&](auto tag) {
            using Policy = typename decltype(tag)::type;
            train<Policy>(scenario, rank);
            return 0;
        });
    std::printf("rank %d finished\n", rank);
    std::fflush(stdout);
    if (rank == 1 && scenario == "stop_end") std::raise(SIGSTOP);
    if (rank == 1 && scenario == "segv") std::raise(SIGSEGV);
    if (rank == 1 && scenario == "compute_end")
        for (;;)
            std::this_thread::sleep_for(std::chrono::seconds(1));
    return 0;
}

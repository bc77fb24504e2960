// Failure scenarios that must end the job, driven by tests/core/run_failure_test.cmake. Every scenario trains
// a small MLP with DistOptimizer<Policy> (argv[2]: collective, ring, naive or async) and breaks one rank:
//   stop     rank 1 stops itself (SIGSTOP, as `kill -STOP`) before step 3: the stall watchdog must end the job
//            naming the step and rank 1 as not answering
//   compute  rank 1 computes forever before step 3 (its watchdog still answers): named as computing
//   leave    rank 1 catches an error and returns from main: the others must end, naming rank 1 as gone
//   sizes    rank 0's data set has one batch more: the ranks end up in different operations, both named
//   async    (with async) worker rank 2 throws at its step 5 while the others would run 100000 steps:
//            run() must end quickly on every rank with rank 2's message (printed, exit 3)
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include <dtrain/dtrain.hpp>

namespace {

template <class Policy>
int train(const std::string& scenario, int rank) {
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
    const bool async = std::is_same_v<Policy, dtrain::Async>;
    const int steps = scenario == "async" ? 100000 : 6 + (scenario == "sizes" && rank == 0 ? 1 : 0);
    try {
        opt.run([&] {
            for (int s = 0; s < steps; ++s) {
                if (s == 3 && rank == 1 && scenario == "stop") std::raise(SIGSTOP);
                if (s == 3 && rank == 1 && scenario == "compute")
                    for (;;)
                        std::this_thread::sleep_for(std::chrono::seconds(1));
                if (s == 3 && rank == 1 && scenario == "leave")
                    throw dtrain::Error("rank 1's deliberate failure");
                if (s == 5 && rank == 2 && scenario == "async")
                    throw dtrain::Error("worker 2's deliberate failure");
                opt.zero_grad();
                loss.compute(model.forward(x), y, grad);
                model.backward(grad);
                opt.step();
            }
            opt.global_sum(1.0);  // the end of an epoch: "sizes" leaves rank 1 here, rank 0 in a step
        });
    } catch (const dtrain::Error& e) {
        if (scenario == "leave" && rank == 1) {
            std::fprintf(stderr, "rank 1 caught '%s' and returns from main\n", e.what());
            return 0;  // handled locally: the Environment ends normally and tells the others it leaves
        }
        if (async) {
            std::fprintf(stderr, "rank %d: run() threw: %s\n", rank, e.what());
            return 3;
        }
        throw;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    dtrain::Environment env(argc, argv);
    const std::string scenario = argc > 1 ? argv[1] : "", policy = argc > 2 ? argv[2] : "ring";
    return dtrain::with_policy(policy, [&](auto tag) {
        using Policy = typename decltype(tag)::type;
        return train<Policy>(scenario, env.rank());
    });
}

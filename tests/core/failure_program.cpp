// Failure scenarios that must end the job, driven by tests/core/run_failure_test.cmake. Every scenario trains
// a small MLP with DistOptimizer<Policy> (argv[2]: collective, ring, naive or async) and breaks one rank:
//   stop     rank 1 stops itself (SIGSTOP, as `kill -STOP`) before step 3: the stall watchdog must end
//            the job naming the step and rank 1 as not answering
//   compute  rank 1 computes forever before step 3 (its watchdog still answers): named as computing
//   leave    rank 1 catches an error and returns from main: the others must end, naming rank 1 as gone
//   sizes    rank 0's data set has one batch more: the ranks end up in different operations, both named
//   async    (with async) worker rank 2 throws at its step 5 while the others would run 100000 steps:
//            run() must end quickly on every rank with rank 2's message (printed, exit 3)
//   option   as stop, with options.stall_timeout = 4 set in code (the test sets DTRAIN_STALL_TIMEOUT=600):
//            the option must win
//   master   (with async) master rank 0 stops itself when the first gradient of step 3 arrives: a worker's
//            watchdog must end the job naming rank 0 as not answering
//   evaluate rank 1 stops after training, before dtrain::evaluate: rank 0 waits in evaluate (step 6)
//   checkpoint  (synchronous) rank 1 stops before save_checkpoint: rank 0 waits in save_checkpoint
//   timeline rank 1 stops before Timeline::write: rank 0 waits in Timeline::write
//   rerun    (with async) worker rank 1 stops between two run()s: master rank 0 waits in the second run()'s
//            sharing of the parameters
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
    if (scenario == "option") options.stall_timeout = 4.0;
    if (scenario == "timeline") dtrain::timeline().enable(1024, MPI_COMM_WORLD);
    dtrain::DistOptimizer<Policy, dtrain::SGD<float>> opt(model, dtrain::SGD<float>(0.01), options);
    if constexpr (std::is_same_v<Policy, dtrain::Async>)
        if (scenario == "master" && rank == 0)
            opt.set_step_callback([](const dtrain::AsyncStepInfo& info) {
                if (info.step == 3) std::raise(SIGSTOP);
            });
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
                if (s == 3 && rank == 1 && (scenario == "stop" || scenario == "option")) std::raise(SIGSTOP);
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
    // Scenarios after training: rank 1 stops before a collective that the others enter.
    const auto stop_rank_1 = [&] {
        if (rank == 1) std::raise(SIGSTOP);
    };
    if (scenario == "evaluate") {
        dtrain::Dataset data;
        data.features = dtrain::Tensor<float>::from_shape({8, 4});
        data.features.fill(0.5f);
        data.labels = dtrain::Labels::from_shape({8});
        data.labels.fill(1);
        data.source = "failure_program's data";
        stop_rank_1();
        dtrain::evaluate(opt, loss, data, 4);
    }
    if constexpr (!async)
        if (scenario == "checkpoint") {
            stop_rank_1();
            dtrain::save_checkpoint("failure_program_checkpoint.bin", opt, dtrain::TrainingPosition{});
        }
    if (scenario == "timeline") {
        stop_rank_1();
        dtrain::timeline().write("failure_program_trace.json", MPI_COMM_WORLD);
    }
    if (scenario == "rerun") {
        stop_rank_1();
        opt.run([] {});
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

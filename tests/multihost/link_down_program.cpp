// Run by the multihost link-down tests only (link_down.sh): trains a small MLP with Ring, one rank per
// simulated host, step after step, so that a host's link can be cut while the ranks wait in each other's
// all-reduces. Rank 0 prints "link_down_program: training" once every rank has taken a step, which is when
// the test cuts the link; the stall watchdog must then end the job. Each step sleeps 5 ms so that the ranks
// leave the machine's CPUs to the others while they wait.
// Usage: link_down_program [STEPS] (default 100000: about 10 minutes, far longer than any test waits);
// exit 0 after STEPS steps.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <dtrain/dtrain.hpp>

int main(int argc, char** argv) {
    dtrain::Environment env(argc, argv);
    const long steps = argc > 1 ? std::atol(argv[1]) : 100000;
    DTRAIN_CHECK(steps > 0, "link_down_program: STEPS must be a positive number of steps, got '", argv[1],
                 "'");
    dtrain::Model<float> model({4}, 1);
    model.add(dtrain::Dense<float>(4, 64)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(64, 3));
    dtrain::DistOptimizer<dtrain::Ring, dtrain::SGD<float>> opt(model, dtrain::SGD<float>(0.01));
    dtrain::SoftmaxCrossEntropy<float> loss;
    dtrain::Tensor<float> x = dtrain::Tensor<float>::from_shape({8, 4}), grad;
    x.fill(0.5f);
    dtrain::Labels y = dtrain::Labels::from_shape({8});
    y.fill(1);
    opt.run([&] {
        for (long s = 0; s < steps; ++s) {
            opt.zero_grad();
            loss.compute(model.forward(x), y, grad);
            model.backward(grad);
            opt.step();
            if (s == 1 && env.rank() == 0) {
                std::printf("link_down_program: training (%d ranks)\n", env.size());
                std::fflush(stdout);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    });
    if (env.rank() == 0) std::printf("link_down_program: %ld steps done\n", steps);
    return 0;
}

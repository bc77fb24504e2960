#pragma once

// A small synchronous training run shared by the compression and communication-hook tests: the model, each
// rank's batches, the global evaluation loss, and `steps` steps of SGD with momentum that count the
// allocations in backward() and step() (tests/optim/alloc_counter.hpp replaces operator new in the program
// that includes this header).

#include <cstddef>
#include <cstdint>
#include <vector>

#include <mpi.h>

#include <dtrain/core/mpi.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/losses/mse.hpp>
#include <dtrain/optim/sgd.hpp>
#include <optim/alloc_counter.hpp>
#include <support/test_utils.hpp>

namespace dtrain::test {

/// Dense(6, 24) - ReLU - Dense(24, 3): 6*24+24 + 24*3+3 = 243 parameters.
inline Model<float> make_sync_model(std::uint64_t seed = 1) {
    Model<float> m({6}, seed);
    m.add(Dense<float>(6, 24)).add(ReLU<float>()).add(Dense<float>(24, 3));
    return m;
}

/// Rank r's batch of step s (pass j): x in [-1, 1), y a fixed function of x plus a rank-dependent shift.
inline void sync_batch(int r, int s, std::size_t j, Tensor<float>& x, Tensor<float>& y) {
    Rng rng(std::uint64_t(1000 * r + 10 * s) + j + 1);
    x = random_tensor<float>({8, 6}, rng);
    y = Tensor<float>::from_shape({8, 3});
    for (std::size_t i = 0; i < 8; ++i)
        for (std::size_t c = 0; c < 3; ++c)
            y(i, c) = x(i, c) - 0.5f * x(i, c + 3) + 0.1f * float(r);
}

/// The global mean squared error of `model` on every rank's batch of step 1000. Collective.
inline double sync_eval_loss(Model<float>& model) {
    Tensor<float> x, y, grad;
    sync_batch(world_rank(), 1000, 0, x, y);
    MeanSquaredError<float> mse;
    const double l = double(mse.compute(model.forward(x), y, grad));
    return dtrain::detail::allreduce_value(l, MPI_SUM, MPI_COMM_WORLD) / world_size();
}

/// What sync_run() returns.
struct SyncRun {
    std::vector<float> params;    ///< the parameters after the last step
    std::vector<float> state;     ///< this rank's communication-hook state (comm_hook_state())
    double loss = 0.0;            ///< sync_eval_loss() after the last step
    std::size_t allocations = 0;  ///< in backward() and step() after two warm-up steps
};

/// `steps` steps of SGD with momentum under `o` on DistOptimizer<Comm>; `install(opt)` runs right after the
/// construction (e.g. to register a communication hook). Collective.
template <class Comm, class Install>
SyncRun sync_run(const SyncOptions& o, int steps, Install&& install) {
    Model<float> model = make_sync_model();
    DistOptimizer<Comm, SGD<float>> opt(model, SGD<float>(SGDOptions().lr(0.05).momentum(0.9)), o);
    install(opt);
    MeanSquaredError<float> mse;
    Tensor<float> x, y, grad;
    SyncRun run;
    for (int s = 0; s < steps; ++s) {
        opt.zero_grad();
        for (std::size_t j = 0; j < o.accumulation_steps; ++j) {
            sync_batch(opt.rank(), s, j, x, y);
            mse.compute(model.forward(x), y, grad);
            const std::size_t a = allocation_count;
            model.backward(grad);
            if (s >= 2) run.allocations += allocation_count - a;
        }
        const std::size_t a = allocation_count;
        opt.step();
        if (s >= 2) run.allocations += allocation_count - a;
    }
    run.params.assign(model.parameters().begin(), model.parameters().end());
    run.state.assign(opt.comm_hook_state().begin(), opt.comm_hook_state().end());
    run.loss = sync_eval_loss(model);
    return run;
}

/// sync_run() without a hook of its own (the one `o.compression` selects).
template <class Comm>
SyncRun sync_run(const SyncOptions& o, int steps) {
    return sync_run<Comm>(o, steps, [](auto&) {});
}

}  // namespace dtrain::test

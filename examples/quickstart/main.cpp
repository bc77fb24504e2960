// The README's first program: an Iris MLP trained data-parallel with a ring all-reduce.
// Run: mpiexec.mpich -n 2 ./quickstart [path/to/iris.csv]
#include <cstdio>
#include <dtrain/dtrain.hpp>

int main(int argc, char** argv) {
    dtrain::Environment env(argc, argv);  // MPI up; an uncaught exception aborts the whole job
    auto data = dtrain::read_csv(argc > 1 ? argv[1] : "data/iris.csv");
    dtrain::Standardizer scale;
    scale.fit(data.features), scale.apply(data.features);
    dtrain::Model<float> model({4}, /*seed=*/42);
    model.add(dtrain::Dense<float>(4, 30)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(30, 3));
    dtrain::DistOptimizer<dtrain::Ring, dtrain::SGD<float>> opt(
        model, dtrain::SGD<float>(dtrain::SGDOptions().lr(0.05).momentum(0.9)));
    dtrain::SoftmaxCrossEntropy<float> loss;
    dtrain::Tensor<float> grad;
    opt.run([&] {  // on every rank; with dtrain::Async on the workers only (the masters serve)
        dtrain::DataLoader loader(data, dtrain::DistributedSampler(150, opt.worker_rank(), opt.num_workers()),
                                  {8});
        for (std::uint64_t epoch = 0; epoch < 30; ++epoch)
            for (loader.start_epoch(epoch); loader.next();) {
                opt.zero_grad();
                loss.compute(model.forward(loader.features()), loader.labels(), grad);
                model.backward(grad);
                opt.step();
            }
    });
    model.eval();
    const double acc = dtrain::accuracy(model.forward(data.features), data.labels);
    if (env.rank() != 0) return 0;  // rank 0 holds the final model with every policy
    std::printf("training accuracy %.3f\n", acc);
    return acc >= 0.95 ? 0 : 1;
}

// A communication hook written by the user: the plain all-reduce of every gradient bucket, plus the norm
// of the averaged gradient of every applied step, logged once per epoch. The Iris MLP of the quickstart
// trains with it data-parallel over a ring; the parameters are bitwise those of the run without the hook.
// Run: mpiexec.mpich -n 2 ./comm_hook [path/to/iris.csv]
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <dtrain/dtrain.hpp>

// A hook provides describe() and, for the nonblocking form, start() and finish(); the optional members
// used here are setup() and commit() (distributed/comm_hook.hpp lists them all).
class GradNormLogger {
public:
    // Checkpoints store this text and registration compares it across ranks.
    std::string describe() const { return "grad-norm-logger"; }

    // Called once at registration: how many ranks sum into each bucket.
    void setup(const dtrain::CommHookContext& ctx) { ranks_ = ctx.size; }

    // Starts the sum of the bucket; DistOptimizer completes the request, overlapped with backward().
    template <class Comm>
    typename Comm::Request start(Comm& comm, const dtrain::GradBucket<float>& bucket) {
        return comm.iallreduce_sum(bucket.grads);
    }

    // The bucket now holds the sum over the ranks (the same on every rank): add its squared norm.
    void finish(const dtrain::GradBucket<float>& bucket) {
        for (float g : bucket.grads)
            sum_squares_ += double(g) * double(g);
    }

    // The step was applied (a step skipped for a non-finite gradient is not): record the norm of the
    // averaged gradient, the sum divided by the number of ranks.
    void commit() {
        norms_.push_back(std::sqrt(sum_squares_) / ranks_);
        sum_squares_ = 0.0;
    }

    // The norms recorded since the last call, and forgets them.
    std::vector<double> take_norms() { return std::exchange(norms_, {}); }

private:
    int ranks_ = 1;
    double sum_squares_ = 0.0;
    std::vector<double> norms_;
};

int main(int argc, char** argv) {
    dtrain::Environment env(argc, argv);
    auto data = dtrain::read_csv(argc > 1 ? argv[1] : "data/iris.csv");
    dtrain::Standardizer scale;
    scale.fit(data.features), scale.apply(data.features);
    dtrain::Model<float> model({4}, /*seed=*/42);
    model.add(dtrain::Dense<float>(4, 30)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(30, 3));
    dtrain::SyncOptions options;
    options.bucket_bytes = 256;  // several buckets, so the hook is called several times per step
    dtrain::DistOptimizer<dtrain::Ring, dtrain::SGD<float>> opt(
        model, dtrain::SGD<float>(dtrain::SGDOptions().lr(0.05).momentum(0.9)), options);
    GradNormLogger& logger = opt.register_comm_hook(GradNormLogger{});  // before the first backward pass
    if (env.rank() == 0)
        std::printf("comm hook %s on %d rank(s), %zu bucket(s)\n", opt.comm_hook_description().c_str(),
                    opt.size(), opt.buckets().size());
    dtrain::SoftmaxCrossEntropy<float> loss;
    dtrain::Tensor<float> grad;
    constexpr std::uint64_t epochs = 30;
    opt.run([&] {
        dtrain::DataLoader loader(data, dtrain::DistributedSampler(150, opt.worker_rank(), opt.num_workers()),
                                  {8});
        for (std::uint64_t epoch = 0; epoch < epochs; ++epoch) {
            for (loader.start_epoch(epoch); loader.next();) {
                opt.zero_grad();
                loss.compute(model.forward(loader.features()), loader.labels(), grad);
                model.backward(grad);
                opt.step();
            }
            const std::vector<double> norms = logger.take_norms();
            double mean = 0.0;
            for (double n : norms)
                mean += n / double(norms.size());
            if (env.rank() == 0 && (epoch == 0 || (epoch + 1) % 10 == 0))
                std::printf("epoch %2llu/%llu: %zu steps, mean gradient norm %.4f\n",
                            (unsigned long long)(epoch + 1), (unsigned long long)epochs, norms.size(), mean);
        }
    });
    model.eval();
    const double acc = dtrain::accuracy(model.forward(data.features), data.labels);
    if (env.rank() != 0) return 0;
    std::printf("training accuracy %.3f\n", acc);
    return acc >= 0.95 ? 0 : 1;
}

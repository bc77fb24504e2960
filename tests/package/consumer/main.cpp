// A tiny outside program: trains a 2-layer MLP on XOR-like data for a few steps and checks that the loss
// went down. Built against an installed dtrain (find_package) or a source tree (add_subdirectory).
#include <dtrain/dtrain.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    dtrain::Model<float> model({2}, 7);
    model.add(dtrain::Dense<float>(2, 8)).add(dtrain::Tanh<float>()).add(dtrain::Dense<float>(8, 2));
    // Read and batched by functions dtrain::precompiled compiles (DTRAIN_INLINE), header-only otherwise.
    const dtrain::Dataset data = dtrain::parse_csv("a,b,y\n0,0,0\n0,1,1\n1,0,1\n1,1,0\n", "xor.csv");
    dtrain::LoaderOptions batches(4);
    batches.shuffle = false;
    dtrain::DataLoader loader(data, batches);
    dtrain::SoftmaxCrossEntropy<float> loss;
    dtrain::Tensor<float> grad;
    float first = 0, last = 0;
    for (int step = 0; step < 300; ++step) {
        model.zero_grad();
        loader.start_epoch(std::uint64_t(step));
        if (!loader.next()) return 1;
        last = loss.compute(model.forward(loader.features()), loader.labels(), grad);
        if (step == 0) first = last;
        model.backward(grad);
        auto p = model.parameters();
        auto g = model.gradients();
        for (std::size_t i = 0; i < p.size(); ++i)
            p[i] -= 0.5f * g[i];
    }
    bool version_ok = true;
#ifdef DTRAIN_CONSUMER_EXPECTED_VERSION
    version_ok = std::strcmp(DTRAIN_VERSION_STRING, DTRAIN_CONSUMER_EXPECTED_VERSION) == 0;
#endif
    if (rank == 0)
        std::printf("consumer: dtrain %s%s, loss %.4f -> %.4f\n", DTRAIN_VERSION_STRING,
                    version_ok ? "" : " (not the package's version)", first, last);
    MPI_Finalize();
    return last < 0.5f * first && version_ok ? 0 : 1;
}

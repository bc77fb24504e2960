// How fast can ANY all-reduce of a gradient buffer be on this node? Ranks on one node, in interleaved
// rounds, each timed over many repetitions:
//   memcpy      every rank copies its buffer once (no communication): the memory-bandwidth floor of
//               touching the gradient once while the other ranks do the same;
//   shm         a minimal shared-memory all-reduce through an MPI-3 shared window (MPI_Win_allocate_shared):
//               each rank copies its buffer into its slot, sums its 1/p slice of all slots in rank order into
//               a shared result, and copies the whole result back; two flag synchronisations, nothing else.
//               This is close to the least work any intra-node all-reduce must do (read every input once,
//               write every output once) without changing where the model keeps its gradients;
//   ring        dtrain::Ring::allreduce_sum;
//   collective  MPICH's in-place MPI_Allreduce.
// A prototype to bound what a shared-memory communicator could gain, not a dtrain policy: it supports one
// call at a time and one node only. Prints median microseconds per call of each over the rounds.
//
// Usage: mpiexec.mpich -n 2 shm_floor [--floats N (default 535818, the MLP's gradient)] [--rounds R]
//        [--reps K]
#include <dtrain/dtrain.hpp>
#include <support/stats.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <sched.h>

namespace {

using dtrain::bench::median;

/// The shared-window all-reduce described above. Not thread-safe; one node; float sums in rank order.
class ShmAllreduce {
public:
    ShmAllreduce(MPI_Comm node, std::size_t capacity) : capacity_(capacity) {
        MPI_Comm_rank(node, &rank_);
        MPI_Comm_size(node, &size_);
        const MPI_Aint own = MPI_Aint(kHeader + capacity * sizeof(float) * (rank_ == 0 ? 2 : 1));
        void* base = nullptr;
        DTRAIN_MPI_CHECK(MPI_Win_allocate_shared(own, 64, MPI_INFO_NULL, node, &base, &win_));
        slots_.resize(std::size_t(size_));
        for (int q = 0; q < size_; ++q) {
            MPI_Aint sz = 0;
            int disp = 0;
            void* b = nullptr;
            DTRAIN_MPI_CHECK(MPI_Win_shared_query(win_, q, &sz, &disp, &b));
            slots_[std::size_t(q)] = static_cast<char*>(b);
        }
        for (int i = 0; i < 2; ++i)
            new (slots_[std::size_t(rank_)] + i * sizeof(std::atomic<std::uint64_t>))
                std::atomic<std::uint64_t>(0);
        MPI_Barrier(node);
    }
    ~ShmAllreduce() { MPI_Win_free(&win_); }
    ShmAllreduce(const ShmAllreduce&) = delete;
    ShmAllreduce& operator=(const ShmAllreduce&) = delete;

    /// In-place sum of `n` <= capacity floats over the node's ranks.
    void run(float* data, std::size_t n) {
        ++seq_;
        std::memcpy(input(rank_), data, n * sizeof(float));
        publish(0);
        wait_all(0);
        const std::size_t lo = n * std::size_t(rank_) / std::size_t(size_),
                          hi = n * std::size_t(rank_ + 1) / std::size_t(size_);
        float* out = result();
        std::memcpy(out + lo, input(0) + lo, (hi - lo) * sizeof(float));
        for (int q = 1; q < size_; ++q) {
            const float* in = input(q);
            for (std::size_t i = lo; i < hi; ++i)
                out[i] += in[i];
        }
        publish(1);
        wait_all(1);  // every slice summed; also means every input of this call was read
        std::memcpy(data, out, n * sizeof(float));
        // The next call overwrites inputs only after its own wait_all(0), which every rank reaches only after
        // copying this result out, and the result only after that: two flags per call suffice.
    }

private:
    static constexpr std::size_t kHeader = 64;
    std::atomic<std::uint64_t>* flags(int q) const {
        return std::launder(reinterpret_cast<std::atomic<std::uint64_t>*>(slots_[std::size_t(q)]));
    }
    float* input(int q) const { return reinterpret_cast<float*>(slots_[std::size_t(q)] + kHeader); }
    float* result() const { return input(0) + capacity_; }
    void publish(int which) { flags(rank_)[which].store(seq_, std::memory_order_release); }
    void wait_all(int which) const {
        for (int q = 0; q < size_; ++q)
            while (flags(q)[which].load(std::memory_order_acquire) < seq_)
                sched_yield();
    }

    std::size_t capacity_;
    int rank_ = 0, size_ = 1;
    MPI_Win win_ = MPI_WIN_NULL;
    std::vector<char*> slots_;
    std::uint64_t seq_ = 0;
};

long arg(int argc, char** argv, const std::string& flag, long def) {
    for (int i = 1; i + 1 < argc; ++i)
        if (flag == argv[i]) return std::strtol(argv[i + 1], nullptr, 10);
    return def;
}

}  // namespace

int main(int argc, char** argv) {
    dtrain::Environment env(argc, argv, MPI_THREAD_FUNNELED);
    const std::size_t n = std::size_t(arg(argc, argv, "--floats", 535818));
    const int rounds = int(arg(argc, argv, "--rounds", 9)), reps = int(arg(argc, argv, "--reps", 50));
    MPI_Comm node = MPI_COMM_NULL;
    DTRAIN_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    int node_size = 0;
    MPI_Comm_size(node, &node_size);
    DTRAIN_CHECK(node_size == env.size(), "shm_floor: every rank must be on one node (", node_size, " of ",
                 env.size(), " are)");

    std::vector<float> a(n), b(n), expect(n);
    for (std::size_t i = 0; i < n; ++i)
        a[i] = float((i * 7 + std::size_t(env.rank())) % 13) - 6.0f;
    ShmAllreduce shm(node, n);
    dtrain::Ring ring(MPI_COMM_WORLD);
    // Correctness: the shm sum equals MPI_Allreduce's (integers: exact in float).
    std::copy(a.begin(), a.end(), expect.begin());
    MPI_Allreduce(MPI_IN_PLACE, expect.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    std::copy(a.begin(), a.end(), b.begin());
    shm.run(b.data(), n);
    DTRAIN_CHECK(b == expect, "shm_floor: the shared-memory sum is wrong");

    const char* names[4] = {"memcpy", "shm", "ring", "collective"};
    std::vector<double> times[4];
    for (int r = 0; r < rounds; ++r) {
        for (int k = 0; k < 4; ++k) {
            const int which = r % 2 == 0 ? k : 3 - k;
            std::copy(a.begin(), a.end(), b.begin());
            MPI_Barrier(MPI_COMM_WORLD);
            const double t0 = MPI_Wtime();
            for (int i = 0; i < reps; ++i) {
                switch (which) {
                    case 0:
                        std::memcpy(b.data(), a.data(), n * sizeof(float));
                        break;
                    case 1:
                        shm.run(b.data(), n);
                        break;
                    case 2:
                        ring.allreduce_sum(dtrain::Span<float>(b.data(), n));
                        break;
                    default:
                        MPI_Allreduce(MPI_IN_PLACE, b.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                }
            }
            MPI_Barrier(MPI_COMM_WORLD);
            times[which].push_back((MPI_Wtime() - t0) / reps * 1e6);
        }
    }
    if (env.rank() == 0) {
        std::printf("shm_floor: %d ranks, %zu floats (%.2f MB), %d rounds x %d reps; median us per call\n",
                    env.size(), n, double(n) * 4e-6, rounds, reps);
        for (int k = 0; k < 4; ++k)
            std::printf("%-10s %9.1f us  %6.2f GB/s algbw\n", names[k], median(times[k]),
                        double(n) * 4.0 / (median(times[k]) * 1e3));
    }
    MPI_Comm_free(&node);
    return 0;
}

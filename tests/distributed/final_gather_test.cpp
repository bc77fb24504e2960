// The end of an Async run (AsyncFinalGather): the masters' shards into rank 0's parameters or every rank's,
// and the workers' mean model state, without the rest of the protocol.
#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

#include <mpi.h>

#include <dtrain/core/mpi.hpp>
#include <dtrain/distributed/async/final_gather.hpp>
#include <support/test_utils.hpp>

using dtrain::Range;
using dtrain::detail::AsyncFinalGather;

namespace {

// n values in `masters` contiguous shards.
std::vector<Range> split(std::size_t n, int masters) {
    std::vector<Range> shards;
    for (int r = 0; r < masters; ++r) {
        const std::size_t begin = n * std::size_t(r) / std::size_t(masters);
        const std::size_t end = n * std::size_t(r + 1) / std::size_t(masters);
        shards.push_back(Range{begin, end - begin});
    }
    return shards;
}

}  // namespace

TEST_CASE("AsyncFinalGather: the masters' shards reach rank 0, or every rank with to_all", "[dist][async]") {
    const int rank = dtrain::comm_rank(MPI_COMM_WORLD), size = dtrain::comm_size(MPI_COMM_WORLD);
    const int masters = size > 1 ? size - 1 : 1;  // at least one worker when there are two ranks
    const std::size_t n = 10;
    const std::vector<Range> shards = split(n, masters);
    const AsyncFinalGather<float> gather(shards, size, 0);
    const Range mine = rank < masters ? shards[std::size_t(rank)] : Range{};
    for (const bool to_all : {false, true}) {
        std::vector<float> p(n, -1.0f);
        for (std::size_t i = mine.offset; i < mine.offset + mine.size; ++i)
            p[i] = float(i) + 0.5f;
        gather.parameters(p.data(), to_all, rank, mine, MPI_COMM_WORLD);
        bool ok = true;
        if (rank == 0 || to_all)
            for (std::size_t i = 0; i < n; ++i)
                ok = ok && p[i] == float(i) + 0.5f;
        CHECK(dtrain::test::all_ranks(ok));
    }
}

TEST_CASE("AsyncFinalGather: rank 0's state, or every rank's with to_all, becomes the workers' mean",
          "[dist][async]") {
    const int rank = dtrain::comm_rank(MPI_COMM_WORLD), size = dtrain::comm_size(MPI_COMM_WORLD);
    if (size < 2) return;          // needs a master and a worker
    const int workers = size - 1;  // rank 0 is the only master
    const AsyncFinalGather<double> gather(split(6, 1), size, 3);
    for (const bool to_all : {false, true}) {
        const bool worker = rank > 0;
        std::vector<double> state = worker ? std::vector<double>{double(rank), 2.0 * rank, 3.0 * rank}
                                           : std::vector<double>{7.0, 7.0, 7.0};
        gather.mean_state(dtrain::Span<double>(state.data(), state.size()), to_all, worker, rank, workers,
                          MPI_COMM_WORLD);
        const double mean = double(workers + 1) / 2.0;  // of 1 .. workers
        bool ok = true;
        if (rank == 0 || to_all)
            ok = state == std::vector<double>{mean, 2.0 * mean, 3.0 * mean};
        else
            ok = state == std::vector<double>{double(rank), 2.0 * rank, 3.0 * rank};  // untouched
        CHECK(dtrain::test::all_ranks(ok));
    }
}

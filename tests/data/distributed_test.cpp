#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include <mpi.h>

#include <dtrain/data/dataset.hpp>
#include <dtrain/data/loader.hpp>
#include <dtrain/data/sampler.hpp>
#include <support/test_utils.hpp>

namespace {

/// Gathers every rank's index list on every rank.
std::vector<std::size_t> allgather_indices(const std::vector<std::size_t>& mine) {
    const int p = dtrain::test::world_size();
    int count = static_cast<int>(mine.size());
    std::vector<int> counts(p), displs(p, 0);
    MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 1; r < p; ++r)
        displs[r] = displs[r - 1] + counts[r - 1];
    std::vector<unsigned long long> send(mine.begin(), mine.end()), recv(displs[p - 1] + counts[p - 1]);
    MPI_Allgatherv(send.data(), count, MPI_UNSIGNED_LONG_LONG, recv.data(), counts.data(), displs.data(),
                   MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD);
    return std::vector<std::size_t>(recv.begin(), recv.end());
}

}  // namespace

TEST_CASE("Ranks agree on shards without communicating; shards are disjoint and covering",
          "[data][sampler][mpi]") {
    const int p = dtrain::test::world_size();
    const std::size_t n = 23;
    for (std::uint64_t epoch : {0u, 1u}) {
        auto s = dtrain::make_distributed_sampler(MPI_COMM_WORLD, n, {true, 99, dtrain::ShardTail::Pad});
        const auto mine = s.indices(epoch);
        auto all = allgather_indices(mine);
        // Every rank computes every other rank's shard locally and gets the same answer.
        std::vector<std::size_t> local;
        for (int r = 0; r < p; ++r) {
            const auto sr = dtrain::shard_indices(n, r, p, epoch, s.options());
            local.insert(local.end(), sr.begin(), sr.end());
        }
        CHECK(all == local);
        CHECK(all.size() == std::size_t(p) * s.num_samples());  // equal counts
        std::sort(all.begin(), all.end());
        all.erase(std::unique(all.begin(), all.end()), all.end());
        CHECK(all.size() == n);  // covering
    }
}

TEST_CASE("Distributed evaluation counts every test sample once and matches one process",
          "[data][sampler][mpi]") {
    const int rank = dtrain::test::world_rank(), p = dtrain::test::world_size();
    const std::size_t n = 101;
    // A fake classifier that is right on samples whose index is not divisible by 3 or 7.
    auto correct = [](std::size_t i) { return i % 3 != 0 && i % 7 != 0; };
    long local = 0, seen = 0;
    for (auto i : dtrain::eval_shard(n, rank, p)) {
        local += correct(i) ? 1 : 0;
        ++seen;
    }
    long total = 0, total_seen = 0;
    MPI_Allreduce(&local, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&seen, &total_seen, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    long single = 0;
    for (std::size_t i = 0; i < n; ++i)
        single += correct(i) ? 1 : 0;
    CHECK(total_seen == long(n));
    CHECK(total == single);
}

TEST_CASE("Every rank's loader yields the same number of batches per epoch", "[data][loader][mpi]") {
    const std::size_t n = 29;
    dtrain::Tensor<float> x = dtrain::Tensor<float>::from_shape({n, 3});
    dtrain::Labels y = dtrain::Labels::from_shape({n});
    for (std::size_t i = 0; i < n; ++i) {
        x(i, 0) = x(i, 1) = x(i, 2) = float(i);
        y(i) = std::int32_t(i % 2);
    }
    dtrain::LoaderOptions o;
    o.batch_size = 4;
    dtrain::DataLoader l(dtrain::DatasetView(x, y),
                         dtrain::make_distributed_sampler(MPI_COMM_WORLD, n, {true, 1}), o);
    long batches = 0;
    l.start_epoch(3);
    while (l.next())
        ++batches;
    long mn = 0, mx = 0;
    MPI_Allreduce(&batches, &mn, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&batches, &mx, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    CHECK(mn == mx);
    CHECK(batches == long(l.batches_per_epoch()));
}

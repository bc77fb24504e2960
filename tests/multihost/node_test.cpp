// Run by the multihost tests only (one rank per simulated host, scripts/cluster.sh): what dtrain derives from
// "the node" follows the MPI runtime's node, not the machine. The hosts are network namespaces of one
// machine sharing its /tmp, /dev/shm and CPUs (each has a hostname of its own), so a node test that looked
// at those would see a single node; each rank must instead be local rank 0 of 1, and the progress thread,
// which runs only with two CPUs per node-local rank, must count this host's one rank, not the job's.
#include <catch2/catch.hpp>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <dtrain/comm/ring.hpp>
#include <dtrain/core/environment.hpp>
#include <dtrain/core/node.hpp>
#include <dtrain/distributed/dist_optimizer.hpp>
#include <dtrain/distributed/progress_thread.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/optim/sgd.hpp>
#include <support/test_utils.hpp>

namespace {

using dtrain::test::all_ranks;
using dtrain::test::world_rank;
using dtrain::test::world_size;

/// This process's network namespace ("net:[4026532...]"), or "" when /proc cannot tell.
std::string network_namespace() {
    char buf[128] = {};
    const ssize_t n = ::readlink("/proc/self/ns/net", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, std::size_t(n)) : std::string();
}

/// Every rank's `text` (at most 127 characters), in rank order, on every rank.
std::vector<std::string> all_gather(const std::string& text) {
    constexpr int width = 128;
    std::vector<char> mine(width, '\0'), all(std::size_t(width) * std::size_t(world_size()));
    std::copy_n(text.begin(), std::min<std::size_t>(text.size(), width - 1), mine.begin());
    MPI_Allgather(mine.data(), width, MPI_CHAR, all.data(), width, MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> out;
    for (int r = 0; r < world_size(); ++r)
        out.emplace_back(all.data() + std::size_t(r) * width);
    return out;
}

}  // namespace

TEST_CASE("Each simulated host is a node of its own: every rank is local rank 0 of 1", "[multihost]") {
    REQUIRE(world_size() >= 2);
    // The ranks really are on different hosts (network namespaces), though the machine and its hostname
    // are one: without this the test would pass vacuously under a plain mpiexec.
    const auto spaces = all_gather(network_namespace());
    auto sorted = spaces;
    std::sort(sorted.begin(), sorted.end());
    CHECK(all_ranks(!spaces[0].empty() && std::unique(sorted.begin(), sorted.end()) == sorted.end()));
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    const auto names = all_gather(std::string(name, std::size_t(len)));
    if (world_rank() == 0)
        for (int r = 0; r < world_size(); ++r)
            std::printf("node_test: rank %d in %s, MPI_Get_processor_name '%s'\n", r,
                        spaces[std::size_t(r)].c_str(), names[std::size_t(r)].c_str());

    dtrain::Environment env;
    INFO("rank " << env.rank() << ": local rank " << env.local_rank() << " of " << env.local_size());
    CHECK(all_ranks(env.local_rank() == 0 && env.local_size() == 1));
    CHECK(all_ranks(dtrain::detail::node_local_size(MPI_COMM_WORLD) == 1));
    // Ring's successor is on another host: whole chunks up to 16 MiB, one message in flight (comm/ring.hpp).
    dtrain::Ring ring(MPI_COMM_WORLD);
    CHECK(all_ranks(ring.crosses_nodes() && ring.window() == 1));
    CHECK(all_ranks(ring.segment_elems(std::size_t(1) << 24, 4) == (std::size_t(16) << 20) / 4));
}

TEST_CASE("The progress-thread decision counts this host's ranks only", "[multihost]") {
    REQUIRE(world_size() >= 2);
    unsetenv("DTRAIN_PROGRESS_THREAD");  // auto
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    const int cpus = dtrain::detail::available_cpus();
    // One rank per host: the thread runs when this process has two CPUs, whatever the job's size.
    const bool expected = provided == MPI_THREAD_MULTIPLE && cpus >= 2;
    INFO("rank " << world_rank() << " of " << world_size() << ", " << cpus << " CPUs");
    dtrain::Model<float> model({8}, 3);
    model.add(dtrain::Dense<float>(8, 16)).add(dtrain::ReLU<float>()).add(dtrain::Dense<float>(16, 4));
    dtrain::SyncOptions options;
    options.bucket_bytes = 0;  // one bucket per layer: more than one, so a progress thread has work
    options.overlap = true;
    dtrain::DistOptimizer<dtrain::Ring, dtrain::SGD<float>> opt(
        model, dtrain::SGD<float>(dtrain::SGDOptions()), options);
    CHECK(all_ranks(opt.progress_thread() == expected));
    if (world_rank() == 0)
        std::printf(
            "node_test: %d CPUs per process, %d ranks in the job, 1 per host: progress thread %s%s\n", cpus,
            world_size(), opt.progress_thread() ? "on" : "off",
            cpus >= 2 && cpus < 2 * world_size() ? " (it would be off if the job's ranks counted)" : "");
}

TEST_CASE("cluster.sh up --pin: every host runs on CPUs of its own", "[.][pinned]") {
    // Selected by the multihost.node_pinned tests only: host I gets CPUs [(I-1)k, Ik), k = online / hosts.
    cpu_set_t set;
    CPU_ZERO(&set);
    REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
    std::string mask;
    const int online = int(sysconf(_SC_NPROCESSORS_ONLN)), per_host = online / world_size();
    for (int c = 0; c < std::min(online, 127); ++c)
        mask += CPU_ISSET(c, &set) ? '1' : '0';
    const auto masks = all_gather(mask);
    INFO("rank " << world_rank() << " runs on CPUs " << mask << " of " << online);
    CHECK(all_ranks(dtrain::detail::available_cpus() == per_host));
    bool disjoint = true;
    for (std::size_t c = 0; c < mask.size(); ++c) {
        int users = 0;
        for (const std::string& m : masks)
            users += m[c] == '1';
        disjoint = disjoint && users <= 1;
    }
    CHECK(all_ranks(disjoint));
    if (world_rank() == 0)
        for (int r = 0; r < world_size(); ++r)
            std::printf("node_test: rank %d (pinned) runs on CPUs %s\n", r, masks[std::size_t(r)].c_str());
}

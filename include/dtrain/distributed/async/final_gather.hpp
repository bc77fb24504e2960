#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include <mpi.h>

#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/nn/layer.hpp>

namespace dtrain::detail {

/// The collective end of an Async run: the masters' parameter shards gathered into rank 0's model (every
/// rank's with gather_to_all), and the workers' mean non-trainable state (BatchNorm statistics). Every
/// buffer is allocated at construction.
///
/// @tparam T the parameter element type.
template <class T>
class AsyncFinalGather {
public:
    /// Nothing to gather (a placeholder until the shards are known).
    AsyncFinalGather() = default;

    /// For a communicator of `size` ranks whose ranks 0 .. shards.size()-1 (the masters) own `shards` of the
    /// flat parameter buffer, and a model with `state_size` state values.
    AsyncFinalGather(const std::vector<Range>& shards, int size, std::size_t state_size)
        : counts_(static_cast<std::size_t>(size), 0), displs_(static_cast<std::size_t>(size), 0) {
        for (std::size_t r = 0; r < shards.size(); ++r) {
            counts_[r] = int(shards[r].size);
            displs_[r] = int(shards[r].offset);
        }
        if (state_size > 0) zeros_.assign(state_size, T(0));
    }

    /// Collective over `comm`: the parameters `p` (the whole flat buffer) of every rank (`to_all`) or of rank
    /// 0 only become the masters' shards; `mine` is this rank's shard (empty on workers).
    void parameters(T* p, bool to_all, int rank, Range mine, MPI_Comm comm) const {
        const MPI_Datatype t = mpi_type<T>();
        if (to_all) {
            DTRAIN_MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, t, p, counts_.data(), displs_.data(), t, comm));
        } else if (rank == 0) {
            DTRAIN_MPI_CHECK(MPI_Gatherv(MPI_IN_PLACE, 0, t, p, counts_.data(), displs_.data(), t, 0, comm));
        } else {
            DTRAIN_MPI_CHECK(
                MPI_Gatherv(p + mine.offset, int(mine.size), t, nullptr, nullptr, nullptr, t, 0, comm));
        }
    }

    /// Collective over `comm`: rank 0's `state` (every rank's with `to_all`) becomes the mean of the
    /// `workers` workers' states; a master (`worker` false) contributes nothing.
    void mean_state(Span<T> state, bool to_all, bool worker, int rank, int workers, MPI_Comm comm) const {
        if (state.empty()) return;
        const MPI_Datatype t = mpi_type<T>();
        const int n = int(state.size());
        if (to_all || rank == 0) {
            if (!worker) std::fill(state.begin(), state.end(), T(0));
            if (to_all)
                DTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, state.data(), n, t, MPI_SUM, comm));
            else
                DTRAIN_MPI_CHECK(MPI_Reduce(MPI_IN_PLACE, state.data(), n, t, MPI_SUM, 0, comm));
            for (auto& v : state)
                v /= T(workers);
        } else {
            const T* mine = worker ? state.data() : zeros_.data();
            DTRAIN_MPI_CHECK(MPI_Reduce(mine, nullptr, n, t, MPI_SUM, 0, comm));
        }
    }

private:
    std::vector<int> counts_, displs_;  // the masters' shards (zero for workers)
    std::vector<T> zeros_;              // a master's (empty) contribution to the workers' mean state
};

}  // namespace dtrain::detail

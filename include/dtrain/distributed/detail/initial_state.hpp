#pragma once

/// @file
/// The initial broadcast both distributed optimizers start with: root's parameters, model state and
/// optimizer state, the latter sliced by the range of the flat buffer each rank owns.

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <mpi.h>

#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/nn/model.hpp>

namespace dtrain::detail {

/// Collective over `comm` (`owned` has one Range of the flat parameter buffer per rank of `comm`): every
/// rank ends with root's parameters and model state, and its optimizer sized for its range owned[rank] (the
/// whole buffer for the synchronous policies; a master's shard, or nothing for a worker, under Async) with
/// root's step count and, for that range, root's optimizer state when root holds state for the whole model
/// (a checkpoint restored before construction), zeroed state otherwise. Throws dtrain::Error (on every
/// rank, as every rank checks the same sizes) when the buffers exceed MPI's int counts.
template <class T, class Opt>
void share_initial_state(Model<T>& model, Opt& opt, const std::vector<Range>& owned, int root,
                         MPI_Comm comm) {
    const std::size_t n = model.num_parameters(), slots = opt.state_slots();
    DTRAIN_CHECK(std::max<std::size_t>(1, slots) * n <= std::size_t(INT_MAX) &&
                     model.state().size() <= std::size_t(INT_MAX),
                 "DistOptimizer: ", n, " parameters (", slots, " optimizer state slots) or ",
                 model.state().size(), " state values exceed MPI's int count limit ", INT_MAX);
    const int rank = comm_rank(comm);
    if (n > 0) DTRAIN_MPI_CHECK(MPI_Bcast(model.parameters().data(), int(n), mpi_type<T>(), root, comm));
    Span<T> state = model.state();
    if (!state.empty())
        DTRAIN_MPI_CHECK(MPI_Bcast(state.data(), int(state.size()), mpi_type<T>(), root, comm));

    std::uint64_t head[2] = {opt.steps(), slots > 0 && opt.state().size() == slots * n ? 1u : 0u};
    DTRAIN_MPI_CHECK(MPI_Bcast(head, 2, MPI_UINT64_T, root, comm));
    const Range mine = owned[std::size_t(rank)];
    const bool whole_everywhere =
        std::all_of(owned.begin(), owned.end(), [n](const Range& r) { return r.offset == 0 && r.size == n; });
    const bool root_has_all = head[1] != 0 && rank == root;
    std::vector<T> full;  // root's whole state, to slice
    if (root_has_all && !whole_everywhere) full.assign(opt.state().begin(), opt.state().end());
    if (!root_has_all || mine.size != n) opt.reset(mine.size);
    opt.set_steps(head[0]);
    if (head[1] == 0) return;
    if (whole_everywhere) {
        DTRAIN_MPI_CHECK(MPI_Bcast(opt.state().data(), int(slots * n), mpi_type<T>(), root, comm));
        return;
    }
    std::vector<int> counts(owned.size()), displs(owned.size());
    for (std::size_t r = 0; r < owned.size(); ++r) {
        counts[r] = int(owned[r].size);
        displs[r] = int(owned[r].offset);
    }
    for (std::size_t k = 0; k < slots; ++k) {  // slot k of root's state to every rank's slot k
        T* dst = opt.state().data() + k * mine.size;
        if (rank == root) {
            const T* slot = full.data() + k * n;
            std::copy(slot + mine.offset, slot + mine.offset + mine.size, dst);
            DTRAIN_MPI_CHECK(MPI_Scatterv(slot, counts.data(), displs.data(), mpi_type<T>(), MPI_IN_PLACE, 0,
                                          mpi_type<T>(), root, comm));
        } else {
            DTRAIN_MPI_CHECK(MPI_Scatterv(nullptr, nullptr, nullptr, mpi_type<T>(), dst, int(mine.size),
                                          mpi_type<T>(), root, comm));
        }
    }
}

}  // namespace dtrain::detail

#pragma once

#include <dtrain/core/span.hpp>
#include <dtrain/distributed/options.hpp>

namespace dtrain::detail {

/// After a synchronous step, keeps the non-trainable model state `state` (BatchNorm running statistics)
/// consistent over the ranks of the communicator `comm` as `how` says: root's state broadcast, the mean of
/// every rank's, or left alone. Collective unless `how` is None or the state is empty.
template <class Comm, class T>
void sync_model_state(Comm& comm, Span<T> state, StateSync how, int root) {
    if (state.empty() || how == StateSync::None) return;
    if (how == StateSync::Broadcast) {
        comm.broadcast(state, root);
        return;
    }
    comm.allreduce_sum(state);
    const T inv = T(1.0 / double(comm.size()));
    for (auto& v : state)
        v *= inv;
}

}  // namespace dtrain::detail

#pragma once

#include <cstdint>
#include <type_traits>

#include <dtrain/comm/communicator.hpp>
#include <dtrain/core/span.hpp>

namespace dtrain {

/// The sum of `x` over every rank of `comm`, identical on all ranks (collective). Requires Comm to model the
/// Communicator concept and T to be an arithmetic type with an MPI datatype (double, std::int64_t, ...).
/// Use it for global loss and accuracy reporting, e.g. global_sum(comm, correct) / global_sum(comm, seen).
template <class Comm, class T>
T global_sum(Comm& comm, T x) {
    static_assert(is_communicator_v<Comm>, "global_sum: Comm must model the Communicator concept");
    static_assert(std::is_arithmetic_v<T>, "global_sum: T must be arithmetic");
    comm.allreduce_sum(Span<T>(&x, 1));
    return x;
}

/// The mean of `x` over every rank of `comm` (sum / number of ranks) as a double, identical on all ranks
/// (collective). Requires the same as global_sum.
template <class Comm, class T>
double global_mean(Comm& comm, T x) {
    return static_cast<double>(global_sum(comm, x)) / static_cast<double>(comm.size());
}

}  // namespace dtrain

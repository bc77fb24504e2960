#pragma once

#include <exception>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include <mpi.h>

#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>

namespace dtrain {

/// Runs `fn()` on every rank of `comm` and agrees on the outcome, so that a failure only some ranks see
/// (a file missing on one node, a bad value read by one rank) ends the operation on all of them instead of
/// leaving the others waiting in the next collective. When fn throws on any rank, every rank throws
/// dtrain::Error "rank R: <message>" for the lowest such rank R, after all ranks have finished fn. Otherwise
/// returns fn's result. Collective over `comm` (one all-reduce; a broadcast more on failure).
///
///     auto data = dtrain::collectively([&] { return dtrain::read_csv(path); });  // throws on every rank
template <class Fn>
auto collectively(Fn&& fn, MPI_Comm comm = MPI_COMM_WORLD) {
    using R = std::invoke_result_t<Fn&>;
    std::string message;
    bool failed = false;
    std::optional<std::conditional_t<std::is_void_v<R>, char, R>> result;
    try {
        if constexpr (std::is_void_v<R>)
            fn();
        else
            result.emplace(fn());
    } catch (...) {
        failed = true;
        message = detail::exception_message(std::current_exception());
    }
    const int rank = comm_rank(comm), size = comm_size(comm);
    const int first = detail::allreduce_value(failed ? rank : size, MPI_MIN, comm);
    if (first < size) {
        detail::broadcast_string(message, first, comm);
        throw Error(detail::concat("rank ", first, ": ", message));
    }
    if constexpr (!std::is_void_v<R>) return std::move(*result);
}

}  // namespace dtrain

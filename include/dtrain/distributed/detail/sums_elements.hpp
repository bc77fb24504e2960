#pragma once

/// @file
/// sums_elements: whether a communicator sums spans of a given element type both blocking and nonblocking,
/// which GradientCompressor (distributed/compression.hpp) asks of TopK's wire of 32-bit words.

#include <type_traits>
#include <utility>

#include <dtrain/core/span.hpp>

namespace dtrain::detail {

/// Whether `comm.iallreduce_sum` and `comm.allreduce_sum` take Span<W> (TopK's wire of 32-bit words).
template <class Comm, class W, class = void>
struct sums_elements : std::false_type {};

/// Specialisation that detects both members.
template <class Comm, class W>
struct sums_elements<Comm, W,
                     std::void_t<decltype(std::declval<Comm&>().allreduce_sum(std::declval<Span<W>>())),
                                 decltype(std::declval<Comm&>().iallreduce_sum(std::declval<Span<W>>()))>>
    : std::is_same<decltype(std::declval<Comm&>().iallreduce_sum(std::declval<Span<W>>())),
                   typename Comm::Request> {};

}  // namespace dtrain::detail

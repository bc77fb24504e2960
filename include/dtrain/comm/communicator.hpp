#pragma once

#include <type_traits>
#include <utility>

#include <mpi.h>

#include <dtrain/comm/reduce_op.hpp>
#include <dtrain/core/span.hpp>

namespace dtrain {

/// The Communicator concept: how ranks move buffers. Communicators know nothing of layers or models.
/// A type `Comm` models it when it provides:
///
/// | member | meaning |
/// |---|---|
/// | `explicit Comm(MPI_Comm comm)` | uses (a duplicate of) `comm`; never initialises or finalises MPI |
/// | `int rank() const`, `int size() const` | this rank and the number of ranks |
/// | `MPI_Comm mpi_comm() const` | the underlying communicator |
/// | `template <class T> void broadcast(Span<T> data, int root)` | every rank ends with root's values (exact) |
/// | `template <class T> void allreduce_sum(Span<T> data)` | in-place element-wise sum over ranks |
/// | `using Request = ...;` | a movable handle of one nonblocking all-reduce |
/// | `template <class T> Request iallreduce_sum(Span<T> data)` | starts an in-place sum; `data` must not be touched until it completes |
/// | `bool test(Request&)` | advances the operation; true once complete |
/// | `void wait(Request&)` | blocks until complete |
/// | `void barrier()` | synchronises all ranks |
///
/// Optional, checked by has_reduce_ops_v (Collective, Ring and Naive provide them; DistOptimizer needs only
/// the sum, so a communicator written for it does not have to):
///
/// | member | meaning |
/// |---|---|
/// | `template <class T> void allreduce(Span<T> data, ReduceOp op)` | in-place element-wise Sum, Max, Min or Prod over ranks (ReduceOp gives the NaN and overflow rules) |
/// | `template <class T> Request iallreduce(Span<T> data, ReduceOp op)` | starts it; completes through test() and wait() like iallreduce_sum |
///
/// Optional, checked by has_half_sums_v (Collective, Ring and Naive provide it; DistOptimizer needs it only
/// for SyncOptions::compression Fp16 and Bf16):
///
/// | member | meaning |
/// |---|---|
/// | `static constexpr bool half_float_sums = true;` | allreduce_sum and iallreduce_sum (and allreduce/iallreduce when present) take Span<Half> and Span<BFloat16> (comm/half.hpp) and add in float, rounding every partial sum to 16 bits once (fp32 accumulation), bitwise identical on every rank |
///
/// The declaration is needed because a generic implementation would compile for Half and be wrong: MPI's
/// MPI_SUM on the MPI_UINT16_T that Half travels as adds the bits as integers.
///
/// The result of every all-reduce must be bitwise identical on every rank. is_communicator_v and
/// has_reduce_ops_v check the concept for float buffers.
template <class Comm, class = void>
struct is_communicator : std::false_type {};

/// Specialisation that detects every member of the Communicator concept.
template <class Comm>
struct is_communicator<
    Comm, std::void_t<typename Comm::Request, decltype(std::declval<const Comm&>().rank()),
                      decltype(std::declval<const Comm&>().size()),
                      decltype(std::declval<const Comm&>().mpi_comm()),
                      decltype(std::declval<Comm&>().broadcast(std::declval<Span<float>>(), 0)),
                      decltype(std::declval<Comm&>().allreduce_sum(std::declval<Span<float>>())),
                      decltype(std::declval<Comm&>().iallreduce_sum(std::declval<Span<float>>())),
                      decltype(std::declval<Comm&>().test(std::declval<typename Comm::Request&>())),
                      decltype(std::declval<Comm&>().wait(std::declval<typename Comm::Request&>())),
                      decltype(std::declval<Comm&>().barrier())>>
    : std::bool_constant<
          std::is_constructible_v<Comm, MPI_Comm> &&
          std::is_same_v<decltype(std::declval<Comm&>().iallreduce_sum(std::declval<Span<float>>())),
                         typename Comm::Request>> {};

/// True when Comm models the Communicator concept.
template <class Comm>
inline constexpr bool is_communicator_v = is_communicator<Comm>::value;

/// Whether a communicator also provides the optional `allreduce(data, op)` and `iallreduce(data, op)`.
template <class Comm, class = void>
struct has_reduce_ops : std::false_type {};

/// Specialisation that detects both members and that iallreduce returns the communicator's Request.
template <class Comm>
struct has_reduce_ops<
    Comm, std::void_t<typename Comm::Request,
                      decltype(std::declval<Comm&>().allreduce(std::declval<Span<float>>(), ReduceOp::Max)),
                      decltype(std::declval<Comm&>().iallreduce(std::declval<Span<float>>(), ReduceOp::Max))>>
    : std::is_same<decltype(std::declval<Comm&>().iallreduce(std::declval<Span<float>>(), ReduceOp::Max)),
                   typename Comm::Request> {};

/// True when Comm provides allreduce(data, op) and iallreduce(data, op) (see is_communicator).
template <class Comm>
inline constexpr bool has_reduce_ops_v = has_reduce_ops<Comm>::value;

/// Whether a communicator declares `half_float_sums` (sums of Half and BFloat16 with fp32 accumulation).
template <class Comm, class = void>
struct has_half_sums : std::false_type {};

/// Specialisation that reads the declaration.
template <class Comm>
struct has_half_sums<Comm, std::void_t<decltype(Comm::half_float_sums)>>
    : std::bool_constant<Comm::half_float_sums> {};

/// True when Comm sums Span<Half> and Span<BFloat16> in float (see is_communicator).
template <class Comm>
inline constexpr bool has_half_sums_v = has_half_sums<Comm>::value;

/// Whether a communicator checks its blocking calls across ranks and lets them be switched: provides
/// `bool collective_checks() const` and `void set_collective_checks(bool on)` (collective; Collective, Ring
/// and Naive do: a rank whose all-reduce or broadcast differs in length, element type, reduce operation or
/// root then gets dtrain::Error on every rank). Code that already guarantees identical calls, such as a
/// bucket plan checked once, can turn the per-call check off through it.
template <class Comm, class = void>
struct has_collective_checks : std::false_type {};

/// Specialisation that detects both members.
template <class Comm>
struct has_collective_checks<Comm,
                             std::void_t<decltype(bool(std::declval<const Comm&>().collective_checks())),
                                         decltype(std::declval<Comm&>().set_collective_checks(true))>>
    : std::true_type {};

/// True when Comm provides collective_checks() and set_collective_checks(bool).
template <class Comm>
inline constexpr bool has_collective_checks_v = has_collective_checks<Comm>::value;

}  // namespace dtrain

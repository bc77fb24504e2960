#pragma once

#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

#include <mpi.h>

#include <dtrain/core/error.hpp>
#include <dtrain/core/operation.hpp>

namespace dtrain {

namespace detail {

/// Whether T names the type it travels as with `using mpi_storage = U;` (see mpi_type()).
template <class T, class = void>
struct has_mpi_storage : std::false_type {};

/// Specialisation for types with a nested mpi_storage.
template <class T>
struct has_mpi_storage<T, std::void_t<typename T::mpi_storage>> : std::true_type {};

}  // namespace detail

/// The MPI datatype of T: float, double, char, the fixed-width integers of 8 to 64 bits (int8_t ...
/// uint64_t), long, unsigned long, long long and unsigned long long (whichever of them are distinct types),
/// and a trivially copyable wrapper that names the type it travels as with `using mpi_storage = U;` (of
/// U's size; e.g. the 16-bit floats of comm/half.hpp, which travel as their bits); a static_assert rejects
/// types without one. Which operation reduces a wrapper is the caller's to choose (not MPI_SUM on U).
template <class T>
MPI_Datatype mpi_type() {
    using U = std::remove_cv_t<T>;
    if constexpr (detail::has_mpi_storage<U>::value) {
        static_assert(sizeof(U) == sizeof(typename U::mpi_storage) && std::is_trivially_copyable_v<U>,
                      "dtrain::mpi_type: a type with mpi_storage must be trivially copyable and of its size");
        return mpi_type<typename U::mpi_storage>();
    } else if constexpr (std::is_same_v<U, float>)
        return MPI_FLOAT;
    else if constexpr (std::is_same_v<U, double>)
        return MPI_DOUBLE;
    else if constexpr (std::is_same_v<U, char>)
        return MPI_CHAR;
    else if constexpr (std::is_same_v<U, std::int8_t>)
        return MPI_INT8_T;
    else if constexpr (std::is_same_v<U, std::uint8_t>)
        return MPI_UINT8_T;
    else if constexpr (std::is_same_v<U, std::int16_t>)
        return MPI_INT16_T;
    else if constexpr (std::is_same_v<U, std::uint16_t>)
        return MPI_UINT16_T;
    else if constexpr (std::is_same_v<U, std::int32_t>)
        return MPI_INT32_T;
    else if constexpr (std::is_same_v<U, std::uint32_t>)
        return MPI_UINT32_T;
    else if constexpr (std::is_same_v<U, std::int64_t>)
        return MPI_INT64_T;
    else if constexpr (std::is_same_v<U, std::uint64_t>)
        return MPI_UINT64_T;
    else if constexpr (std::is_same_v<U, long>)
        return MPI_LONG;
    else if constexpr (std::is_same_v<U, unsigned long>)
        return MPI_UNSIGNED_LONG;
    else if constexpr (std::is_same_v<U, long long>)
        return MPI_LONG_LONG;
    else if constexpr (std::is_same_v<U, unsigned long long>)
        return MPI_UNSIGNED_LONG_LONG;
    else
        static_assert(!sizeof(U), "dtrain::mpi_type: no MPI datatype for this type");
}

namespace detail {

/// Throws dtrain::Error "<call> failed: <MPI error string>" when `code` is not MPI_SUCCESS.
inline void mpi_check(int code, const char* call) {
    if (code == MPI_SUCCESS) return;
    char buf[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) len = 0;
    throw Error(std::string(call) + " failed: " + std::string(buf, static_cast<std::size_t>(len)));
}

}  // namespace detail

/// Runs an MPI call and throws dtrain::Error naming the call and MPI's error string when it fails.
/// Requires MPI_ERRORS_RETURN on the communicator involved for errors to reach here (dtrain sets it).
#define DTRAIN_MPI_CHECK(call) ::dtrain::detail::mpi_check((call), #call)

/// This process's rank in `comm` (MPI_Comm_rank); throws dtrain::Error when the call fails.
inline int comm_rank(MPI_Comm comm = MPI_COMM_WORLD) {
    int rank = 0;
    DTRAIN_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    return rank;
}

/// Number of processes in `comm` (MPI_Comm_size); throws dtrain::Error when the call fails.
inline int comm_size(MPI_Comm comm = MPI_COMM_WORLD) {
    int size = 1;
    DTRAIN_MPI_CHECK(MPI_Comm_size(comm, &size));
    return size;
}

/// This process's rank in MPI_COMM_WORLD.
inline int world_rank() {
    return comm_rank(MPI_COMM_WORLD);
}

/// Number of processes in MPI_COMM_WORLD.
inline int world_size() {
    return comm_size(MPI_COMM_WORLD);
}

namespace detail {

/// Every rank ends with root's `s` (its length, then its bytes). Collective.
inline void broadcast_string(std::string& s, int root, MPI_Comm comm) {
    std::uint64_t n = s.size();
    DTRAIN_MPI_CHECK(MPI_Bcast(&n, 1, MPI_UINT64_T, root, comm));
    DTRAIN_CHECK(n <= std::uint64_t(INT_MAX), "broadcast_string: ", n, " bytes exceed MPI's int count");
    s.resize(n);
    if (n > 0) DTRAIN_MPI_CHECK(MPI_Bcast(s.data(), int(n), MPI_CHAR, root, comm));
}

/// Broadcasts `message` from `root` (empty = success) and throws it as dtrain::Error on every rank if it is
/// not empty, so that a failure seen by one rank ends the operation on all of them. Collective.
inline void throw_if_failed_anywhere(std::string message, int root, MPI_Comm comm) {
    OperationScope scope("agreeing on an error", comm);
    broadcast_string(message, root, comm);
    if (!message.empty()) throw Error(message);
}

/// `x` reduced with `op` (MPI_SUM, MPI_MAX, ...) over the ranks of `comm`, identical on every rank.
/// Collective. T must have an MPI datatype (mpi_type<T>()).
template <class T>
T allreduce_value(T x, MPI_Op op, MPI_Comm comm) {
    OperationScope scope("MPI_Allreduce of one value", comm);
    T out{};
    DTRAIN_MPI_CHECK(MPI_Allreduce(&x, &out, 1, mpi_type<T>(), op, comm));
    return out;
}

/// True on every rank when every rank of `comm` passed the same `value` (one all-reduce of two words: the
/// minimum of the value and of its complement). Collective.
inline bool same_everywhere(std::uint64_t value, MPI_Comm comm) {
    OperationScope scope("comparing a hash across ranks", comm);
    std::uint64_t mine[2] = {value, ~value}, low[2] = {0, 0};
    DTRAIN_MPI_CHECK(MPI_Allreduce(mine, low, 2, MPI_UINT64_T, MPI_MIN, comm));
    return low[0] == ~low[1];
}

/// Throws dtrain::Error naming `who` unless `root` is a rank of a communicator of `size` ranks.
inline void check_root(const char* who, int root, int size) {
    DTRAIN_CHECK(root >= 0 && root < size, who, ": root ", root, " is not a rank of a communicator of size ",
                 size);
}

}  // namespace detail

}  // namespace dtrain

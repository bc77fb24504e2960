#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include <mpi.h>

#include <dtrain/comm/half.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>

namespace dtrain {

/// The element-wise reduction of an all-reduce (`allreduce(data, op)` / `iallreduce(data, op)` on every
/// communicator policy). Every rank ends with the same value, bitwise identical on all ranks.
///
/// - `Sum`, `Prod`: x0 + x1 + ... and x0 * x1 * ...; Ring and Naive associate them in their own order
///   (Naive in rank order, Ring chunk by chunk around the ring), so floating-point results may differ from
///   another policy's in the last bits. On integers they follow C++ arithmetic, as MPI_SUM and MPI_PROD do:
///   unsigned types wrap modulo 2^bits; a signed result or partial result must not overflow (undefined, as
///   in MPI).
/// - `Max`, `Min`: the largest / smallest value. NaN propagates (as PyTorch's max and min): an element is
///   NaN when it is NaN on any rank (which NaN, when several differ in sign or payload, is unspecified but
///   the same on every rank). When the extreme is a zero present as both +0 and -0, which one results is
///   unspecified but the same on every rank. Collective uses MPI_MAX / MPI_MIN, whose NaN behaviour MPI
///   leaves unspecified; use Ring or Naive where NaN must propagate. On unsigned integers Collective uses
///   its own MPI operation instead (detail::mpi_op_for): MPICH 4.0.2 compares them as signed
///   (pmodels/mpich#6083), and so does Open MPI 4.1.2-4.1.4 for MPI_UNSIGNED_LONG. Likewise for Sum of 8-
///   and 16-bit unsigned integers: Open MPI 4.1.4's MPI_SUM gives the modular sum for a single element but
///   other values for the same elements in a 61-element buffer (tests/comm/reduce_op_test.cpp).
/// - On the 16-bit wire floats Half and BFloat16 (comm/half.hpp) every op computes in float and rounds
///   each partial result back to 16 bits once (fp32 accumulation); Collective uses its own MPI operations
///   for them (their MPI datatype is MPI_UINT16_T).
enum class ReduceOp { Sum, Max, Min, Prod };

/// The operation's name ("sum", "max", "min", "prod"), for messages.
inline const char* reduce_op_name(ReduceOp op) noexcept {
    switch (op) {
        case ReduceOp::Sum:
            return "sum";
        case ReduceOp::Max:
            return "max";
        case ReduceOp::Min:
            return "min";
        case ReduceOp::Prod:
            return "prod";
    }
    return "unknown";
}

namespace detail {

/// Throws dtrain::Error for a ReduceOp outside the enumeration (a cast from an arbitrary integer).
[[noreturn]] inline void throw_invalid_reduce_op(ReduceOp op) {
    throw Error("ReduceOp: invalid value " + std::to_string(static_cast<int>(op)) +
                " (use ReduceOp::Sum, Max, Min or Prod)");
}

/// The MPI operation of `op` (MPI_SUM, MPI_MAX, MPI_MIN, MPI_PROD); throws dtrain::Error for a value
/// outside the enumeration.
inline MPI_Op mpi_op(ReduceOp op) {
    switch (op) {
        case ReduceOp::Sum:
            return MPI_SUM;
        case ReduceOp::Max:
            return MPI_MAX;
        case ReduceOp::Min:
            return MPI_MIN;
        case ReduceOp::Prod:
            return MPI_PROD;
    }
    throw_invalid_reduce_op(op);
}

/// dst[i] = combine(dst[i], src[i]) for i < n; the two ranges must not overlap. Blocks of 8 independent
/// results let the compiler vectorise it at -O2 as well as -O3 (each element is still exactly
/// combine(dst[i], src[i])).
template <class T, class Combine>
void combine_into(T* __restrict dst, const T* __restrict src, std::size_t n, Combine combine) noexcept {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        T block[8];
        for (int k = 0; k < 8; ++k)
            block[k] = combine(dst[i + k], src[i + k]);
        for (int k = 0; k < 8; ++k)
            dst[i + k] = block[k];
    }
    for (; i < n; ++i)
        dst[i] = combine(dst[i], src[i]);
}

/// The element-wise combine functions. Max and Min keep `a` unless `b` is beyond it or NaN, so a NaN on
/// either side survives (`b != b` is false for integers and folds away). Sum and Prod compute in T (small
/// unsigned types wrap instead of overflowing after promotion to int).
struct Plus {
    template <class T>
    T operator()(T a, T b) const noexcept {
        return T(a + b);
    }
};
/// Sums of Half arrays: add_halves (F16C where the CPU has it), bitwise the generic loop's Half + Half.
inline void combine_into(Half* __restrict dst, const Half* __restrict src, std::size_t n, Plus) noexcept {
    static_assert(sizeof(Half) == sizeof(std::uint16_t) && std::is_standard_layout_v<Half>,
                  "Half is its bits");
    add_halves(reinterpret_cast<std::uint16_t*>(dst), reinterpret_cast<const std::uint16_t*>(src), n);
}

/// Sums of BFloat16 arrays: add_bfloat16s (vectorised), bitwise the generic loop's BFloat16 + BFloat16.
inline void combine_into(BFloat16* __restrict dst, const BFloat16* __restrict src, std::size_t n,
                         Plus) noexcept {
    static_assert(sizeof(BFloat16) == sizeof(std::uint16_t) && std::is_standard_layout_v<BFloat16>,
                  "BFloat16 is its bits");
    add_bfloat16s(reinterpret_cast<std::uint16_t*>(dst), reinterpret_cast<const std::uint16_t*>(src), n);
}

/// See Plus.
struct Times {
    template <class T>
    T operator()(T a, T b) const noexcept {
        return T(a * b);
    }
};
/// See Plus.
struct Larger {
    template <class T>
    T operator()(T a, T b) const noexcept {
        return (b > a || b != b) ? b : a;
    }
};
/// See Plus.
struct Smaller {
    template <class T>
    T operator()(T a, T b) const noexcept {
        return (b < a || b != b) ? b : a;
    }
};

/// A type-erased element-wise reduction: dst[i] = combine(dst[i], src[i]) for i < n elements.
using ReduceFn = void (*)(void* dst, const void* src, std::size_t n);

/// combine_into with `Combine` on elements of type T behind the type-erased signature, for state machines
/// that serve every element type.
template <class T, class Combine>
void combine_into_erased(void* dst, const void* src, std::size_t n) noexcept {
    combine_into(static_cast<T*>(dst), static_cast<const T*>(src), n, Combine{});
}

/// The type-erased reduction of `op` on elements of type T (for Sum the same dst[i] + src[i] loop the
/// all-reduces always used; for Half and BFloat16 their float arithmetic); throws dtrain::Error for a value
/// outside the enumeration.
template <class T>
ReduceFn reduce_fn(ReduceOp op) {
    static_assert(std::is_arithmetic_v<T> || is_wire_float_v<T>,
                  "dtrain::ReduceOp: elements must be arithmetic, Half or BFloat16");
    switch (op) {
        case ReduceOp::Sum:
            return &combine_into_erased<T, Plus>;
        case ReduceOp::Max:
            return &combine_into_erased<T, Larger>;
        case ReduceOp::Min:
            return &combine_into_erased<T, Smaller>;
        case ReduceOp::Prod:
            return &combine_into_erased<T, Times>;
    }
    throw_invalid_reduce_op(op);
}

/// An MPI_User_function applying `Combine` to elements of T: inout[i] = combine(inout[i], in[i]).
template <class T, class Combine>
void mpi_combine(void* in, void* inout, int* len, MPI_Datatype*) {
    combine_into(static_cast<T*>(inout), static_cast<const T*>(in), static_cast<std::size_t>(*len),
                 Combine{});
}

/// The commutative MPI operation of mpi_combine<T, Combine>, created on first use (MPI must be
/// initialised) and kept until the program ends.
template <class T, class Combine>
MPI_Op user_mpi_op() {
    static const MPI_Op op = [] {
        MPI_Op created = MPI_OP_NULL;
        DTRAIN_MPI_CHECK(MPI_Op_create(&mpi_combine<T, Combine>, 1, &created));
        return created;
    }();
    return op;
}

/// The MPI operation for reducing elements of T with `op`: mpi_op(op), except Max and Min of unsigned
/// integers and Sum of 8- and 16-bit unsigned integers, which use user_mpi_op because MPI libraries in use
/// get them wrong (see ReduceOp), and every op on Half and BFloat16, which MPI does not know.
template <class T>
MPI_Op mpi_op_for(ReduceOp op) {
    if constexpr (is_wire_float_v<T>) {
        switch (op) {
            case ReduceOp::Sum:
                return user_mpi_op<T, Plus>();
            case ReduceOp::Max:
                return user_mpi_op<T, Larger>();
            case ReduceOp::Min:
                return user_mpi_op<T, Smaller>();
            case ReduceOp::Prod:
                return user_mpi_op<T, Times>();
        }
        throw_invalid_reduce_op(op);
    }
    if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {
        if (op == ReduceOp::Max) return user_mpi_op<T, Larger>();
        if (op == ReduceOp::Min) return user_mpi_op<T, Smaller>();
        if (sizeof(T) < 4 && op == ReduceOp::Sum) return user_mpi_op<T, Plus>();
    }
    return mpi_op(op);
}

}  // namespace detail

}  // namespace dtrain

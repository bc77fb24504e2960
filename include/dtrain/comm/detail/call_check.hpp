#pragma once

/// @file
/// The check that every rank makes the same blocking collective call: one small all-reduce of each rank's
/// call signature (operation, element count, element type, reduce operation, root) before the call moves
/// any data, so that a rank passing another length, type, op or root gets a dtrain::Error on every rank
/// instead of MPI's "Message truncated", a hang or silently different results.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <mpi.h>

#include <dtrain/comm/half.hpp>
#include <dtrain/comm/reduce_op.hpp>
#include <dtrain/core/comm_handle.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>

namespace dtrain::detail {

/// The names of the element types element_type_id() numbers, indexed by id (0: a type it does not list).
inline constexpr const char* element_type_names[] = {
    "another type", "float",   "double", "char",   "int8", "uint8",         "int16",     "uint16",
    "int32",        "uint32",  "int64",  "uint64", "long", "unsigned long", "long long", "unsigned long long",
    "Half",         "BFloat16"};

/// The element types that element_type_names names, in its order from index 1.
using listed_element_types =
    std::tuple<float, double, char, std::int8_t, std::uint8_t, std::int16_t, std::uint16_t, std::int32_t,
               std::uint32_t, std::int64_t, std::uint64_t, long, unsigned long, long long, unsigned long long,
               Half, BFloat16>;

static_assert(std::tuple_size_v<listed_element_types> + 1 == std::size(element_type_names),
              "every listed element type has a name");

/// 1 + the index of the first of the listed types that is U, or 0.
template <class U, std::size_t... I>
constexpr std::int64_t listed_index(std::index_sequence<I...>) noexcept {
    std::int64_t id = 0;
    ((id = id == 0 && std::is_same_v<U, std::tuple_element_t<I, listed_element_types>> ? std::int64_t(I) + 1
                                                                                       : id),
     ...);
    return id;
}

/// A number for the element type T that is the same on every rank (the index of its name in
/// element_type_names); 0 for a type not listed there. Types that are the same C++ type under two names
/// (std::int64_t and long on LP64) get the first.
template <class T>
constexpr std::int64_t element_type_id() noexcept {
    return listed_index<std::remove_cv_t<T>>(
        std::make_index_sequence<std::tuple_size_v<listed_element_types>>());
}

/// What one rank passes to a blocking collective call. Every rank must pass the same.
struct CallSignature {
    /// The fields, in the order they are compared and reported.
    enum Field { Kind, Count, Type, Op, Root, fields };
    /// Field values; `Kind` is 1 for an all-reduce and 2 for a broadcast, `Op` the ReduceOp's value (-1 for
    /// a broadcast), `Root` the root (-1 for an all-reduce).
    std::int64_t value[fields] = {0, 0, 0, -1, -1};
};

/// The signature of an all-reduce with `op` of `n` elements of T.
template <class T>
CallSignature allreduce_signature(std::size_t n, ReduceOp op) noexcept {
    return {{1, static_cast<std::int64_t>(n), element_type_id<T>(), static_cast<std::int64_t>(op), -1}};
}

/// The signature of a broadcast of `n` elements of T from `root`.
template <class T>
CallSignature broadcast_signature(std::size_t n, int root) noexcept {
    return {{2, static_cast<std::int64_t>(n), element_type_id<T>(), -1, root}};
}

/// Field `f` with value `v` as a message shows it ("1000", "float", "max", "broadcast").
inline std::string signature_value(int f, std::int64_t v) {
    switch (f) {
        case CallSignature::Kind:
            return v == 1 ? "allreduce" : v == 2 ? "broadcast" : "no call";
        case CallSignature::Type:
            return v >= 0 && v < std::int64_t(std::size(element_type_names)) ? element_type_names[v]
                                                                             : "another type";
        case CallSignature::Op:
            return v < 0 ? "none" : reduce_op_name(static_cast<ReduceOp>(v));
        default:
            return std::to_string(v);
    }
}

/// "rank 0 has 1000, rank 1 has 500": the value of field `f` on each rank of `all` (p signatures' fields,
/// rank by rank), grouping ranks with the same value in order of their first rank and listing at most
/// four ranks per value.
inline std::string describe_disagreement(int f, const std::vector<std::int64_t>& all, int p) {
    std::string out;
    std::vector<bool> done(std::size_t(p), false);
    for (int r = 0; r < p; ++r) {
        if (done[std::size_t(r)]) continue;
        const std::int64_t v = all[std::size_t(r) * CallSignature::fields + std::size_t(f)];
        std::vector<int> ranks;
        for (int q = r; q < p; ++q) {
            if (all[std::size_t(q) * CallSignature::fields + std::size_t(f)] != v) continue;
            done[std::size_t(q)] = true;
            ranks.push_back(q);
        }
        if (!out.empty()) out += ", ";
        out += ranks.size() == 1 ? "rank " : "ranks ";
        for (std::size_t i = 0; i < ranks.size() && i < 4; ++i)
            out += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
        if (ranks.size() > 4) out += concat(" and ", ranks.size() - 4, " more");
        out += concat(ranks.size() == 1 ? " has " : " have ", signature_value(f, v));
    }
    return out;
}

/// What field `f` is called in messages.
inline const char* signature_field_name(int f) noexcept {
    static constexpr const char* names[] = {"the operation", "the element count", "the element type",
                                            "the reduce operation", "the root"};
    return names[f];
}

/// Whether DTRAIN_CHECK_COLLECTIVES asks communicators to check their blocking calls: unset, empty, "1" or
/// "on" = yes, "0" or "off" = no. Throws dtrain::Error naming the variable for any other value.
inline bool collective_checks_from_environment() {
    const char* env = std::getenv("DTRAIN_CHECK_COLLECTIVES");
    const std::string v = env != nullptr ? env : "";
    DTRAIN_CHECK(v.empty() || v == "1" || v == "on" || v == "0" || v == "off",
                 "DTRAIN_CHECK_COLLECTIVES must be 1 or on (check that every rank makes the same collective "
                 "call, the default) or 0 or off (do not), got '",
                 v, "'");
    return !(v == "0" || v == "off");
}

/// Compares `sig` over the ranks of `comm` and throws dtrain::Error on every rank when the ranks disagree:
/// "<who>::<what>: ranks disagree on the element count: rank 0 has 1000, rank 1 has 500" (one clause per
/// field that differs). Collective: one all-reduce of ten 64-bit words (each field's maximum and the
/// maximum of its complement, that is its minimum) and, only when they differ, an all-gather of every
/// rank's signature to name the ranks.
inline void verify_same_call(const CallSignature& sig, const char* who, const char* what, MPI_Comm comm) {
    constexpr int n = CallSignature::fields;
    std::int64_t mine[2 * n], high[2 * n];
    for (int f = 0; f < n; ++f) {
        mine[f] = sig.value[f];
        mine[n + f] = ~sig.value[f];
    }
    DTRAIN_MPI_CHECK(MPI_Allreduce(mine, high, 2 * n, MPI_INT64_T, MPI_MAX, comm));
    bool same = true;
    for (int f = 0; f < n; ++f)
        same = same && high[f] == ~high[n + f];
    if (same) return;
    const int p = comm_size(comm);
    std::vector<std::int64_t> all(std::size_t(p) * n);
    DTRAIN_MPI_CHECK(MPI_Allgather(sig.value, n, MPI_INT64_T, all.data(), n, MPI_INT64_T, comm));
    std::string message = concat(who, "::", what, ": ranks disagree on ");
    bool first = true;
    for (int f = 0; f < n; ++f) {
        if (high[f] == ~high[n + f]) continue;
        message +=
            concat(first ? "" : "; on ", signature_field_name(f), ": ", describe_disagreement(f, all, p));
        first = false;
    }
    message +=
        " (every rank must make the same collective calls in the same order, with the same length, "
        "element type, reduce operation and root)";
    throw Error(message);
}

/// Whether a communicator checks its blocking calls (verify_same_call before each all-reduce and
/// broadcast), the same on every rank. The checks run on a duplicate of the policy's communicator of their
/// own, so a check never matches a collective call of the user or of the policy on the policy's
/// communicator: a rank that makes an unchecked call while the others check waits (and the stall watchdog
/// names it) instead of mixing the two calls' data. Copying duplicates it again (collective), moving steals
/// it.
class CallCheck {
public:
    /// Checks on, no communicator (for a communicator of one rank, where there is nothing to compare).
    CallCheck() noexcept = default;

    /// Duplicates `comm` for the checks (collective over `comm`), takes DTRAIN_CHECK_COLLECTIVES's choice
    /// and agrees on it over the ranks: throws dtrain::Error on every rank naming `who` when the variable
    /// differs between ranks or is invalid on one.
    CallCheck(const char* who, MPI_Comm comm) : comm_(comm) {
        std::string error;
        bool on = true;
        try {
            on = collective_checks_from_environment();
        } catch (const Error& e) {
            error = e.what();
        }
        agree(error.empty() ? (on ? 1 : 0) : 2, error, who);
    }

    /// True when blocking calls are checked.
    bool on() const noexcept { return on_; }

    /// Turns the checks on or off on every rank (collective): throws dtrain::Error on every rank naming
    /// `who` when the ranks pass different values, and then leaves the setting unchanged.
    void set(bool on, const char* who) { agree(on ? 1 : 0, "", who); }

    /// verify_same_call(sig, who, what) over the checks' communicator when the checks are on and there is
    /// more than one rank. Collective then.
    void verify(const CallSignature& sig, const char* who, const char* what) const {
        if (on_ && comm_.size() > 1) verify_same_call(sig, who, what, comm_.get());
    }

private:
    // Agrees on `state` (0 off, 1 on, 2 `error` on this rank) over the checks' communicator.
    void agree(int state, const std::string& error, const char* who) {
        const MPI_Comm comm = comm_.get();
        int mine[2] = {state, -state}, high[2] = {0, 0};
        DTRAIN_MPI_CHECK(MPI_Allreduce(mine, high, 2, MPI_INT, MPI_MAX, comm));
        if (high[0] == 2) {
            const int first = allreduce_value(state == 2 ? comm_.rank() : comm_.size(), MPI_MIN, comm);
            throw_if_failed_anywhere(concat(who, ": rank ", first, ": ", error), first, comm);
        }
        DTRAIN_CHECK(high[0] == -high[1], who,
                     ": ranks disagree on whether to check collective calls (DTRAIN_CHECK_COLLECTIVES or "
                     "set_collective_checks): some ranks have it on, others off; set it alike on every rank");
        on_ = high[0] == 1;
    }

    CommHandle comm_;
    bool on_ = true;
};

}  // namespace dtrain::detail

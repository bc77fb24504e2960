#pragma once

/// @file
/// Choosing the communicator policy by name at run time (a command-line flag, a configuration file):
/// with_policy() turns "collective", "ring", "naive" or "async" into the policy type that
/// DistOptimizer<Policy, Opt> takes as a template argument.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <dtrain/comm/collective.hpp>
#include <dtrain/comm/naive.hpp>
#include <dtrain/comm/ring.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/distributed/async.hpp>

namespace dtrain {

/// An empty value carrying the policy type P; with_policy() passes one to its callable, which recovers the
/// type as the member `type` of `decltype(tag)`.
template <class P>
struct PolicyTag {
    /// The communicator policy (Collective, Ring, Naive or Async).
    using type = P;
};

/// The names with_policy() accepts, in this order: "collective", "ring", "naive", "async" (e.g. the
/// choices of a command-line flag).
inline const std::vector<std::string>& policy_names() {
    static const std::vector<std::string> names = {"collective", "ring", "naive", "async"};
    return names;
}

/// Calls `fn(PolicyTag<P>{})` with the policy P named by `name` ("collective": Collective, "ring": Ring,
/// "naive": Naive, "async": Async; exact, lower case) and returns what fn returns, so fn must return the
/// same type for every policy (a generic lambda usually does). Throws dtrain::Error naming `name` and
/// listing policy_names() for any other name, without calling fn.
///
/// \code
/// dtrain::with_policy(flags.comm, [&](auto tag) {
///     using Policy = typename decltype(tag)::type;
///     dtrain::DistOptimizer<Policy, dtrain::SGD<float>> opt(model, sgd);
///     ...
/// });
/// \endcode
template <class Fn>
decltype(auto) with_policy(std::string_view name, Fn&& fn) {
    const auto& names = policy_names();
    if (name == names[0]) return std::forward<Fn>(fn)(PolicyTag<Collective>{});
    if (name == names[1]) return std::forward<Fn>(fn)(PolicyTag<Ring>{});
    if (name == names[2]) return std::forward<Fn>(fn)(PolicyTag<Naive>{});
    if (name == names[3]) return std::forward<Fn>(fn)(PolicyTag<Async>{});
    std::string valid;
    for (const auto& n : names)
        valid += (valid.empty() ? "" : ", ") + n;
    throw Error(detail::concat("with_policy: unknown communicator policy '", name, "' (valid: ", valid, ")"));
}

}  // namespace dtrain

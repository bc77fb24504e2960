#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtrain {

/// The one exception type dtrain throws. Every message names the component (layer, reader, call)
/// and the values involved, so a user can tell what was wrong without a debugger.
class Error : public std::runtime_error {
public:
    /// Builds an error carrying `message`.
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {

/// Appends every argument to one string with operator<<.
template <class... Args>
std::string concat(const Args&... args) {
    std::ostringstream os;
    (os << ... << args);
    return os.str();
}

/// Formats a shape as "[a, b, c]".
template <class Shape>
std::string shape_str(const Shape& s) {
    std::ostringstream os;
    os << '[';
    bool first = true;
    for (auto v : s) {
        if (!first) os << ", ";
        os << v;
        first = false;
    }
    os << ']';
    return os.str();
}

}  // namespace detail

/// Throws dtrain::Error whose message is the concatenation of the arguments when `cond` is false.
#define DTRAIN_CHECK(cond, ...)                                                    \
    do {                                                                           \
        if (!(cond)) throw ::dtrain::Error(::dtrain::detail::concat(__VA_ARGS__)); \
    } while (0)

}  // namespace dtrain

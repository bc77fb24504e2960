#pragma once

#include <exception>
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

/// The message of the exception `e` (non-null): its what() when it derives from std::exception, otherwise
/// a sentence saying it does not, e.g. to report it on other ranks.
inline std::string exception_message(const std::exception_ptr& e) {
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& x) {
        return x.what();
    } catch (...) {
        return "an exception of a type not derived from std::exception";
    }
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

#pragma once

// Command-line handling of dtrain's example programs on CLI11 (Debian libcli11-dev): numeric checks that
// CLI11 2.1 lacks (it turns "-3" into a huge unsigned value and accepts overflow, "nan" and "inf"), and
// parsing in an MPI program: every rank parses the same argv (deterministic, so all agree), rank 0 alone
// prints --help or the error, and every rank returns the same status.

#include <charconv>
#include <cmath>
#include <functional>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <system_error>
#include <type_traits>

#include <CLI/CLI.hpp>

#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>

namespace example {

/// T, in a position where a template argument is not deduced.
template <class T>
struct same {
    using type = T;
};

/// A CLI11 check that an option's value is all a number of type T (an integer for integer types, never
/// negative for unsigned ones; finite; no overflow) in [lo, hi]. Its description ("at least 1",
/// "in [0.01, 0.9]") appears in --help; the error reads "--name: must be at least 1, got 0".
template <class T>
CLI::Validator number(T lo = std::numeric_limits<T>::lowest(), T hi = std::numeric_limits<T>::max()) {
    auto text = [](T v) {
        std::ostringstream os;
        os << v;
        return os.str();
    };
    const bool has_lo = lo != std::numeric_limits<T>::lowest(), has_hi = hi != std::numeric_limits<T>::max();
    std::string range;
    if (has_lo && has_hi)
        range = "in [" + text(lo) + ", " + text(hi) + "]";
    else if (has_lo)
        range = "at least " + text(lo);
    else if (has_hi)
        range = "at most " + text(hi);
    const std::string kind = !std::is_integral_v<T>  ? "a number"
                             : std::is_unsigned_v<T> ? "a non-negative integer"
                                                     : "an integer";
    return CLI::Validator(
        [lo, hi, range, kind](std::string& s) -> std::string {
            T v{};
            const char* end = s.data() + s.size();
            const auto r = std::from_chars(s.data(), end, v);
            bool ok = r.ec == std::errc() && r.ptr == end;
            if constexpr (std::is_floating_point_v<T>) ok = ok && std::isfinite(v);
            if (!ok) return "expects " + kind + ", got '" + s + "'";
            if (v < lo || v > hi) return "must be " + range + ", got " + s;
            return {};
        },
        range);
}

/// Declares the numeric option `name` ("--epochs") bound to `target`, whose value is the default shown by
/// --help, checked by number<T>(lo, hi).
template <class T>
CLI::Option* add_number(CLI::App& app, const std::string& name, T& target, const std::string& help,
                        typename same<T>::type lo = std::numeric_limits<T>::lowest(),
                        typename same<T>::type hi = std::numeric_limits<T>::max()) {
    return app.add_option(name, target, help)->check(number<T>(lo, hi));
}

/// A CLI11 application named `name` (as in "Usage: name [OPTIONS]") whose --help shows every option's
/// default.
class App : public CLI::App {
public:
    /// An application `name` described by `description` (printed first by --help).
    App(const std::string& name, const std::string& description) : CLI::App(description, name) {
        option_defaults()->always_capture_default();
    }
};

/// The message for arguments CLI11 did not expect: "unknown option --epoch (did you mean --epochs?)" for
/// the first unknown flag (suggesting the declared option that shares the longest prefix of at least 3
/// characters), or "unexpected argument 'x'" for a stray value.
inline std::string unexpected_message(const CLI::App& app) {
    const auto rest = app.remaining();
    const std::string arg = rest.empty() ? std::string() : rest.front();
    if (arg.compare(0, 2, "--") != 0) return "unexpected argument '" + arg + "' (see --help)";
    std::string name =
        arg.substr(2, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - 2);
    std::size_t best = 0;
    std::string pick;
    for (const CLI::Option* o : app.get_options())
        for (const auto& n : o->get_lnames()) {
            std::size_t k = 0;
            while (k < name.size() && k < n.size() && name[k] == n[k])
                ++k;
            if (k > best) best = k, pick = n;
        }
    return "unknown option --" + name + (best >= 3 ? " (did you mean --" + pick + "?)" : std::string()) +
           " (see --help)";
}

/// parse_command_line()'s result meaning "go on with the program".
inline constexpr int keep_going = -1;

/// Parses argv with `app` on every rank, then runs `check` (which throws dtrain::Error for a bad
/// combination of flags). Returns keep_going to go on, or the exit status every rank must return: 0 after
/// --help (the help printed by rank 0), 2 after a bad flag (rank 0 prints "<name>: error: <message>" naming
/// the flag).
inline int parse_command_line(CLI::App& app, int argc, char** argv, const std::function<void()>& check = {}) {
    std::string error;
    try {
        app.parse(argc, argv);
        if (check) check();
        return keep_going;
    } catch (const CLI::CallForHelp&) {
        if (dtrain::world_rank() == 0) std::cout << app.help();
        return 0;
    } catch (const CLI::ExtrasError&) {
        error = unexpected_message(app);
    } catch (const CLI::ParseError& e) {
        error = e.what();
    } catch (const dtrain::Error& e) {
        error = e.what();
    }
    if (dtrain::world_rank() == 0) std::cerr << app.get_name() << ": error: " << error << "\n";
    return 2;
}

}  // namespace example

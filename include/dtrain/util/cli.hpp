#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <dtrain/core/error.hpp>

namespace dtrain {

namespace detail {

/// Parses all of `text` as a signed integer; false on junk, an empty string or overflow.
inline bool parse_integer(const std::string& text, long long& out) {
    if (text.empty()) return false;
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (errno == ERANGE || end != text.c_str() + text.size()) return false;
    out = v;
    return true;
}

/// Parses all of `text` as an unsigned integer; false on junk, a sign, an empty string or overflow.
inline bool parse_unsigned(const std::string& text, unsigned long long& out) {
    if (text.empty() || text[0] == '-' || text[0] == '+') return false;
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    if (errno == ERANGE || end != text.c_str() + text.size()) return false;
    out = v;
    return true;
}

/// Parses all of `text` as a finite floating-point number; false on junk, an empty string or overflow.
inline bool parse_real(const std::string& text, double& out) {
    if (text.empty()) return false;
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (errno == ERANGE || end != text.c_str() + text.size() || !(v == v) ||
        v > std::numeric_limits<double>::max() || v < -std::numeric_limits<double>::max())
        return false;
    out = v;
    return true;
}

}  // namespace detail

/// A small command-line parser for dtrain's example and benchmark programs. Options are declared with
/// add() bound to a variable that already holds the default; parse() accepts `--name value`,
/// `--name=value`, boolean `--name` switches and `--help`/`-h`, and throws dtrain::Error naming the flag
/// and the value for an unknown flag, a missing value, a bad number, a value below an option's minimum or
/// outside its choices, so every rank of an MPI program fails the same way (parsing is deterministic).
///
/// \code
/// int epochs = 10; std::string comm = "collective";
/// dtrain::CommandLine cli("iris_mlp", "Trains a 4-30-20-3 MLP on Iris.");
/// cli.add("epochs", epochs, "number of passes over the training data").at_least(1);
/// cli.add("comm", comm, "communicator").choices({"collective", "ring"});
/// if (!cli.parse(argc, argv)) { if (rank == 0) cli.usage(std::cout); return 0; }  // --help
/// \endcode
class CommandLine {
public:
    /// A declared option; its setters refine validation and return the option for chaining.
    class Option {
    public:
        virtual ~Option() = default;
        /// Rejects numbers below `lo` (numeric options only).
        Option& at_least(double lo) {
            min_ = lo;
            has_min_ = true;
            return *this;
        }
        /// Rejects numbers above `hi` (numeric options only).
        Option& at_most(double hi) {
            max_ = hi;
            has_max_ = true;
            return *this;
        }
        /// Restricts a string option to one of `values`.
        Option& choices(std::vector<std::string> values) {
            choices_ = std::move(values);
            return *this;
        }
        /// The value placeholder shown by usage(), e.g. "N" or "PATH".
        Option& metavar(std::string m) {
            metavar_ = std::move(m);
            return *this;
        }

    protected:
        friend class CommandLine;
        virtual bool is_switch() const { return false; }
        virtual void set(const std::string& flag, const std::string& value) = 0;
        virtual std::string default_text() const = 0;
        void check_range(const std::string& flag, double v) const {
            DTRAIN_CHECK(!has_min_ || v >= min_, "command line: --", flag, " must be at least ", min_,
                         ", got ", v);
            DTRAIN_CHECK(!has_max_ || v <= max_, "command line: --", flag, " must be at most ", max_,
                         ", got ", v);
        }
        void check_choice(const std::string& flag, const std::string& v) const {
            if (choices_.empty()) return;
            for (const auto& c : choices_)
                if (c == v) return;
            DTRAIN_CHECK(false, "command line: --", flag, " must be one of ", choice_list(), ", got '", v,
                         "'");
        }
        std::string choice_list() const {
            std::string s;
            for (std::size_t i = 0; i < choices_.size(); ++i)
                s += (i ? "|" : "") + choices_[i];
            return s;
        }
        std::string name_;
        std::string help_;
        std::string metavar_;
        std::vector<std::string> choices_;
        double min_ = 0.0, max_ = 0.0;
        bool has_min_ = false, has_max_ = false;
    };

    /// A parser for program `program`; `description` is printed by usage().
    explicit CommandLine(std::string program, std::string description = {})
        : program_(std::move(program)), description_(std::move(description)) {}

    /// Declares `--name VALUE` bound to `target`, whose current value is the default. T is bool (a switch
    /// `--name`, also accepting `--name=true|false|1|0`), an integer type, float, double or std::string.
    /// Throws dtrain::Error when `name` was already declared.
    template <class T>
    Option& add(const std::string& name, T& target, std::string help) {
        DTRAIN_CHECK(!name.empty() && name != "help", "CommandLine::add: invalid option name '", name, "'");
        DTRAIN_CHECK(find(name) == nullptr, "CommandLine::add: option --", name, " declared twice");
        auto opt = std::make_unique<Bound<T>>(target);
        opt->name_ = name;
        opt->help_ = std::move(help);
        if constexpr (std::is_same_v<T, std::string>)
            opt->metavar_ = "STR";
        else if constexpr (std::is_floating_point_v<T>)
            opt->metavar_ = "X";
        else
            opt->metavar_ = "N";
        options_.push_back(std::move(opt));
        return *options_.back();
    }

    /// Parses argv[1..argc). Returns false when --help or -h was given (nothing else is validated then
    /// except that the flags before it parsed), true otherwise. Throws dtrain::Error on any bad input.
    bool parse(int argc, const char* const* argv) {
        for (int i = 1; i < argc; ++i) {
            const std::string arg = argv[i];
            if (arg == "--help" || arg == "-h") return false;
            DTRAIN_CHECK(arg.size() > 2 && arg.compare(0, 2, "--") == 0,
                         "command line: unexpected argument '", arg,
                         "' (options look like --name value; see --help)");
            std::string name = arg.substr(2), value;
            bool has_value = false;
            if (const auto eq = name.find('='); eq != std::string::npos) {
                value = name.substr(eq + 1);
                name.resize(eq);
                has_value = true;
            }
            Option* opt = find(name);
            DTRAIN_CHECK(opt != nullptr, "command line: unknown option --", name, suggestion(name),
                         " (see --help)");
            if (!has_value && opt->is_switch()) {
                value = "true";
            } else if (!has_value) {
                DTRAIN_CHECK(i + 1 < argc, "command line: --", name, " needs a value");
                value = argv[++i];
            }
            opt->set(name, value);
            given_.push_back(name);
        }
        return true;
    }

    /// parse() for a non-const argv.
    bool parse(int argc, char** argv) { return parse(argc, const_cast<const char* const*>(argv)); }

    /// True when `--name` appeared on the command line parsed last.
    bool given(const std::string& name) const {
        for (const auto& g : given_)
            if (g == name) return true;
        return false;
    }

    /// Writes "usage: program [options]", the description and one line per option with its default.
    void usage(std::ostream& os) const {
        os << "usage: " << program_ << " [options]\n";
        if (!description_.empty()) os << '\n' << description_ << "\n";
        os << "\noptions:\n";
        for (const auto& o : options_) {
            std::string left = "  --" + o->name_;
            if (!o->is_switch()) left += " " + (o->choices_.empty() ? o->metavar_ : o->choice_list());
            os << left;
            if (left.size() < 30)
                os << std::string(30 - left.size(), ' ');
            else
                os << "\n" << std::string(30, ' ');
            os << o->help_;
            const std::string d = o->default_text();
            if (!d.empty()) os << " (default: " << d << ")";
            os << '\n';
        }
        os << "  --help, -h                  show this help and exit\n";
    }

    /// usage() as a string.
    std::string usage() const {
        std::ostringstream os;
        usage(os);
        return os.str();
    }

private:
    template <class T>
    class Bound final : public Option {
    public:
        explicit Bound(T& t) : target_(t) {}

    private:
        bool is_switch() const override { return std::is_same_v<T, bool>; }
        void set(const std::string& flag, const std::string& value) override {
            if constexpr (std::is_same_v<T, bool>) {
                if (value == "true" || value == "1" || value == "yes")
                    target_ = true;
                else if (value == "false" || value == "0" || value == "no")
                    target_ = false;
                else
                    DTRAIN_CHECK(false, "command line: --", flag, " expects true or false, got '", value,
                                 "'");
            } else if constexpr (std::is_same_v<T, std::string>) {
                DTRAIN_CHECK(!value.empty(), "command line: --", flag, " needs a non-empty value");
                this->check_choice(flag, value);
                target_ = value;
            } else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T>) {
                unsigned long long v = 0;
                DTRAIN_CHECK(!value.empty() && value[0] != '-', "command line: --", flag,
                             " must not be negative, got ", value);
                DTRAIN_CHECK(detail::parse_unsigned(value, v), "command line: --", flag,
                             " expects a non-negative integer, got '", value, "'");
                DTRAIN_CHECK(v <= std::numeric_limits<T>::max(), "command line: --", flag, " value ", v,
                             " is out of range");
                this->check_range(flag, double(v));
                target_ = static_cast<T>(v);
            } else if constexpr (std::is_integral_v<T>) {
                long long v = 0;
                DTRAIN_CHECK(detail::parse_integer(value, v), "command line: --", flag,
                             " expects an integer, got '", value, "'");
                DTRAIN_CHECK(v >= static_cast<long long>(std::numeric_limits<T>::min()) &&
                                 v <= static_cast<long long>(std::numeric_limits<T>::max()),
                             "command line: --", flag, " value ", v, " is out of range");
                this->check_range(flag, double(v));
                target_ = static_cast<T>(v);
            } else {
                static_assert(std::is_floating_point_v<T>, "CommandLine: unsupported option type");
                double v = 0;
                DTRAIN_CHECK(detail::parse_real(value, v), "command line: --", flag,
                             " expects a number, got '", value, "'");
                this->check_range(flag, v);
                target_ = static_cast<T>(v);
            }
        }
        std::string default_text() const override {
            if constexpr (std::is_same_v<T, bool>) {
                return target_ ? "on" : "";
            } else if constexpr (std::is_same_v<T, std::string>) {
                return target_;
            } else {
                std::ostringstream os;
                os << target_;
                return os.str();
            }
        }
        T& target_;
    };

    Option* find(const std::string& name) const {
        for (const auto& o : options_)
            if (o->name_ == name) return o.get();
        return nullptr;
    }

    // " (did you mean --x?)" for the declared option sharing the longest prefix with `name`, if any.
    std::string suggestion(const std::string& name) const {
        std::size_t best = 0;
        const Option* pick = nullptr;
        for (const auto& o : options_) {
            std::size_t k = 0;
            while (k < name.size() && k < o->name_.size() && name[k] == o->name_[k])
                ++k;
            if (k > best) best = k, pick = o.get();
        }
        return pick != nullptr && best >= 3 ? " (did you mean --" + pick->name_ + "?)" : std::string();
    }

    std::string program_;
    std::string description_;
    std::vector<std::unique_ptr<Option>> options_;
    std::vector<std::string> given_;
};

}  // namespace dtrain

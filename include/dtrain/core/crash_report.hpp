#pragma once

/// @file
/// A line naming the rank and host when a process dies of a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
/// SIGABRT), so a crash among many ranks is not only the launcher's "process killed by signal 11". Installed
/// by dtrain::Environment; internals in dtrain::detail.

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include <unistd.h>

namespace dtrain::detail {

/// The signals crash reports cover.
inline constexpr int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

/// State the signal handler reads: the line's prefix and the actions it replaced.
struct CrashReportState {
    char prefix[320] = {};  ///< "dtrain: rank R of P (host H): killed by "
    struct sigaction previous[sizeof(crash_signals) / sizeof(crash_signals[0])] = {};
    bool installed = false;
};

/// The process's crash report state.
inline CrashReportState& crash_report_state() {
    static CrashReportState state;
    return state;
}

/// "SIGSEGV (invalid memory access)" for the crash signals; async-signal-safe (a string literal).
inline const char* crash_signal_name(int sig) noexcept {
    switch (sig) {
        case SIGSEGV:
            return "SIGSEGV (invalid memory access)";
        case SIGBUS:
            return "SIGBUS (bus error: misaligned access or a truncated mapped file)";
        case SIGFPE:
            return "SIGFPE (arithmetic error, e.g. an integer division by zero)";
        case SIGILL:
            return "SIGILL (illegal instruction: a binary built for another CPU?)";
        case SIGABRT:
            return "SIGABRT (abort)";
        default:
            return "a fatal signal";
    }
}

/// The handler: writes the prefix and the signal's name with write(2), restores the action it replaced and
/// raises the signal again, so the process ends as it would have (core dump, the launcher's report).
inline void crash_report_handler(int sig) noexcept {
    CrashReportState& s = crash_report_state();
    const char* name = crash_signal_name(sig);
    ssize_t ignored = ::write(2, s.prefix, std::strlen(s.prefix));
    ignored = ::write(2, name, std::strlen(name));
    ignored = ::write(2, "\n", 1);
    (void)ignored;
    for (std::size_t i = 0; i < sizeof(crash_signals) / sizeof(crash_signals[0]); ++i)
        if (crash_signals[i] == sig) sigaction(sig, &s.previous[i], nullptr);
    std::raise(sig);
}

/// Installs the crash report for this process as rank `rank` of `size` on `host`, once (later calls do
/// nothing). The handler runs on the crashing thread's stack.
inline void install_crash_report(int rank, int size, const std::string& host) {
    CrashReportState& s = crash_report_state();
    if (s.installed) return;
    s.installed = true;
    std::snprintf(s.prefix, sizeof s.prefix, "dtrain: rank %d of %d (host %s): killed by ", rank, size,
                  host.c_str());
    for (std::size_t i = 0; i < sizeof(crash_signals) / sizeof(crash_signals[0]); ++i) {
        struct sigaction action = {};
        action.sa_handler = [](int sig) { crash_report_handler(sig); };
        sigemptyset(&action.sa_mask);
        action.sa_flags = SA_RESETHAND;
        sigaction(crash_signals[i], &action, &s.previous[i]);
    }
}

}  // namespace dtrain::detail

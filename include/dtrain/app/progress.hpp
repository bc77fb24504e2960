#pragma once

/// @file
/// A live one-line progress bar for training programs (application helper, target dtrain::app).

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <ostream>
#include <string>

#include <unistd.h>

namespace dtrain {

/// True when the C stdout stream is a terminal (isatty), i.e. a live progress bar makes sense. False when
/// stdout goes to a file, a pipe, CI logs or through mpiexec's output forwarding to a non-terminal.
inline bool stdout_is_terminal() {
    return ::isatty(::fileno(stdout)) == 1;
}

/// Formats a duration in seconds as "1h02m03s", "2m05s" or "7.3s".
inline std::string format_duration(double seconds) {
    if (!(seconds >= 0.0)) seconds = 0.0;
    char buf[32];
    const long s = static_cast<long>(seconds + 0.5);
    if (s >= 3600)
        std::snprintf(buf, sizeof buf, "%ldh%02ldm%02lds", s / 3600, (s / 60) % 60, s % 60);
    else if (s >= 60)
        std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
    else
        std::snprintf(buf, sizeof buf, "%.1fs", seconds);
    return buf;
}

/// A live one-line progress bar for the batches of one epoch, redrawn in place with '\r':
///
///     epoch 3/10 [=========>          ] batch 412/938 loss 0.3121 acc 88.72% 5321 samples/s ETA 9.8s
///
/// It draws only when live (by default: when stdout is a terminal, see stdout_is_terminal()), so programs
/// call it unconditionally and get plain one-line-per-epoch output in logs. Redraws are throttled (at most
/// every `min_interval` seconds, plus the last batch), so calling update() every batch costs a clock read;
/// only a redraw formats text. Not thread-safe; use it from one thread of one rank (rank 0).
class ProgressBar {
public:
    /// A bar writing to `os`, drawing only when `live` (default: stdout is a terminal), redrawing at most
    /// every `min_interval` seconds.
    explicit ProgressBar(std::ostream& os, bool live = stdout_is_terminal(), double min_interval = 0.1)
        : os_(&os), live_(live), min_interval_(min_interval) {}

    /// True when the bar draws.
    bool live() const { return live_; }

    /// Starts epoch `epoch` (1-based) of `epochs`, with `batches` batches; resets counters and the clock.
    void start(std::size_t epoch, std::size_t epochs, std::size_t batches) {
        epoch_ = epoch;
        epochs_ = epochs;
        batches_ = batches;
        start_ = Clock::now();
        last_draw_ = start_;
        drawn_ = false;
    }

    /// Reports that batch `done` (1-based) of the epoch finished, with the running mean loss, running
    /// accuracy in [0, 1] and the number of samples processed so far in this epoch (by this rank). Redraws
    /// when live and the throttle interval passed or this is the last batch.
    void update(std::size_t done, double loss, double accuracy, std::size_t samples) {
        if (!live_) return;
        const auto now = Clock::now();
        const double since = std::chrono::duration<double>(now - last_draw_).count();
        if (drawn_ && since < min_interval_ && done < batches_) return;
        last_draw_ = now;
        drawn_ = true;
        const double elapsed = std::chrono::duration<double>(now - start_).count();
        *os_ << '\r' << render(done, loss, accuracy, samples, elapsed) << "\x1b[K" << std::flush;
    }

    /// Ends the epoch's bar: clears the line when live so the caller's one-line epoch summary replaces it.
    void finish() {
        if (live_ && drawn_) *os_ << "\r\x1b[K" << std::flush;
        drawn_ = false;
    }

    /// The bar's text for the given state (no '\r', no escape codes); exposed for tests and custom output.
    std::string render(std::size_t done, double loss, double accuracy, std::size_t samples,
                       double elapsed) const {
        constexpr int width = 20;
        const double frac = batches_ ? double(done) / double(batches_) : 1.0;
        const int filled = static_cast<int>(frac * width + 1e-9);
        char bar[width + 1];
        for (int i = 0; i < width; ++i)
            bar[i] = i < filled ? '=' : (i == filled ? '>' : ' ');
        bar[width] = '\0';
        const double rate = elapsed > 0.0 ? double(samples) / elapsed : 0.0;
        const double eta =
            done > 0 && batches_ > done ? elapsed / double(done) * double(batches_ - done) : 0.0;
        char line[256];
        std::snprintf(
            line, sizeof line, "epoch %zu/%zu [%s] batch %zu/%zu loss %.4f acc %.2f%% %.0f samples/s ETA %s",
            epoch_, epochs_, bar, done, batches_, loss, 100.0 * accuracy, rate, format_duration(eta).c_str());
        return line;
    }

private:
    using Clock = std::chrono::steady_clock;
    std::ostream* os_;
    bool live_;
    double min_interval_;
    std::size_t epoch_ = 0, epochs_ = 0, batches_ = 0;
    Clock::time_point start_{}, last_draw_{};
    bool drawn_ = false;
};

}  // namespace dtrain

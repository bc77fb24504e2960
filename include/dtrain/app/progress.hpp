#pragma once

/// @file
/// A live one-line progress bar for training programs (application helper, target dtrain::app).

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <string>

#include <dtrain/core/error.hpp>

#include <mpi.h>
#include <unistd.h>

namespace dtrain {

/// True when the C stdout stream is a terminal (isatty), i.e. a live progress bar makes sense. False when
/// stdout goes to a file, a pipe, CI logs or through mpiexec's output forwarding (see
/// output_is_interactive()).
inline bool stdout_is_terminal() {
    return ::isatty(::fileno(stdout)) == 1;
}

namespace detail {

/// The parent process id of `pid` from /proc (0 when it cannot be read).
inline long parent_pid(long pid) {
    const std::string stat = "/proc/" + std::to_string(pid) + "/stat";
    std::FILE* f = std::fopen(stat.c_str(), "r");
    if (f == nullptr) return 0;
    char buf[512] = {};
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so parse after the last ')'.
    const char* close = std::strrchr(buf, ')');
    if (close == nullptr || std::size_t(close - buf) >= n) return 0;
    long ppid = 0;
    return std::sscanf(close + 1, " %*c %ld", &ppid) == 1 ? ppid : 0;
}

/// True when process `pid` is an MPI launcher (mpiexec, mpirun, orterun, prterun and their .mpich / .openmpi
/// / .hydra names) or Open MPI's per-host daemon (orted, prted), whose stdout the rank's output goes to.
inline bool is_launcher(long pid) {
    const std::string comm_path = "/proc/" + std::to_string(pid) + "/comm";
    std::FILE* f = std::fopen(comm_path.c_str(), "r");
    if (f == nullptr) return false;
    char comm[64] = {};
    const bool ok = std::fgets(comm, sizeof comm, f) != nullptr;
    std::fclose(f);
    if (!ok) return false;
    for (const char* name : {"mpiexec", "mpirun", "orterun", "prterun", "orted", "prted"})
        if (std::strncmp(comm, name, std::strlen(name)) == 0) return true;
    return false;
}

/// True when file descriptor 1 of process `pid` is a terminal device (/dev/pts/N, /dev/ttyN, /dev/console).
inline bool stdout_of_is_terminal(long pid) {
    const std::string fd = "/proc/" + std::to_string(pid) + "/fd/1";
    char target[256] = {};
    const ssize_t n = ::readlink(fd.c_str(), target, sizeof target - 1);
    if (n <= 0) return false;
    const std::string t(target, std::size_t(n));
    return t.rfind("/dev/pts/", 0) == 0 || t.rfind("/dev/tty", 0) == 0 || t == "/dev/console";
}

/// This process's rank in MPI_COMM_WORLD, or 0 when MPI is not initialized (or already finalized), so that
/// a program without MPI draws its bar.
inline int world_rank_or_zero() {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized) return 0;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

}  // namespace detail

/// True when what this process prints reaches a person at a terminal. When the process was started
/// (directly or through a proxy such as hydra_pmi_proxy, up to 4 generations) by an MPI launcher, the
/// launcher's own stdout decides: the launcher forwards the ranks' output there, and Open MPI gives each rank
/// a pseudo-terminal of its own even when the job's output goes to a file, so the rank's isatty() says
/// nothing. Otherwise stdout_is_terminal(). False in batch jobs and logs (output redirected to a file or a
/// pipe), and for ranks on another host than the launcher (their ancestors are the remote daemon's, whose
/// stdout is no terminal). Reads /proc (Linux); elsewhere stdout_is_terminal().
inline bool output_is_interactive() {
    long pid = long(::getppid());
    for (int generation = 0; generation < 4 && pid > 1; ++generation) {
        if (detail::is_launcher(pid)) return detail::stdout_of_is_terminal(pid);
        pid = detail::parent_pid(pid);
    }
    return stdout_is_terminal();
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

/// Which ranks of a job draw a ProgressBar.
enum class DrawOn {
    /// Only the process whose rank is 0 (the default): one bar per job. Every rank may construct and update
    /// the bar; on the others it writes nothing.
    RankZero,
    /// Every rank, each line starting with "rank N: ". For streams of their own per rank (a file each); on
    /// one shared terminal the ranks' bars overwrite and interleave with each other.
    EveryRank,
};

/// A live one-line progress bar for the batches of one epoch, redrawn in place (each redraw starts with a
/// carriage return):
///
///     epoch 3/10 [=========>          ] batch 412/938 loss 0.3121 acc 88.72% 5321 samples/s ETA 9.8s
///
/// It draws only when live (by default: when the output reaches a terminal, also through mpiexec; see
/// output_is_interactive()) and only on rank 0 (DrawOn::RankZero; the bar knows its rank, by default this
/// process's rank in MPI_COMM_WORLD), so programs construct and update it unconditionally on every rank and
/// get one bar per job on a terminal and plain one-line-per-epoch output in logs. Redraws are throttled (at
/// most every `min_interval` seconds, plus the last batch), so calling update() every batch costs a clock
/// read; only a redraw formats text. Not thread-safe; use each bar from one thread.
class ProgressBar {
public:
    /// A bar writing to `os`, redrawing at most every `min_interval` seconds. It draws when `live`
    /// (default: output_is_interactive()) and `draw_on` selects this process: DrawOn::RankZero (default)
    /// draws only where `rank` is 0, DrawOn::EveryRank everywhere. `rank` defaults to this process's rank in
    /// MPI_COMM_WORLD (0 without MPI); pass the rank among the processes that train when they are not all
    /// of MPI_COMM_WORLD (e.g. a worker rank next to parameter servers), so that the first of them draws.
    /// Throws dtrain::Error when `min_interval` is negative or not a number, or `rank` is negative.
    explicit ProgressBar(std::ostream& os, bool live = output_is_interactive(), double min_interval = 0.1,
                         DrawOn draw_on = DrawOn::RankZero, int rank = detail::world_rank_or_zero())
        : os_(&os),
          live_(live && (draw_on == DrawOn::EveryRank || rank == 0)),
          min_interval_(min_interval),
          draw_on_(draw_on),
          rank_(rank) {
        DTRAIN_CHECK(min_interval >= 0.0, "ProgressBar: min_interval must be >= 0 seconds, got ",
                     min_interval);
        DTRAIN_CHECK(rank >= 0, "ProgressBar: rank must be >= 0, got ", rank,
                     " (pass the process's rank among the ranks that train)");
    }

    /// True when the bar draws on this rank: it is live and `draw_on` selects this rank.
    bool live() const { return live_; }

    /// The rank the bar was constructed for (by default this process's rank in MPI_COMM_WORLD).
    int rank() const { return rank_; }

    /// Which ranks draw (DrawOn::RankZero unless the constructor was told otherwise).
    DrawOn draw_on() const { return draw_on_; }

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
    /// accuracy in [0, 1] and the number of samples processed so far in this epoch by ALL ranks (in data-
    /// parallel training with equal shards: this rank's count times the number of workers), so that the
    /// bar's samples/s is the job's, as in the epoch summary. Redraws when live and the throttle interval
    /// passed or this is the last batch.
    void update(std::size_t done, double loss, double accuracy, std::size_t samples) {
        if (!live_) return;
        const auto now = Clock::now();
        const double since = std::chrono::duration<double>(now - last_draw_).count();
        if (drawn_ && since < min_interval_ && done < batches_) return;
        last_draw_ = now;
        drawn_ = true;
        const double elapsed = std::chrono::duration<double>(now - start_).count();
        *os_ << '\r';
        if (draw_on_ == DrawOn::EveryRank) *os_ << "rank " << rank_ << ": ";
        *os_ << render(done, loss, accuracy, samples, elapsed) << "\x1b[K" << std::flush;
    }

    /// Ends the epoch's bar: clears the line when live so the caller's one-line epoch summary replaces it.
    void finish() {
        if (live_ && drawn_) *os_ << "\r\x1b[K" << std::flush;
        drawn_ = false;
    }

    /// The bar's text for the given state (no carriage return, no escape codes); exposed for tests and
    /// custom output.
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
    DrawOn draw_on_;
    int rank_;
    std::size_t epoch_ = 0, epochs_ = 0, batches_ = 0;
    Clock::time_point start_{}, last_draw_{};
    bool drawn_ = false;
};

}  // namespace dtrain

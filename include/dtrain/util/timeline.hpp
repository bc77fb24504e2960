#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <mpi.h>

#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/operation.hpp>

namespace dtrain {

/// One recorded interval of a Timeline: a Chrome trace "complete" event on this rank.
struct TimelineEvent {
    /// Event name (a string with static storage duration, e.g. a literal): "forward", "allreduce", ...
    const char* name = nullptr;
    /// Category (static string): "compute", "comm", "data", "optim", ...
    const char* category = nullptr;
    /// Name of the optional integer argument (static string), or nullptr for none.
    const char* arg_name = nullptr;
    /// The optional integer argument, e.g. a bucket index or a byte count.
    std::int64_t arg = 0;
    /// Start, in microseconds since the timeline was enabled.
    std::int64_t start_us = 0;
    /// Duration in microseconds; negative while the event is still open.
    std::int64_t duration_us = -1;
    /// Small per-process thread number (0 = the first thread that recorded).
    std::int32_t thread = 0;
};

/// A per-process recorder of timed intervals (forward, backward, each bucket's all-reduce, optimizer
/// step, data loading), written as one Chrome trace JSON file for all ranks (pid = rank, one process row
/// per rank), viewable in Perfetto (ui.perfetto.dev) or chrome://tracing, like Horovod's timeline.
///
/// Recording is off until enable(), which preallocates storage for `capacity` events; begin()/end() then
/// only read the steady clock and fill a preallocated slot (no allocation, no lock; safe from several
/// threads of one process). When disabled, begin() is one atomic load. When the storage is full further
/// events are dropped and counted (dropped()); write() reports the count in the file. Library components
/// record into the process-wide instance timeline() without knowing whether anyone enabled it.
///
/// \code
/// dtrain::timeline().enable(1 << 18, MPI_COMM_WORLD);          // collective: aligns rank clocks
/// { dtrain::TimelineScope s("forward", "compute"); model.forward(x); }
/// dtrain::timeline().write("trace.json", MPI_COMM_WORLD);        // collective: rank 0 writes the file
/// \endcode
class Timeline {
public:
    /// Identifies an open event; `none` when nothing was recorded (disabled or full).
    using Handle = std::size_t;
    /// The handle of an event that was not recorded; end(none) does nothing.
    static constexpr Handle none = std::numeric_limits<std::size_t>::max();

    /// A disabled timeline.
    Timeline() = default;
    Timeline(const Timeline&) = delete;
    Timeline& operator=(const Timeline&) = delete;

    /// Starts recording into fresh storage for `capacity` events (previous events are discarded); time 0
    /// is now. Not collective. Call it before any other thread records.
    void enable(std::size_t capacity = std::size_t(1) << 18) {
        DTRAIN_CHECK(capacity > 0, "Timeline::enable: capacity must be positive");
        enabled_.store(false);
        events_.assign(capacity, TimelineEvent{});
        count_.store(0);
        dropped_.store(0);
        origin_ = Clock::now();
        enabled_.store(true, std::memory_order_release);
    }

    /// Collective over `comm`: a barrier, then enable(capacity), so time 0 is (nearly) the same instant on
    /// every rank and the rows of the merged trace line up even across nodes. The barrier is the operation
    /// "Timeline::enable" for the stall watchdog (DTRAIN_STALL_TIMEOUT).
    void enable(std::size_t capacity, MPI_Comm comm) {
        {
            OperationScope op("Timeline::enable", comm);
            DTRAIN_MPI_CHECK(MPI_Barrier(comm));
        }
        enable(capacity);
    }

    /// Stops recording; recorded events are kept for write().
    void disable() { enabled_.store(false, std::memory_order_release); }

    /// True while recording.
    bool enabled() const { return enabled_.load(std::memory_order_acquire); }

    /// Microseconds since enable() on the steady clock.
    std::int64_t now_us() const {
        return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - origin_).count();
    }

    /// Opens an event `name` of `category` (both strings with static storage duration) with an optional
    /// integer argument; returns its handle for end(), or `none` when disabled or full. Never allocates.
    Handle begin(const char* name, const char* category, const char* arg_name = nullptr,
                 std::int64_t arg = 0) noexcept {
        if (!enabled()) return none;
        const std::size_t i = count_.fetch_add(1, std::memory_order_relaxed);
        if (i >= events_.size()) {
            count_.fetch_sub(1, std::memory_order_relaxed);
            dropped_.fetch_add(1, std::memory_order_relaxed);
            return none;
        }
        TimelineEvent& e = events_[i];
        e.name = name;
        e.category = category;
        e.arg_name = arg_name;
        e.arg = arg;
        e.thread = thread_number();
        e.duration_us = -1;
        e.start_us = now_us();
        return i;
    }

    /// Closes the event `h` returned by begin() (does nothing for `none`).
    void end(Handle h) noexcept {
        if (h == none || h >= events_.size()) return;
        const std::int64_t t = now_us();
        TimelineEvent& e = events_[h];
        e.duration_us = t > e.start_us ? t - e.start_us : 0;
    }

    /// Records an already finished interval [start_us, end_us] (times from now_us()), e.g. a non-blocking
    /// all-reduce from its start to the wait that completed it. Never allocates.
    void complete(const char* name, const char* category, std::int64_t start_us, std::int64_t end_us,
                  const char* arg_name = nullptr, std::int64_t arg = 0) noexcept {
        const Handle h = begin(name, category, arg_name, arg);
        if (h == none) return;
        events_[h].start_us = start_us;
        events_[h].duration_us = end_us > start_us ? end_us - start_us : 0;
    }

    /// Number of events recorded since enable() (open ones included).
    std::size_t size() const {
        const std::size_t n = count_.load(std::memory_order_acquire);
        return n < events_.size() ? n : events_.size();
    }
    /// Number of events dropped because the storage was full.
    std::size_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
    /// Event `i` < size().
    const TimelineEvent& event(std::size_t i) const {
        DTRAIN_CHECK(i < size(), "Timeline::event: index ", i, " out of range (", size(), " events)");
        return events_[i];
    }

    /// This rank's finished events as comma-separated Chrome trace JSON objects with pid `pid`, preceded
    /// by process name/sort metadata ("rank <pid>"). Events still open are left out.
    std::string json_events(int pid) const {
        std::string out;
        out.reserve(size() * 110 + 256);
        const std::string p = std::to_string(pid);
        out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + p +
               ",\"tid\":0,\"args\":{\"name\":\"rank " + p +
               "\"}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" + p +
               ",\"tid\":0,\"args\":{\"sort_index\":" + p + "}}";
        const std::size_t n = size();
        for (std::size_t i = 0; i < n; ++i) {
            const TimelineEvent& e = events_[i];
            if (e.duration_us < 0 || e.name == nullptr) continue;
            out += ",\n{\"name\":";
            append_json_string(out, e.name);
            out += ",\"cat\":";
            append_json_string(out, e.category ? e.category : "");
            out += ",\"ph\":\"X\",\"ts\":" + std::to_string(e.start_us) +
                   ",\"dur\":" + std::to_string(e.duration_us) + ",\"pid\":" + p +
                   ",\"tid\":" + std::to_string(e.thread);
            if (e.arg_name != nullptr) {
                out += ",\"args\":{";
                append_json_string(out, e.arg_name);
                out += ":" + std::to_string(e.arg) + "}";
            }
            out += "}";
        }
        return out;
    }

    /// Collective over `comm`: gathers every rank's events to rank 0 of `comm`, which writes one Chrome
    /// trace JSON file at `path` ({"traceEvents": [...]}, pid = rank in `comm`, timestamps in us). Throws
    /// dtrain::Error on every rank when rank 0 cannot write the file, or when the events of all ranks
    /// together exceed the 2 GiB that MPI's int counts can gather. The whole call is the operation
    /// "Timeline::write" for the stall watchdog (DTRAIN_STALL_TIMEOUT).
    void write(const std::string& path, MPI_Comm comm = MPI_COMM_WORLD) const {
        OperationScope op("Timeline::write", comm);
        const int rank = comm_rank(comm), size = comm_size(comm);
        const std::string mine = json_events(rank);
        // Every rank checks the total, so a trace too large fails everywhere instead of leaving the other
        // ranks waiting in the gather.
        const unsigned long long here = mine.size(), limit = std::numeric_limits<int>::max();
        unsigned long long total = 0;
        DTRAIN_MPI_CHECK(MPI_Allreduce(&here, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm));
        DTRAIN_CHECK(total < limit, "Timeline::write: the trace is too large to gather (", total,
                     " bytes of events over ", size, " rank(s), ", here, " on rank ", rank, "; at most ",
                     limit - 1, " bytes can be gathered)");
        const int len = int(mine.size());
        std::vector<int> lens(rank == 0 ? std::size_t(size) : 0), displs(lens.size());
        DTRAIN_MPI_CHECK(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, comm));
        long long dropped_here = static_cast<long long>(dropped()), dropped_all = 0;
        DTRAIN_MPI_CHECK(MPI_Reduce(&dropped_here, &dropped_all, 1, MPI_LONG_LONG, MPI_SUM, 0, comm));
        std::string all;
        if (rank == 0) {
            int offset = 0;  // below the limit: checked above
            for (int r = 0; r < size; ++r) {
                displs[std::size_t(r)] = offset;
                offset += lens[std::size_t(r)];
            }
            all.resize(std::size_t(offset));
        }
        DTRAIN_MPI_CHECK(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(),
                                     MPI_CHAR, 0, comm));
        std::string error;
        if (rank == 0) {
            std::ofstream f(path, std::ios::binary);
            if (f) {
                f << "{\"traceEvents\":[\n";
                bool first = true;
                for (int r = 0; r < size; ++r) {
                    if (lens[std::size_t(r)] == 0) continue;
                    if (!first) f << ",\n";
                    f.write(all.data() + displs[std::size_t(r)], lens[std::size_t(r)]);
                    first = false;
                }
                f << "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"dtrain\",\"ranks\":"
                  << size << ",\"dropped_events\":" << dropped_all << "}}\n";
                f.flush();
            }
            if (!f) error = detail::concat("Timeline::write: cannot write the trace file '", path, "'");
        }
        detail::throw_if_failed_anywhere(std::move(error), 0, comm);
    }

private:
    using Clock = std::chrono::steady_clock;

    static std::int32_t thread_number() noexcept {
        static std::atomic<std::int32_t> next{0};
        thread_local const std::int32_t mine = next.fetch_add(1, std::memory_order_relaxed);
        return mine;
    }

    static void append_json_string(std::string& out, const char* s) {
        out += '"';
        for (; *s; ++s) {
            const unsigned char c = static_cast<unsigned char>(*s);
            if (c == '"' || c == '\\') {
                out += '\\';
                out += char(c);
            } else if (c < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
            } else {
                out += char(c);
            }
        }
        out += '"';
    }

    std::vector<TimelineEvent> events_;
    std::atomic<std::size_t> count_{0};
    std::atomic<std::size_t> dropped_{0};
    std::atomic<bool> enabled_{false};
    Clock::time_point origin_ = Clock::now();
};

/// The process-wide timeline that dtrain's components (DistOptimizer's bucket all-reduces) and programs
/// record into; disabled until someone calls timeline().enable().
inline Timeline& timeline() {
    static Timeline instance;
    return instance;
}

/// RAII interval: begins an event on construction and ends it on destruction (a no-op when the timeline
/// is disabled). `name`, `category` and `arg_name` must have static storage duration.
class TimelineScope {
public:
    /// Begins `name` of `category` on `t` (default: the process-wide timeline()).
    TimelineScope(const char* name, const char* category, const char* arg_name = nullptr,
                  std::int64_t arg = 0, Timeline& t = timeline()) noexcept
        : t_(t), h_(t.begin(name, category, arg_name, arg)) {}
    TimelineScope(const TimelineScope&) = delete;
    TimelineScope& operator=(const TimelineScope&) = delete;
    /// Ends the event.
    ~TimelineScope() { t_.end(h_); }

private:
    Timeline& t_;
    Timeline::Handle h_;
};

}  // namespace dtrain

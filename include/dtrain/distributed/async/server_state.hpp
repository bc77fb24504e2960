#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include <dtrain/core/error.hpp>

namespace dtrain::detail {

/// What a parameter server knows about one worker during a run.
struct WorkerRecord {
    /// Gradients received from the worker in this run (its clock: the next step it will send).
    std::uint64_t clock = 0;
    /// The server's version (updates applied) when the worker last received the parameters.
    std::uint64_t read_version = 0;
    /// Receive slot that holds its gradient until the averaged round completes (-1: none).
    int held_slot = -1;
    /// The worker sent 'done'; it sends nothing more.
    bool done = false;
    /// Its latest gradient was taken and it waits for the parameters.
    bool waiting = false;
    /// Its reply is withheld by the staleness bound and was counted as such.
    bool withheld = false;
    /// A reply to it was sent and not yet seen delivered.
    bool reply_in_flight = false;
};

/// The parameter server's state machine, without MPI or buffers: one WorkerRecord per worker, the server's
/// version and the rules of the protocol (DistOptimizer<Async, Opt> drives it; tests drive it directly).
///
/// Events: gradient() when a worker's gradient of a step arrives, done() when it ends, delivered() when a
/// reply was delivered. Decisions: with `averaging` (staleness 0 or average_rounds), round_ready() says when
/// every unfinished worker's gradient is in, so the server averages them, applies ONE update (updated())
/// and replies to all; otherwise the server applies each gradient at once (updated()) and replies to every
/// waiting worker for which may_reply() holds (at most `staleness` steps ahead of the slowest unfinished
/// worker), withholding the others (withhold()) until the slowest catches up. finished() says when the
/// run is over: every worker done and every reply delivered. Protocol violations throw dtrain::Error.
class ServerState {
public:
    /// A server for `workers` workers with the staleness bound `staleness`.
    ServerState(std::size_t workers, std::uint64_t staleness, bool averaging)
        : records_(workers), staleness_(staleness), averaging_(averaging) {
        start_run();
    }

    /// Forgets the previous run: every worker at clock 0, active and not waiting.
    void start_run() {
        std::fill(records_.begin(), records_.end(), WorkerRecord{});
        version_ = 0;
        active_ = records_.size();
    }

    /// Worker `w`'s gradient of step `step` arrived (held in receive slot `slot` when averaging). Returns
    /// its delay: the updates applied since the worker read the parameters. Throws dtrain::Error when the
    /// worker is done or waiting, or the step is not its clock (the message names `server`).
    std::uint64_t gradient(std::size_t w, std::uint64_t step, int slot, int server) {
        WorkerRecord& r = record(w, server);
        DTRAIN_CHECK(!r.done && !r.waiting && step == r.clock, "DistOptimizer<Async>: master ", server,
                     " got step ", step, " from worker ", w, " whose clock is ", r.clock,
                     r.done ? " and which is done" : "", r.waiting ? " and which waits for its reply" : "",
                     " (protocol error)");
        ++r.clock;
        r.waiting = true;
        if (averaging_) r.held_slot = slot;
        return version_ - r.read_version;
    }

    /// Worker `w` is done after `steps` steps. Throws dtrain::Error unless it is active, not waiting, and
    /// `steps` is its clock.
    void done(std::size_t w, std::uint64_t steps, int server) {
        WorkerRecord& r = record(w, server);
        DTRAIN_CHECK(!r.done && !r.waiting && steps == r.clock, "DistOptimizer<Async>: master ", server,
                     " got 'done' after ", steps, " steps from worker ", w, " whose clock is ", r.clock,
                     " (protocol error)");
        r.done = true;
        --active_;
    }

    /// The reply to worker `w` was delivered.
    void delivered(std::size_t w) { records_[w].reply_in_flight = false; }

    /// One update was applied to the server's parameters.
    void updated() noexcept { ++version_; }

    /// Averaging: true when every unfinished worker is waiting and at least one is.
    bool round_ready() const noexcept {
        std::size_t waiting = 0;
        for (const WorkerRecord& r : records_) {
            if (r.done) continue;
            if (!r.waiting) return false;
            ++waiting;
        }
        return waiting > 0;
    }

    /// True when worker `w` waits and is at most `staleness` steps ahead of the slowest unfinished worker.
    bool may_reply(std::size_t w) const noexcept {
        return records_[w].waiting &&
               records_[w].clock - std::min(slowest(), records_[w].clock) <= staleness_;
    }

    /// Worker `w` waits but may not be replied to yet. Returns true the first time for this reply (to count
    /// withheld replies once).
    bool withhold(std::size_t w) noexcept {
        const bool first = !records_[w].withheld;
        records_[w].withheld = true;
        return first;
    }

    /// A reply with the current parameters goes to worker `w`: it stops waiting and reads this version.
    /// Returns its clock gap (clock minus the slowest unfinished worker's), for statistics.
    std::uint64_t replied(std::size_t w) noexcept {
        WorkerRecord& r = records_[w];
        r.waiting = false;
        r.withheld = false;
        r.reply_in_flight = true;
        r.held_slot = -1;
        r.read_version = version_;
        return r.clock - std::min(slowest(), r.clock);
    }

    /// The smallest clock of an unfinished worker (the largest value when every worker is done).
    std::uint64_t slowest() const noexcept {
        std::uint64_t m = std::numeric_limits<std::uint64_t>::max();
        for (const WorkerRecord& r : records_)
            if (!r.done) m = std::min(m, r.clock);
        return m;
    }

    /// True once every worker is done and no reply is in flight: the run is over for this server.
    bool finished() const noexcept {
        return active_ == 0 && std::none_of(records_.begin(), records_.end(),
                                            [](const WorkerRecord& r) { return r.reply_in_flight; });
    }

    /// Number of workers not done yet.
    std::size_t active() const noexcept { return active_; }
    /// Updates applied in this run.
    std::uint64_t version() const noexcept { return version_; }
    /// Number of workers.
    std::size_t workers() const noexcept { return records_.size(); }
    /// Worker `w`'s record.
    const WorkerRecord& worker(std::size_t w) const { return records_.at(w); }
    /// True when rounds are averaged.
    bool averaging() const noexcept { return averaging_; }

private:
    WorkerRecord& record(std::size_t w, int server) {
        DTRAIN_CHECK(w < records_.size(), "DistOptimizer<Async>: master ", server,
                     " got a message from worker ", w, ", but there are ", records_.size(),
                     " workers (protocol error)");
        return records_[w];
    }

    std::vector<WorkerRecord> records_;
    std::uint64_t staleness_;
    bool averaging_;
    std::uint64_t version_ = 0;
    std::size_t active_ = 0;
};

}  // namespace dtrain::detail

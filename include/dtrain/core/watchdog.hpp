#pragma once

/// @file
/// The stall watchdog: a thread per process (started by dtrain::Environment) that ends the job, with a
/// message naming the operation, the step and the ranks that did not arrive, when this rank has waited in a
/// dtrain operation longer than the stall timeout, or when a rank it waits for has left the job.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <mpi.h>

#include <dtrain/core/abort.hpp>
#include <dtrain/core/error.hpp>
#include <dtrain/core/operation.hpp>

namespace dtrain {

namespace detail {

/// True when world rank `world` belongs to `comm` (or `comm` is not known). Requires the frame's owner to
/// keep `comm` alive (the record's mutex held).
inline bool comm_has_world_rank(MPI_Comm comm, int world) {
    if (comm == MPI_COMM_NULL) return true;
    MPI_Group group = MPI_GROUP_NULL, world_group = MPI_GROUP_NULL;
    int mapped = MPI_UNDEFINED;
    if (MPI_Comm_group(comm, &group) == MPI_SUCCESS &&
        MPI_Comm_group(MPI_COMM_WORLD, &world_group) == MPI_SUCCESS)
        MPI_Group_translate_ranks(world_group, 1, &world, group, &mapped);
    if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
    if (world_group != MPI_GROUP_NULL) MPI_Group_free(&world_group);
    return mapped != MPI_UNDEFINED;
}

}  // namespace detail

/// The stall watchdog of one process. Environment starts it on a private duplicate of MPI_COMM_WORLD when MPI
/// provides MPI_THREAD_MULTIPLE and the stall timeout is not 0. Every `tick` it answers other ranks'
/// questions ("what are you doing?") and looks at this process's OperationRecord:
/// - after half the timeout in one wait it asks every rank what it is doing (a census) and prints a warning;
/// - after the whole timeout it asks again and ends the job (MPI_Abort) with "rank R has waited T s in
///   <operation> (step S); ranks that did not arrive: ...", each other rank's state (in which operation, for
///   how long; or "did not answer": stopped or dead). A rank has arrived when its outermost operation (with
///   its step) is this rank's, whatever it waits for inside it;
/// - when a rank of the communicator it waits on has left the job (its Environment ended: it returned from
///   main, possibly after catching an error) and the wait has not ended a few seconds later, it ends the job
///   naming that rank.
/// The timeout of the innermost OperationScope that sets one wins over `timeout`.
class Watchdog {
public:
    /// Message tags on the private communicator.
    enum class Tag : int { Question = 1, Answer = 2, Leaving = 3 };

    Watchdog() = default;
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;
    /// Stops the thread.
    ~Watchdog() { stop(); }

    /// Starts watching with the default `timeout` (seconds) on `control`, a communicator over the same
    /// processes as MPI_COMM_WORLD that nobody else uses.
    void start(MPI_Comm control, double timeout) {
        control_ = control;
        timeout_ = timeout;
        MPI_Comm_rank(control, &rank_);
        MPI_Comm_size(control, &size_);
        departed_.assign(std::size_t(size_), -1.0);
        stop_ = false;
        thread_ = std::thread([this] { loop(); });
    }

    /// The ranks' host names, by rank, for the stall messages (thread-safe; may come after start()).
    void set_hosts(std::vector<std::string> hosts) {
        std::lock_guard<std::mutex> lock(hosts_mutex_);
        hosts_ = std::move(hosts);
    }

    /// Stops and joins the thread (answers nothing after).
    void stop() noexcept {
        if (!thread_.joinable()) return;
        stop_ = true;
        thread_.join();
    }

    /// Tells every other rank's watchdog that this rank leaves the job, then answers their questions until
    /// every other rank has said the same or `max_seconds` have passed, so no message is left unreceived when
    /// MPI finalizes. Returns "" when every rank said it leaves; otherwise asks the others what they do and
    /// returns "rank 0 (host a) left main and has waited 4.0 s in MPI_Finalize for rank 1; rank 1 (host b)
    /// did not answer (stopped or dead)", for the caller to end the job with. `hosts` are the ranks' host
    /// names (may be empty). Call after stop(), before MPI_Finalize.
    std::string leave(double max_seconds, const std::vector<std::string>& hosts = {}) noexcept {
        if (control_ == MPI_COMM_NULL) return "";
        leaving_ = true;
        int none = 0;
        for (int r = 0; r < size_; ++r) {
            if (r == rank_) continue;
            MPI_Request req;
            if (MPI_Isend(&none, 1, MPI_INT, r, int(Tag::Leaving), control_, &req) == MPI_SUCCESS)
                MPI_Request_free(&req);
        }
        const double start = detail::steady_seconds(), end = start + max_seconds;
        const auto all_left = [&] {
            return std::count_if(departed_.begin(), departed_.end(), [](double t) { return t >= 0; }) >=
                   size_ - 1;
        };
        try {
            while (detail::steady_seconds() < end && !all_left()) {
                serve();
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
            if (all_left()) return "";
            const std::vector<std::string> answers = census();
            const auto host = [&](int r) {
                return std::size_t(r) < hosts.size() ? detail::concat(" (host ", hosts[std::size_t(r)], ")")
                                                     : std::string();
            };
            std::string late, states;
            for (int r = 0; r < size_; ++r) {
                if (r == rank_ || departed_[std::size_t(r)] >= 0) continue;
                const std::string& a = answers[std::size_t(r)];
                late += detail::concat(late.empty() ? "" : ", ", r);
                states += detail::concat("; rank ", r, host(r), " ",
                                         a.empty() ? "did not answer (stopped or dead)" : answer_state(a));
            }
            return detail::concat("rank ", rank_, host(rank_),
                                  " left main (its dtrain::Environment ended) and ", "has waited ",
                                  fixed(detail::steady_seconds() - start), " s in MPI_Finalize for rank",
                                  late.find(',') == std::string::npos ? " " : "s ", late, states);
        } catch (...) {  // out of memory while answering or describing
            return all_left() ? "" : "a rank did not leave the job in time";
        }
    }

    /// True while the thread runs.
    bool running() const noexcept { return thread_.joinable(); }

private:
    static constexpr int answer_bytes = 512;

    void loop() {
        const double tick = std::clamp(timeout_ / 20.0, 0.005, 0.1);
        std::uint64_t warned_for = ~std::uint64_t(0);
        while (!stop_) {
            std::this_thread::sleep_for(std::chrono::duration<double>(tick));
            serve();
            double waited = 0.0, timeout = timeout_;
            // Whether an operation set the timeout (DistOptions::stall_timeout) rather than the environment.
            bool own_timeout = false;
            std::uint64_t entered = 0;
            std::string what, where;  // built only when needed: the loop must not allocate while ranks train
            {
                detail::OperationRecord& r = detail::operation_record();
                std::lock_guard<std::mutex> lock(r.mutex);
                if (r.depth == 0) continue;
                const double now = detail::steady_seconds();
                waited = now - r.since;
                entered = r.entered;
                MPI_Comm comm = MPI_COMM_NULL;
                for (int i = 0; i < std::min(r.depth, detail::OperationRecord::max_depth); ++i) {
                    if (r.frames[i].timeout > 0) {
                        timeout = r.frames[i].timeout;
                        own_timeout = true;
                    }
                    if (r.frames[i].comm != MPI_COMM_NULL) comm = r.frames[i].comm;
                }
                if (waited > timeout / 2) {
                    what = detail::describe_operations(r);
                    where = detail::describe_outermost(r);
                }
                for (int d = 0; d < size_ && waited > leave_grace; ++d)
                    if (departed_[std::size_t(d)] >= 0 && now - departed_[std::size_t(d)] > leave_grace &&
                        detail::comm_has_world_rank(comm, d))
                        detail::abort_job(detail::concat(
                            "rank ", d,
                            " left the job (its dtrain::Environment ended: it returned from main, "
                            "perhaps after catching an error) while rank ",
                            rank_, " waits in ", detail::describe_operations(r), " for ", fixed(waited),
                            " s"));
            }
            if (waited > timeout) {
                // Answers other ranks' censuses while the message is forwarded: a rank that reports at the
                // same time must not take this one for stopped.
                detail::abort_job(stall_message(what, where, waited, timeout, own_timeout, true),
                                  [this] { serve(); });
            }
            if (waited > timeout / 2 && warned_for != entered) {
                warned_for = entered;
                const std::string m = stall_message(what, where, waited, timeout, own_timeout, false);
                std::fprintf(stderr, "dtrain: rank %d: warning: %s\n", rank_, m.c_str());
                std::fflush(stderr);
            }
        }
    }

    static std::string fixed(double v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.1f", v);
        return buf;
    }

    // This rank's answer to a census: its outermost operation (describe_outermost), a newline, and its
    // state as the asking rank reports it.
    std::string state() {
        if (leaving_) return "\nhas left the job (its dtrain::Environment ended)";
        detail::OperationRecord& r = detail::operation_record();
        std::lock_guard<std::mutex> lock(r.mutex);
        const double now = detail::steady_seconds();
        if (r.depth == 0)
            return detail::concat("\nis computing (in no dtrain operation) for ", fixed(now - r.idle_since),
                                  " s");
        return detail::concat(detail::describe_outermost(r), "\nwaits in ", detail::describe_operations(r),
                              " for ", fixed(now - r.since), " s");
    }

    // The parts of an answer (see state()).
    static std::string answer_position(const std::string& a) { return a.substr(0, a.find('\n')); }
    static std::string answer_state(const std::string& a) {
        const std::size_t nl = a.find('\n');
        return nl == std::string::npos ? a : a.substr(nl + 1);
    }

    // Answers questions and records departures; with `want` (a census id), collects answers into `answers`.
    void serve(std::uint64_t want = 0, std::vector<std::string>* answers = nullptr) {
        for (;;) {
            int flag = 0;
            MPI_Status st;
            if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, control_, &flag, &st) != MPI_SUCCESS || !flag) return;
            char buf[answer_bytes + 8] = {};
            int count = 0;
            MPI_Get_count(&st, MPI_CHAR, &count);
            MPI_Recv(buf, std::min(count, int(sizeof buf)), MPI_CHAR, st.MPI_SOURCE, st.MPI_TAG, control_,
                     MPI_STATUS_IGNORE);
            if (st.MPI_TAG == int(Tag::Question)) {
                const std::string s = state();
                std::memcpy(reply_[next_reply_], buf, 8);  // the census id comes back
                std::snprintf(reply_[next_reply_] + 8, answer_bytes, "%s", s.c_str());
                MPI_Request req;
                if (MPI_Isend(reply_[next_reply_], answer_bytes + 8, MPI_CHAR, st.MPI_SOURCE,
                              int(Tag::Answer), control_, &req) == MPI_SUCCESS)
                    MPI_Request_free(&req);
                next_reply_ = (next_reply_ + 1) % replies;
            } else if (st.MPI_TAG == int(Tag::Answer)) {
                std::uint64_t id = 0;
                std::memcpy(&id, buf, 8);
                if (answers != nullptr && id == want) (*answers)[std::size_t(st.MPI_SOURCE)] = buf + 8;
            } else if (st.MPI_TAG == int(Tag::Leaving)) {
                departed_[std::size_t(st.MPI_SOURCE)] = detail::steady_seconds();
            }
        }
    }

    // Asks every rank what it does and waits up to a grace period for the answers.
    std::vector<std::string> census() {
        const std::uint64_t id = ++census_;
        std::vector<std::string> answers(static_cast<std::size_t>(size_));
        std::memcpy(question_, &id, 8);
        for (int r = 0; r < size_; ++r) {
            if (r == rank_) continue;
            MPI_Request req;
            if (MPI_Isend(question_, 8, MPI_CHAR, r, int(Tag::Question), control_, &req) == MPI_SUCCESS)
                MPI_Request_free(&req);
        }
        // Long enough for a healthy rank's watchdog to answer on an oversubscribed machine, where it may wait
        // for a core: a late answer would name a healthy rank as stopped.
        const double end = detail::steady_seconds() + std::clamp(timeout_ / 10.0, 1.0, 2.0);
        while (detail::steady_seconds() < end) {
            serve(id, &answers);
            if (std::count_if(answers.begin(), answers.end(),
                              [](const std::string& a) { return !a.empty(); }) == size_ - 1)
                break;
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        return answers;
    }

    // `what` describes this rank's operations, `where` its outermost one (a rank in it has arrived).
    std::string stall_message(const std::string& what, const std::string& where, double waited,
                              double timeout, bool own_timeout, bool fatal) {
        const std::vector<std::string> answers = census();
        // The ranks that did not arrive are those in no dtrain operation (stopped, dead, computing or gone):
        // a rank waiting in one is held up like this one (an Async worker waiting for the end of run() while
        // the master serves). Only when every rank waits in some operation (ranks in different operations,
        // e.g. one more step on one rank) are the ranks outside this rank's outermost operation named.
        std::string others, missing, elsewhere;
        for (int r = 0; r < size_; ++r) {
            if (r == rank_) continue;
            const std::string& a = answers[std::size_t(r)];
            others += detail::concat("; rank ", r, " ",
                                     a.empty() ? "did not answer (stopped or dead)" : answer_state(a));
            const std::string position = a.empty() ? std::string() : answer_position(a);
            if (position.empty()) missing += detail::concat(missing.empty() ? "" : ", ", r);
            if (position != where) elsewhere += detail::concat(elsewhere.empty() ? "" : ", ", r);
        }
        if (missing.empty()) missing = elsewhere;
        return detail::concat("stall: rank ", rank_, " has waited ", fixed(waited), " s in ", what, others,
                              ". Ranks that did not arrive: ", missing.empty() ? "none" : missing, " (",
                              host_list(missing), "stall timeout ", fixed(timeout), " s, ",
                              own_timeout ? "DistOptions::stall_timeout" : "DTRAIN_STALL_TIMEOUT",
                              fatal ? "); ending the job" : ")");
    }

    // "hosts: rank 1 on b, rank 2 on c; this rank on a; " for the ranks in `ranks` ("1, 2"), or "" before the
    // host names are known.
    std::string host_list(const std::string& ranks) {
        std::lock_guard<std::mutex> lock(hosts_mutex_);
        if (hosts_.size() != std::size_t(size_)) return "";
        std::string s;
        for (std::size_t at = 0; at < ranks.size();) {
            const std::size_t end = std::min(ranks.find(',', at), ranks.size());
            const int r = std::atoi(ranks.substr(at, end - at).c_str());
            if (r >= 0 && r < size_)
                s += detail::concat(s.empty() ? "hosts: " : ", ", "rank ", r, " on ", hosts_[std::size_t(r)]);
            at = end + 1;
        }
        return detail::concat(s, s.empty() ? "" : "; ", "this rank on ", hosts_[std::size_t(rank_)], "; ");
    }

    static constexpr int replies = 16;
    static constexpr double leave_grace = 3.0;  // a wait may outlive a peer's departure by this much
    MPI_Comm control_ = MPI_COMM_NULL;
    double timeout_ = 300.0;
    int rank_ = 0, size_ = 1;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    bool leaving_ = false;
    std::vector<double> departed_;  // when each rank announced leaving (-1: it did not)
    std::uint64_t census_ = 0;
    std::mutex hosts_mutex_;
    std::vector<std::string> hosts_;  // by rank; empty until set_hosts()
    char question_[8] = {};
    char reply_[replies][answer_bytes + 8] = {};  // answers in flight (freed requests keep using them)
    int next_reply_ = 0;
};

}  // namespace dtrain

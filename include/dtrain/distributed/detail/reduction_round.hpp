#pragma once

/// @file
/// The synchronous DistOptimizer's bucket reductions as its threads share them: the BucketSchedule that
/// starts them through the communication hook, the mutex that serialises it, and the progress thread.

#include <cstddef>
#include <mutex>
#include <utility>
#include <vector>

#include <dtrain/distributed/bucket.hpp>
#include <dtrain/distributed/bucket_schedule.hpp>
#include <dtrain/distributed/detail/hooked_comm.hpp>
#include <dtrain/distributed/progress_thread.hpp>
#include <dtrain/nn/model.hpp>

namespace dtrain::detail {

/// The reductions of a synchronous DistOptimizer's buckets, started through `hook` on `comm` over `model`'s
/// flat gradient buffer, and shared by the calling thread, the model's gradient hooks during backward() and
/// an optional ProgressThread: every call on the schedule or on `comm` holds mutex(). `comm`, `hook` and
/// `model` must outlive it. Not copyable or movable (the progress thread refers to it).
template <class Comm, class T>
class ReductionRound {
public:
    /// The communicator as the schedule sees it: starting a bucket's reduction runs the hook.
    using Wire = HookedComm<Comm, T>;
    /// The schedule of the buckets' reductions.
    using Schedule = BucketSchedule<Wire, T>;

    /// Reductions over no buckets yet (see set_buckets()).
    ReductionRound(Comm& comm, CommHookSlot<Comm, T>& hook, Model<T>& model) noexcept
        : comm_(comm), hook_(hook), model_(model) {}
    ReductionRound(const ReductionRound&) = delete;
    ReductionRound& operator=(const ReductionRound&) = delete;

    /// Schedules `buckets` (in reduction order); before any reduction has started.
    void set_buckets(std::vector<Bucket> buckets) { schedule_ = Schedule(std::move(buckets)); }
    /// Starts the progress thread, which polls the started reductions while one is outstanding. Throws what
    /// ProgressThread::start() throws; nothing is running then.
    void start_progress() {
        progress_.start(
            mutex_, [this] { return schedule_.outstanding(); }, [this] { poll(); });
    }

    /// The communicator as the schedule sees it, over the model's gradients.
    Wire wire() noexcept { return Wire(comm_, *hook_, schedule_.buckets(), model_.gradients()); }
    /// The schedule (use it under mutex()).
    Schedule& schedule() noexcept { return schedule_; }
    /// See schedule().
    const Schedule& schedule() const noexcept { return schedule_; }
    /// The mutex that serialises the schedule and the communicator between the threads.
    std::mutex& mutex() noexcept { return mutex_; }
    /// The progress thread (running only after start_progress()).
    ProgressThread& progress() noexcept { return progress_; }
    /// See progress().
    const ProgressThread& progress() const noexcept { return progress_; }

    /// Everything from `from` to the end of the flat gradient buffer is final: starts the reductions of the
    /// buckets inside it that have not started yet, and wakes the progress thread when it started any.
    /// Rethrows an error of the progress thread.
    void launch_ready(std::size_t from) {
        std::unique_lock<std::mutex> lock(mutex_);
        progress_.rethrow_error();
        auto w = wire();
        schedule_.poll(w);
        if (schedule_.launch_ready(w, model_.gradients(), from)) {
            lock.unlock();
            progress_.notify();
        }
    }

    /// Completes the started reductions whose results no step will use, and ends the round.
    void drain() {
        std::lock_guard<std::mutex> lock(mutex_);
        auto w = wire();
        schedule_.drain(w);
    }

private:
    // Advances the started reductions (the progress thread's work; under mutex_).
    void poll() {
        auto w = wire();
        schedule_.poll(w);
    }

    Comm& comm_;
    CommHookSlot<Comm, T>& hook_;
    Model<T>& model_;
    Schedule schedule_;
    std::mutex mutex_;         // serialises comm_ and schedule_ between the threads
    ProgressThread progress_;  // declared after what it polls, so it stops first
};

}  // namespace dtrain::detail

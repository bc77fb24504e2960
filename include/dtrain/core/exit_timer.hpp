#pragma once

/// @file
/// A last-resort timer for the phases of a process that the stall watchdog cannot watch: MPI start-up
/// (MPI_Init_thread, the duplicate of MPI_COMM_WORLD the watchdog needs), the end of the job (MPI_Abort,
/// MPI_Finalize). It is a plain thread that makes no MPI call unless asked to: when a phase has not ended
/// in time, it prints a message and ends the process, so no process hangs silently in the MPI library.

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include <unistd.h>

#include <mpi.h>

namespace dtrain::detail {

/// How a process ends when an ExitTimer expires.
enum class ExitBy {
    Exit,      ///< _exit(code): the launcher sees the status (mpiexec ends the others on a non-zero one)
    MpiAbort,  ///< MPI_Abort(MPI_COMM_WORLD, code), and _exit(code) if that has not ended it 5 s later
};

/// A thread that ends the process unless disarmed in time. arm() starts (or re-arms) a deadline; when it
/// passes, the thread writes "dtrain: <message>" and a newline to stderr (after flushing stdout), then ends
/// the process as `by` says. Not copyable; the destructor disarms and joins.
class ExitTimer {
public:
    ExitTimer() = default;
    ExitTimer(const ExitTimer&) = delete;
    ExitTimer& operator=(const ExitTimer&) = delete;
    /// Disarms and joins the thread.
    ~ExitTimer() { disarm(); }

    /// Ends the process `seconds` from now with `message` and `code` unless disarm() or another arm() comes
    /// first. Requires seconds > 0. Throws std::system_error if the thread cannot start.
    void arm(double seconds, std::string message, int code, ExitBy by = ExitBy::Exit) {
        disarm();
        message_ = "dtrain: " + message + "\n";
        code_ = code;
        by_ = by;
        armed_ = true;
        const auto deadline = std::chrono::steady_clock::now() +
                              std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                  std::chrono::duration<double>(seconds));
        thread_ = std::thread([this, deadline] {
            std::unique_lock<std::mutex> lock(mutex_);
            if (wake_.wait_until(lock, deadline, [this] { return !armed_; })) return;
            expire();
        });
    }

    /// Cancels the deadline and joins the thread; no effect when not armed.
    void disarm() noexcept {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            armed_ = false;
        }
        wake_.notify_all();
        if (thread_.joinable()) thread_.join();
    }

private:
    [[noreturn]] void expire() noexcept {
        std::fflush(stdout);
        // write(2), not stdio: the thread that hangs may hold stderr's lock.
        std::size_t done = 0;
        while (done < message_.size()) {
            const ssize_t n = ::write(2, message_.data() + done, message_.size() - done);
            if (n <= 0) break;
            done += std::size_t(n);
        }
        if (by_ == ExitBy::MpiAbort) {
            const int code = code_;
            std::thread([code] {
                std::this_thread::sleep_for(std::chrono::seconds(5));
                ::_exit(code);
            }).detach();
            // Gives the launcher time to forward the line before it tears the job down.
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            MPI_Abort(MPI_COMM_WORLD, code);
        }
        ::_exit(code_);
    }

    std::mutex mutex_;
    std::condition_variable wake_;
    bool armed_ = false;
    std::string message_;
    int code_ = 1;
    ExitBy by_ = ExitBy::Exit;
    std::thread thread_;
};

}  // namespace dtrain::detail

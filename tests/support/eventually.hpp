#pragma once

// Waiting in tests for what another thread does.

#include <chrono>
#include <mutex>
#include <thread>

namespace dtrain::test {

/// Waits up to 10 s for `cond` (read under `m`), polling every millisecond; true once it holds.
template <class Cond>
bool eventually(std::mutex& m, Cond cond) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < end) {
        {
            std::lock_guard<std::mutex> lock(m);
            if (cond()) return true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
}

}  // namespace dtrain::test

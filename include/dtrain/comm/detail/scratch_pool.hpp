#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace dtrain::detail {

/// Byte buffers reused across calls, so communicators allocate only while the sizes they see still grow.
/// acquire() hands out a buffer of at least the requested size that no other lease holds; release() returns
/// it. Not thread-safe: one pool serves one communicator used from one thread at a time.
class ScratchPool {
public:
    /// A buffer of at least `bytes` bytes, aligned for any scalar type; give it back with release().
    unsigned char* acquire(std::size_t bytes) {
        Buffer* pick = nullptr;
        std::size_t pick_index = 0;
        for (std::size_t i = 0; i < free_.size(); ++i) {  // smallest free buffer that fits, else the largest
            Buffer* b = free_[i];
            const bool fits = b->bytes >= bytes;
            const bool better = pick == nullptr ||
                                (fits && (pick->bytes < bytes || b->bytes < pick->bytes)) ||
                                (!fits && pick->bytes < bytes && b->bytes > pick->bytes);
            if (better) {
                pick = b;
                pick_index = i;
            }
        }
        if (pick == nullptr) {
            all_.push_back(std::make_unique<Buffer>());
            pick = all_.back().get();
            free_.reserve(all_.size());
        } else {
            free_[pick_index] = free_.back();
            free_.pop_back();
        }
        if (pick->bytes < bytes) {
            pick->data.reset();  // release first: the old and the new buffer never coexist
            pick->bytes = 0;
            // Default-initialised (not zeroed): every byte is written by MPI before it is read.
            pick->data.reset(
                new std::max_align_t[(bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t)]);
            pick->bytes = bytes;
        }
        return reinterpret_cast<unsigned char*>(pick->data.get());
    }

    /// Returns a buffer obtained from acquire(); nullptr is ignored.
    void release(unsigned char* p) noexcept {
        if (p == nullptr) return;
        for (auto& b : all_) {
            if (reinterpret_cast<unsigned char*>(b->data.get()) == p) {
                free_.push_back(b.get());  // capacity reserved in acquire(): never allocates
                return;
            }
        }
    }

    /// Number of buffers the pool owns (free or leased).
    std::size_t buffers() const noexcept { return all_.size(); }

private:
    struct Buffer {
        std::unique_ptr<std::max_align_t[]> data;
        std::size_t bytes = 0;
    };
    std::vector<std::unique_ptr<Buffer>> all_;
    std::vector<Buffer*> free_;
};

/// RAII lease of one ScratchPool buffer, shared ownership of the pool so a lease may outlive a moved-from
/// communicator. Move-only.
class ScratchLease {
public:
    /// An empty lease.
    ScratchLease() noexcept = default;
    /// Acquires `bytes` bytes from `pool` (nothing when bytes is 0).
    ScratchLease(std::shared_ptr<ScratchPool> pool, std::size_t bytes) : pool_(std::move(pool)) {
        if (bytes > 0) data_ = pool_->acquire(bytes);
    }
    ScratchLease(const ScratchLease&) = delete;
    ScratchLease& operator=(const ScratchLease&) = delete;
    /// Takes over other's buffer.
    ScratchLease(ScratchLease&& other) noexcept
        : pool_(std::move(other.pool_)), data_(std::exchange(other.data_, nullptr)) {}
    /// Releases this lease's buffer, then takes over other's.
    ScratchLease& operator=(ScratchLease&& other) noexcept {
        if (this != &other) {
            reset();
            pool_ = std::move(other.pool_);
            data_ = std::exchange(other.data_, nullptr);
        }
        return *this;
    }
    /// Gives the buffer back to the pool.
    ~ScratchLease() { reset(); }
    /// The leased bytes (nullptr when empty).
    unsigned char* data() const noexcept { return data_; }
    /// Gives the buffer back to the pool now.
    void reset() noexcept {
        if (pool_ && data_ != nullptr) pool_->release(data_);
        data_ = nullptr;
    }

private:
    std::shared_ptr<ScratchPool> pool_;
    unsigned char* data_ = nullptr;
};

}  // namespace dtrain::detail

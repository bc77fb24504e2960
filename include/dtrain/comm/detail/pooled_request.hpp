#pragma once

#include <utility>

#include <dtrain/comm/detail/scratch_pool.hpp>

namespace dtrain::detail {

/// Handle of one nonblocking point-to-point all-reduce of a dtrain policy (Ring, Naive): the operation's
/// state machine `Op` (which provides drain(), active() and a default "inactive" state) plus the lease of
/// its receive scratch from the policy's pool. Move-only. Destroying or overwriting a pending request
/// drains its operation first, so no buffer is ever left in flight; requests must complete before the
/// policy that started them is destroyed.
template <class Op>
class PooledRequest {
public:
    /// An inactive request (test() is immediately true).
    PooledRequest() noexcept = default;
    PooledRequest(const PooledRequest&) = delete;
    PooledRequest& operator=(const PooledRequest&) = delete;
    /// Takes over other's operation; other becomes inactive.
    PooledRequest(PooledRequest&& other) noexcept
        : op_(std::exchange(other.op_, Op())), scratch_(std::move(other.scratch_)) {}
    /// Drains this request's operation (if any), then takes over other's.
    PooledRequest& operator=(PooledRequest&& other) noexcept {
        if (this != &other) {
            op_.drain();
            op_ = std::exchange(other.op_, Op());
            scratch_ = std::move(other.scratch_);
        }
        return *this;
    }
    /// Drains a pending operation so its buffer is never left in flight.
    ~PooledRequest() { op_.drain(); }
    /// True while the operation has not completed.
    bool active() const noexcept { return op_.active(); }

    /// The operation's state machine (for the policy that owns the request).
    Op& op() noexcept { return op_; }
    /// The scratch lease (for the policy that owns the request).
    ScratchLease& scratch() noexcept { return scratch_; }

private:
    Op op_;
    ScratchLease scratch_;
};

}  // namespace dtrain::detail

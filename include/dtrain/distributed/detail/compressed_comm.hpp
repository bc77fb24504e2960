#pragma once

/// @file
/// The communicator as the synchronous DistOptimizer's BucketSchedule sees it: starting a bucket's
/// reduction encodes the bucket with the GradientCompressor first and sums its wire.

#include <dtrain/core/span.hpp>
#include <dtrain/distributed/compression.hpp>

namespace dtrain::detail {

/// The communicator as BucketSchedule sees it under compression: iallreduce_sum(range) starts the
/// compressed sum of a bucket `range` of the flat gradient buffer `grads` (GradientCompressor::start);
/// test() and wait() are the communicator's. A view of three references, made where it is used.
template <class Comm, class T>
class CompressedComm {
public:
    /// The communicator's request.
    using Request = typename Comm::Request;
    /// A view of `comm` compressing with `codec` the buckets of `grads`.
    CompressedComm(Comm& comm, GradientCompressor<T>& codec, Span<T> grads) noexcept
        : comm_(comm), codec_(codec), grads_(grads) {}
    /// Starts the compressed sum of bucket `range` of the gradients.
    Request iallreduce_sum(Span<T> range) { return codec_.start(comm_, grads_, range); }
    /// The communicator's test().
    bool test(Request& r) { return comm_.test(r); }
    /// The communicator's wait().
    void wait(Request& r) { comm_.wait(r); }

private:
    Comm& comm_;
    GradientCompressor<T>& codec_;
    Span<T> grads_;
};

}  // namespace dtrain::detail

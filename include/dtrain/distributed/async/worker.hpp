#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include <mpi.h>

#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/distributed/async/protocol.hpp>
#include <dtrain/nn/model.hpp>

namespace dtrain::detail {

/// The worker's side of the parameter-server protocol: per step, sends every master its slice of the
/// gradient (behind an AsyncGradHeader) and receives the fresh slice straight into the parameters, all
/// masters concurrently; at the end of its loop, tells every master its step count. Every buffer is
/// allocated at construction.
///
/// @tparam T the parameter element type.
template <class T>
class AsyncWorker {
public:
    /// A worker of `comm` whose masters 0..shards.size()-1 own `shards` of the flat parameter buffer.
    AsyncWorker(MPI_Comm comm, std::vector<Range> shards)
        : comm_(comm), shards_(std::move(shards)), reqs_(2 * shards_.size(), MPI_REQUEST_NULL) {
        for (const Range& r : shards_)
            send_.emplace_back(header_elems<T> + r.size, T(0));
    }

    /// Sends `grads` (the whole flat gradient buffer, multiplied by `scale` unless it is 1) with `header` and
    /// receives the masters' fresh parameters into `params`; returns the seconds spent waiting.
    double step(Span<const T> grads, Span<T> params, T scale, const AsyncGradHeader& header) {
        for (std::size_t m = 0; m < shards_.size(); ++m) {
            const Range r = shards_[m];
            std::vector<T>& buf = send_[m];
            std::memcpy(buf.data(), &header, sizeof header);
            T* g = buf.data() + header_elems<T>;
            if (scale == T(1))
                std::copy(grads.begin() + r.offset, grads.begin() + r.offset + r.size, g);
            else
                for (std::size_t i = 0; i < r.size; ++i)
                    g[i] = grads[r.offset + i] * scale;
            DTRAIN_MPI_CHECK(MPI_Irecv(params.data() + r.offset, int(r.size), mpi_type<T>(), int(m),
                                       tag(AsyncTag::Parameters), comm_, &reqs_[2 * m]));
            DTRAIN_MPI_CHECK(MPI_Isend(buf.data(), int(buf.size() * sizeof(T)), MPI_BYTE, int(m),
                                       tag(AsyncTag::Gradient), comm_, &reqs_[2 * m + 1]));
        }
        const double t0 = async_now();
        DTRAIN_MPI_CHECK(MPI_Waitall(int(reqs_.size()), reqs_.data(), MPI_STATUSES_IGNORE));
        return async_now() - t0;
    }

    /// Tells every master that this worker is done after `steps` steps.
    void send_done(std::uint64_t steps) {
        for (std::size_t m = 0; m < shards_.size(); ++m)
            DTRAIN_MPI_CHECK(
                MPI_Isend(&steps, 1, MPI_UINT64_T, int(m), tag(AsyncTag::Done), comm_, &reqs_[m]));
        DTRAIN_MPI_CHECK(MPI_Waitall(int(shards_.size()), reqs_.data(), MPI_STATUSES_IGNORE));
    }

private:
    MPI_Comm comm_;
    std::vector<Range> shards_;
    std::vector<std::vector<T>> send_;  // per master: header + gradient slice
    std::vector<MPI_Request> reqs_;     // per master: parameter receive, gradient send
};

}  // namespace dtrain::detail

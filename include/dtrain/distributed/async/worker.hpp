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
#include <dtrain/distributed/detail/nonfinite.hpp>
#include <dtrain/nn/layer.hpp>

namespace dtrain::detail {

/// The worker's side of the parameter-server protocol: per step, sends every master its slice of the
/// gradient (behind an AsyncGradHeader) and receives the fresh slice straight into the parameters, all
/// masters concurrently; at the end of its loop, tells every master its step count. During a run it also
/// listens for master 0's Stop (another worker's loop failed). Every buffer is allocated at construction.
///
/// @tparam T the parameter element type.
template <class T>
class AsyncWorker {
public:
    /// What step() did.
    enum class Outcome { Sent, NonFinite, Stopped };

    /// A worker of `comm` whose masters 0..shards.size()-1 own `shards` of the flat parameter buffer.
    AsyncWorker(MPI_Comm comm, std::vector<Range> shards)
        : comm_(comm), shards_(std::move(shards)), reqs_(2 * shards_.size(), MPI_REQUEST_NULL) {
        for (const Range& r : shards_)
            send_.emplace_back(header_elems<T> + r.size, T(0));
    }

    /// Starts listening for master 0's Stop for this run.
    void start_run() {
        DTRAIN_MPI_CHECK(MPI_Irecv(&stop_word_, 1, MPI_INT, 0, tag(AsyncTag::Stop), comm_, &stop_));
    }

    /// True once master 0's Stop arrived.
    bool stopped() {
        if (stop_ == MPI_REQUEST_NULL) return stop_seen_;
        int flag = 0;
        DTRAIN_MPI_CHECK(MPI_Test(&stop_, &flag, MPI_STATUS_IGNORE));
        stop_seen_ = stop_seen_ || flag != 0;
        return stop_seen_;
    }

    /// Unless a Stop arrived (Stopped) or `grads` (the whole flat gradient buffer, multiplied by `scale`
    /// unless it is 1) holds a NaN or an infinity (NonFinite; nothing is sent): sends it with `header` and
    /// receives the masters' fresh parameters into `params` (Sent). Adds the seconds waited to `waited`.
    /// Without `check`, non-finite gradients are sent like any other.
    Outcome step(Span<const T> grads, Span<T> params, T scale, const AsyncGradHeader& header, double& waited,
                 bool check = true) {
        if (stopped()) return Outcome::Stopped;
        bool finite = true;
        for (std::size_t m = 0; m < shards_.size(); ++m) {
            const Range r = shards_[m];
            T* g = send_[m].data() + header_elems<T>;
            std::memcpy(send_[m].data(), &header, sizeof header);
            std::copy(grads.begin() + r.offset, grads.begin() + r.offset + r.size, g);
            finite = scale_and_check(g, r.size, scale, check) && finite;
        }
        if (!finite) return Outcome::NonFinite;
        for (std::size_t m = 0; m < shards_.size(); ++m) {
            const Range r = shards_[m];
            DTRAIN_MPI_CHECK(MPI_Irecv(params.data() + r.offset, int(r.size), mpi_type<T>(), int(m),
                                       tag(AsyncTag::Parameters), comm_, &reqs_[2 * m]));
            DTRAIN_MPI_CHECK(MPI_Isend(send_[m].data(), int(send_[m].size() * sizeof(T)), MPI_BYTE, int(m),
                                       tag(AsyncTag::Gradient), comm_, &reqs_[2 * m + 1]));
        }
        const double t0 = async_now();
        DTRAIN_MPI_CHECK(MPI_Waitall(int(reqs_.size()), reqs_.data(), MPI_STATUSES_IGNORE));
        waited += async_now() - t0;
        return Outcome::Sent;
    }

    /// Tells master 0 that this worker's loop failed (it then stops the other workers).
    void send_failed() {
        int none = 0;
        DTRAIN_MPI_CHECK(MPI_Send(&none, 1, MPI_INT, 0, tag(AsyncTag::Failed), comm_));
    }

    /// Tells every master that this worker is done after `steps` steps.
    void send_done(std::uint64_t steps) {
        for (std::size_t m = 0; m < shards_.size(); ++m)
            DTRAIN_MPI_CHECK(
                MPI_Isend(&steps, 1, MPI_UINT64_T, int(m), tag(AsyncTag::Done), comm_, &reqs_[m]));
        DTRAIN_MPI_CHECK(MPI_Waitall(int(shards_.size()), reqs_.data(), MPI_STATUSES_IGNORE));
    }

    /// Ends the run's Stop listener: waits for the Stop master 0 says it sent (`stop_sent`), else cancels.
    void end_run(bool stop_sent) {
        if (stop_ != MPI_REQUEST_NULL) {
            if (!stop_sent) DTRAIN_MPI_CHECK(MPI_Cancel(&stop_));
            DTRAIN_MPI_CHECK(MPI_Wait(&stop_, MPI_STATUS_IGNORE));
        }
        stop_seen_ = false;
    }

private:
    MPI_Comm comm_;
    std::vector<Range> shards_;
    std::vector<std::vector<T>> send_;  // per master: header + gradient slice
    std::vector<MPI_Request> reqs_;     // per master: parameter receive, gradient send
    MPI_Request stop_ = MPI_REQUEST_NULL;
    int stop_word_ = 0;
    bool stop_seen_ = false;
};

}  // namespace dtrain::detail

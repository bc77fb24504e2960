#pragma once

/// @file
/// PowerSGD (Vogels, Karimireddy and Jaggi, NeurIPS 2019) as a communication hook (comm_hook.hpp), as
/// PyTorch DDP's powerSGD_hook: each weight matrix of a bucket is sent as a rank-r approximation P Q^T
/// found by one step of power iteration with warm start and error feedback; the rest is summed as it is.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/core/rng.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/distributed/comm_hook.hpp>
#include <dtrain/nn/layers/conv2d.hpp>
#include <dtrain/nn/layers/dense.hpp>
#include <dtrain/nn/layers/embedding.hpp>
#include <dtrain/nn/layers/residual.hpp>
#include <dtrain/nn/model.hpp>

namespace dtrain {

/// A weight matrix in a model's flat gradient buffer: `rows` x `cols` values, row-major, from `offset`.
struct WeightMatrix {
    /// First value in the flat buffer.
    std::size_t offset = 0;
    /// Rows (Dense: out_features; Conv2d: out_channels; Embedding: count).
    std::size_t rows = 0;
    /// Columns (Dense: in_features; Conv2d: in_channels * kh * kw; Embedding: dim).
    std::size_t cols = 0;
};

namespace detail {

/// Appends the weight matrices of `layer`, whose parameters start at `offset`, to `out`.
template <class T>
void append_weight_matrices(const Layer<T>& layer, std::size_t offset, std::vector<WeightMatrix>& out) {
    if (const auto* d = dynamic_cast<const Dense<T>*>(&layer)) {
        out.push_back({offset, d->out_features(), d->in_features()});
    } else if (const auto* c = dynamic_cast<const Conv2d<T>*>(&layer)) {
        const auto k = c->kernel_size();
        out.push_back({offset, c->out_channels(), c->in_channels() * k[0] * k[1]});
    } else if (const auto* e = dynamic_cast<const Embedding<T>*>(&layer)) {
        out.push_back({offset, e->count(), e->dim()});
    } else if (const auto* r = dynamic_cast<const Residual<T>*>(&layer)) {
        for (std::size_t i = 0; i < r->num_layers(); ++i)
            append_weight_matrices(r->layer(i), offset + r->parameter_ranges()[i].offset, out);
    }
}

}  // namespace detail

/// The weight matrices of `model` in layer order: Dense [out, in], Conv2d [out, in * kh * kw] and
/// Embedding [count, dim] weights, also inside Residual blocks. Biases and the parameters of other layers
/// are not matrices here (PowerSgdHook sums them uncompressed).
template <class T>
std::vector<WeightMatrix> weight_matrices(const Model<T>& model) {
    std::vector<WeightMatrix> out;
    for (std::size_t i = 0; i < model.num_layers(); ++i)
        detail::append_weight_matrices(model.layer(i), model.parameter_ranges()[i].offset, out);
    return out;
}

/// Settings of PowerSgdHook (PyTorch's PowerSGDState).
struct PowerSgdOptions {
    /// Rank r of the approximation P Q^T (matrix_approximation_rank); at least 1.
    std::size_t rank = 1;
    /// Applied steps summed uncompressed before PowerSGD starts (start_powerSGD_iter; DDP's default is 1000).
    std::uint64_t start_iter = 1000;
    /// A matrix of n x m is compressed only when (n + m) * r * min_compression_rate < n * m.
    double min_compression_rate = 2.0;
    /// Seed of the initial Q, the same on every rank.
    std::uint64_t seed = 0;
};

/// PowerSGD as a blocking communication hook. Each bucket's part of a weight matrix (whole rows of it:
/// a matrix split over two buckets gives each its rows) that passes min_compression_rate is a matrix M
/// = gradient + residual (error feedback); with Q (m x r) kept from the last step (warm start, Gram-Schmidt
/// orthogonalised), P = M Q is summed over the ranks together with the bucket's uncompressed values,
/// orthogonalised, Q = M^T P is summed, and the bucket receives P Q^T, the sum over ranks of the rank-r
/// approximations; the residual keeps M - P Q^T / size. The first start_iter applied steps are plain
/// all-reduces. Every rank computes the same P, Q and result from the same summed bytes, so the result is
/// bitwise identical on every rank and deterministic. The residuals, the Q's and the count of applied steps
/// are state(): formed during a step, they replace the state only at commit() and checkpoints save them.
/// Allocates in setup() only.
///
/// @tparam T the gradient element type (float or double).
template <class T>
class PowerSgdHook {
public:
    /// PowerSGD over the weight `matrices` of the flat gradient buffer (weight_matrices()). Throws
    /// dtrain::Error when the rank is 0, start_iter is 2^24 or more, or min_compression_rate is not positive.
    explicit PowerSgdHook(std::vector<WeightMatrix> matrices, PowerSgdOptions options = {})
        : matrices_(std::move(matrices)), o_(options) {
        DTRAIN_CHECK(o_.rank >= 1, "PowerSgdHook: rank must be at least 1");
        DTRAIN_CHECK(o_.start_iter < (std::uint64_t(1) << 24), "PowerSgdHook: start_iter ", o_.start_iter,
                     " must be below 2^24 (it is counted in the state's element type)");
        DTRAIN_CHECK(o_.min_compression_rate > 0.0, "PowerSgdHook: min_compression_rate must be positive");
    }
    /// PowerSGD over the weight matrices of `model` (weight_matrices(model)).
    explicit PowerSgdHook(const Model<T>& model, PowerSgdOptions options = {})
        : PowerSgdHook(weight_matrices(model), options) {}

    /// Splits the matrices over the buckets of `ctx`, allocates every buffer and draws the first Q's from
    /// the seed. Throws dtrain::Error when a matrix lies outside the flat buffer.
    void setup(const CommHookContext& ctx) {
        size_ = ctx.size;
        n_ = ctx.num_values;
        blocks_.clear();
        plans_.assign(ctx.buckets.size(), Plan{});
        std::size_t q_total = 0, wire = 0;
        for (std::size_t b = 0; b < ctx.buckets.size(); ++b) {
            const Bucket& bk = ctx.buckets[b];
            Plan& plan = plans_[b];
            plan.first = blocks_.size();
            for (const WeightMatrix& w : matrices_) {
                DTRAIN_CHECK(w.offset + w.rows * w.cols <= n_, "PowerSgdHook: a matrix of ", w.rows, " x ",
                             w.cols, " at ", w.offset, " lies outside the ", n_, " gradient values");
                const std::size_t a = std::max(w.offset, bk.offset);
                const std::size_t e = std::min(w.offset + w.rows * w.cols, bk.offset + bk.size);
                if (w.cols == 0 || e <= a) continue;
                const std::size_t r0 = (a - w.offset + w.cols - 1) / w.cols, r1 = (e - w.offset) / w.cols;
                if (r1 <= r0) continue;
                Block k{w.offset + r0 * w.cols, r1 - r0, w.cols, 0, 0, 0};
                k.r = std::min({o_.rank, k.rows, k.cols});
                if (double((k.rows + k.cols) * k.r) * o_.min_compression_rate >= double(k.rows * k.cols))
                    continue;
                k.q_at = q_total;
                q_total += k.cols * k.r;
                blocks_.push_back(k);
            }
            std::sort(blocks_.begin() + std::ptrdiff_t(plan.first), blocks_.end(),
                      [](const Block& x, const Block& y) { return x.offset < y.offset; });
            plan.last = blocks_.size();
            std::size_t at = bk.offset;  // the gaps between the blocks are sent raw
            for (std::size_t i = plan.first; i < plan.last; ++i) {
                if (blocks_[i].offset > at) plan.raw.push_back({at, blocks_[i].offset - at});
                at = blocks_[i].offset + blocks_[i].rows * blocks_[i].cols;
            }
            if (bk.offset + bk.size > at) plan.raw.push_back({at, bk.offset + bk.size - at});
            for (const Range& r : plan.raw)
                plan.raw_values += r.size;
            std::size_t p = plan.raw_values;
            for (std::size_t i = plan.first; i < plan.last; ++i) {
                blocks_[i].p_at = p;
                p += blocks_[i].rows * blocks_[i].r;
            }
            wire = std::max(wire, p);
        }
        q_at_ = n_;
        state_.assign(n_ + q_total + 1, T(0));
        Rng rng(o_.seed);
        for (Block& k : blocks_) {
            T* q = state_.data() + q_at_ + k.q_at;
            for (std::size_t j = 0; j < k.cols * k.r; ++j)
                q[j] = T(rng.normal());
            orthogonalise(q, k.cols, k.r);
        }
        next_ = state_;
        wire_.assign(wire, T(0));
    }

    /// Sums bucket `b` over the ranks: a plain all-reduce for the first start_iter applied steps, PowerSGD
    /// after (two all-reduces: the raw values with the P's, then the Q's).
    template <class Comm>
    void reduce(Comm& comm, const GradBucket<T>& b) {
        const Plan& plan = plans_.at(b.index);
        const std::size_t off = b.bucket.offset, len = b.grads.size();
        T* res = next_.data() + off;
        T* g = b.grads.data();
        if (!started() || plan.first == plan.last) {
            std::copy(state_.begin() + std::ptrdiff_t(off), state_.begin() + std::ptrdiff_t(off + len), res);
            copy_qs(plan);
            comm.allreduce_sum(b.grads);
            return;
        }
        const T* old = state_.data() + off;
        for (std::size_t i = 0; i < len; ++i)  // M = gradient + residual, kept in the next residual
            res[i] = g[i] + old[i];
        copy_qs(plan);
        T* w = wire_.data();
        for (const Range& r : plan.raw) {
            std::copy(res + (r.offset - off), res + (r.offset - off + r.size), w);
            std::fill(res + (r.offset - off), res + (r.offset - off + r.size), T(0));
            w += r.size;
        }
        for (std::size_t i = plan.first; i < plan.last; ++i) {  // P = M Q
            const Block& k = blocks_[i];
            const T* m = res + (k.offset - off);
            const T* q = next_.data() + q_at_ + k.q_at;
            orthogonalise(next_.data() + q_at_ + k.q_at, k.cols, k.r);
            T* p = wire_.data() + k.p_at;
            for (std::size_t c = 0; c < k.r; ++c)
                for (std::size_t row = 0; row < k.rows; ++row)
                    p[c * k.rows + row] = dot(m + row * k.cols, q + c * k.cols, k.cols);
        }
        const std::size_t p_end =
            blocks_[plan.last - 1].p_at + blocks_[plan.last - 1].rows * blocks_[plan.last - 1].r;
        comm.allreduce_sum(Span<T>(wire_.data(), p_end));
        w = wire_.data();
        for (const Range& r : plan.raw) {
            std::copy(w, w + r.size, g + (r.offset - off));
            w += r.size;
        }
        const Block& first = blocks_[plan.first];
        std::size_t q_len = 0;
        for (std::size_t i = plan.first; i < plan.last; ++i) {  // Q = M^T P
            const Block& k = blocks_[i];
            T* p = wire_.data() + k.p_at;
            orthogonalise(p, k.rows, k.r);
            const T* m = res + (k.offset - off);
            T* q = next_.data() + q_at_ + k.q_at;
            std::fill(q, q + k.cols * k.r, T(0));
            for (std::size_t c = 0; c < k.r; ++c)
                for (std::size_t row = 0; row < k.rows; ++row)
                    axpy(p[c * k.rows + row], m + row * k.cols, q + c * k.cols, k.cols);
            q_len += k.cols * k.r;
        }
        comm.allreduce_sum(Span<T>(next_.data() + q_at_ + first.q_at, q_len));
        const T share = T(1) / T(size_);
        for (std::size_t i = plan.first; i < plan.last; ++i) {  // sum = P Q^T; residual = M - sum / size
            const Block& k = blocks_[i];
            const T* p = wire_.data() + k.p_at;
            const T* q = next_.data() + q_at_ + k.q_at;
            T* out = g + (k.offset - off);
            T* m = res + (k.offset - off);
            for (std::size_t row = 0; row < k.rows; ++row) {
                T* o = out + row * k.cols;
                std::fill(o, o + k.cols, T(0));
                for (std::size_t c = 0; c < k.r; ++c)
                    axpy(p[c * k.rows + row], q + c * k.cols, o, k.cols);
                T* mr = m + row * k.cols;
                for (std::size_t j = 0; j < k.cols; ++j)
                    mr[j] -= o[j] * share;
            }
        }
    }

    /// The step was applied: the residuals and Q's formed in it become the state, and it counts.
    void commit() noexcept {
        next_.back() = std::min(state_.back() + T(1), T(o_.start_iter));
        std::swap(state_, next_);
    }

    /// "powersgd(rank=R,start=S)", with ",min_rate=X" and ",seed=N" when they are not the defaults.
    std::string describe() const {
        std::string s =
            "powersgd(rank=" + std::to_string(o_.rank) + ",start=" + std::to_string(o_.start_iter);
        if (o_.min_compression_rate != 2.0) {
            char rate[32];
            std::snprintf(rate, sizeof rate, "%g", o_.min_compression_rate);
            s += std::string(",min_rate=") + rate;
        }
        if (o_.seed != 0) s += ",seed=" + std::to_string(o_.seed);
        return s + ")";
    }

    /// This rank's state: the residuals over the flat buffer, the Q's, and the applied steps counted up to
    /// start_iter.
    Span<T> state() noexcept { return Span<T>(state_.data(), state_.size()); }
    /// The settings.
    const PowerSgdOptions& options() const noexcept { return o_; }
    /// This rank's committed residuals (the first num_values values of state()).
    Span<const T> residual() const noexcept { return Span<const T>(state_.data(), n_); }
    /// Whether the committed state has passed start_iter applied steps (PowerSGD is on).
    bool started() const noexcept { return !state_.empty() && state_.back() >= T(o_.start_iter); }
    /// The values the bucket `b` puts on the wire per step once started, over both all-reduces.
    std::size_t wire_values(std::size_t b) const {
        const Plan& plan = plans_.at(b);
        std::size_t v = plan.raw_values;
        for (std::size_t i = plan.first; i < plan.last; ++i)
            v += (blocks_[i].rows + blocks_[i].cols) * blocks_[i].r;
        return v;
    }
    /// The matrices (whole rows of a weight matrix in one bucket) sent as P and Q.
    std::size_t compressed_matrices() const noexcept { return blocks_.size(); }

private:
    struct Block {  // a compressed matrix of one bucket
        std::size_t offset, rows, cols, r, p_at, q_at;
    };
    struct Plan {  // a bucket: its blocks_[first, last) and the ranges sent raw
        std::size_t first = 0, last = 0, raw_values = 0;
        std::vector<Range> raw;
    };

    void copy_qs(const Plan& plan) {
        for (std::size_t i = plan.first; i < plan.last; ++i) {
            const Block& k = blocks_[i];
            const auto at = std::ptrdiff_t(q_at_ + k.q_at);
            std::copy(state_.begin() + at, state_.begin() + at + std::ptrdiff_t(k.cols * k.r),
                      next_.begin() + at);
        }
    }
    static T dot(const T* x, const T* y, std::size_t n) {
        double s = 0.0;
        for (std::size_t i = 0; i < n; ++i)
            s += double(x[i]) * double(y[i]);
        return T(s);
    }
    static void axpy(T a, const T* x, T* y, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i)
            y[i] += a * x[i];
    }
    // Gram-Schmidt on the `cols` columns (each of `len` contiguous values) of `a`; a zero column stays zero.
    static void orthogonalise(T* a, std::size_t len, std::size_t cols) {
        for (std::size_t c = 0; c < cols; ++c) {
            T* col = a + c * len;
            const double norm = std::sqrt(double(dot(col, col, len)));
            const T inv = norm > 0.0 ? T(1.0 / norm) : T(0);
            for (std::size_t i = 0; i < len; ++i)
                col[i] *= inv;
            for (std::size_t d = c + 1; d < cols; ++d)
                axpy(-dot(col, a + d * len, len), col, a + d * len, len);
        }
    }

    std::vector<WeightMatrix> matrices_;
    PowerSgdOptions o_;
    int size_ = 1;
    std::size_t n_ = 0, q_at_ = 0;
    std::vector<Block> blocks_;
    std::vector<Plan> plans_;
    std::vector<T> state_, next_, wire_;
};

}  // namespace dtrain

#pragma once

#include <cstddef>

namespace dtrain {

/// Where a layer reports, during its backward(), parts of its parameter-gradient slice that are already
/// final: fn(context, begin, end) for the values [begin, end) of the slice, in pieces of about `chunk`
/// values. Sequential::backward() (run by Model and by composite layers) sets it on each layer that derives
/// from ReportsGradients before calling the layer's backward() (see Model::set_partial_grad_hook()); an
/// empty one (fn null) asks for no reports.
struct GradProgress {
    /// Receiver of the reports; null for none.
    void (*fn)(void* context, std::size_t begin, std::size_t end) = nullptr;
    /// First argument of fn.
    void* context = nullptr;
    /// Requested granularity of partial reports in values (0: none).
    std::size_t chunk = 0;
};

/// The opt-in interface of the layers that take part in overlapping the gradient reduction with the
/// backward pass. A layer opts in by deriving from it besides Layer<T> (`class Dense final : public
/// Layer<T>, public ReportsGradients`); Sequential finds it with one dynamic_cast when the layer is added
/// (or cloned) and keeps the pointer. A layer that does not opt in behaves as one that never reports and
/// always adds: its whole slice counts as final once its backward() returned, and Model::zero_grad() zeroes
/// its slice.
///
/// Two independent abilities, either or both:
/// - Partial reports. A layer whose parameter gradient is large and can be computed in parts (Dense) may,
///   when grad_chunk() is not 0, compute it in parts of about grad_chunk() values, from the END of its
///   slice to its start, and call report_grads_ready() after each, so that a distributed optimizer can
///   start reducing them before the layer's backward() returns. A composite layer (Residual) forwards its
///   children's reports with their offsets in its own slice.
/// - Write instead of add. A layer that writes its whole gradient slice in one pass (Dense) says so with
///   writes_unset_grads(): after Model::zero_grad() its backward() then writes instead of adding while
///   grads_unset() is true, which saves the zeroing pass and the reads of zeros.
class ReportsGradients {
public:
    virtual ~ReportsGradients() = default;

    /// Sets where backward() reports final parts of the gradient slice (called by Sequential::backward()).
    void set_grad_progress(const GradProgress& progress) noexcept { progress_ = progress; }

    /// True for a layer whose next backward(), when grads_unset() is true, WRITES its parameter gradients
    /// (every value of its slice, whatever the slice held) instead of adding them, with bit for bit the
    /// result of adding them to zeros, and then clears grads_unset(). Default false: Model::zero_grad()
    /// zeroes such a layer's slice itself.
    virtual bool writes_unset_grads() const noexcept { return false; }

    /// Marks the layer's gradient slice as holding nothing yet (set by Model::zero_grad() for layers whose
    /// writes_unset_grads() is true; cleared by the layer's backward() and by Model::gradients()).
    void set_grads_unset(bool unset) noexcept { grads_unset_ = unset; }

    /// True while the gradient slice holds nothing yet: the next backward() writes it.
    bool grads_unset() const noexcept { return grads_unset_; }

protected:
    /// Requested granularity of partial gradient reports in values; 0 when nobody listens.
    std::size_t grad_chunk() const noexcept { return progress_.fn != nullptr ? progress_.chunk : 0; }

    /// Reports that values [begin, end) of this layer's gradient slice are final for this backward().
    void report_grads_ready(std::size_t begin, std::size_t end) const {
        if (progress_.fn != nullptr) progress_.fn(progress_.context, begin, end);
    }

private:
    GradProgress progress_;
    bool grads_unset_ = false;
};

}  // namespace dtrain

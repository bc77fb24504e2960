// ReportsGradients (nn/grad_reporting.hpp) from a layer written outside dtrain: opting in is deriving from
// it, and a layer that does not is run as one that never reports and always adds.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <dtrain/nn/grad_reporting.hpp>
#include <dtrain/nn/layers/activation.hpp>
#include <dtrain/nn/model.hpp>

using dtrain::Model;
using dtrain::Tensor;

namespace {

// out = in; gradient value k of its `n` is sum(grad_out) * (k + 1), computed in parts of grad_chunk() values
// from the end of the slice, each reported; written instead of added after zero_grad() when `writes`.
class Ramp final : public dtrain::Layer<double>, public dtrain::ReportsGradients {
public:
    Ramp(std::size_t n, bool writes) : n_(n), writes_(writes) {}
    std::string name() const override { return "Ramp"; }
    dtrain::Shape output_shape(const dtrain::Shape& input) const override { return input; }
    std::size_t num_params() const override { return n_; }
    void bind(double*, double* grads, double*) override { g_ = grads; }
    void forward(const Tensor<double>& in, Tensor<double>& out, bool) override { out = in; }
    void backward(const Tensor<double>&, const Tensor<double>&, const Tensor<double>& grad_out,
                  Tensor<double>& grad_in, bool need_grad_in) override {
        double s = 0.0;
        for (double v : grad_out)
            s += v;
        const bool add = !grads_unset();
        set_grads_unset(false);
        const std::size_t chunk = grad_chunk();
        for (std::size_t hi = n_; hi > 0;) {
            const std::size_t lo = chunk > 0 && hi > chunk ? hi - chunk : 0;
            for (std::size_t k = lo; k < hi; ++k)
                g_[k] = (add ? g_[k] : 0.0) + s * double(k + 1);
            if (chunk > 0) report_grads_ready(lo, hi);
            hi = lo;
        }
        if (need_grad_in) grad_in = grad_out;
    }
    bool writes_unset_grads() const noexcept override { return writes_; }
    std::unique_ptr<dtrain::Layer<double>> clone() const override {
        return std::make_unique<Ramp>(n_, writes_);
    }

private:
    std::size_t n_;
    bool writes_;
    double* g_ = nullptr;
};

}  // namespace

TEST_CASE("ReportsGradients: a layer that opts in reports in parts and writes after zero_grad()",
          "[nn][grad_reporting]") {
    Model<double> m({2}, 1);
    m.add(Ramp(10, true)).add(dtrain::ReLU<double>()).add(Ramp(5, false));
    std::vector<std::vector<std::size_t>> events;
    m.set_partial_grad_hook(
        [&](std::size_t l, std::size_t b, std::size_t e) {
            events.push_back({l, b, e});
        },
        4);
    auto stale = m.gradients();
    std::fill(stale.begin(), stale.end(), 7.0);
    m.zero_grad();
    CHECK(stale[0] == 7.0);                              // left to the writing layer's backward()
    CHECK(stale[10] == 0.0);                             // zeroed: this Ramp adds
    const Tensor<double> x = {{1.0, 2.0}, {0.5, -4.0}};  // ReLU passes the gradient at 1, 2, 0.5: sum 3
    const Tensor<double> g = {{1.0, 1.0}, {1.0, 1.0}};
    for (int pass = 1; pass <= 2; ++pass) {  // the second adds to the first
        events.clear();
        m.forward(x);
        m.backward(g);
        const std::vector<std::vector<std::size_t>> expected = {
            {2, 1, 5}, {2, 0, 1}, {0, 6, 10}, {0, 2, 6}, {0, 0, 2}};
        CHECK(events == expected);  // ReLU does not opt in: no reports
        const auto grads = m.gradients();
        for (std::size_t k = 0; k < 10; ++k)
            CHECK(grads[k] == pass * 3.0 * double(k + 1));
        for (std::size_t k = 0; k < 5; ++k)
            CHECK(grads[10 + k] == pass * 4.0 * double(k + 1));
    }
    // gradients() zeroes a writing layer's slice that no backward() has written yet.
    m.zero_grad();
    for (double v : m.gradients())
        CHECK(v == 0.0);
}

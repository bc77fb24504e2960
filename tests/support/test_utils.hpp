#pragma once

#include <cmath>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <unistd.h>

#include <mpi.h>

#include <dtrain/core/error.hpp>
#include <dtrain/core/mpi.hpp>
#include <dtrain/core/rng.hpp>
#include <dtrain/core/tensor.hpp>

namespace dtrain::test {

/// True on every rank when `cond` holds on every rank of `comm` (collective).
inline bool all_ranks(bool cond, MPI_Comm comm = MPI_COMM_WORLD) {
    int v = cond ? 1 : 0, r = 0;
    MPI_Allreduce(&v, &r, 1, MPI_INT, MPI_LAND, comm);
    return r != 0;
}

using dtrain::world_rank;
using dtrain::world_size;

/// The message of the dtrain::Error that `f()` throws, or "" when it throws none, so a check that the
/// message contains something fails when nothing is thrown, and `.empty()` checks that nothing is. Any other
/// exception propagates (Catch2 reports it and fails the test case).
template <class F>
std::string error_message(F&& f) {
    try {
        f();
    } catch (const dtrain::Error& e) {
        return e.what();
    }
    return "";
}

/// A tensor of `shape` with uniform values in [lo, hi) drawn from `rng`.
template <class T>
Tensor<T> random_tensor(const std::vector<std::size_t>& shape, Rng& rng, double lo = -1.0, double hi = 1.0) {
    Tensor<T> t = Tensor<T>::from_shape(shape);
    for (auto& v : t)
        v = T(rng.uniform(lo, hi));
    return t;
}

/// `n` floats uniform in [-1, 1) drawn from `rng` (the operands of the kernel tests).
inline std::vector<float> random_floats(std::size_t n, Rng& rng) {
    std::vector<float> v(n);
    for (auto& x : v)
        x = float(rng.uniform(-1, 1));
    return v;
}

/// Largest |a - b| / max(1, |b|) over two equally long ranges.
template <class A, class B>
double max_rel_diff(const A& a, const B& b) {
    double m = 0.0;
    auto ib = b.begin();
    for (auto ia = a.begin(); ia != a.end(); ++ia, ++ib) {
        const double d = std::abs(double(*ia) - double(*ib)) / std::max(1.0, std::abs(double(*ib)));
        m = std::max(m, d);
    }
    return m;
}

/// A path under the temporary directory, the same on every rank of `comm` (it holds rank 0's process id):
/// "<dir>/<prefix>_<pid>_<tag>". Collective.
inline std::string shared_temp_path(const std::string& prefix, const std::string& tag,
                                    MPI_Comm comm = MPI_COMM_WORLD) {
    long pid = long(::getpid());
    MPI_Bcast(&pid, 1, MPI_LONG, 0, comm);
    return (std::filesystem::temp_directory_path() / (prefix + "_" + std::to_string(pid) + "_" + tag))
        .string();
}

}  // namespace dtrain::test

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

#include <dtrain/core/aligned_allocator.hpp>
#include <dtrain/core/tensor.hpp>

namespace {

bool on_64_bytes(const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) % dtrain::detail::buffer_alignment == 0;
}

}  // namespace

// glibc's malloc puts blocks above its mmap threshold (128 KiB) 16 bytes past a page boundary and small
// ones on 16 bytes: the sizes cover both.
TEST_CASE("AlignedAllocator: every block starts on 64 bytes, small and large", "[core][aligned]") {
    dtrain::detail::AlignedAllocator<float> a;
    for (std::size_t n : {std::size_t(1), std::size_t(3), std::size_t(17), std::size_t(1000),
                          std::size_t(40000), std::size_t(1) << 20}) {
        std::vector<float*> blocks;
        for (int i = 0; i < 4; ++i) {
            blocks.push_back(a.allocate(n));
            CHECK(on_64_bytes(blocks.back()));
        }
        for (float* p : blocks)
            a.deallocate(p, n);
    }
    CHECK(dtrain::detail::AlignedAllocator<double>() == dtrain::detail::AlignedAllocator<float>(a));
}

TEST_CASE("AlignedAllocator: an impossible size throws instead of wrapping around", "[core][aligned]") {
    dtrain::detail::AlignedAllocator<double> a;
    CHECK_THROWS_AS(a.allocate(std::size_t(-1) / 4), std::bad_array_new_length);
}

TEST_CASE("AlignedVector: stays on 64 bytes as it grows and when copied", "[core][aligned]") {
    dtrain::detail::AlignedVector<float> v;
    for (int i = 0; i < 100000; ++i) {
        v.push_back(float(i));
        if ((i & (i + 1)) == 0) CHECK(on_64_bytes(v.data()));  // after each reallocation
    }
    const dtrain::detail::AlignedVector<float> copy = v;
    CHECK(on_64_bytes(copy.data()));
    CHECK(copy == v);
}

TEST_CASE("Tensor: data on 64 bytes when made, resized and assigned", "[core][aligned][tensor]") {
    auto t = dtrain::Tensor<float>::from_shape({3, 5});
    CHECK(on_64_bytes(t.data()));
    for (std::size_t n : {std::size_t(7), std::size_t(64), std::size_t(50000)}) {
        dtrain::ensure_shape(t, std::vector<std::size_t>{n, 13});
        CHECK(on_64_bytes(t.data()));
    }
    dtrain::Tensor<float> sum = t + t;  // from an expression
    CHECK(on_64_bytes(sum.data()));
    dtrain::Tensor<double> d = dtrain::Tensor<double>::from_shape({1, 3});
    d = dtrain::Tensor<double>::from_shape({300, 300});
    CHECK(on_64_bytes(d.data()));
}

#pragma once

#include <cstddef>
#include <type_traits>

namespace dtrain {

/// A non-owning (pointer, length) view of contiguous memory, the C++17 stand-in for std::span.
/// Requires that the memory outlives the span.
template <class T>
class Span {
public:
    /// An empty span.
    constexpr Span() noexcept = default;
    /// A span over `size` elements starting at `data`.
    constexpr Span(T* data, std::size_t size) noexcept : data_(data), size_(size) {}
    /// Converts `Span<U>` to `Span<T>` when `U*` converts to `T*` safely (e.g. `Span<float>` to
    /// `Span<const float>`).
    template <class U, class = std::enable_if_t<std::is_convertible_v<U (*)[], T (*)[]>>>
    constexpr Span(const Span<U>& other) noexcept : data_(other.data()), size_(other.size()) {}
    /// First element.
    constexpr T* data() const noexcept { return data_; }
    /// Number of elements.
    constexpr std::size_t size() const noexcept { return size_; }
    /// True when the span has no elements.
    constexpr bool empty() const noexcept { return size_ == 0; }
    /// Element `i` (unchecked).
    constexpr T& operator[](std::size_t i) const noexcept { return data_[i]; }
    /// Iterators for range-for.
    constexpr T* begin() const noexcept { return data_; }
    /// One past the last element.
    constexpr T* end() const noexcept { return data_ + size_; }
    /// The sub-span [offset, offset + count).
    constexpr Span subspan(std::size_t offset, std::size_t count) const noexcept {
        return Span(data_ + offset, count);
    }

private:
    T* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace dtrain

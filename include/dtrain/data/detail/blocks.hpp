#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace dtrain::detail {

/// Values appended one at a time when their number is not known in advance (rows streaming from a file),
/// kept in blocks of a fixed size: growing never copies what is stored nor holds it twice, unlike a vector
/// that doubles. move_to() copies them into the final buffer and frees each block once copied, so the
/// values exist twice only one block at a time beyond the final buffer.
template <class T>
class Blocks {
public:
    /// Values per block.
    static constexpr std::size_t block = std::size_t(1) << 14;

    /// Appends `v`.
    void push(T v) {
        if (blocks_.empty() || blocks_.back().size() == block) {
            blocks_.emplace_back();
            blocks_.back().reserve(block);
        }
        blocks_.back().push_back(v);
        ++size_;
    }
    /// Number of values appended.
    std::size_t size() const { return size_; }
    /// Writes f(value) for every value, in order, to `dst` (room for size() values) and empties this.
    template <class Out, class F>
    void move_to(Out* dst, F&& f) {
        for (auto& b : blocks_) {
            dst = std::transform(b.begin(), b.end(), dst, f);
            std::vector<T>().swap(b);
        }
        blocks_.clear();
        size_ = 0;
    }
    /// Copies every value, in order, to `dst` (room for size() values) and empties this.
    void move_to(T* dst) {
        move_to(dst, [](T v) { return v; });
    }

private:
    std::vector<std::vector<T>> blocks_;
    std::size_t size_ = 0;
};

}  // namespace dtrain::detail

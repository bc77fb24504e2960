#pragma once

#include <cstddef>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/nn/layer.hpp>

namespace dtrain {

/// One gradient bucket (Horovod's tensor fusion, PyTorch DDP's buckets): a contiguous range
/// [offset, offset + size) of a model's flat gradient buffer, reduced across ranks by ONE communicator call.
/// It holds the parameter ranges of the layers first_layer..last_layer, whole, except that a layer larger
/// than the bucket size is split into pieces (see make_buckets()). Its gradients are final once backward()
/// has finished layer `first_layer` (backward runs last layer first).
struct Bucket {
    /// First element in the flat buffer.
    std::size_t offset = 0;
    /// Number of elements.
    std::size_t size = 0;
    /// Lowest-index layer with parameters in the bucket: the bucket is ready after its backward.
    std::size_t first_layer = 0;
    /// Highest-index layer with parameters in the bucket.
    std::size_t last_layer = 0;
};

/// Splits a model's per-layer parameter ranges (Model::parameter_ranges(), which are contiguous and in
/// layer order) into buckets that cover the flat buffer from its end to its start, last layer first:
/// - layers with parameters are added to the current bucket, which is closed as soon as it holds at least
///   `bucket_bytes` bytes of `value_bytes`-byte values;
/// - a layer of MORE than `bucket_bytes` bytes is split into k = ceil(bytes / bucket_bytes) pieces of
///   equal size (rounded up to a multiple of 64 values, so pieces start on cache lines), last piece first;
///   the first of them also takes the still-open bucket, and each piece closes its bucket. A layer that
///   reports parts of its gradient during backward() (Dense; ReportsGradients, nn/grad_reporting.hpp)
///   lets DistOptimizer start a piece's reduction before the layer has finished; for any layer, the pieces
///   let it apply the optimizer to one piece while the next one is still being reduced;
/// - bucket_bytes = 0 gives one bucket per layer with parameters (nothing is split).
/// Layers without parameters belong to no bucket. Bucket 0 therefore holds the last layers and is the first
/// to become ready in backward(). Throws dtrain::Error when the ranges are not contiguous or value_bytes
/// is 0.
inline std::vector<Bucket> make_buckets(const std::vector<Range>& ranges, std::size_t bucket_bytes,
                                        std::size_t value_bytes) {
    DTRAIN_CHECK(value_bytes > 0, "make_buckets: value_bytes must be positive");
    for (std::size_t i = 1; i < ranges.size(); ++i) {
        DTRAIN_CHECK(ranges[i].offset == ranges[i - 1].offset + ranges[i - 1].size, "make_buckets: layer ", i,
                     " starts at ", ranges[i].offset, " but layer ", i - 1, " ends at ",
                     ranges[i - 1].offset + ranges[i - 1].size, "; parameter ranges must be contiguous");
    }
    constexpr std::size_t align = 64;  // values per piece are a multiple of this
    std::vector<Bucket> buckets;
    bool open = false;
    Bucket cur;
    auto add = [&](std::size_t offset, std::size_t size, std::size_t layer) {
        if (!open) {
            cur = Bucket{offset + size, 0, layer, layer};
            open = true;
        }
        cur.offset = offset;
        cur.size += size;
        cur.first_layer = layer;
    };
    for (std::size_t i = ranges.size(); i-- > 0;) {
        const Range& r = ranges[i];
        if (r.size == 0) continue;
        if (bucket_bytes > 0 && r.size * value_bytes > bucket_bytes) {
            const std::size_t k = (r.size * value_bytes + bucket_bytes - 1) / bucket_bytes;
            std::size_t piece = (r.size + k - 1) / k;
            piece = (piece + align - 1) / align * align;
            for (std::size_t end = r.offset + r.size; end > r.offset;) {
                const std::size_t len = end - r.offset < piece ? end - r.offset : piece;
                add(end - len, len, i);
                buckets.push_back(cur);
                open = false;
                end -= len;
            }
            continue;
        }
        add(r.offset, r.size, i);
        if (cur.size * value_bytes >= bucket_bytes) {
            buckets.push_back(cur);
            open = false;
        }
    }
    if (open) buckets.push_back(cur);
    return buckets;
}

}  // namespace dtrain

#pragma once

#include <cstddef>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/nn/model.hpp>

namespace dtrain {

/// One gradient bucket (Horovod's tensor fusion, PyTorch DDP's buckets): a contiguous range
/// [offset, offset + size) of a model's flat gradient buffer made of the whole parameter ranges of the
/// layers first_layer..last_layer, reduced across ranks by ONE communicator call. Its gradients are final
/// once backward() has finished layer `first_layer` (backward runs last layer first).
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
/// layer order) into buckets, last layer first: layers with parameters are added to the current bucket,
/// which is closed as soon as it holds at least `bucket_bytes` bytes of `value_bytes`-byte values
/// (bucket_bytes = 0 gives one bucket per layer with parameters). Layers without parameters belong to no
/// bucket. Bucket 0 therefore holds the last layers and is the first to become ready in backward().
/// Throws dtrain::Error when the ranges are not contiguous or value_bytes is 0.
inline std::vector<Bucket> make_buckets(const std::vector<Range>& ranges, std::size_t bucket_bytes,
                                        std::size_t value_bytes) {
    DTRAIN_CHECK(value_bytes > 0, "make_buckets: value_bytes must be positive");
    for (std::size_t i = 1; i < ranges.size(); ++i) {
        DTRAIN_CHECK(ranges[i].offset == ranges[i - 1].offset + ranges[i - 1].size, "make_buckets: layer ", i,
                     " starts at ", ranges[i].offset, " but layer ", i - 1, " ends at ",
                     ranges[i - 1].offset + ranges[i - 1].size, "; parameter ranges must be contiguous");
    }
    std::vector<Bucket> buckets;
    bool open = false;
    Bucket cur;
    for (std::size_t i = ranges.size(); i-- > 0;) {
        if (ranges[i].size == 0) continue;
        if (!open) {
            cur = Bucket{ranges[i].offset + ranges[i].size, 0, i, i};
            open = true;
        }
        cur.offset = ranges[i].offset;
        cur.size += ranges[i].size;
        cur.first_layer = i;
        if (cur.size * value_bytes >= bucket_bytes) {
            buckets.push_back(cur);
            open = false;
        }
    }
    if (open) buckets.push_back(cur);
    return buckets;
}

}  // namespace dtrain

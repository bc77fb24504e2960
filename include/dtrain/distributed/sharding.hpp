#pragma once

/// @file
/// Shard planning for the parameter-server policy: how a flat parameter buffer is split over masters.

#include <algorithm>
#include <cstddef>
#include <vector>

#include <dtrain/core/error.hpp>
#include <dtrain/distributed/options.hpp>
#include <dtrain/nn/model.hpp>

namespace dtrain {

/// Splits a flat buffer of `n` elements into `parts` contiguous ranges whose sizes differ by at most one;
/// range i is [i*n/parts, (i+1)*n/parts). Ranges are in order, cover [0, n) exactly once and are empty
/// when n < parts. Layers may be split between ranges. Requires parts >= 1.
inline std::vector<Range> shard_balanced(std::size_t n, std::size_t parts) {
    DTRAIN_CHECK(parts >= 1, "shard_balanced: need at least one part, got ", parts);
    std::vector<Range> out(parts);
    for (std::size_t i = 0; i < parts; ++i) {
        // i * n / parts without overflow for any n that fits memory.
        const std::size_t lo = i * (n / parts) + (i * (n % parts)) / parts;
        const std::size_t hi = (i + 1) * (n / parts) + ((i + 1) * (n % parts)) / parts;
        out[i] = Range{lo, hi - lo};
    }
    return out;
}

namespace detail {

/// Number of contiguous groups the greedy packing of `sizes` into groups of at most `cap` needs.
inline std::size_t groups_needed(const std::vector<std::size_t>& sizes, std::size_t cap) {
    std::size_t groups = 1, load = 0;
    for (std::size_t s : sizes) {
        if (load + s > cap && load > 0) {
            ++groups;
            load = 0;
        }
        load += s;
    }
    return groups;
}

}  // namespace detail

/// Splits a flat buffer made of consecutive `layers` (Model::parameter_ranges(), which must be contiguous
/// and start at 0) into `parts` contiguous ranges made of whole layers, minimising the largest range (the
/// MPI collectives exercise's "each master is in charge of some layers", README References 3). Layers without
/// parameters join a neighbour. When there are fewer non-empty layers than parts, the last ranges are empty.
/// Requires parts >= 1.
inline std::vector<Range> shard_by_layer(const std::vector<Range>& layers, std::size_t parts) {
    DTRAIN_CHECK(parts >= 1, "shard_by_layer: need at least one part, got ", parts);
    std::vector<std::size_t> sizes;
    std::size_t total = 0, largest = 0;
    for (std::size_t i = 0; i < layers.size(); ++i) {
        DTRAIN_CHECK(layers[i].offset == total, "shard_by_layer: layer ", i, " starts at ", layers[i].offset,
                     " but the previous layers end at ", total, " (ranges must be contiguous)");
        total += layers[i].size;
        largest = std::max(largest, layers[i].size);
        sizes.push_back(layers[i].size);
    }
    std::vector<Range> out(parts, Range{total, 0});
    if (total == 0) return out;
    // Smallest capacity for which greedy packing of whole layers needs at most `parts` groups (greedy is
    // optimal for contiguous packing with a given capacity, and feasibility is monotone in it).
    std::size_t lo = largest, hi = total;
    while (lo < hi) {
        const std::size_t mid = lo + (hi - lo) / 2;
        if (detail::groups_needed(sizes, mid) <= parts)
            hi = mid;
        else
            lo = mid + 1;
    }
    std::size_t part = 0, start = 0, load = 0;
    for (std::size_t s : sizes) {
        if (load + s > lo && load > 0) {
            out[part++] = Range{start, load};
            start += load;
            load = 0;
        }
        load += s;
    }
    out[part] = Range{start, load};
    return out;
}

/// The shard of every master for `model` under `how` (see Sharding): `parts` contiguous ranges, in master
/// order, that cover the parameter buffer exactly once.
template <class T>
std::vector<Range> plan_shards(const Model<T>& model, std::size_t parts, Sharding how = Sharding::Balanced) {
    return how == Sharding::ByLayer ? shard_by_layer(model.parameter_ranges(), parts)
                                    : shard_balanced(model.num_parameters(), parts);
}

}  // namespace dtrain

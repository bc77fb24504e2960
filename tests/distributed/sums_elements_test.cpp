// detail::sums_elements, the trait by which GradientCompressor decides whether a communicator can carry
// TopK's wire of 32-bit words: both sums of Span<W> present, the nonblocking one returning Comm::Request.
#include <catch2/catch.hpp>

#include <cstdint>

#include <dtrain/comm/collective.hpp>
#include <dtrain/comm/naive.hpp>
#include <dtrain/comm/ring.hpp>
#include <dtrain/core/span.hpp>
#include <dtrain/distributed/compression.hpp>
#include <dtrain/distributed/detail/sums_elements.hpp>

namespace {

/// Sums any element type, blocking and nonblocking.
struct SumsAnyComm {
    struct Request {};
    template <class W>
    void allreduce_sum(dtrain::Span<W>) {}
    template <class W>
    Request iallreduce_sum(dtrain::Span<W>) {
        return {};
    }
};

/// Sums float only.
struct SumsFloatComm {
    struct Request {};
    void allreduce_sum(dtrain::Span<float>) {}
    Request iallreduce_sum(dtrain::Span<float>) { return {}; }
};

/// Sums words blocking only.
struct BlockingOnlyComm {
    struct Request {};
    void allreduce_sum(dtrain::Span<std::uint32_t>) {}
};

/// Its nonblocking sum returns something other than its Request.
struct OtherRequestComm {
    struct Request {};
    void allreduce_sum(dtrain::Span<std::uint32_t>) {}
    int iallreduce_sum(dtrain::Span<std::uint32_t>) { return 0; }
};

template <class Comm>
constexpr bool sums_words = dtrain::detail::sums_elements<Comm, std::uint32_t>::value;

}  // namespace

TEST_CASE("sums_elements: both sums of Span<W>, the nonblocking one returning Comm::Request",
          "[dist][compression][traits]") {
    STATIC_REQUIRE(sums_words<SumsAnyComm>);
    STATIC_REQUIRE(dtrain::detail::sums_elements<SumsAnyComm, double>::value);
    STATIC_REQUIRE(dtrain::detail::sums_elements<SumsFloatComm, float>::value);
    STATIC_REQUIRE_FALSE(sums_words<SumsFloatComm>);
    STATIC_REQUIRE_FALSE(sums_words<BlockingOnlyComm>);
    STATIC_REQUIRE_FALSE(sums_words<OtherRequestComm>);
    STATIC_REQUIRE(sums_words<dtrain::Collective>);
    STATIC_REQUIRE(sums_words<dtrain::Ring>);
    STATIC_REQUIRE(sums_words<dtrain::Naive>);
}

TEST_CASE("GradientCompressor refuses TopK over a communicator that cannot sum 32-bit words",
          "[dist][compression][traits]") {
    const std::vector<dtrain::Bucket> buckets = {{0, 8, 0, 0}};
    const dtrain::GradientCompressor<float> topk(dtrain::Compression::TopK, 0.5, buckets, 8, 0, 1);
    CHECK_THROWS_WITH(topk.check_communicator<SumsFloatComm>(),
                      Catch::Contains("topk needs a communicator whose allreduce_sum and iallreduce_sum take "
                                      "Span<std::uint32_t>"));
    CHECK_NOTHROW(topk.check_communicator<SumsAnyComm>());
}

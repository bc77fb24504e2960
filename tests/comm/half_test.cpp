// The 16-bit wire floats (comm/half.hpp): conversions against naive references (the nearest value found by
// search among all 65536 binary16 values; the two bfloat16 neighbours compared in double), every bit
// pattern's round trip, the precision bounds (fp16 2^-11, bf16 2^-8 relative), special values; their float
// arithmetic; and sums of Span<Half> / Span<BFloat16> on Collective, Ring and Naive (fp32 accumulation,
// bitwise identical on every rank, Naive exactly the rank-order fold).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <dtrain/comm.hpp>
#include <dtrain/core/hash.hpp>
#include <support/test_utils.hpp>

namespace {

using dtrain::BFloat16;
using dtrain::Half;

float from_bits(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

std::uint32_t bits_of(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

/// The binary16 value of bits `h` by the format's definition, in double (independent of half.hpp).
double half_value(std::uint16_t h) {
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 0x1f) return m ? std::nan("") : sign * std::numeric_limits<double>::infinity();
    if (e == 0) return sign * std::ldexp(double(m), -24);
    return sign * std::ldexp(1.0 + m / 1024.0, e - 15);
}

/// The binary16 nearest to finite `x` (ties to the even bit pattern), found by search among all
/// non-negative finite binary16 values; from 65520 up, infinity.
std::uint16_t naive_half(float x) {
    static const std::vector<double> values = [] {
        std::vector<double> v;
        for (std::uint32_t h = 0; h < 0x7c00; ++h)
            v.push_back(half_value(std::uint16_t(h)));
        return v;
    }();
    const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double a = std::fabs(double(x));
    if (a >= 65520.0) return sign | 0x7c00;
    const auto it = std::lower_bound(values.begin(), values.end(), a);
    std::size_t hi = std::size_t(it - values.begin());
    if (hi == values.size()) hi = values.size() - 1;
    if (values[hi] == a || hi == 0) return std::uint16_t(sign | hi);
    const std::size_t lo = hi - 1;
    const double dl = a - values[lo], dh = values[hi] - a;
    const std::size_t pick = dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
    return std::uint16_t(sign | pick);
}

/// The bfloat16 nearest to finite `x`: of the two bfloat16 neighbours (truncation and the next one up in
/// magnitude), the closer in double, ties to the even pattern.
std::uint16_t naive_bfloat16(float x) {
    const std::uint32_t u = bits_of(x);
    const std::uint16_t lo = std::uint16_t(u >> 16), hi = std::uint16_t(lo + 1);
    const double v = std::fabs(double(x)), vl = std::fabs(double(from_bits(std::uint32_t(lo) << 16))),
                 vh = std::fabs(double(from_bits(std::uint32_t(hi) << 16)));
    if ((u & 0xffff) == 0) return lo;
    const double dl = v - vl, dh = vh - v;
    return dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
}

/// Random floats over the whole exponent range (every bit pattern equally likely, NaN excluded), plus
/// values near the binary16 boundaries.
std::vector<float> sample_floats() {
    dtrain::Rng rng(11);
    std::vector<float> v;
    for (int i = 0; i < 200000; ++i) {
        float f = from_bits(std::uint32_t(rng()));
        if (std::isnan(f)) continue;
        v.push_back(f);
        // The same significand at a binary16-relevant scale: [2^-26, 2^17).
        int e = 0;
        v.push_back(std::ldexp(std::frexp(f, &e) * 2.0f, int(rng.below(43)) - 26));
    }
    for (float f : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 65536.0f, 6.103515625e-05f, 6.0975552e-05f,
                    5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048,
                    std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()})
        v.insert(v.end(), {f, -f});
    return v;
}

}  // namespace

TEST_CASE("Half: float to binary16 rounds to nearest even like a search over all 65536 values", "[half]") {
    std::size_t wrong = 0;
    for (float x : sample_floats()) {
        const std::uint16_t got = Half(x).bits, want = naive_half(x);
        if (got != want && ++wrong <= 5) FAIL_CHECK("x = " << x << ": got " << got << ", want " << want);
    }
    CHECK(wrong == 0);
}

TEST_CASE("Half: every bit pattern converts to float and back unchanged, NaN stays NaN", "[half]") {
    for (std::uint32_t h = 0; h < 0x10000; ++h) {
        const float f = float(Half::from_bits(std::uint16_t(h)));
        const double want = half_value(std::uint16_t(h));
        if (std::isnan(want)) {
            REQUIRE(std::isnan(f));
            REQUIRE(std::isnan(float(Half(f))));
            REQUIRE((Half(f).bits & 0x8000) == (h & 0x8000));  // sign kept
        } else {
            REQUIRE(double(f) == want);
            REQUIRE(Half(f).bits == h);  // also -0 and subnormals
        }
    }
}

TEST_CASE("Half and BFloat16: relative rounding error within 2^-11 and 2^-8, special values", "[half]") {
    for (float x : sample_floats()) {
        const float a = std::fabs(x);
        if (a >= 6.103515625e-05f && a <= 65504.0f)
            REQUIRE(std::fabs(float(Half(x)) - x) <= std::ldexp(a, -11));
        if (a >= std::numeric_limits<float>::min() && a <= 3.38e38f)
            REQUIRE(std::fabs(float(BFloat16(x)) - x) <= std::ldexp(a, -8));
    }
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    CHECK(Half(inf).bits == 0x7c00);
    CHECK(Half(-inf).bits == 0xfc00);
    CHECK(std::isnan(float(Half(nan))));
    CHECK(std::isnan(float(Half(-nan))));
    CHECK(Half(1e6f).bits == 0x7c00);                             // overflow rounds to infinity
    CHECK(Half(-1e-9f).bits == 0x8000);                           // underflow keeps the sign
    CHECK(float(Half(5.9604645e-08f)) == std::ldexp(1.0f, -24));  // the smallest subnormal
    CHECK(BFloat16(inf).bits == 0x7f80);
    CHECK(BFloat16(-inf).bits == 0xff80);
    CHECK(std::isnan(float(BFloat16(nan))));
    CHECK(std::isnan(float(BFloat16(from_bits(0x7f800001u)))));  // a NaN whose payload is in the low bits
    CHECK(BFloat16(std::numeric_limits<float>::max()).bits == 0x7f80);
    CHECK(float(BFloat16(std::numeric_limits<float>::denorm_min())) == 0.0f);  // ties to even: zero
}

TEST_CASE("BFloat16: float to bfloat16 rounds to nearest even like the closer neighbour", "[half]") {
    std::size_t wrong = 0;
    for (float x : sample_floats()) {
        if (std::fabs(x) > 3.3895e38f) continue;  // the upper neighbour would be infinity
        const std::uint16_t got = BFloat16(x).bits, want = naive_bfloat16(x);
        if (got != want && ++wrong <= 5) FAIL_CHECK("x = " << x << ": got " << got << ", want " << want);
    }
    CHECK(wrong == 0);
    for (std::uint32_t b = 0; b < 0x10000; ++b) {
        const BFloat16 v = BFloat16::from_bits(std::uint16_t(b));
        if (!std::isnan(float(v))) REQUIRE(BFloat16(float(v)).bits == b);
    }
}

TEST_CASE("Half and BFloat16 arithmetic: in float, rounded once, NaN canonical and commutative", "[half]") {
    const Half a(1.0f), b(1.0f / 4096);  // 1 + 2^-12 rounds back to 1 (ties to even)
    CHECK((a + b).bits == Half(1.0f).bits);
    CHECK((Half(1.5f) * Half(3.0f)).bits == Half(4.5f).bits);
    CHECK((Half(60000.0f) + Half(60000.0f)).bits == 0x7c00);  // fp16 overflows
    CHECK(float(BFloat16(60000.0f) + BFloat16(60000.0f)) == float(BFloat16(120000.0f)));
    const Half n1 = Half::from_bits(0x7e01), n2 = Half::from_bits(0xfe33);
    CHECK((n1 + n2).bits == (n2 + n1).bits);
    CHECK((n1 + n2).bits == 0x7e00);
    CHECK(
        (Half(std::numeric_limits<float>::infinity()) + Half(-std::numeric_limits<float>::infinity())).bits ==
        0x7e00);
    CHECK((BFloat16::from_bits(0x7fc1) + BFloat16::from_bits(0xffc5)).bits == 0x7fc0);
    CHECK(Half(2.0f) > Half(1.0f));
    CHECK(n1 != n1);
    CHECK(dtrain::mpi_type<Half>() == MPI_UINT16_T);
    CHECK(dtrain::mpi_type<BFloat16>() == MPI_UINT16_T);
    STATIC_REQUIRE(sizeof(Half) == 2);
    STATIC_REQUIRE(dtrain::has_half_sums_v<dtrain::Collective>);
    STATIC_REQUIRE(dtrain::has_half_sums_v<dtrain::Ring>);
    STATIC_REQUIRE(dtrain::has_half_sums_v<dtrain::Naive>);
}

namespace {

/// Rank r's input at index i: values of both signs over several binary orders of magnitude.
float wire_input(int r, std::size_t i) {
    const std::uint64_t h = (std::uint64_t(r) * 1000003u + i) * 0x9E3779B97F4A7C15ull;
    return float(std::int64_t(h >> 40) - (std::int64_t(1) << 23)) / float(1 << 20) * ((i % 7) + 1) / 7.0f;
}

/// The sum of every rank's wire input at i folded in rank order in W's arithmetic (Naive's order).
template <class W>
W rank_order_sum(std::size_t i) {
    W acc(wire_input(0, i));
    for (int r = 1; r < dtrain::world_size(); ++r)
        acc = acc + W(wire_input(r, i));
    return acc;
}

template <class Comm, class W>
void check_wire_sums(const char* name) {
    Comm comm;
    const int p = comm.size(), me = comm.rank();
    for (std::size_t n :
         {std::size_t(0), std::size_t(1), std::size_t(2), std::size_t(7), std::size_t(1001)}) {
        for (int nonblocking = 0; nonblocking < 2; ++nonblocking) {
            INFO(name << ", n = " << n << (nonblocking ? ", iallreduce_sum" : ", allreduce_sum"));
            std::vector<W> v(n);
            for (std::size_t i = 0; i < n; ++i)
                v[i] = W(wire_input(me, i));
            if (n == 7 && p > 1 && me == 1) v[3] = W(std::numeric_limits<float>::quiet_NaN());
            if (n == 7 && me == 0) v[5] = W(std::numeric_limits<float>::infinity());
            const dtrain::Span<W> s(v.data(), v.size());
            if (nonblocking) {
                auto r = comm.iallreduce_sum(s);
                comm.wait(r);
            } else {
                comm.allreduce_sum(s);
            }
            const std::uint64_t h = dtrain::detail::fnv1a(v.data(), v.size() * sizeof(W));
            CHECK(dtrain::detail::same_everywhere(h, comm.mpi_comm()));
            double worst = 0.0;
            for (std::size_t i = 0; i < n; ++i) {
                if (n == 7 && (i == 3 || i == 5)) continue;
                double exact = 0.0, scale = 0.0;
                for (int r = 0; r < p; ++r) {
                    exact += double(float(W(wire_input(r, i))));
                    scale += std::fabs(double(wire_input(r, i)));
                }
                worst = std::max(worst, std::fabs(double(float(v[i])) - exact) / std::max(scale, 1e-30));
            }
            // Each of the p - 1 partial sums is rounded once to 16 bits.
            const double unit = std::is_same_v<W, Half> ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
            CHECK(worst <= unit * p);
            if (n == 7) {
                CHECK(std::isnan(float(v[3])) == (p > 1));  // NaN on rank 1 reaches every rank
                CHECK(float(v[5]) == std::numeric_limits<float>::infinity());
            }
            if constexpr (std::is_same_v<Comm, dtrain::Naive>) {
                for (std::size_t i = 0; i < n; ++i)
                    if (!(n == 7 && (i == 3 || i == 5))) CHECK(v[i].bits == rank_order_sum<W>(i).bits);
            }
        }
    }
}

}  // namespace

TEMPLATE_TEST_CASE(
    "Sums of Span<Half> and Span<BFloat16>: fp32 accumulation, bitwise identical on every rank",
    "[half][allreduce]", dtrain::Collective, dtrain::Ring, dtrain::Naive) {
    check_wire_sums<TestType, Half>("Half");
    check_wire_sums<TestType, BFloat16>("BFloat16");
}

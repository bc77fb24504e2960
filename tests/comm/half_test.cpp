// The 16-bit wire floats (comm/half.hpp): conversions against naive references (the nearest value found by
// search among all 65536 binary16 values; the two bfloat16 neighbours compared in double), every bit
// pattern's round trip, the precision bounds (fp16 2^-11, bf16 2^-8 relative), special values; their float
// arithmetic; and sums of Span<Half> / Span<BFloat16> on Collective, Ring and Naive (fp32 accumulation,
// bitwise identical on every rank, Naive exactly the rank-order fold); the bulk conversions and sums (F16C
// and scalar) bitwise against the scalar functions over every binary16 pattern and a dense float sweep,
// also with DAZ/FTZ set.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

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

/// Floats around every place binary16 rounding decides: each finite binary16 value and the midpoints to its
/// neighbour (exact in float) with the patterns next to them, 65504..infinity, float subnormals, NaNs with
/// many payloads, every 4099th bit pattern; both signs of each.
std::vector<float> rounding_sweep() {
    std::vector<std::uint32_t> u;
    for (std::uint32_t h = 0; h < 0x7c00; ++h) {
        const double lo = half_value(std::uint16_t(h)), hi = half_value(std::uint16_t(h + 1));
        const std::uint32_t at = bits_of(float(lo)), mid = bits_of(float((lo + hi) / 2));
        for (std::uint32_t d = 0; d < 3; ++d)
            u.insert(u.end(), {at + d, at - d, mid + d, mid - d});
    }
    for (std::uint32_t x = 0x477fe000u; x <= 0x47800000u; ++x)  // 65504 up to infinity
        u.push_back(x);
    for (std::uint32_t x = 0; x < 0x00800000u; x += 997)  // float subnormals (binary16 zeros)
        u.push_back(x);
    for (std::uint32_t x = 0x7f800000u; x <= 0x7fffffffu; x += 0x1fff)  // inf, NaNs
        u.insert(u.end(), {x, x | 1u, x | 0x1000u, x | 0x2000u, x & ~0x400000u, x | 0x7fffffu});
    for (std::uint64_t x = 0; x < (std::uint64_t(1) << 31); x += 4099)
        u.push_back(std::uint32_t(x));
    std::vector<float> v;
    v.reserve(2 * u.size());
    for (std::uint32_t x : u)
        v.insert(v.end(), {from_bits(x & 0x7fffffffu), from_bits(x | 0x80000000u)});
    return v;
}

/// The first position at which a and b differ in their bits, or -1.
template <class T>
long first_difference(const std::vector<T>& a, const std::vector<T>& b) {
    for (std::size_t i = 0; i < a.size(); ++i)
        if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return long(i);
    return -1;
}

/// Checks the bulk functions against the scalar ones on every start offset and tail length up to 9; returns
/// a hash of the scalar results (the same under every MXCSR mode).
std::uint64_t check_bulk_conversions() {
    namespace d = dtrain::detail;
    const std::vector<float> floats = rounding_sweep();
    std::vector<std::uint16_t> halves(0x10000);
    for (std::uint32_t h = 0; h < 0x10000; ++h)
        halves[h] = std::uint16_t(h);
    std::vector<std::uint16_t> want16(floats.size()), got16(floats.size()), bf_want(floats.size());
    for (std::size_t i = 0; i < floats.size(); ++i) {
        want16[i] = d::float_to_half_bits(floats[i]);
        bf_want[i] = d::float_to_bfloat16_bits(floats[i]);
    }
    std::vector<float> want32(halves.size()), got32(halves.size()), bf_want32(halves.size());
    for (std::size_t i = 0; i < halves.size(); ++i) {
        want32[i] = d::half_bits_to_float(halves[i]);
        bf_want32[i] = d::bfloat16_bits_to_float(halves[i]);
    }
    using Encode = void (*)(const float*, std::uint16_t*, std::size_t);
    using Decode = void (*)(const std::uint16_t*, float*, std::size_t);
    std::vector<std::pair<Encode, Decode>> paths = {{&d::halves_from_floats, &d::floats_from_halves}};
#ifdef DTRAIN_HAS_F16C_PATH
    if (d::cpu_has_f16c()) paths.push_back({&d::halves_from_floats_f16c, &d::floats_from_halves_f16c});
#endif
    for (std::size_t p = 0; p < paths.size(); ++p) {
        INFO("path " << p << " (0 dispatched, 1 F16C)");
        for (std::size_t start = 0; start < 9; ++start) {  // unaligned starts, every tail length
            std::fill(got16.begin(), got16.end(), std::uint16_t(0x5555));
            paths[p].first(floats.data() + start, got16.data() + start, floats.size() - start);
            for (std::size_t i = 0; i < start; ++i)
                got16[i] = want16[i];
            const long e = first_difference(got16, want16);
            CHECK(e == -1);
            if (e >= 0) FAIL_CHECK("float bits " << bits_of(floats[std::size_t(e)]) << ": " << got16[e]);
            std::fill(got32.begin(), got32.end(), 0.5f);
            paths[p].second(halves.data() + start, got32.data() + start, halves.size() - start);
            std::copy(want32.begin(), want32.begin() + long(start), got32.begin());
            const long f = first_difference(got32, want32);
            CHECK(f == -1);
            if (f >= 0) FAIL_CHECK("half bits " << f << ": " << bits_of(got32[std::size_t(f)]));
        }
    }
    d::bfloat16s_from_floats(floats.data(), got16.data(), floats.size());
    CHECK(first_difference(got16, bf_want) == -1);
    d::floats_from_bfloat16s(halves.data(), got32.data(), halves.size());
    CHECK(first_difference(got32, bf_want32) == -1);
    return d::fnv1a(want16.data(), 2 * want16.size()) ^ d::fnv1a(want32.data(), 4 * want32.size()) ^
           d::fnv1a(bf_want.data(), 2 * bf_want.size());
}

/// Checks add_halves (and its F16C form) against Half + Half, and add_bfloat16s against BFloat16 +
/// BFloat16, on all pairs of special and random 16-bit values; returns a hash of the scalar Half sums.
std::uint64_t check_bulk_sums() {
    namespace d = dtrain::detail;
    std::vector<std::uint16_t> special;
    for (std::uint16_t h : {0x0000, 0x0001, 0x0002, 0x03ff, 0x0400, 0x0401, 0x3c00, 0x3c01, 0x3bff, 0x7bfe,
                            0x7bff, 0x7c00, 0x7c01, 0x7d00, 0x7e00, 0x7e01, 0x7fff, 0x1400, 0x5640, 0x7a00})
        special.insert(special.end(), {h, std::uint16_t(h | 0x8000)});
    dtrain::Rng rng(5);
    std::vector<std::uint16_t> a, b;
    for (std::uint16_t x : special)
        for (std::uint16_t y : special) {
            a.push_back(x);
            b.push_back(y);
        }
    for (int i = 0; i < 300000; ++i) {
        a.push_back(std::uint16_t(rng()));
        const std::uint16_t near = std::uint16_t((a.back() & 0x7c00) | (rng() & 0x83ff));  // same exponent
        b.push_back(i % 2 ? near : std::uint16_t(rng()));
    }
    std::vector<std::uint16_t> want(a.size());
    for (std::size_t i = 0; i < a.size(); ++i)
        want[i] = (Half::from_bits(a[i]) + Half::from_bits(b[i])).bits;
    using Add = void (*)(std::uint16_t*, const std::uint16_t*, std::size_t);
    std::vector<Add> paths = {&d::add_halves, &d::add_halves_scalar};
#ifdef DTRAIN_HAS_F16C_PATH
    if (d::cpu_has_f16c()) paths.push_back(&d::add_halves_f16c);
#endif
    const std::uint64_t hash = d::fnv1a(want.data(), 2 * want.size());
    for (std::size_t p = 0; p < paths.size(); ++p) {
        for (std::size_t start = 0; start < 9; ++start) {
            std::vector<std::uint16_t> got = a;
            paths[p](got.data() + start, b.data() + start, got.size() - start);
            std::copy(want.begin(), want.begin() + long(start), got.begin());
            const long e = first_difference(got, want);
            INFO("path " << p << ", start " << start);
            CHECK(e == -1);
            if (e >= 0)
                FAIL_CHECK(a[std::size_t(e)] << " + " << b[std::size_t(e)] << ": " << got[std::size_t(e)]);
        }
    }
    for (std::size_t i = 0; i < a.size(); ++i)  // the same pairs as bfloat16 bits
        want[i] = (BFloat16::from_bits(a[i]) + BFloat16::from_bits(b[i])).bits;
    std::vector<std::uint16_t> got = a;
    d::add_bfloat16s(got.data(), b.data(), got.size());
    CHECK(first_difference(got, want) == -1);
    return hash;  // bfloat16 sums of float subnormals follow DAZ/FTZ, in either form, like float arithmetic
}

}  // namespace

TEST_CASE("Bulk binary16 and bfloat16 conversions and sums: bitwise the scalar functions, F16C or not",
          "[half][bulk]") {
    const std::uint64_t conversions = check_bulk_conversions(), sums = check_bulk_sums();
#if defined(__x86_64__)
    const unsigned saved = _mm_getcsr();
    _mm_setcsr(saved | 0x8040u);  // flush-to-zero (bit 15) and denormals-are-zero (bit 6)
    const std::uint64_t daz_conversions = check_bulk_conversions(), daz_sums = check_bulk_sums();
    _mm_setcsr(saved);
    CHECK(daz_conversions == conversions);  // the scalar results too are independent of the mode
    CHECK(daz_sums == sums);
#endif
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

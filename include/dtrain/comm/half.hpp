#pragma once

/// @file
/// 16-bit floating-point wire types for gradient compression: Half (IEEE 754 binary16, "fp16") and BFloat16
/// (the upper half of a binary32, "bf16"), with round-to-nearest-even conversion from float and exact
/// conversion to float. Their arithmetic happens in float: a + b converts both operands to float, adds and
/// rounds the sum back once, so an all-reduce of 16-bit values accumulates in fp32 at every step (Horovod's
/// fp16 compression, PyTorch DDP's bf16 hook). Every communicator policy that declares
/// `half_float_sums` (see comm/communicator.hpp) reduces Span<Half> and Span<BFloat16> this way. Bulk
/// conversions and sums of binary16 arrays use the CPU's F16C instructions where it has them (chosen at run
/// time), with bitwise the same results as the scalar conversions.

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DTRAIN_HAS_F16C_PATH 1
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace dtrain {

namespace detail {

/// The bits of a float.
inline std::uint32_t float_bits(float f) noexcept {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

/// The float of `u`'s bits.
inline float bits_float(std::uint32_t u) noexcept {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

/// Whether `f` is a NaN, read from its bits. An integer test, so that in a vectorised loop the NaN select
/// works on the 32-bit lanes of the conversion's bit arithmetic: with `f != f`, GCC 12 narrowed the float
/// compare's mask to 16 bits on its own, and add_bfloat16s took 12% longer.
inline bool is_nan(float f) noexcept {
    return (float_bits(f) & 0x7fffffffu) > 0x7f800000u;
}

/// The binary16 nearest to `f` (ties to even): values from 65520 up round to infinity, values below 2^-14
/// become subnormals (down to 2^-24; at most 2^-25 rounds to zero), signs are kept, infinities stay
/// infinities and a NaN stays a quiet NaN with its sign and the top 9 bits of its payload.
inline std::uint16_t float_to_half_bits(float f) noexcept {
    const std::uint32_t x = float_bits(f);
    const std::uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u)  // infinity or NaN
        return std::uint16_t(ax == 0x7f800000u ? sign | 0x7c00u : sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) return std::uint16_t(sign | 0x7c00u);  // >= 65520: rounds to infinity
    if (ax >= 0x38800000u) {                                      // a normal binary16 (>= 2^-14)
        std::uint32_t h = (ax - 0x38000000u) >> 13;               // rebias the exponent by 127 - 15
        const std::uint32_t rest = ax & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry moves into the exponent: right
        return std::uint16_t(sign | h);
    }
    if (ax <= 0x33000000u) return std::uint16_t(sign);  // at most 2^-25: rounds to (signed) zero
    // A subnormal binary16, in units of 2^-24: the 24-bit significand shifted right by 126 - exponent.
    const std::uint32_t significand = (ax & 0x7fffffu) | 0x800000u, shift = 126u - (ax >> 23);
    std::uint32_t h = significand >> shift;
    const std::uint32_t rest = significand & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (h & 1u))) ++h;  // may reach 0x400, the smallest normal: right
    return std::uint16_t(sign | h);
}

/// The float of binary16 bits `h` (exact: every binary16 value is a float).
inline float half_bits_to_float(std::uint16_t h) noexcept {
    const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu,
                        mantissa = h & 0x3ffu;
    if (exponent == 0x1fu) return bits_float(sign | 0x7f800000u | (mantissa << 13));  // infinity, NaN
    if (exponent != 0) return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
    const float magnitude = float(mantissa) * 5.9604644775390625e-08f;  // subnormal or zero: m * 2^-24
    return bits_float(sign | float_bits(magnitude));
}

/// The bfloat16 nearest to `f` (ties to even; float's exponent range, so only values beyond the largest
/// bfloat16 round to infinity and subnormals stay subnormals); a NaN stays a quiet NaN with its sign and
/// the top 6 bits of its payload. Branch-free (the NaN case is a select), so loops over it vectorise.
inline std::uint16_t float_to_bfloat16_bits(float f) noexcept {
    const std::uint32_t x = float_bits(f);
    const std::uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16, quiet = (x >> 16) | 0x40u;
    return std::uint16_t(is_nan(f) ? quiet : rounded);  // a NaN keeps its top bits with the quiet bit set
}

/// The float of bfloat16 bits `b` (exact).
inline float bfloat16_bits_to_float(std::uint16_t b) noexcept {
    return bits_float(std::uint32_t(b) << 16);
}

/// The IEEE 754 binary16 format for WireFloat: conversions and the canonical NaN.
struct Binary16Format {
    /// The nearest binary16 bits (float_to_half_bits).
    static std::uint16_t encode(float f) noexcept { return float_to_half_bits(f); }
    /// The float of binary16 bits (half_bits_to_float).
    static float decode(std::uint16_t h) noexcept { return half_bits_to_float(h); }
    /// The quiet NaN of arithmetic results.
    static constexpr std::uint16_t nan = 0x7e00u;
};

/// The bfloat16 format for WireFloat: conversions and the canonical NaN.
struct BFloat16Format {
    /// The nearest bfloat16 bits (float_to_bfloat16_bits).
    static std::uint16_t encode(float f) noexcept { return float_to_bfloat16_bits(f); }
    /// The float of bfloat16 bits (bfloat16_bits_to_float).
    static float decode(std::uint16_t b) noexcept { return bfloat16_bits_to_float(b); }
    /// The quiet NaN of arithmetic results.
    static constexpr std::uint16_t nan = 0x7fc0u;
};

}  // namespace detail

/// A 16-bit floating-point value on the wire, stored as its bits in `Format` (detail::Binary16Format for
/// Half, detail::BFloat16Format for BFloat16) and computed with in float: a + b and a * b convert both
/// operands to float and round the result once; a NaN result is the format's canonical quiet NaN, so that
/// a + b and b + a have the same bits also for two different NaNs (MPI may swap the operands of a
/// commutative operation, and every rank must end with the same bits). Comparisons are those of the
/// floats (a NaN is unequal to everything). Travels as MPI_UINT16_T (`mpi_storage`).
///
/// @tparam Format provides `static std::uint16_t encode(float)` (round to nearest, ties to even),
///         `static float decode(std::uint16_t)` (exact) and `static constexpr std::uint16_t nan`.
template <class Format>
struct WireFloat {
    /// The MPI datatype's type: the value travels as its bits (mpi_type<WireFloat>() is MPI_UINT16_T).
    using mpi_storage = std::uint16_t;
    /// The bits.
    std::uint16_t bits = 0;

    /// Positive zero.
    WireFloat() noexcept = default;
    /// The value nearest to `f` (round to nearest, ties to even).
    explicit WireFloat(float f) noexcept : bits(Format::encode(f)) {}
    /// The value as a float (exact).
    explicit operator float() const noexcept { return Format::decode(bits); }
    /// The value with bits `b`.
    static WireFloat from_bits(std::uint16_t b) noexcept {
        WireFloat h;
        h.bits = b;
        return h;
    }
    /// `f` rounded, with every NaN the canonical quiet NaN (the results of arithmetic).
    static WireFloat rounded(float f) noexcept {
        return detail::is_nan(f) ? from_bits(Format::nan) : WireFloat(f);
    }

    /// a + b in float, rounded once.
    friend WireFloat operator+(WireFloat a, WireFloat b) noexcept { return rounded(float(a) + float(b)); }
    /// a * b in float, rounded once.
    friend WireFloat operator*(WireFloat a, WireFloat b) noexcept { return rounded(float(a) * float(b)); }
    /// Comparisons as floats.
    friend bool operator<(WireFloat a, WireFloat b) noexcept { return float(a) < float(b); }
    /// See operator<.
    friend bool operator>(WireFloat a, WireFloat b) noexcept { return float(a) > float(b); }
    /// See operator<.
    friend bool operator==(WireFloat a, WireFloat b) noexcept { return float(a) == float(b); }
    /// See operator<.
    friend bool operator!=(WireFloat a, WireFloat b) noexcept { return float(a) != float(b); }
};

/// An IEEE 754 binary16 ("fp16", "half") value: 1 sign, 5 exponent and 10 mantissa bits; largest finite
/// value 65504, smallest normal 2^-14, subnormals down to 2^-24; relative rounding error at most 2^-11.
using Half = WireFloat<detail::Binary16Format>;

/// A bfloat16 ("bf16") value: the upper 16 bits of a float (1 sign, 8 exponent, 7 mantissa bits), so it has
/// float's range, subnormals included, with a relative rounding error of at most 2^-8.
using BFloat16 = WireFloat<detail::BFloat16Format>;

/// True for the 16-bit wire float types (Half, BFloat16: any WireFloat).
template <class T>
inline constexpr bool is_wire_float_v = false;
/// Every WireFloat is a wire float.
template <class Format>
inline constexpr bool is_wire_float_v<WireFloat<Format>> = true;

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2, "Half and BFloat16 are their 16 bits");

namespace detail {

/// dst[i] = float_to_half_bits(src[i]) for i < n, one element at a time (halves_from_floats' reference).
inline void halves_from_floats_scalar(const float* src, std::uint16_t* dst, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i)
        dst[i] = float_to_half_bits(src[i]);
}

/// dst[i] = half_bits_to_float(src[i]) for i < n, one element at a time (floats_from_halves' reference).
inline void floats_from_halves_scalar(const std::uint16_t* src, float* dst, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i)
        dst[i] = half_bits_to_float(src[i]);
}

/// The binary16 sum of binary16 bits `a` and `b`: Half's operator+ on the bits (both converted to float,
/// added and rounded once, every NaN the quiet NaN 0x7e00).
inline std::uint16_t half_bits_sum(std::uint16_t a, std::uint16_t b) noexcept {
    return (Half::from_bits(a) + Half::from_bits(b)).bits;
}

/// dst[i] = half_bits_sum(dst[i], src[i]) for i < n, one element at a time (the reference of add_halves).
inline void add_halves_scalar(std::uint16_t* dst, const std::uint16_t* src, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i)
        dst[i] = half_bits_sum(dst[i], src[i]);
}

#ifdef DTRAIN_HAS_F16C_PATH
/// Whether this CPU has the F16C conversions and AVX (with the OS saving its registers), asked once. F16C is
/// read from CPUID leaf 1 (ECX bit 29): Clang 14's __builtin_cpu_supports does not know "f16c".
inline bool cpu_has_f16c() noexcept {
    static const bool has = [] {
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
        return __builtin_cpu_supports("avx") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 &&
               (ecx & (1u << 29)) != 0;
    }();
    return has;
}

/// halves_from_floats with F16C, 8 values at a time (requires cpu_has_f16c()). vcvtps2ph rounds to nearest
/// even whatever MXCSR says, keeps NaN payloads' top bits with the quiet bit set, and ignores DAZ/FTZ for
/// these values: bitwise float_to_half_bits.
__attribute__((target("avx,f16c"))) inline void halves_from_floats_f16c(const float* src, std::uint16_t* dst,
                                                                        std::size_t n) noexcept {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    halves_from_floats_scalar(src + i, dst + i, n - i);
}

/// Whether any of the 8 binary16 values in `h` is a NaN (whose vcvtph2ps result is quieted, unlike
/// half_bits_to_float's).
__attribute__((target("avx,f16c"))) inline bool any_half_nan(__m128i h) noexcept {
    const __m128i magnitude = _mm_and_si128(h, _mm_set1_epi16(0x7fff));
    return _mm_movemask_epi8(_mm_cmpgt_epi16(magnitude, _mm_set1_epi16(0x7c00))) != 0;
}

/// floats_from_halves with F16C, 8 values at a time (requires cpu_has_f16c()); blocks holding a NaN take
/// the scalar conversion, which keeps a signalling NaN signalling: bitwise half_bits_to_float.
__attribute__((target("avx,f16c"))) inline void floats_from_halves_f16c(const std::uint16_t* src, float* dst,
                                                                        std::size_t n) noexcept {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
        if (any_half_nan(h))
            floats_from_halves_scalar(src + i, dst + i, 8);
        else
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    floats_from_halves_scalar(src + i, dst + i, n - i);
}

/// add_halves with F16C, 8 values at a time (requires cpu_has_f16c()): the sums in float, NaN sums replaced
/// by 0x7e00 before rounding: bitwise half_bits_sum.
__attribute__((target("avx,f16c"))) inline void add_halves_f16c(std::uint16_t* dst, const std::uint16_t* src,
                                                                std::size_t n) noexcept {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(dst + i)));
        const __m256 b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
        const __m256 s = _mm256_add_ps(a, b);
        const __m256 nan = _mm256_cmp_ps(s, s, _CMP_UNORD_Q);
        const __m128i rounded = _mm256_cvtps_ph(s, _MM_FROUND_TO_NEAREST_INT);
        const __m128i nan16 = _mm_packs_epi32(_mm_castps_si128(_mm256_castps256_ps128(nan)),
                                              _mm_castps_si128(_mm256_extractf128_ps(nan, 1)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                         _mm_blendv_epi8(rounded, _mm_set1_epi16(0x7e00), nan16));
    }
    add_halves_scalar(dst + i, src + i, n - i);
}
#endif

/// dst[i] = float_to_half_bits(src[i]) for i < n: bitwise the same, with F16C when the CPU has it.
inline void halves_from_floats(const float* src, std::uint16_t* dst, std::size_t n) noexcept {
#ifdef DTRAIN_HAS_F16C_PATH
    if (cpu_has_f16c()) return halves_from_floats_f16c(src, dst, n);
#endif
    halves_from_floats_scalar(src, dst, n);
}

/// dst[i] = half_bits_to_float(src[i]) for i < n: bitwise the same, with F16C when the CPU has it.
inline void floats_from_halves(const std::uint16_t* src, float* dst, std::size_t n) noexcept {
#ifdef DTRAIN_HAS_F16C_PATH
    if (cpu_has_f16c()) return floats_from_halves_f16c(src, dst, n);
#endif
    floats_from_halves_scalar(src, dst, n);
}

/// dst[i] = half_bits_sum(dst[i], src[i]) for i < n (the ranges must not overlap): bitwise the same, with
/// F16C when the CPU has it.
inline void add_halves(std::uint16_t* dst, const std::uint16_t* src, std::size_t n) noexcept {
#ifdef DTRAIN_HAS_F16C_PATH
    if (cpu_has_f16c()) return add_halves_f16c(dst, src, n);
#endif
    add_halves_scalar(dst, src, n);
}

/// dst[i] = float_to_bfloat16_bits(src[i]) for i < n (vectorised by the compiler: the conversion is
/// branch-free).
inline void bfloat16s_from_floats(const float* __restrict src, std::uint16_t* __restrict dst,
                                  std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i)
        dst[i] = float_to_bfloat16_bits(src[i]);
}

/// dst[i] = bfloat16_bits_to_float(src[i]) for i < n.
inline void floats_from_bfloat16s(const std::uint16_t* __restrict src, float* __restrict dst,
                                  std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i)
        dst[i] = bfloat16_bits_to_float(src[i]);
}

/// dst[i] = the bfloat16 sum of dst[i] and src[i] for i < n (the ranges must not overlap): BFloat16's
/// operator+ on the bits (both converted to float, added and rounded once, every NaN the quiet NaN 0x7fc0),
/// vectorised by the compiler.
inline void add_bfloat16s(std::uint16_t* __restrict dst, const std::uint16_t* __restrict src,
                          std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i)
        dst[i] = (BFloat16::from_bits(dst[i]) + BFloat16::from_bits(src[i])).bits;
}

}  // namespace detail

}  // namespace dtrain

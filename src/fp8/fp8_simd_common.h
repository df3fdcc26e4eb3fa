/* fp8_simd_common.h — ISA-neutral constants shared by fp8_avx2.c and fp8_avx512.c.
 *
 * Both SIMD paths encode the same way, on the 32-bit pattern u of the f32 input
 * (bf16 widens by a 16-bit shift, f16 through F16C; both exact), with a = |u|:
 *  - normal results (a >= min_normal): round to nearest even by adding
 *    round_bias + (lowest kept bit) and shifting right by `shift`; the add also
 *    rebiases the exponent, and a mantissa carry moves into the exponent, which
 *    is exactly what RNE needs (the code of the next binade is code + 1).
 *  - subnormal results (a < min_normal): the float sum a + magic, with magic =
 *    2^23 * quantum, has an ulp of exactly one fp8 quantum, so the hardware's
 *    RNE does the rounding; bits(sum) - bits(magic) is the code (2^man_bits when
 *    it rounds up to the smallest normal, which is that normal's code).  f32
 *    subnormal inputs give 0 here with or without DAZ.
 *  - SAT: a = min(a, max_bits) before rounding (max is representable, so it
 *    rounds to max_code; Inf becomes max).  NONSAT: a rounded code above
 *    max_code (also every Inf/NaN pattern) is the overflow code.  NaN lanes are
 *    then overwritten by the NaN code.
 *  - sign: OR-ed into bit 7, except fnuz where a zero code stays 0x00 and the
 *    NaN/overflow code 0x80 already carries it.
 *  - e8m0: e = (a + 0x3FFFFF + (a >= 2^-126 ? 1 : 0)) >> 23, min 255: a normal
 *    input rounds up on a mantissa >= 1.5 (ties up), an f32 subnormal only
 *    above 1.5 (guard and a lower bit set), 0xFE rounds up to 0xFF, Inf/NaN give
 *    0x100 or more and clamp to 0xFF.
 * These reproduce fp8_ref.c bit for bit (tests/test_fp8_paths.c checks every
 * bf16 and f16 pattern and ~2M f32 edge values).  The SIMD code assumes the
 * default MXCSR rounding mode (round to nearest even), as the reference does.
 */
#ifndef OCTET_FP8_SIMD_COMMON_H
#define OCTET_FP8_SIMD_COMMON_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "octet.h"

/* What an encode loop reads: f32, bf16 or f16 elements; SRC_MUL / SRC_DIV:
 * f32 times / divided by a scale (one IEEE operation). */
enum { SRC_F32, SRC_BF16, SRC_F16, SRC_MUL, SRC_DIV };

/* What overflow and NaN produce. */
enum {
    FP8K_FN = 0,   /* e4m3fn: NaN and overflow both S.1111111 */
    FP8K_IEEE = 1, /* e5m2: overflow -> Inf S.11111.00, NaN -> S.1111111 */
    FP8K_FNUZ = 2  /* fnuz: NaN and overflow both 0x80, no -0 */
};

typedef struct fp8_simd_enc {
    uint32_t shift;      /* 23 - man_bits: f32 mantissa bits dropped */
    uint32_t round_bias; /* 2^(shift-1) - 1 - ((127 - bias) << 23), mod 2^32 */
    uint32_t min_normal; /* f32 bits of 2^(1 - bias) */
    uint32_t magic;      /* f32 bits of 2^(24 - bias - man_bits) */
    uint32_t max_bits;   /* f32 bits of the largest finite value */
    uint32_t max_code;   /* its code (without sign) */
    uint32_t kind;       /* FP8K_* */
} fp8_simd_enc;

#define FP8_SIMD_ENC(mb, bias, maxbits, maxcode, kind)                                             \
    {                                                                                              \
        23u - (mb), ((1u << (22u - (mb))) - 1u) - ((127u - (bias)) << 23), (128u - (bias)) << 23,  \
            (151u - (bias) - (mb)) << 23, maxbits, maxcode, kind                                   \
    }

/* Indexed by oct_fp8_format (E8M0FNU has its own path). */
static const fp8_simd_enc k_fp8_simd_enc[4] = {
    [OCT_FP8_E4M3FN] = FP8_SIMD_ENC(3u, 7u, 0x43E00000u /* 448 */, 0x7Eu, FP8K_FN),
    [OCT_FP8_E5M2] = FP8_SIMD_ENC(2u, 15u, 0x47600000u /* 57344 */, 0x7Bu, FP8K_IEEE),
    [OCT_FP8_E4M3FNUZ] = FP8_SIMD_ENC(3u, 8u, 0x43700000u /* 240 */, 0x7Fu, FP8K_FNUZ),
    [OCT_FP8_E5M2FNUZ] = FP8_SIMD_ENC(2u, 16u, 0x47600000u /* 57344 */, 0x7Fu, FP8K_FNUZ),
};

/* Arithmetic decode (AVX2): magnitude m7 = code & 0x7F;
 * m7 >= sub_limit: bits = (m7 << shift) + norm_add; else m7 * sub_scale
 * (an exact int -> float conversion and power-of-two product, no denormals). */
typedef struct fp8_simd_dec {
    uint32_t shift;     /* 23 - man_bits */
    uint32_t norm_add;  /* (127 - bias) << 23 */
    uint32_t sub_limit; /* 2^man_bits: first normal magnitude code */
    uint32_t sub_scale; /* f32 bits of 2^(1 - bias - man_bits) */
} fp8_simd_dec;

#define FP8_SIMD_DEC(mb, bias)                                                                     \
    {                                                                                              \
        23u - (mb), (127u - (bias)) << 23, 1u << (mb), (128u - (bias) - (mb)) << 23                \
    }

static const fp8_simd_dec k_fp8_simd_dec[4] = {
    [OCT_FP8_E4M3FN] = FP8_SIMD_DEC(3u, 7u),
    [OCT_FP8_E5M2] = FP8_SIMD_DEC(2u, 15u),
    [OCT_FP8_E4M3FNUZ] = FP8_SIMD_DEC(3u, 8u),
    [OCT_FP8_E5M2FNUZ] = FP8_SIMD_DEC(2u, 16u),
};

/* f32 bit patterns the decoders produce for specials (those of fp8_ref.c). */
#define FP8_SIMD_QNAN 0x7FC00000u
#define FP8_SIMD_INF 0x7F800000u
#define FP8_SIMD_E8M0_ZERO 0x00400000u /* code 0x00 = 2^-127, an f32 subnormal */

/* SAT clamp bound as f32 bits: min(max, qmax) when qmax > 0 (qmax <= 0 or NaN:
 * the format max).  Positive floats order like their bit patterns, so an
 * integer min on |x| bits clamps exactly like the scalar compare. */
static inline uint32_t fp8_simd_clamp_bits(oct_fp8_format f, float qmax)
{
    if (f == OCT_FP8_E8M0FNU)
        return 0;
    uint32_t m = k_fp8_simd_enc[f].max_bits, q;
    if (!(qmax > 0.0f))
        return m;
    memcpy(&q, &qmax, sizeof q);
    return q < m ? q : m;
}

/* The float for a max of magnitude bits: NaN (the canonical one) when any lane
 * held a NaN pattern. */
static inline float fp8_simd_amax_result(uint32_t bits)
{
    float r;
    if (bits > FP8_SIMD_INF)
        return NAN;
    memcpy(&r, &bits, sizeof r);
    return r;
}

#endif

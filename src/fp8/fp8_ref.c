/* fp8_ref.c — scalar reference encoders and decoders for the five formats.
 *
 * This file is the definition the SIMD paths are tested against.  Rules
 * (docs/NUMERICS.md §The five formats):
 *  - decode: E>0: (-1)^S 2^(E-bias) (1 + m/2^w); E=0: (-1)^S 2^(1-bias) m/2^w;
 *    e4m3fn 0x7F/0xFF NaN; e5m2 E=31 m=0 Inf, m!=0 NaN; fnuz 0x80 NaN;
 *    e8m0 2^(b-127), 0xFF NaN.
 *  - encode: exact f32 input (bf16/f16 widen exactly), round to nearest, ties
 *    to even, into subnormals; sign kept on zero except fnuz (no -0).
 *    NONSAT: a result above max -> NaN (fn/fnuz) or Inf (e5m2); Inf input
 *    likewise.  SAT: clamp |x| to max first (Inf -> max).  NaN -> NaN.
 *  - e8m0: biased f32 exponent; NaN/Inf -> 0xFF; sign ignored; normal inputs
 *    round up when the first mantissa bit is set (ties up), f32 subnormals only
 *    when it and a lower bit are set; 0 -> 0x00.  SAT behaves like NONSAT.
 */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "fp8/fp8_impl.h"

typedef struct fp8_desc {
    int exp_bits, man_bits, bias;
    int fnuz;    /* 1: single NaN 0x80, no negative zero, no Inf */
    int has_inf; /* e5m2 */
    uint8_t max_code;
    float max;
} fp8_desc;

static const fp8_desc k_desc[4] = {
    [OCT_FP8_E4M3FN] = {4, 3, 7, 0, 0, 0x7E, 448.0f},
    [OCT_FP8_E5M2] = {5, 2, 15, 0, 1, 0x7B, 57344.0f},
    [OCT_FP8_E4M3FNUZ] = {4, 3, 8, 1, 0, 0x7F, 240.0f},
    [OCT_FP8_E5M2FNUZ] = {5, 2, 16, 1, 0, 0x7F, 57344.0f},
};

static uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static uint8_t nan_code(oct_fp8_format f, uint32_t sign)
{
    switch (f) {
    case OCT_FP8_E4M3FN: return (uint8_t)(0x7Fu | (sign << 7));
    case OCT_FP8_E5M2: return (uint8_t)(0x7Fu | (sign << 7));
    case OCT_FP8_E8M0FNU: return 0xFF;
    default: return 0x80;
    }
}

/* Code for a non-saturated overflow (result above max, or +-Inf input). */
static uint8_t overflow_code(oct_fp8_format f, uint32_t sign)
{
    if (f == OCT_FP8_E5M2)
        return (uint8_t)(0x7Cu | (sign << 7));
    return nan_code(f, sign);
}

static uint8_t encode_e8m0(float x)
{
    uint32_t u = f32_bits(x);
    uint32_t exponent = (u >> 23) & 0xFFu;
    uint32_t mantissa = u & 0x7FFFFFu;
    if (exponent == 0xFFu)
        return 0xFF;
    bool guard = (mantissa & 0x400000u) != 0;
    bool sticky = (mantissa & 0x3FFFFFu) != 0;
    if (guard && (sticky || exponent > 0))
        exponent++; /* 0xFE + 1 -> 0xFF: NaN, as PyTorch does */
    return (uint8_t)exponent;
}

uint8_t oct_fp8_ref_encode(oct_fp8_format f, oct_cast_mode m, float x)
{
    if (f == OCT_FP8_E8M0FNU)
        return encode_e8m0(x);
    const fp8_desc *d = &k_desc[f];
    uint32_t sign = f32_bits(x) >> 31;
    if (isnan(x))
        return nan_code(f, sign);
    double a = fabs((double)x);
    if (m == OCT_CAST_SAT && a > (double)d->max)
        a = (double)d->max;
    if (isinf(a))
        return overflow_code(f, sign);
    uint8_t zero = d->fnuz ? 0x00 : (uint8_t)(sign << 7);
    if (a == 0.0)
        return zero;
    /* Quantum (spacing of representable values) at a's binade, never below
     * the subnormal spacing 2^(1-bias-man_bits). */
    int e2;
    frexp(a, &e2); /* a = fr * 2^e2, fr in [0.5,1): floor(log2 a) = e2-1 */
    int min_exp = 1 - d->bias;
    int e = e2 - 1 < min_exp ? min_exp : e2 - 1;
    double quantum = ldexp(1.0, e - d->man_bits);
    double n = nearbyint(a / quantum); /* exact division; RNE */
    double val = n * quantum;
    if (val == 0.0)
        return zero;
    if (val > (double)d->max)
        return overflow_code(f, sign);
    /* Encode val: normal if val >= 2^min_exp. */
    int ve2;
    double vfr = frexp(val, &ve2);
    int ve = ve2 - 1;
    uint32_t E, man;
    if (ve < min_exp) {
        E = 0;
        man = (uint32_t)ldexp(val, d->man_bits - min_exp);
    } else {
        E = (uint32_t)(ve + d->bias);
        man = (uint32_t)ldexp(vfr * 2.0 - 1.0, d->man_bits);
    }
    return (uint8_t)((sign << 7) | (E << d->man_bits) | man);
}

float oct_fp8_ref_decode(oct_fp8_format f, uint8_t code)
{
    if (f == OCT_FP8_E8M0FNU) {
        if (code == 0xFF)
            return NAN;
        return ldexpf(1.0f, (int)code - 127);
    }
    const fp8_desc *d = &k_desc[f];
    uint32_t sign = code >> 7;
    uint32_t E = ((uint32_t)code >> d->man_bits) & ((1u << d->exp_bits) - 1u);
    uint32_t man = (uint32_t)code & ((1u << d->man_bits) - 1u);
    if (d->fnuz) {
        if (code == 0x80)
            return NAN;
    } else if (d->has_inf) {
        if (E == 31u)
            return man ? (sign ? -NAN : NAN) : (sign ? -INFINITY : INFINITY);
    } else if ((code & 0x7Fu) == 0x7Fu) {
        return sign ? -NAN : NAN;
    }
    float v;
    if (E == 0)
        v = ldexpf((float)man, 1 - d->bias - d->man_bits);
    else
        v = ldexpf((float)((1u << d->man_bits) | man), (int)E - d->bias - d->man_bits);
    return sign ? -v : v;
}

float oct_fp8_max(oct_fp8_format f)
{
    if (f == OCT_FP8_E8M0FNU)
        return ldexpf(1.0f, 127);
    if ((unsigned)f >= OCT_FP8_FORMAT_COUNT)
        return 0.0f;
    return k_desc[f].max;
}

static float g_tables[OCT_FP8_FORMAT_COUNT][256];
static int g_tables_ready[OCT_FP8_FORMAT_COUNT];

const float *oct_fp8_decode_table(oct_fp8_format f)
{
    /* Idempotent fill: concurrent first calls write identical values. */
    if (!__atomic_load_n(&g_tables_ready[f], __ATOMIC_ACQUIRE)) {
        for (int c = 0; c < 256; c++)
            g_tables[f][c] = oct_fp8_ref_decode(f, (uint8_t)c);
        __atomic_store_n(&g_tables_ready[f], 1, __ATOMIC_RELEASE);
    }
    return g_tables[f];
}

static void ref_from_f32(oct_fp8_format f, oct_cast_mode m, const float *src, uint8_t *dst,
                         size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = oct_fp8_ref_encode(f, m, src[i]);
}

static void ref_from_bf16(oct_fp8_format f, oct_cast_mode m, const uint16_t *src, uint8_t *dst,
                          size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = oct_fp8_ref_encode(f, m, oct_bf16_to_f32(src[i]));
}

static void ref_from_f16(oct_fp8_format f, oct_cast_mode m, const uint16_t *src, uint8_t *dst,
                         size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = oct_fp8_ref_encode(f, m, oct_f16_to_f32(src[i]));
}

static void ref_to_f32(oct_fp8_format f, const uint8_t *src, float *dst, size_t n)
{
    const float *t = oct_fp8_decode_table(f);
    for (size_t i = 0; i < n; i++)
        dst[i] = t[src[i]];
}

static void ref_from_f32_scaled(oct_fp8_format f, const float *src, uint8_t *dst, size_t n,
                                float scale, bool divide, float qmax)
{
    if (isnan(scale)) { /* NaN * NaN keeps either operand's sign: pin it */
        memset(dst, oct_fp8_ref_encode(f, OCT_CAST_SAT, scale), n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float y = divide ? src[i] / scale : src[i] * scale;
        if (qmax > 0.0f && fabsf(y) > qmax)
            y = copysignf(qmax, y);
        dst[i] = oct_fp8_ref_encode(f, OCT_CAST_SAT, y);
    }
}

static float ref_amax_f32(const float *src, size_t n)
{
    float m = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(src[i]);
        if (isnan(a))
            return NAN;
        m = a > m ? a : m;
    }
    return m;
}

static void ref_from_f32_segmul(oct_fp8_format f, const float *src, uint8_t *dst, size_t n,
                                size_t seg, const float *mul, float qmax)
{
    for (size_t c0 = 0, c = 0; c0 < n; c0 += seg, c++)
        ref_from_f32_scaled(f, src + c0, dst + c0, n - c0 < seg ? n - c0 : seg, mul[c], false,
                            qmax);
}

const oct_fp8_impl oct_fp8_impl_ref = {"ref",        ref_from_f32,       ref_from_bf16,
                                       ref_from_f16, ref_to_f32,         ref_from_f32_scaled,
                                       ref_amax_f32, ref_from_f32_segmul};

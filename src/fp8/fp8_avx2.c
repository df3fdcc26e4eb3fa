/* fp8_avx2.c — AVX2 (+FMA, F16C) conversion paths.
 *
 * Encode: 8 lanes of the integer/float scheme in fp8_simd_common.h, 32
 * elements per iteration packed to bytes with two saturating packs and a
 * dword permute.  Decode: arithmetic (shift-and-rebias for normals, an exact
 * int->float product for subnormals, blends for NaN/Inf).  Tails go through a
 * zero-padded stack block so the vector kernel is the only code path.
 * Everything is bit-exact with fp8_ref.c.
 */
#include <immintrin.h>
#include <string.h>

#include "fp8/fp8_impl.h"
#include "fp8/fp8_simd_common.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* ------------------------------------------------------------------ encode */

ALWAYS_INLINE __m256i set1(uint32_t v)
{
    return _mm256_set1_epi32((int)v);
}

ALWAYS_INLINE __m256i enc_e8m0(__m256i u)
{
    __m256i a = _mm256_and_si256(u, set1(0x7FFFFFFFu));
    __m256i nrm = _mm256_cmpgt_epi32(a, set1(0x007FFFFFu)); /* -1 where a >= 2^-126 */
    __m256i t = _mm256_sub_epi32(_mm256_add_epi32(a, set1(0x003FFFFFu)), nrm);
    return _mm256_min_epu32(_mm256_srli_epi32(t, 23), set1(0xFFu));
}

/* 8 f32 patterns -> 8 codes, one per dword (0..255).  f is E4M3FN..E5M2FNUZ.
 * SAT clamps |x| to `clamp` (f32 bits, <= max_bits; NaN lanes are handled apart).
 * All compares are signed on values in [0, 2^31). */
ALWAYS_INLINE __m256i enc_fp8(__m256i u, oct_fp8_format f, oct_cast_mode m, __m256i clamp)
{
    const fp8_simd_enc *P = &k_fp8_simd_enc[f];
    const __m128i shift = _mm_cvtsi32_si128((int)P->shift);
    __m256i a = _mm256_and_si256(u, set1(0x7FFFFFFFu));
    __m256i nan = _mm256_cmpgt_epi32(a, set1(FP8_SIMD_INF));
    if (m == OCT_CAST_SAT)
        a = _mm256_min_epi32(a, clamp);
    __m256i odd = _mm256_and_si256(_mm256_srl_epi32(a, shift), set1(1));
    __m256i cn = _mm256_add_epi32(_mm256_add_epi32(a, set1(P->round_bias)), odd);
    cn = _mm256_srl_epi32(cn, shift);
    __m256i magic = set1(P->magic);
    __m256 sum = _mm256_add_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(magic));
    __m256i cs = _mm256_sub_epi32(_mm256_castps_si256(sum), magic);
    __m256i sub = _mm256_cmpgt_epi32(set1(P->min_normal), a);
    __m256i c = _mm256_blendv_epi8(cn, cs, sub);
    __m256i ovf = _mm256_cmpgt_epi32(c, set1(P->max_code));
    __m256i s8 = _mm256_and_si256(_mm256_srli_epi32(u, 24), set1(0x80u));
    if (P->kind == FP8K_FNUZ) {
        c = _mm256_blendv_epi8(c, set1(0x80u), _mm256_or_si256(ovf, nan));
        __m256i zero = _mm256_cmpeq_epi32(c, _mm256_setzero_si256());
        return _mm256_or_si256(c, _mm256_andnot_si256(zero, s8));
    }
    if (P->kind == FP8K_IEEE) {
        c = _mm256_blendv_epi8(c, set1(0x7Cu), ovf);
        c = _mm256_blendv_epi8(c, set1(0x7Fu), nan);
    } else {
        c = _mm256_blendv_epi8(c, set1(0x7Fu), _mm256_or_si256(ovf, nan));
    }
    return _mm256_or_si256(c, s8);
}

ALWAYS_INLINE __m256i enc_any(__m256i u, oct_fp8_format f, oct_cast_mode m, __m256i clamp)
{
    return f == OCT_FP8_E8M0FNU ? enc_e8m0(u) : enc_fp8(u, f, m, clamp);
}

/* 8 elements at p[i..i+7] -> 8 f32 patterns (exact widening). */
ALWAYS_INLINE __m256i load_src(int src, const void *p, size_t i, __m256 scale)
{
    if (src == SRC_F32 || src == SRC_MUL || src == SRC_DIV) {
        __m256 x = _mm256_loadu_ps((const float *)p + i);
        if (src == SRC_MUL)
            x = _mm256_mul_ps(x, scale);
        else if (src == SRC_DIV)
            x = _mm256_div_ps(x, scale);
        return _mm256_castps_si256(x);
    }
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)p + i));
    if (src == SRC_BF16)
        return _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    return _mm256_castps_si256(_mm256_cvtph_ps(h));
}

/* 32 elements -> 32 codes. */
ALWAYS_INLINE void enc_block32(int src, oct_fp8_format f, oct_cast_mode m, const void *s, size_t i,
                               uint8_t *d, __m256 sc, __m256i cl)
{
    __m256i c0 = enc_any(load_src(src, s, i, sc), f, m, cl);
    __m256i c1 = enc_any(load_src(src, s, i + 8, sc), f, m, cl);
    __m256i c2 = enc_any(load_src(src, s, i + 16, sc), f, m, cl);
    __m256i c3 = enc_any(load_src(src, s, i + 24, sc), f, m, cl);
    /* packs work per 128-bit lane: dword order c0lo c1lo c2lo c3lo | c0hi c1hi ... */
    __m256i w01 = _mm256_packus_epi32(c0, c1);
    __m256i w23 = _mm256_packus_epi32(c2, c3);
    __m256i b = _mm256_packus_epi16(w01, w23);
    b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)d, b);
}

ALWAYS_INLINE void enc_loop(int src, oct_fp8_format f, oct_cast_mode m, const void *s, uint8_t *d,
                            size_t n, float scale, uint32_t clamp_bits)
{
    const __m256 sc = _mm256_set1_ps(scale);
    const __m256i cl = set1(clamp_bits);
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        enc_block32(src, f, m, s, i, d + i, sc, cl);
    if (i < n) {
        /* Zero-padded copy of the tail; zeros encode harmlessly. */
        size_t left = n - i, esz = src == SRC_BF16 || src == SRC_F16 ? 2 : 4;
        _Alignas(32) uint8_t in[32 * 4];
        uint8_t out[32];
        memset(in, 0, sizeof in);
        memcpy(in, (const uint8_t *)s + i * esz, left * esz);
        enc_block32(src, f, m, in, 0, out, sc, cl);
        memcpy(d + i, out, left);
    }
}

#include "fp8/fp8_simd_enc.h" /* from_f32, from_bf16, from_f16, from_f32_scaled */

/* max |x| as the integer max of the magnitude bits (positive floats order like
 * their bit patterns; every NaN pattern is above +Inf). */
static float amax_f32(const float *s, size_t n)
{
    const __m256i mag = set1(0x7FFFFFFFu);
    __m256i m0 = _mm256_setzero_si256(), m1 = m0, m2 = m0, m3 = m0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        m0 = _mm256_max_epu32(m0,
                              _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(s + i)), mag));
        m1 = _mm256_max_epu32(
            m1, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(s + i + 8)), mag));
        m2 = _mm256_max_epu32(
            m2, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(s + i + 16)), mag));
        m3 = _mm256_max_epu32(
            m3, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(s + i + 24)), mag));
    }
    m0 = _mm256_max_epu32(_mm256_max_epu32(m0, m1), _mm256_max_epu32(m2, m3));
    _Alignas(32) uint32_t lanes[8];
    _mm256_store_si256((__m256i *)lanes, m0);
    uint32_t best = 0;
    for (int k = 0; k < 8; k++)
        best = lanes[k] > best ? lanes[k] : best;
    for (; i < n; i++) {
        uint32_t u;
        memcpy(&u, s + i, sizeof u);
        u &= 0x7FFFFFFFu;
        best = u > best ? u : best;
    }
    return fp8_simd_amax_result(best);
}

/* ------------------------------------------------------------------ decode */

ALWAYS_INLINE __m256i dec_e8m0(__m256i c)
{
    __m256i r = _mm256_slli_epi32(c, 23);
    r = _mm256_blendv_epi8(r, set1(FP8_SIMD_E8M0_ZERO),
                           _mm256_cmpeq_epi32(c, _mm256_setzero_si256()));
    return _mm256_blendv_epi8(r, set1(FP8_SIMD_QNAN), _mm256_cmpeq_epi32(c, set1(0xFFu)));
}

/* 8 codes (one per dword) -> 8 f32 patterns.  f is E4M3FN..E5M2FNUZ. */
ALWAYS_INLINE __m256i dec_fp8(__m256i c, oct_fp8_format f)
{
    const fp8_simd_dec *P = &k_fp8_simd_dec[f];
    __m256i m7 = _mm256_and_si256(c, set1(0x7Fu));
    __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, set1(0x80u)), 24);
    __m256i nrm =
        _mm256_add_epi32(_mm256_sll_epi32(m7, _mm_cvtsi32_si128((int)P->shift)), set1(P->norm_add));
    __m256 sub = _mm256_mul_ps(_mm256_cvtepi32_ps(m7), _mm256_castsi256_ps(set1(P->sub_scale)));
    __m256i is_sub = _mm256_cmpgt_epi32(set1(P->sub_limit), m7);
    __m256i r = _mm256_blendv_epi8(nrm, _mm256_castps_si256(sub), is_sub);
    if (f == OCT_FP8_E4M3FN) {
        r = _mm256_blendv_epi8(r, set1(FP8_SIMD_QNAN), _mm256_cmpeq_epi32(m7, set1(0x7Fu)));
    } else if (f == OCT_FP8_E5M2) {
        r = _mm256_blendv_epi8(r, set1(FP8_SIMD_INF), _mm256_cmpeq_epi32(m7, set1(0x7Cu)));
        r = _mm256_blendv_epi8(r, set1(FP8_SIMD_QNAN), _mm256_cmpgt_epi32(m7, set1(0x7Cu)));
    }
    r = _mm256_or_si256(r, sign);
    if (f == OCT_FP8_E4M3FNUZ || f == OCT_FP8_E5M2FNUZ) /* 0x80: +NaN (no -0) */
        r = _mm256_blendv_epi8(r, set1(FP8_SIMD_QNAN), _mm256_cmpeq_epi32(c, set1(0x80u)));
    return r;
}

ALWAYS_INLINE __m256i dec_any(__m256i c, oct_fp8_format f)
{
    return f == OCT_FP8_E8M0FNU ? dec_e8m0(c) : dec_fp8(c, f);
}

ALWAYS_INLINE void dec_loop(oct_fp8_format f, const uint8_t *s, float *d, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i b = _mm_loadu_si128((const __m128i *)(s + i));
        __m256i r0 = dec_any(_mm256_cvtepu8_epi32(b), f);
        __m256i r1 = dec_any(_mm256_cvtepu8_epi32(_mm_srli_si128(b, 8)), f);
        _mm256_storeu_si256((__m256i *)(d + i), r0);
        _mm256_storeu_si256((__m256i *)(d + i + 8), r1);
    }
    if (i < n) {
        size_t left = n - i;
        uint8_t in[16] = {0};
        _Alignas(32) float out[16];
        memcpy(in, s + i, left);
        __m128i b = _mm_loadu_si128((const __m128i *)in);
        _mm256_store_si256((__m256i *)out, dec_any(_mm256_cvtepu8_epi32(b), f));
        _mm256_store_si256((__m256i *)(out + 8),
                           dec_any(_mm256_cvtepu8_epi32(_mm_srli_si128(b, 8)), f));
        memcpy(d + i, out, left * sizeof(float));
    }
}

static void to_f32(oct_fp8_format f, const uint8_t *s, float *d, size_t n)
{
    switch (f) {
    case OCT_FP8_E4M3FN: dec_loop(OCT_FP8_E4M3FN, s, d, n); break;
    case OCT_FP8_E5M2: dec_loop(OCT_FP8_E5M2, s, d, n); break;
    case OCT_FP8_E4M3FNUZ: dec_loop(OCT_FP8_E4M3FNUZ, s, d, n); break;
    case OCT_FP8_E5M2FNUZ: dec_loop(OCT_FP8_E5M2FNUZ, s, d, n); break;
    case OCT_FP8_E8M0FNU: dec_loop(OCT_FP8_E8M0FNU, s, d, n); break;
    default: break;
    }
}

static void from_f32_segmul(oct_fp8_format f, const float *src, uint8_t *dst, size_t n, size_t seg,
                            const float *mul, float qmax)
{
    for (size_t c0 = 0, c = 0; c0 < n; c0 += seg, c++)
        from_f32_scaled(f, src + c0, dst + c0, n - c0 < seg ? n - c0 : seg, mul[c], false, qmax);
}

const oct_fp8_impl oct_fp8_impl_avx2 = {"avx2", from_f32,        from_bf16, from_f16,
                                        to_f32, from_f32_scaled, amax_f32,  from_f32_segmul};

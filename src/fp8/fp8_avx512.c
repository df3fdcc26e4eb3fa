/* fp8_avx512.c — AVX-512 (F/BW/VL/DQ + VBMI) conversion paths.
 *
 * Encode: 16 lanes of the integer/float scheme in fp8_simd_common.h, tails by
 * masked loads and stores.  Decode: every fp8 value is exactly a bf16 (its f32
 * pattern has 16 zero low bits), so the output dword is [0, 0, LO[c], HI[c]]
 * with two 256-byte tables built from the reference decode table; VBMI
 * vpermi2b looks up 128 entries at a time (bit 7 of the code picks the half
 * through a mask).  Everything is bit-exact with fp8_ref.c.
 */
#include <immintrin.h>
#include <string.h>

#include "fp8/fp8_impl.h"
#include "fp8/fp8_simd_common.h"

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Lanes [0, min(left, 16)) of a 16-lane vector. */
ALWAYS_INLINE __mmask16 tail_mask(size_t left)
{
    return (__mmask16)(left >= 16 ? 0xFFFFu : (1u << left) - 1u);
}

/* ------------------------------------------------------------------ encode */

ALWAYS_INLINE __m512i enc_e8m0(__m512i u)
{
    __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
    __mmask16 nrm = _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32(0x00800000));
    __m512i t = _mm512_add_epi32(a, _mm512_set1_epi32(0x003FFFFF));
    t = _mm512_mask_add_epi32(t, nrm, t, _mm512_set1_epi32(1));
    return _mm512_min_epu32(_mm512_srli_epi32(t, 23), _mm512_set1_epi32(0xFF));
}

/* 16 f32 patterns -> 16 codes, one per dword (0..255).  f is E4M3FN..E5M2FNUZ. */
ALWAYS_INLINE __m512i enc_fp8(__m512i u, oct_fp8_format f, oct_cast_mode m)
{
    const fp8_simd_enc *P = &k_fp8_simd_enc[f];
    const __m128i shift = _mm_cvtsi32_si128((int)P->shift);
    __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
    __mmask16 nan = _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32((int)FP8_SIMD_INF));
    if (m == OCT_CAST_SAT)
        a = _mm512_min_epu32(a, _mm512_set1_epi32((int)P->max_bits));
    /* normal: RNE by add-bias-and-carry */
    __m512i odd = _mm512_and_si512(_mm512_srl_epi32(a, shift), _mm512_set1_epi32(1));
    __m512i cn = _mm512_add_epi32(_mm512_add_epi32(a, _mm512_set1_epi32((int)P->round_bias)), odd);
    cn = _mm512_srl_epi32(cn, shift);
    /* subnormal: the FPU rounds a + magic */
    __m512i magic = _mm512_set1_epi32((int)P->magic);
    __m512 sum = _mm512_add_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(magic));
    __m512i cs = _mm512_sub_epi32(_mm512_castps_si512(sum), magic);
    __mmask16 sub = _mm512_cmplt_epu32_mask(a, _mm512_set1_epi32((int)P->min_normal));
    __m512i c = _mm512_mask_mov_epi32(cn, sub, cs);
    __mmask16 ovf = _mm512_cmpgt_epu32_mask(c, _mm512_set1_epi32((int)P->max_code));
    /* sign -> bit 7 */
    __m512i s8 = _mm512_and_si512(_mm512_srli_epi32(u, 24), _mm512_set1_epi32(0x80));
    if (P->kind == FP8K_FNUZ) {
        c = _mm512_mask_mov_epi32(c, (__mmask16)(ovf | nan), _mm512_set1_epi32(0x80));
        return _mm512_mask_or_epi32(c, _mm512_test_epi32_mask(c, c), c, s8);
    }
    if (P->kind == FP8K_IEEE) {
        c = _mm512_mask_mov_epi32(c, ovf, _mm512_set1_epi32(0x7C));
        c = _mm512_mask_mov_epi32(c, nan, _mm512_set1_epi32(0x7F));
    } else {
        c = _mm512_mask_mov_epi32(c, (__mmask16)(ovf | nan), _mm512_set1_epi32(0x7F));
    }
    return _mm512_or_si512(c, s8);
}

ALWAYS_INLINE __m512i enc_any(__m512i u, oct_fp8_format f, oct_cast_mode m)
{
    return f == OCT_FP8_E8M0FNU ? enc_e8m0(u) : enc_fp8(u, f, m);
}

/* Source loaders: 16 elements -> 16 f32 patterns (exact widening); `k` masks a tail. */
ALWAYS_INLINE __m512i load_f32(const void *p, size_t i, __mmask16 k)
{
    return _mm512_maskz_loadu_epi32(k, (const float *)p + i);
}

ALWAYS_INLINE __m512i load_bf16(const void *p, size_t i, __mmask16 k)
{
    __m256i h = _mm256_maskz_loadu_epi16(k, (const uint16_t *)p + i);
    return _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
}

ALWAYS_INLINE __m512i load_f16(const void *p, size_t i, __mmask16 k)
{
    __m256i h = _mm256_maskz_loadu_epi16(k, (const uint16_t *)p + i);
    return _mm512_castps_si512(_mm512_cvtph_ps(h));
}

enum { SRC_F32, SRC_BF16, SRC_F16 };

ALWAYS_INLINE __m512i load_src(int src, const void *p, size_t i, __mmask16 k)
{
    if (src == SRC_F32)
        return load_f32(p, i, k);
    if (src == SRC_BF16)
        return load_bf16(p, i, k);
    return load_f16(p, i, k);
}

/* The loop, specialised at compile time for (source, format, mode); 64 elements
 * per iteration keep four independent chains in flight. */
ALWAYS_INLINE void enc_loop(int src, oct_fp8_format f, oct_cast_mode m, const void *s,
                            uint8_t *d, size_t n)
{
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512i c0 = enc_any(load_src(src, s, i, 0xFFFF), f, m);
        __m512i c1 = enc_any(load_src(src, s, i + 16, 0xFFFF), f, m);
        __m512i c2 = enc_any(load_src(src, s, i + 32, 0xFFFF), f, m);
        __m512i c3 = enc_any(load_src(src, s, i + 48, 0xFFFF), f, m);
        _mm_storeu_si128((__m128i *)(d + i), _mm512_cvtepi32_epi8(c0));
        _mm_storeu_si128((__m128i *)(d + i + 16), _mm512_cvtepi32_epi8(c1));
        _mm_storeu_si128((__m128i *)(d + i + 32), _mm512_cvtepi32_epi8(c2));
        _mm_storeu_si128((__m128i *)(d + i + 48), _mm512_cvtepi32_epi8(c3));
    }
    for (; i < n; i += 16) {
        size_t left = n - i;
        __mmask16 k = tail_mask(left);
        __m512i c = enc_any(load_src(src, s, i, k), f, m);
        _mm512_mask_cvtepi32_storeu_epi8(d + i, k, c);
    }
}

#define ENC_CASES(SRC, m, s, d, n)                                                             \
    switch (f) {                                                                               \
    case OCT_FP8_E4M3FN: enc_loop(SRC, OCT_FP8_E4M3FN, m, s, d, n); break;                     \
    case OCT_FP8_E5M2: enc_loop(SRC, OCT_FP8_E5M2, m, s, d, n); break;                         \
    case OCT_FP8_E4M3FNUZ: enc_loop(SRC, OCT_FP8_E4M3FNUZ, m, s, d, n); break;                 \
    case OCT_FP8_E5M2FNUZ: enc_loop(SRC, OCT_FP8_E5M2FNUZ, m, s, d, n); break;                 \
    case OCT_FP8_E8M0FNU: enc_loop(SRC, OCT_FP8_E8M0FNU, m, s, d, n); break;                   \
    default: break;                                                                            \
    }

#define ENC_DISPATCH(SRC)                                                                      \
    do {                                                                                       \
        if (m == OCT_CAST_SAT) {                                                               \
            ENC_CASES(SRC, OCT_CAST_SAT, s, d, n)                                              \
        } else {                                                                               \
            ENC_CASES(SRC, OCT_CAST_NONSAT, s, d, n)                                           \
        }                                                                                      \
    } while (0)

static void from_f32(oct_fp8_format f, oct_cast_mode m, const float *s, uint8_t *d, size_t n)
{
    ENC_DISPATCH(SRC_F32);
}

static void from_bf16(oct_fp8_format f, oct_cast_mode m, const uint16_t *s, uint8_t *d, size_t n)
{
    ENC_DISPATCH(SRC_BF16);
}

static void from_f16(oct_fp8_format f, oct_cast_mode m, const uint16_t *s, uint8_t *d, size_t n)
{
    ENC_DISPATCH(SRC_F16);
}

/* ------------------------------------------------------------------ decode */

/* Per format: byte tables LO[c] = bits(decode(c)) >> 16 & 0xFF and HI[c] =
 * bits >> 24, as four 64-byte vectors each (codes 0-63, 64-127, 128-191,
 * 192-255).  Filled on first use from the reference table; concurrent first
 * calls write identical bytes. */
typedef struct dec_tables {
    _Alignas(64) uint8_t lo[256];
    _Alignas(64) uint8_t hi[256];
} dec_tables;

static dec_tables g_dec[OCT_FP8_FORMAT_COUNT];
static int g_dec_state[OCT_FP8_FORMAT_COUNT]; /* 0 unset, 1 ready, 2 not bf16-exact */

static int dec_tables_get(oct_fp8_format f, const dec_tables **out)
{
    int st = __atomic_load_n(&g_dec_state[f], __ATOMIC_ACQUIRE);
    if (st == 0) {
        const float *t = oct_fp8_decode_table(f);
        st = 1;
        for (int c = 0; c < 256; c++) {
            uint32_t b;
            memcpy(&b, &t[c], sizeof b);
            if (b & 0xFFFFu)
                st = 2; /* cannot happen for the five formats; stay correct anyway */
            g_dec[f].lo[c] = (uint8_t)(b >> 16);
            g_dec[f].hi[c] = (uint8_t)(b >> 24);
        }
        __atomic_store_n(&g_dec_state[f], st, __ATOMIC_RELEASE);
    }
    *out = &g_dec[f];
    return st;
}

static void to_f32(oct_fp8_format f, const uint8_t *s, float *d, size_t n)
{
    const dec_tables *T;
    if (dec_tables_get(f, &T) != 1) {
        oct_fp8_impl_ref.to_f32(f, s, d, n);
        return;
    }
    const __m512i lo0 = _mm512_load_si512(T->lo), lo1 = _mm512_load_si512(T->lo + 64);
    const __m512i lo2 = _mm512_load_si512(T->lo + 128), lo3 = _mm512_load_si512(T->lo + 192);
    const __m512i hi0 = _mm512_load_si512(T->hi), hi1 = _mm512_load_si512(T->hi + 64);
    const __m512i hi2 = _mm512_load_si512(T->hi + 128), hi3 = _mm512_load_si512(T->hi + 192);
    /* byte 4j+k of the index vector = code j (k = 0..3) */
    const __m512i spread = _mm512_set_epi32(
        0x0F0F0F0F, 0x0E0E0E0E, 0x0D0D0D0D, 0x0C0C0C0C, 0x0B0B0B0B, 0x0A0A0A0A, 0x09090909,
        0x08080808, 0x07070707, 0x06060606, 0x05050505, 0x04040404, 0x03030303, 0x02020202,
        0x01010101, 0x00000000);
    const __mmask64 byte2 = 0x4444444444444444ull, byte3 = 0x8888888888888888ull;
    const __m512i keep = _mm512_set1_epi32((int)0xFFFF0000u);
    for (size_t i = 0; i < n; i += 16) {
        size_t left = n - i;
        __mmask16 k = tail_mask(left);
        __m128i codes = _mm_maskz_loadu_epi8(k, s + i);
        __m512i idx = _mm512_permutexvar_epi8(spread, _mm512_zextsi128_si512(codes));
        __mmask64 top = _mm512_movepi8_mask(idx); /* codes >= 128 */
        /* mask2 variants merge into the index vector: each lookup fills only its
         * own byte positions, the others keep their code for the next lookup. */
        __m512i r = _mm512_mask2_permutex2var_epi8(lo0, idx, byte2 & ~top, lo1);
        r = _mm512_mask2_permutex2var_epi8(lo2, r, byte2 & top, lo3);
        r = _mm512_mask2_permutex2var_epi8(hi0, r, byte3 & ~top, hi1);
        r = _mm512_mask2_permutex2var_epi8(hi2, r, byte3 & top, hi3);
        r = _mm512_and_si512(r, keep);
        _mm512_mask_storeu_epi32(d + i, k, r);
    }
}

const oct_fp8_impl oct_fp8_impl_avx512 = {"avx512", from_f32, from_bf16, from_f16, to_f32};

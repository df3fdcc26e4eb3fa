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
#include <stdbool.h>
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

/* 16 f32 patterns -> 16 codes, one per dword (0..255).  f is E4M3FN..E5M2FNUZ.
 * SAT clamps |x| to `clamp` (f32 bits, <= max_bits; NaN lanes are handled apart). */
ALWAYS_INLINE __m512i enc_fp8(__m512i u, oct_fp8_format f, oct_cast_mode m, __m512i clamp)
{
    const fp8_simd_enc *P = &k_fp8_simd_enc[f];
    const __m128i shift = _mm_cvtsi32_si128((int)P->shift);
    __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
    __mmask16 nan = _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32((int)FP8_SIMD_INF));
    if (m == OCT_CAST_SAT)
        a = _mm512_min_epu32(a, clamp);
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

ALWAYS_INLINE __m512i enc_any(__m512i u, oct_fp8_format f, oct_cast_mode m, __m512i clamp)
{
    return f == OCT_FP8_E8M0FNU ? enc_e8m0(u) : enc_fp8(u, f, m, clamp);
}

/* Source loaders: 16 elements -> 16 f32 patterns (exact widening).  `k` masks
 * a tail; full vectors use plain loads. */
ALWAYS_INLINE __m512i load_src(int src, const void *p, size_t i, bool full, __mmask16 k,
                               __m512 scale)
{
    if (src == SRC_F32 || src == SRC_MUL || src == SRC_DIV) {
        __m512 x = full ? _mm512_loadu_ps((const float *)p + i)
                        : _mm512_maskz_loadu_ps(k, (const float *)p + i);
        if (src == SRC_MUL)
            x = _mm512_mul_ps(x, scale);
        else if (src == SRC_DIV)
            x = _mm512_div_ps(x, scale);
        return _mm512_castps_si512(x);
    }
    __m256i h = full ? _mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i))
                     : _mm256_maskz_loadu_epi16(k, (const uint16_t *)p + i);
    if (src == SRC_BF16)
        return _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
    return _mm512_castps_si512(_mm512_cvtph_ps(h));
}

/* Four vectors of 16 codes (one per dword) -> 64 bytes in element order: put
 * c_k in byte k of each dword, then one vpermb gathers byte 16k+j = dword j, byte k. */
ALWAYS_INLINE __m512i pack4(__m512i c0, __m512i c1, __m512i c2, __m512i c3)
{
    const __m512i order = _mm512_set_epi8(
        63, 59, 55, 51, 47, 43, 39, 35, 31, 27, 23, 19, 15, 11, 7, 3, 62, 58, 54, 50, 46, 42, 38,
        34, 30, 26, 22, 18, 14, 10, 6, 2, 61, 57, 53, 49, 45, 41, 37, 33, 29, 25, 21, 17, 13, 9, 5,
        1, 60, 56, 52, 48, 44, 40, 36, 32, 28, 24, 20, 16, 12, 8, 4, 0);
    __m512i p = _mm512_ternarylogic_epi32(c0, _mm512_slli_epi32(c1, 8), _mm512_slli_epi32(c2, 16),
                                          0xFE); /* a | b | c */
    p = _mm512_or_si512(p, _mm512_slli_epi32(c3, 24));
    return _mm512_permutexvar_epi8(order, p);
}

/* Outputs at least this large bypass the cache (streaming stores): a bulk
 * conversion that big will not be read back from cache, and skipping the
 * read-for-ownership saves bandwidth.  Smaller ones (e.g. the quantizers'
 * chunks) stay cached for their consumer. */
#define NT_MIN_BYTES ((size_t)8 << 20)

/* The loop, specialised at compile time for (source, format, mode); 64 elements
 * per iteration keep four independent chains in flight. */
ALWAYS_INLINE void enc_loop(int src, oct_fp8_format f, oct_cast_mode m, const void *s, uint8_t *d,
                            size_t n, float scale, uint32_t clamp_bits)
{
    const __m512 sc = _mm512_set1_ps(scale);
    const __m512i cl = _mm512_set1_epi32((int)clamp_bits);
    size_t i = 0;
    if (n >= NT_MIN_BYTES) {
        /* reach a 64-byte aligned destination, then stream whole lines */
        size_t head = (64u - ((uintptr_t)d & 63u)) & 63u;
        for (; i < head; i += 16) {
            __mmask16 k = tail_mask(head - i);
            _mm512_mask_cvtepi32_storeu_epi8(d + i, k,
                                             enc_any(load_src(src, s, i, false, k, sc), f, m, cl));
        }
        i = head;
        for (; i + 64 <= n; i += 64) {
            __m512i c0 = enc_any(load_src(src, s, i, true, 0, sc), f, m, cl);
            __m512i c1 = enc_any(load_src(src, s, i + 16, true, 0, sc), f, m, cl);
            __m512i c2 = enc_any(load_src(src, s, i + 32, true, 0, sc), f, m, cl);
            __m512i c3 = enc_any(load_src(src, s, i + 48, true, 0, sc), f, m, cl);
            _mm512_stream_si512((void *)(d + i), pack4(c0, c1, c2, c3));
        }
        _mm_sfence();
    }
    for (; i + 64 <= n; i += 64) {
        __m512i c0 = enc_any(load_src(src, s, i, true, 0, sc), f, m, cl);
        __m512i c1 = enc_any(load_src(src, s, i + 16, true, 0, sc), f, m, cl);
        __m512i c2 = enc_any(load_src(src, s, i + 32, true, 0, sc), f, m, cl);
        __m512i c3 = enc_any(load_src(src, s, i + 48, true, 0, sc), f, m, cl);
        _mm512_storeu_si512(d + i, pack4(c0, c1, c2, c3));
    }
    for (; i + 16 <= n; i += 16)
        _mm_storeu_si128((__m128i *)(d + i),
                         _mm512_cvtepi32_epi8(enc_any(load_src(src, s, i, true, 0, sc), f, m, cl)));
    if (i < n) {
        __mmask16 k = tail_mask(n - i);
        _mm512_mask_cvtepi32_storeu_epi8(d + i, k,
                                         enc_any(load_src(src, s, i, false, k, sc), f, m, cl));
    }
}

#include "fp8/fp8_simd_enc.h" /* from_f32, from_bf16, from_f16, from_f32_scaled */

/* Per-segment multipliers (block and MX quantizers): the encode loop is
 * inlined per segment, so a 32-element MX block costs no call. */
static void from_f32_segmul(oct_fp8_format f, const float *s, uint8_t *d, size_t n, size_t seg,
                            const float *mul, float qmax)
{
    if (f == OCT_FP8_E8M0FNU) {
        for (size_t c0 = 0, c = 0; c0 < n; c0 += seg, c++)
            oct_fp8_impl_ref.from_f32_scaled(f, s + c0, d + c0, n - c0 < seg ? n - c0 : seg, mul[c],
                                             false, qmax);
        return;
    }
    uint32_t clamp = fp8_simd_clamp_bits(f, qmax);
    for (size_t c0 = 0, c = 0; c0 < n; c0 += seg, c++) {
        size_t len = n - c0 < seg ? n - c0 : seg;
        float mc = mul[c];
        if (mc != mc) { /* NaN multiplier: the scale's NaN code everywhere */
            oct_fp8_impl_ref.from_f32_scaled(f, s + c0, d + c0, len, mc, false, qmax);
            continue;
        }
        switch (f) {
        case OCT_FP8_E4M3FN:
            enc_loop(SRC_MUL, OCT_FP8_E4M3FN, OCT_CAST_SAT, s + c0, d + c0, len, mc, clamp);
            break;
        case OCT_FP8_E5M2:
            enc_loop(SRC_MUL, OCT_FP8_E5M2, OCT_CAST_SAT, s + c0, d + c0, len, mc, clamp);
            break;
        case OCT_FP8_E4M3FNUZ:
            enc_loop(SRC_MUL, OCT_FP8_E4M3FNUZ, OCT_CAST_SAT, s + c0, d + c0, len, mc, clamp);
            break;
        default:
            enc_loop(SRC_MUL, OCT_FP8_E5M2FNUZ, OCT_CAST_SAT, s + c0, d + c0, len, mc, clamp);
            break;
        }
    }
}

/* max |x| as the integer max of the magnitude bits (positive floats order like
 * their bit patterns; every NaN pattern is above +Inf). */
static float amax_f32(const float *s, size_t n)
{
    const __m512i mag = _mm512_set1_epi32(0x7FFFFFFF);
    __m512i m0 = _mm512_setzero_si512(), m1 = m0, m2 = m0, m3 = m0;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        m0 = _mm512_max_epu32(m0, _mm512_and_si512(_mm512_loadu_si512(s + i), mag));
        m1 = _mm512_max_epu32(m1, _mm512_and_si512(_mm512_loadu_si512(s + i + 16), mag));
        m2 = _mm512_max_epu32(m2, _mm512_and_si512(_mm512_loadu_si512(s + i + 32), mag));
        m3 = _mm512_max_epu32(m3, _mm512_and_si512(_mm512_loadu_si512(s + i + 48), mag));
    }
    for (; i < n; i += 16) {
        __mmask16 k = tail_mask(n - i);
        m0 = _mm512_max_epu32(m0, _mm512_and_si512(_mm512_maskz_loadu_epi32(k, s + i), mag));
    }
    m0 = _mm512_max_epu32(_mm512_max_epu32(m0, m1), _mm512_max_epu32(m2, m3));
    return fp8_simd_amax_result((uint32_t)_mm512_reduce_max_epu32(m0));
}

/* ------------------------------------------------------------------ decode */

/* Per format: byte tables LO[c] = bits(decode(c)) >> 16 & 0xFF and HI[c] =
 * bits >> 24 for the 128 magnitudes c = 0..127, as two 64-byte vectors each.
 * Codes c | 0x80 decode to decode(c) with the sign bit set (checked while
 * filling), except fnuz 0x80 (NaN, fixed up after the lookup).  Filled on
 * first use from the reference table; concurrent first calls write identical
 * bytes. */
typedef struct dec_tables {
    _Alignas(64) uint8_t lo[128];
    _Alignas(64) uint8_t hi[128];
} dec_tables;

static dec_tables g_dec[OCT_FP8_FORMAT_COUNT];
static int g_dec_state[OCT_FP8_FORMAT_COUNT]; /* 0 unset, 1 ready, 2 use the reference */

static int dec_tables_get(oct_fp8_format f, const dec_tables **out)
{
    int st = __atomic_load_n(&g_dec_state[f], __ATOMIC_ACQUIRE);
    if (st == 0) {
        const float *t = oct_fp8_decode_table(f);
        bool fnuz = f == OCT_FP8_E4M3FNUZ || f == OCT_FP8_E5M2FNUZ;
        st = 1;
        for (int c = 0; c < 128; c++) {
            uint32_t b, bn;
            memcpy(&b, &t[c], sizeof b);
            memcpy(&bn, &t[c + 128], sizeof bn);
            /* cannot fail for the four formats; stay correct anyway */
            if ((b & 0xFFFFu) || (bn != (b | 0x80000000u) && !(fnuz && c == 0)))
                st = 2;
            g_dec[f].lo[c] = (uint8_t)(b >> 16);
            g_dec[f].hi[c] = (uint8_t)(b >> 24);
        }
        __atomic_store_n(&g_dec_state[f], st, __ATOMIC_RELEASE);
    }
    *out = &g_dec[f];
    return st;
}

typedef struct dec_vecs {
    __m512i lo0, lo1, hi0, hi1;
    bool fnuz;
} dec_vecs;

/* 16 codes -> 16 f32 patterns by table (E4M3FN..E5M2FNUZ).  A single masked
 * vpermb spreads code j to bytes 2 and 3 of dword j (bytes 0, 1 zeroed); the
 * two vpermi2b read the tables with the low 7 bits and, through the mask2 form,
 * write only their own byte, so the index vector becomes the result. */
ALWAYS_INLINE __m512i dec16(__m128i codes, const dec_vecs *V)
{
    const __m512i spread =
        _mm512_set_epi32(0x0F0F0F0F, 0x0E0E0E0E, 0x0D0D0D0D, 0x0C0C0C0C, 0x0B0B0B0B, 0x0A0A0A0A,
                         0x09090909, 0x08080808, 0x07070707, 0x06060606, 0x05050505, 0x04040404,
                         0x03030303, 0x02020202, 0x01010101, 0x00000000);
    const __mmask64 byte2 = 0x4444444444444444ull, byte3 = 0x8888888888888888ull;
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    __m512i idx =
        _mm512_maskz_permutexvar_epi8(byte2 | byte3, spread, _mm512_zextsi128_si512(codes));
    __m512i r = _mm512_mask2_permutex2var_epi8(V->lo0, idx, byte2, V->lo1);
    r = _mm512_mask2_permutex2var_epi8(V->hi0, r, byte3, V->hi1);
    r = _mm512_ternarylogic_epi32(r, idx, sign, 0xF8); /* r | (idx & sign) */
    if (V->fnuz)                                       /* 0x80 would read as -0: it is the NaN */
        r = _mm512_mask_mov_epi32(r, _mm512_cmpeq_epi32_mask(r, sign),
                                  _mm512_set1_epi32((int)FP8_SIMD_QNAN));
    return r;
}

/* e8m0: 2^(c-127) is c << 23, except 0x00 (2^-127, subnormal) and 0xFF (NaN). */
ALWAYS_INLINE __m512i dec16_e8m0(__m128i codes)
{
    __m512i c = _mm512_cvtepu8_epi32(codes);
    __m512i r = _mm512_slli_epi32(c, 23);
    r = _mm512_mask_mov_epi32(r, _mm512_testn_epi32_mask(c, c),
                              _mm512_set1_epi32((int)FP8_SIMD_E8M0_ZERO));
    return _mm512_mask_mov_epi32(r, _mm512_cmpeq_epi32_mask(c, _mm512_set1_epi32(0xFF)),
                                 _mm512_set1_epi32((int)FP8_SIMD_QNAN));
}

ALWAYS_INLINE __m512i dec_any(__m128i codes, bool e8m0, const dec_vecs *V)
{
    return e8m0 ? dec16_e8m0(codes) : dec16(codes, V);
}

/* Masked stores are slow on some cores (AMD Zen 4/5): full vectors use plain
 * loads and stores, only the tail is masked. */
ALWAYS_INLINE void dec_loop(bool e8m0, const dec_vecs *V, const uint8_t *s, float *d, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_si512(d + i, dec_any(_mm_loadu_si128((const __m128i *)(s + i)), e8m0, V));
    if (i < n) {
        __mmask16 k = tail_mask(n - i);
        _mm512_mask_storeu_epi32(d + i, k, dec_any(_mm_maskz_loadu_epi8(k, s + i), e8m0, V));
    }
}

static void to_f32(oct_fp8_format f, const uint8_t *s, float *d, size_t n)
{
    if (f == OCT_FP8_E8M0FNU) {
        dec_loop(true, NULL, s, d, n);
        return;
    }
    const dec_tables *tab;
    if (dec_tables_get(f, &tab) != 1) {
        oct_fp8_impl_ref.to_f32(f, s, d, n);
        return;
    }
    const dec_vecs V = {_mm512_load_si512(tab->lo), _mm512_load_si512(tab->lo + 64),
                        _mm512_load_si512(tab->hi), _mm512_load_si512(tab->hi + 64),
                        f == OCT_FP8_E4M3FNUZ || f == OCT_FP8_E5M2FNUZ};
    dec_loop(false, &V, s, d, n);
}

const oct_fp8_impl oct_fp8_impl_avx512 = {"avx512", from_f32,        from_bf16, from_f16,
                                          to_f32,   from_f32_scaled, amax_f32,  from_f32_segmul};

/* gemm_avx512.c — the AVX-512 (BF16 + VBMI) linear kernel.
 *
 * Every E4M3FN value is exactly a bf16 value, and the product of two of them
 * is exact in f32, so FP8 x FP8 runs on `vdpbf16ps` without any rounding
 * except the f32 summation (docs/KERNELS.md §Semantics only fixes f32 sums).
 *
 * Weight layout (prepared once): panels of 32 output columns; for each pair
 * of K (k, k+1) a panel holds 64 bytes, one cache line, so a panel is one
 * sequential stream:  panel[p][kp][64].  Decoding a line with two `vpermi2b`
 * table lookups (low and high byte of the bf16) and `vpunpck{l,h}bw` yields
 * two vectors of 16 (k, k+1) bf16 pairs for columns 0-15 and 16-31; the bytes
 * are stored pre-permuted so the unpacks' in-lane order comes out right.
 * BF16 weights use the same layout already decoded (64 bf16 words per pair).
 *
 * Activations are quantized (or rounded to bf16) and packed once per call
 * into panels of 8 rows: apack[mp][kp][8] 32-bit (k, k+1) pairs, with row
 * scales rs[m] (tensor/row) or sak[m][kb] (block128 / mx32).
 *
 * M <= 16: GEMV path, weights streamed once from DRAM, decoded in registers.
 * M  > 16: blocked GEMM: threads own ranges of column panels; per (8 panels x
 * 128 pairs) chunk the weights are decoded once into an L2 buffer and reused
 * by every 8x32 micro-tile of the M dimension. */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "core/core.h"
#include "fp8/fp8_impl.h"
#include "kernels/cpu/gemm.h"

#define MR 8
#define NR 32
#define KC_PAIRS 128 /* multiple of 64 (block128) and 16 (mx32) pairs */
#define NC_PANELS 8

/* Byte position inside a 64-byte group -> word index of the decoded pair. */
static int perm_word(int pos)
{
    int lane = pos / 16, r = pos % 16;
    return r < 8 ? 8 * lane + r : 32 + 8 * lane + (r - 8);
}

/* ---------------------------------------------------------------- decode */

typedef struct dec_tables {
    __m512i lo0, lo1, hi0, hi1, sign;
} dec_tables;

static dec_tables make_tables(void)
{
    const float *lut = oct_fp8_decode_table(OCT_FP8_E4M3FN);
    uint8_t lo[128], hi[128];
    for (int c = 0; c < 128; c++) {
        uint32_t u;
        memcpy(&u, &lut[c], 4);
        lo[c] = (uint8_t)(u >> 16);
        hi[c] = (uint8_t)(u >> 24); /* NaN 0x7FC00000 -> 0x7FC0: still a NaN */
    }
    dec_tables t;
    t.lo0 = _mm512_loadu_si512(lo);
    t.lo1 = _mm512_loadu_si512(lo + 64);
    t.hi0 = _mm512_loadu_si512(hi);
    t.hi1 = _mm512_loadu_si512(hi + 64);
    t.sign = _mm512_set1_epi8((char)0x80);
    return t;
}

/* 64 permuted codes -> two vectors of 16 bf16 pairs. */
static inline __attribute__((always_inline)) void decode64(const dec_tables *t, const uint8_t *src,
                                                           __m512i *b0, __m512i *b1)
{
    __m512i c = _mm512_loadu_si512(src);
    __m512i lo = _mm512_permutex2var_epi8(t->lo0, c, t->lo1);
    __m512i hi = _mm512_permutex2var_epi8(t->hi0, c, t->hi1);
    hi = _mm512_ternarylogic_epi32(hi, c, t->sign, 0xF8); /* hi | (c & 0x80) */
    *b0 = _mm512_unpacklo_epi8(lo, hi);
    *b1 = _mm512_unpackhi_epi8(lo, hi);
}

static inline __m512 dp(__m512 acc, __m512i a, __m512i b)
{
    return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b);
}

/* --------------------------------------------------------------- prepare */

static const char *avx512_cannot(const oct_linear_desc *d)
{
    if (d->weight_type == OCT_WEIGHT_F32)
        return "f32 weights are served by the reference kernel only";
    return NULL;
}

static oct_status avx512_prepare(oct_linear *l, oct_error *err)
{
    int64_t np = l->n_panels, kp2 = l->kp / 2, n = l->n, k = l->k;
    bool fp8 = l->desc.weight_type == OCT_WEIGHT_FP8;
    size_t bytes = (size_t)np * (size_t)kp2 * 64 * (fp8 ? 1 : 2);
    l->panel = oct_malloc_aligned(bytes);
    if (!l->panel)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "%s: out of memory for packed weights",
                             l->name);
    int word_of[64];
    for (int pos = 0; pos < 64; pos++)
        word_of[pos] = perm_word(pos);
#pragma omp parallel for schedule(static) num_threads(oct_threads_get())
    for (int64_t p = 0; p < np; p++) {
        for (int64_t q = 0; q < kp2; q++) {
            size_t base = ((size_t)p * (size_t)kp2 + (size_t)q) * 64;
            for (int pos = 0; pos < 64; pos++) {
                int w = fp8 ? word_of[pos] : pos;
                int64_t col = p * NR + w / 2, kk = 2 * q + (w & 1);
                bool in = col < n && kk < k;
                size_t src = (size_t)(col * k + kk);
                if (fp8)
                    ((uint8_t *)l->panel)[base + (size_t)pos] = in ? l->w8[src] : 0;
                else
                    ((uint16_t *)l->panel)[base + (size_t)pos] = in ? l->w16[src] : 0;
            }
        }
    }
    if (fp8 && l->n_kb > 0) {
        l->panel_kb = oct_malloc_aligned((size_t)(np * l->n_kb * NR) * sizeof(float));
        if (!l->panel_kb)
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "%s: out of memory", l->name);
        for (int64_t p = 0; p < np; p++)
            for (int64_t b = 0; b < l->n_kb; b++)
                for (int c = 0; c < NR; c++) {
                    int64_t col = p * NR + c;
                    l->panel_kb[(p * l->n_kb + b) * NR + c] =
                        col < n ? oct_gemm_sb_kb(l, col, b) : 0.0f;
                }
    }
    /* The raw weights are no longer needed: this kernel reads only the panels. */
    if (!l->raw_borrowed) {
        oct_free(l->w8);
        oct_free(l->w16);
    }
    l->w8 = NULL;
    l->w16 = NULL;
    return OCT_OK;
}

/* ------------------------------------------------------- activation pack */

/* Saturating RNE to the nearest E4M3FN value, returned as bf16 bits in the
 * low half of each lane (exact: the result has at most 4 significant bits).
 * Equals decode(oct_fp8_ref_encode(E4M3FN, SAT, y)) for every y. */
static inline __m512i e4m3_round_bf16(__m512 y)
{
    const __m512i sign_m = _mm512_set1_epi32((int)0x80000000u);
    __m512i yi = _mm512_castps_si512(y);
    __m512i sign = _mm512_and_si512(yi, sign_m);
    __m512 a = _mm512_castsi512_ps(_mm512_andnot_si512(sign_m, yi));
    a = _mm512_min_ps(_mm512_set1_ps(448.0f), a); /* NaN in a stays NaN (2nd operand) */
    __m512i ai = _mm512_castps_si512(a);
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(ai, 20), _mm512_set1_epi32(1));
    __m512i rn = _mm512_add_epi32(ai, _mm512_add_epi32(_mm512_set1_epi32(0x7FFFF), odd));
    rn = _mm512_and_si512(rn, _mm512_set1_epi32((int)0xFFF00000u));
    __m512 big = _mm512_set1_ps(16384.0f); /* ulp 2^-9 = e4m3 subnormal step */
    __m512 sub = _mm512_sub_ps(_mm512_add_ps(a, big), big);
    __mmask16 normal = _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.015625f), _CMP_GE_OQ);
    __m512i v = _mm512_mask_mov_epi32(_mm512_castps_si512(sub), normal, rn);
    v = _mm512_or_si512(v, sign);
    __m512i h = _mm512_srli_epi32(v, 16);
    __mmask16 nan = _mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q);
    return _mm512_mask_or_epi32(h, nan, h, _mm512_set1_epi32(0x40));
}

/* f32 -> bf16 RNE (oct_f32_to_bf16), low half of each lane. */
static inline __m512i f32_bf16(__m512 x)
{
    __m512i u = _mm512_castps_si512(x);
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), odd)), 16);
    __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    __m512i qn = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    return _mm512_mask_mov_epi32(r, nan, qn);
}

typedef enum { OP_BF16, OP_MUL, OP_DIV } elem_op;

/* Row segment x[0..len) -> bf16 words out[0..len): op(x, s) then E4M3 rounding
 * (OP_MUL / OP_DIV) or plain bf16 rounding (OP_BF16). */
static void quant_seg(const float *x, int64_t len, elem_op op, float s, uint16_t *out)
{
    __m512 vs = _mm512_set1_ps(s);
    for (int64_t i = 0; i < len; i += 16) {
        int64_t r = OCT_MIN(16, len - i);
        __mmask16 m = (__mmask16)((1u << r) - 1u);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        __m512i h;
        if (op == OP_BF16)
            h = f32_bf16(v);
        else
            h = e4m3_round_bf16(op == OP_DIV ? _mm512_div_ps(v, vs) : _mm512_mul_ps(v, vs));
        _mm256_mask_storeu_epi16(out + i, m, _mm512_cvtepi32_epi16(h));
    }
}

/* max |x| over a segment; NaN if any element is NaN. */
static float amax_seg(const float *x, int64_t len)
{
    __m512 acc = _mm512_setzero_ps();
    __mmask16 nan = 0;
    for (int64_t i = 0; i < len; i += 16) {
        int64_t r = OCT_MIN(16, len - i);
        __mmask16 m = (__mmask16)((1u << r) - 1u);
        __m512 v = _mm512_abs_ps(_mm512_maskz_loadu_ps(m, x + i));
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        acc = _mm512_max_ps(acc, v);
    }
    return nan ? NAN : _mm512_reduce_max_ps(acc);
}

typedef struct packed_act {
    uint32_t *a; /* [m_pad/8][kp/2][8] */
    float *rs;   /* [m_pad] row scales (tensor/row modes) */
    float *sak;  /* [m_pad][n_kb] block scales (block128/mx32 modes) */
    int64_t m_pad;
} packed_act;

/* Stores one row of bf16 words (kp entries, zero padded) into the panel layout. */
static void scatter_row(const oct_linear *l, uint32_t *a, int64_t row, const uint16_t *w)
{
    int64_t kp2 = l->kp / 2;
    uint32_t *dst = a + (row / MR) * kp2 * MR + (row % MR);
    const uint32_t *src = (const uint32_t *)(const void *)w;
    for (int64_t q = 0; q < kp2; q++)
        dst[q * MR] = src[q];
}

/* Quantizes / rounds / decodes activations per the layer and packs them. */
static bool pack_act(const oct_linear *l, int64_t m, const oct_act_in *in, packed_act *pa,
                     float tensor_scale)
{
    bool ok = true;
    const oct_linear_desc *d = &l->desc;
    int64_t k = l->k, kp = l->kp, n_kb = l->n_kb;
    int64_t kblk = d->weight_type == OCT_WEIGHT_FP8 ? oct_scale_kblock(d->weight_scale) : 0;
    uint16_t dec16[256];
    if (in->q) {
        const float *lut = oct_fp8_decode_table(OCT_FP8_E4M3FN);
        for (int c = 0; c < 256; c++)
            dec16[c] = oct_gemm_f32_to_bf16(lut[c]);
    }
#pragma omp parallel num_threads(oct_threads_get())
    {
        uint16_t *w = oct_malloc_aligned((size_t)(kp + 32) * 2);
        if (!w) {
#pragma omp atomic write
            ok = false;
        }
#pragma omp for schedule(static)
        for (int64_t i = 0; i < m; i++) {
            if (!w)
                continue;
            const float *x = in->x ? in->x + i * k : NULL;
            w[kp - 1] = 0;
            if (in->q) {
                const uint8_t *q = in->q + i * k;
                for (int64_t j = 0; j < k; j++)
                    w[j] = dec16[q[j]];
                if (kblk)
                    for (int64_t b = 0; b < n_kb; b++)
                        pa->sak[i * n_kb + b] = oct_gemm_sa_at(in->ka, in->sa, i, b, n_kb);
                else
                    pa->rs[i] = oct_gemm_sa_at(in->ka, in->sa, i, 0, 0);
            } else {
                switch (d->act) {
                case OCT_ACT_NONE:
                    quant_seg(x, k, OP_BF16, 0.0f, w);
                    if (kblk)
                        for (int64_t b = 0; b < n_kb; b++)
                            pa->sak[i * n_kb + b] = 1.0f;
                    else
                        pa->rs[i] = 1.0f;
                    break;
                case OCT_ACT_DYNAMIC_TOKEN: {
                    float s = oct_gemm_scale_from_amax(amax_seg(x, k), d->act_scale_ub);
                    quant_seg(x, k, OP_DIV, s, w);
                    pa->rs[i] = s;
                    break;
                }
                case OCT_ACT_DYNAMIC_TENSOR:
                case OCT_ACT_STATIC:
                    quant_seg(x, k, OP_MUL, 1.0f / tensor_scale, w);
                    pa->rs[i] = tensor_scale;
                    break;
                case OCT_ACT_GROUP128:
                case OCT_ACT_MX32:
                    for (int64_t b = 0; b < n_kb; b++) {
                        int64_t k0 = b * kblk, len = OCT_MIN(kblk, k - k0);
                        float am = amax_seg(x + k0, len), s;
                        if (d->act == OCT_ACT_GROUP128) {
                            s = oct_gemm_scale_from_amax(am, 0.0f);
                        } else {
                            uint8_t e = oct_gemm_mx_exponent_from_amax(am);
                            s = e == 0xFF ? NAN : ldexpf(1.0f, (int)e - 127);
                        }
                        quant_seg(x + k0, len, OP_DIV, s, w + k0);
                        pa->sak[i * n_kb + b] = s;
                    }
                    break;
                }
            }
            scatter_row(l, pa->a, i, w);
        }
        oct_free_aligned(w);
    }
    return ok;
}

/* ------------------------------------------------------------------ GEMV */

/* The row loops below are spelled out with macros: compilers do not reliably
 * keep an array of accumulators in registers, and a spilled accumulator
 * turns every vdpbf16ps into load + dp + store. */
#define ROWS_1(X) X(0)
#define ROWS_2(X) X(0) X(1)
#define ROWS_4(X) X(0) X(1) X(2) X(3)
#define ROWS_8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

#define LOAD_FP8(q, b0, b1)                                                                        \
    do {                                                                                           \
        _mm_prefetch((const char *)(w8 + (q)*64 + 2048), _MM_HINT_T0);                             \
        decode64(t, w8 + (q)*64, &b0, &b1);                                                        \
    } while (0)
#define LOAD_BF16(q, b0, b1)                                                                       \
    do {                                                                                           \
        _mm_prefetch((const char *)(w16 + (q)*64 + 2048), _MM_HINT_T0);                            \
        b0 = _mm512_loadu_si512(w16 + (q)*64);                                                     \
        b1 = _mm512_loadu_si512(w16 + (q)*64 + 32);                                                \
    } while (0)

#define DECL_C(r) __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = c##r##0;
#define DP_C(r)                                                                                    \
    {                                                                                              \
        __m512i av = _mm512_set1_epi32((int)a[q * MR + r]);                                        \
        c##r##0 = dp(c##r##0, av, b0);                                                             \
        c##r##1 = dp(c##r##1, av, b1);                                                             \
    }
#define OUT_C(r) out[r][0] = c##r##0, out[r][1] = c##r##1;

/* One panel x R rows, all K, summed in exactly the GEMM path's order: one
 * accumulator per KC_PAIRS chunk of K, chunk sums added in K order.  So a row's
 * result never depends on how many rows share the call (batch invariance:
 * continuous batching gives the same tokens as one request at a time). */
#define DECL_T(r) __m512 t##r##0 = _mm512_setzero_ps(), t##r##1 = t##r##0;
#define ADD_T(r)                                                                                   \
    t##r##0 = _mm512_add_ps(t##r##0, c##r##0), t##r##1 = _mm512_add_ps(t##r##1, c##r##1);
#define OUT_T(r) out[r][0] = t##r##0, out[r][1] = t##r##1;
#define GEMVC(NAME, ROWS, LOAD)                                                                    \
    static void NAME(const dec_tables *t, int64_t kp2, const uint32_t *a, const void *wp,          \
                     __m512 out[8][2])                                                             \
    {                                                                                              \
        const uint8_t *w8 = wp;                                                                    \
        const uint16_t *w16 = wp;                                                                  \
        (void)w8;                                                                                  \
        (void)w16;                                                                                 \
        (void)t;                                                                                   \
        ROWS(DECL_T)                                                                               \
        for (int64_t q0 = 0; q0 < kp2; q0 += KC_PAIRS) {                                           \
            int64_t q1 = OCT_MIN(kp2, q0 + KC_PAIRS);                                              \
            ROWS(DECL_C)                                                                           \
            for (int64_t q = q0; q < q1; q++) {                                                    \
                __m512i b0, b1;                                                                    \
                LOAD(q, b0, b1);                                                                   \
                ROWS(DP_C)                                                                         \
            }                                                                                      \
            ROWS(ADD_T) /* 0 + x == x exactly: the first chunk matches a plain store */            \
        }                                                                                          \
        ROWS(OUT_T)                                                                                \
    }

GEMVC(gemv8_1, ROWS_1, LOAD_FP8)
GEMVC(gemv8_2, ROWS_2, LOAD_FP8)
GEMVC(gemv8_4, ROWS_4, LOAD_FP8)
GEMVC(gemv8_8, ROWS_8, LOAD_FP8)
GEMVC(gemv16_1, ROWS_1, LOAD_BF16)
GEMVC(gemv16_2, ROWS_2, LOAD_BF16)
GEMVC(gemv16_4, ROWS_4, LOAD_BF16)
GEMVC(gemv16_8, ROWS_8, LOAD_BF16)

typedef void (*gemv_fn)(const dec_tables *, int64_t, const uint32_t *, const void *, __m512[8][2]);

/* K-blocked scales (block128 / mx32, fp8 weights only), R <= 4 rows:
 * tot += (partial * sa) * sb per block, as the reference orders it. */
#define TOT_KB(r)                                                                                  \
    {                                                                                              \
        __m512 sa = _mm512_set1_ps(sak[r * n_kb + b]);                                             \
        out[r][0] = _mm512_add_ps(out[r][0], _mm512_mul_ps(_mm512_mul_ps(c##r##0, sa), sb0));      \
        out[r][1] = _mm512_add_ps(out[r][1], _mm512_mul_ps(_mm512_mul_ps(c##r##1, sa), sb1));      \
    }
#define ZERO_OUT(r) out[r][0] = out[r][1] = _mm512_setzero_ps();
#define GEMVKB(NAME, ROWS)                                                                         \
    static void NAME(const dec_tables *t, int64_t kp2, int64_t blk_pairs, int64_t n_kb,            \
                     const uint32_t *a, const float *sak, const uint8_t *w8, const float *pkb,     \
                     __m512 out[8][2])                                                             \
    {                                                                                              \
        ROWS(ZERO_OUT)                                                                             \
        for (int64_t b = 0; b < n_kb; b++) {                                                       \
            ROWS(DECL_C)                                                                           \
            int64_t q1 = OCT_MIN(kp2, (b + 1) * blk_pairs);                                        \
            for (int64_t q = b * blk_pairs; q < q1; q++) {                                         \
                __m512i b0, b1;                                                                    \
                LOAD_FP8(q, b0, b1);                                                               \
                ROWS(DP_C)                                                                         \
            }                                                                                      \
            __m512 sb0 = _mm512_loadu_ps(pkb + b * NR), sb1 = _mm512_loadu_ps(pkb + b * NR + 16);  \
            ROWS(TOT_KB)                                                                           \
        }                                                                                          \
    }
GEMVKB(gemvkb_1, ROWS_1)
GEMVKB(gemvkb_2, ROWS_2)
GEMVKB(gemvkb_4, ROWS_4)

typedef struct run_ctx {
    const oct_linear *l;
    const packed_act *pa;
    float *y;
    int64_t m;
    bool fp8, kb;
    int64_t blk_pairs;
    dec_tables t;
} run_ctx;

/* Writes rows [r0, r0+R) x panel p from accumulators (final values). */
static void store_rows(const run_ctx *c, int64_t p, int64_t r0, int R, __m512 acc[8][2])
{
    const oct_linear *l = c->l;
    int64_t n = l->n, col0 = p * NR;
    int64_t nc = OCT_MIN(NR, n - col0);
    __mmask16 m0 = (__mmask16)(nc >= 16 ? 0xFFFF : (1u << nc) - 1u);
    __mmask16 m1 = (__mmask16)(nc >= 32 ? 0xFFFF : nc <= 16 ? 0 : (1u << (nc - 16)) - 1u);
    __m512 bias0 = l->bias ? _mm512_loadu_ps(l->bias + col0) : _mm512_setzero_ps();
    __m512 bias1 = l->bias ? _mm512_loadu_ps(l->bias + col0 + 16) : _mm512_setzero_ps();
    __m512 cs0 = _mm512_loadu_ps(l->col_scale + col0),
           cs1 = _mm512_loadu_ps(l->col_scale + col0 + 16);
    for (int r = 0; r < R && r0 + r < c->m; r++) {
        __m512 v0 = acc[r][0], v1 = acc[r][1];
        if (!c->kb) {
            __m512 rs = _mm512_set1_ps(c->pa->rs[r0 + r]);
            v0 = _mm512_mul_ps(rs, _mm512_mul_ps(cs0, v0));
            v1 = _mm512_mul_ps(rs, _mm512_mul_ps(cs1, v1));
        }
        v0 = _mm512_add_ps(v0, bias0);
        v1 = _mm512_add_ps(v1, bias1);
        float *dst = c->y + (r0 + r) * n + col0;
        _mm512_mask_storeu_ps(dst, m0, v0);
        _mm512_mask_storeu_ps(dst + 16, m1, v1);
    }
}

/* 8 rows (a: the row group's packed activations at the chunk start) x one
 * panel over nq decoded pairs w16: the chunk sums, as the direct kernels form
 * them. */
static void chunk8(int64_t nq, const uint32_t *a, const uint16_t *w16, __m512 out[8][2])
{
    ROWS_8(DECL_C)
    for (int64_t q = 0; q < nq; q++) {
        __m512i b0 = _mm512_load_si512(w16 + q * 64), b1 = _mm512_load_si512(w16 + q * 64 + 32);
        ROWS_8(DP_C)
    }
    ROWS_8(OUT_C)
}

/* K-blocked scales at M 13-16 (four or more register groups of 4 rows):
 * each KC_PAIRS chunk of the panel is decoded once into an L1 buffer and every
 * group of 8 rows runs over it, instead of decoding the FP8 weights once per
 * 4 rows.  Sums are formed in exactly the direct kernels' order (per K block,
 * added in K order), so results stay bit-identical and batch invariant.
 * 1024x2816 at M = 16: 194 -> 172 us; at M = 12 it lost (160 -> 173: the
 * buffer path runs whole groups of 8).  Per-channel scales keep the direct
 * 8-row kernel: decoding twice at M = 16 measured faster than this buffer
 * (154 vs 168-182 us). */
static void gemv_panel_shared(const run_ctx *c, int64_t p)
{
    const oct_linear *l = c->l;
    int64_t kp2 = l->kp / 2, groups = c->pa->m_pad / MR;
    const uint8_t *w8 = (const uint8_t *)l->panel + (size_t)p * (size_t)kp2 * 64;
    const float *pkb = l->panel_kb + p * l->n_kb * NR;
    _Alignas(64) uint16_t buf[KC_PAIRS * 64];
    _Alignas(64) __m512 tot[OCT_GEMV_MAX_M][2];
    for (int64_t r = 0; r < groups * MR; r++)
        tot[r][0] = tot[r][1] = _mm512_setzero_ps();
    for (int64_t q0 = 0; q0 < kp2; q0 += KC_PAIRS) {
        int64_t nq = OCT_MIN(KC_PAIRS, kp2 - q0);
        for (int64_t q = 0; q < nq; q++) {
            __m512i b0, b1;
            _mm_prefetch((const char *)(w8 + (q0 + q) * 64 + 2048), _MM_HINT_T0);
            decode64(&c->t, w8 + (q0 + q) * 64, &b0, &b1);
            _mm512_store_si512(buf + q * 64, b0);
            _mm512_store_si512(buf + q * 64 + 32, b1);
        }
        for (int64_t qb = 0; qb < nq; qb += c->blk_pairs) {
            int64_t nqb = OCT_MIN(c->blk_pairs, nq - qb), kb = (q0 + qb) / c->blk_pairs;
            for (int64_t g = 0; g < groups; g++) {
                __m512 acc[8][2];
                chunk8(nqb, c->pa->a + (g * kp2 + q0 + qb) * MR, buf + qb * 64, acc);
                __m512 sb0 = _mm512_loadu_ps(pkb + kb * NR),
                       sb1 = _mm512_loadu_ps(pkb + kb * NR + 16);
                for (int r = 0; r < MR; r++) {
                    __m512 *t = tot[g * MR + r];
                    __m512 sa = _mm512_set1_ps(c->pa->sak[(g * MR + r) * l->n_kb + kb]);
                    t[0] = _mm512_add_ps(t[0], _mm512_mul_ps(_mm512_mul_ps(acc[r][0], sa), sb0));
                    t[1] = _mm512_add_ps(t[1], _mm512_mul_ps(_mm512_mul_ps(acc[r][1], sa), sb1));
                }
            }
        }
    }
    for (int64_t g = 0; g < groups; g++)
        store_rows(c, p, g * MR, MR, &tot[g * MR]);
}

static void gemv_panel(const run_ctx *c, int64_t p)
{
    const oct_linear *l = c->l;
    int64_t kp2 = l->kp / 2;
    size_t esz = c->fp8 ? 1 : 2;
    const char *wp = (const char *)l->panel + (size_t)p * (size_t)kp2 * 64 * esz;
    __m512 acc[8][2];
    int group = c->kb ? 4 : 8;
    if (c->kb && c->m > 12) { /* measured: at M <= 12 the direct 4-row passes win */
        gemv_panel_shared(c, p);
        return;
    }
    for (int64_t r0 = 0; r0 < c->m;) {
        /* R rows in registers; the A panel's zero padding covers R > left. */
        int64_t left = c->m - r0;
        int R = left >= group ? group : left > 4 ? 8 : left > 2 ? 4 : (int)left;
        const uint32_t *a = c->pa->a + (r0 / MR) * kp2 * MR + (r0 % MR);
        if (!c->kb) {
            static const gemv_fn f8[9] = {NULL, gemv8_1, gemv8_2, NULL,   gemv8_4,
                                          NULL, NULL,    NULL,    gemv8_8};
            static const gemv_fn f16[9] = {NULL, gemv16_1, gemv16_2, NULL,    gemv16_4,
                                           NULL, NULL,     NULL,     gemv16_8};
            (c->fp8 ? f8 : f16)[R](&c->t, kp2, a, wp, acc);
        } else {
            const float *sak = c->pa->sak + r0 * l->n_kb;
            const float *pkb = l->panel_kb + p * l->n_kb * NR;
            if (R == 1)
                gemvkb_1(&c->t, kp2, c->blk_pairs, l->n_kb, a, sak, (const uint8_t *)wp, pkb, acc);
            else if (R == 2)
                gemvkb_2(&c->t, kp2, c->blk_pairs, l->n_kb, a, sak, (const uint8_t *)wp, pkb, acc);
            else
                gemvkb_4(&c->t, kp2, c->blk_pairs, l->n_kb, a, sak, (const uint8_t *)wp, pkb, acc);
        }
        store_rows(c, p, r0, R, acc);
        r0 += R;
    }
}

/* ------------------------------------------------------------------ GEMM */

/* 8 x 32 micro-tile over np pairs: out = sum (16 accumulators in registers). */
static inline __attribute__((always_inline)) void ukr(int64_t np, const uint32_t *a,
                                                      const uint16_t *b, __m512 out[8][2])
{
    ROWS_8(DECL_C)
    for (int64_t q = 0; q < np; q++) {
        __m512i b0 = _mm512_load_si512(b + q * 64);
        __m512i b1 = _mm512_load_si512(b + q * 64 + 32);
        ROWS_8(DP_C)
    }
    ROWS_8(OUT_C)
}

/* C tile (8 x 32 at c, stride NR) += / = acc, optionally scaled per K block. */
static inline void tile_acc(float *ct, bool first, __m512 acc[8][2], const float *sa_rows,
                            int64_t sa_stride, const float *sb)
{
    __m512 sb0 = sb ? _mm512_loadu_ps(sb) : _mm512_setzero_ps();
    __m512 sb1 = sb ? _mm512_loadu_ps(sb + 16) : _mm512_setzero_ps();
    for (int r = 0; r < MR; r++) {
        __m512 v0 = acc[r][0], v1 = acc[r][1];
        if (sb) {
            __m512 sa = _mm512_set1_ps(sa_rows[r * sa_stride]);
            v0 = _mm512_mul_ps(_mm512_mul_ps(v0, sa), sb0);
            v1 = _mm512_mul_ps(_mm512_mul_ps(v1, sa), sb1);
        }
        if (!first) {
            v0 = _mm512_add_ps(_mm512_load_ps(ct + r * NR), v0);
            v1 = _mm512_add_ps(_mm512_load_ps(ct + r * NR + 16), v1);
        }
        _mm512_store_ps(ct + r * NR, v0);
        _mm512_store_ps(ct + r * NR + 16, v1);
    }
}

/* One thread's share: column panels [p0, p1), all rows.  The C tiles of a
 * chunk live in `ctile` ([m_pad/8][NC_PANELS][8][32]) until the last K chunk. */
static void gemm_range(const run_ctx *c, int64_t p0, int64_t p1, uint16_t *bdec, float *ctile)
{
    const oct_linear *l = c->l;
    int64_t kp2 = l->kp / 2, mp = c->pa->m_pad / MR;
    for (int64_t j0 = p0; j0 < p1; j0 += NC_PANELS) {
        int64_t nj = OCT_MIN(NC_PANELS, p1 - j0);
        for (int64_t q0 = 0; q0 < kp2; q0 += KC_PAIRS) {
            int64_t nq = OCT_MIN(KC_PAIRS, kp2 - q0);
            bool first = q0 == 0;
            /* Decode (or point at) the weight chunk: [nj][nq][64] bf16. */
            for (int64_t j = 0; j < nj; j++) {
                int64_t p = j0 + j;
                if (c->fp8) {
                    const uint8_t *src =
                        (const uint8_t *)l->panel + ((size_t)p * (size_t)kp2 + (size_t)q0) * 64;
                    uint16_t *dst = bdec + j * KC_PAIRS * 64;
                    for (int64_t q = 0; q < nq; q++) {
                        __m512i b0, b1;
                        decode64(&c->t, src + q * 64, &b0, &b1);
                        _mm512_store_si512(dst + q * 64, b0);
                        _mm512_store_si512(dst + q * 64 + 32, b1);
                    }
                } else {
                    memcpy(bdec + j * KC_PAIRS * 64,
                           (const uint16_t *)l->panel + ((size_t)p * (size_t)kp2 + (size_t)q0) * 64,
                           (size_t)nq * 128);
                }
            }
            for (int64_t ip = 0; ip < mp; ip++) {
                const uint32_t *a = c->pa->a + (ip * kp2 + q0) * MR;
                for (int64_t j = 0; j < nj; j++) {
                    const uint16_t *b = bdec + j * KC_PAIRS * 64;
                    float *ct = ctile + (ip * NC_PANELS + j) * MR * NR;
                    __m512 acc[8][2];
                    if (!c->kb) {
                        ukr(nq, a, b, acc);
                        tile_acc(ct, first, acc, NULL, 0, NULL);
                    } else {
                        for (int64_t qb = 0; qb < nq; qb += c->blk_pairs) {
                            int64_t kb = (q0 + qb) / c->blk_pairs;
                            int64_t nqb = OCT_MIN(c->blk_pairs, nq - qb);
                            ukr(nqb, a + qb * MR, b + qb * 64, acc);
                            tile_acc(ct, first && qb == 0, acc, c->pa->sak + ip * MR * l->n_kb + kb,
                                     l->n_kb, l->panel_kb + ((j0 + j) * l->n_kb + kb) * NR);
                        }
                    }
                }
            }
        }
        /* Epilogue: scales, bias, store into y. */
        for (int64_t ip = 0; ip < mp; ip++) {
            for (int64_t j = 0; j < nj; j++) {
                float *ct = ctile + (ip * NC_PANELS + j) * MR * NR;
                __m512 acc[8][2];
                for (int r = 0; r < MR; r++) {
                    acc[r][0] = _mm512_load_ps(ct + r * NR);
                    acc[r][1] = _mm512_load_ps(ct + r * NR + 16);
                }
                store_rows(c, j0 + j, ip * MR, MR, acc);
            }
        }
    }
}

/* ------------------------------------------------------------------- run */

static oct_status avx512_run(const oct_linear *l, int64_t m, const oct_act_in *in, float *y,
                             oct_error *err)
{
    const oct_linear_desc *d = &l->desc;
    run_ctx c;
    memset(&c, 0, sizeof c);
    c.l = l;
    c.y = y;
    c.m = m;
    c.fp8 = d->weight_type == OCT_WEIGHT_FP8;
    int64_t kblk = c.fp8 ? oct_scale_kblock(d->weight_scale) : 0;
    c.kb = kblk > 0;
    c.blk_pairs = kblk / 2;
    c.t = make_tables();

    packed_act pa;
    memset(&pa, 0, sizeof pa);
    pa.m_pad = oct_ceil_div(m, MR) * MR;
    int64_t kp2 = l->kp / 2;
    size_t abytes = (size_t)pa.m_pad * (size_t)kp2 * 4;
    pa.a = oct_malloc_aligned(abytes);
    pa.rs = oct_calloc((size_t)pa.m_pad, sizeof(float));
    pa.sak = oct_calloc((size_t)(pa.m_pad * OCT_MAX(l->n_kb, 1)), sizeof(float));
    oct_status st = OCT_OK;
    float *ctile = NULL;
    if (!pa.a || !pa.rs || !pa.sak) {
        st = oct_error_set(err, OCT_ERR_NOMEM, -1, "%s: out of memory for activations", l->name);
        goto out;
    }
    /* Padding rows must be zero (they feed the micro-kernel). */
    if (pa.m_pad > m)
        memset(pa.a + (pa.m_pad / MR - 1) * kp2 * MR, 0, (size_t)kp2 * MR * 4);
    float ts = 0.0f;
    if (!in->q && d->act == OCT_ACT_STATIC)
        ts = d->act_static_scale;
    if (!in->q && d->act == OCT_ACT_DYNAMIC_TENSOR) {
        float am = 0.0f;
        for (int64_t i = 0; i < m && am == am; i++) {
            float r = amax_seg(in->x + i * l->k, l->k);
            am = (r > am || r != r) ? r : am;
        }
        ts = oct_gemm_scale_from_amax(am, 0.0f);
    }
    if (!pack_act(l, m, in, &pa, ts)) {
        st = oct_error_set(err, OCT_ERR_NOMEM, -1, "%s: out of memory for activations", l->name);
        goto out;
    }
    c.pa = &pa;

    int nt = oct_threads_get();
    if (m <= OCT_GEMV_MAX_M) {
#pragma omp parallel for schedule(static) num_threads(nt)
        for (int64_t p = 0; p < l->n_panels; p++)
            gemv_panel(&c, p);
        goto out;
    }
    /* Each thread: a contiguous range of panels, a decode buffer and C tiles. */
    size_t per_bdec = (size_t)NC_PANELS * KC_PAIRS * 64 * 2;
    size_t per_ct = (size_t)pa.m_pad * NC_PANELS * NR * sizeof(float);
    ctile = oct_malloc_aligned((size_t)nt * (per_bdec + per_ct));
    if (!ctile) {
        st = oct_error_set(err, OCT_ERR_NOMEM, -1, "%s: out of memory for tiles", l->name);
        goto out;
    }
#pragma omp parallel num_threads(nt)
    {
        int tid = omp_get_thread_num(), cnt = omp_get_num_threads();
        int64_t chunks = oct_ceil_div(l->n_panels, NC_PANELS);
        int64_t c0 = chunks * tid / cnt, c1 = chunks * (tid + 1) / cnt;
        char *base = (char *)ctile + (size_t)tid * (per_bdec + per_ct);
        if (c1 > c0)
            gemm_range(&c, c0 * NC_PANELS, OCT_MIN(l->n_panels, c1 * NC_PANELS),
                       (uint16_t *)(void *)base, (float *)(void *)(base + per_bdec));
    }
out:
    oct_free_aligned(ctile);
    oct_free_aligned(pa.a);
    oct_free(pa.rs);
    oct_free(pa.sak);
    return st;
}

const oct_linear_kernel oct_kernel_cpu_avx512 = {
    "cpu_avx512_bf16",
    "avx512",
    OCT_CPU_AVX512,
    avx512_cannot,
    {avx512_prepare, avx512_run, NULL},
    false,
};

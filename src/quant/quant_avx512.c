/* quant_avx512.c — AVX-512 helpers for the quantizers with many small groups
 * (128x128 blocks, MX 1x32), where one call of the fp8 table per 32- or
 * 128-element piece costs more than the piece itself: block amaxes with NaN
 * propagation in one pass over the rows, and MX exponents 16 blocks at a time.
 * The encoding itself is the fp8 table's from_f32_segmul. */
#include <immintrin.h>
#include <math.h>

#include "quant/quant_impl.h"

/* amax[c] = max over rows [0, n_rows) of |x[r*ld + c*seg .. +seg)|, NaN if any
 * element is NaN; seg must be a multiple of 16; the last segment may be
 * shorter (cols % seg). */
void oct_quant_seg_amax_avx512(const float *x, int64_t n_rows, int64_t ld, int64_t cols,
                               int64_t seg, float *amax)
{
    int64_t n_seg = (cols + seg - 1) / seg;
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
    /* rows outer, segments inner: each row is read front to back once (a
     * segment-outer order would jump rows every `seg` floats) */
    __m512 acc[64];
    __mmask16 nan[64];
    for (int64_t c0 = 0; c0 < n_seg; c0 += 64) {
        int64_t c1 = n_seg - c0 < 64 ? n_seg : c0 + 64;
        for (int64_t c = c0; c < c1; c++) {
            acc[c - c0] = _mm512_setzero_ps();
            nan[c - c0] = 0;
        }
        for (int64_t r = 0; r < n_rows; r++) {
            const float *row = x + r * ld;
            for (int64_t c = c0; c < c1; c++) {
                const float *p = row + c * seg;
                int64_t len = cols - c * seg < seg ? cols - c * seg : seg;
                __m512 m = acc[c - c0];
                __mmask16 nn = nan[c - c0];
                int64_t j = 0;
                for (; j + 16 <= len; j += 16) {
                    __m512 v = _mm512_and_ps(_mm512_loadu_ps(p + j), absmask);
                    nn |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
                    m = _mm512_max_ps(m, v);
                }
                if (j < len) {
                    __mmask16 k = (__mmask16)((1u << (len - j)) - 1u);
                    __m512 v = _mm512_and_ps(_mm512_maskz_loadu_ps(k, p + j), absmask);
                    nn |= _mm512_mask_cmp_ps_mask(k, v, v, _CMP_UNORD_Q);
                    m = _mm512_max_ps(m, v);
                }
                acc[c - c0] = m;
                nan[c - c0] = nn;
            }
        }
        for (int64_t c = c0; c < c1; c++)
            amax[c] = nan[c - c0] ? NAN : _mm512_reduce_max_ps(acc[c - c0]);
    }
}

/* Max over the 16 lanes of each of m[0..15], packed as out lane b = block b. */
static __m512 reduce16(const __m512 m[16])
{
    __m512 a[8], b[4];
    for (int i = 0; i < 8; i++)
        a[i] = _mm512_max_ps(_mm512_shuffle_f32x4(m[2 * i], m[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(m[2 * i], m[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; i++)
        b[i] = _mm512_max_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xDD));
    /* 128-bit lane L of b[i] holds block 4i + L */
    __m512 c0 = _mm512_max_ps(_mm512_unpacklo_ps(b[0], b[1]), _mm512_unpackhi_ps(b[0], b[1]));
    __m512 c1 = _mm512_max_ps(_mm512_unpacklo_ps(b[2], b[3]), _mm512_unpackhi_ps(b[2], b[3]));
    __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(c0), _mm512_castps_pd(c1));
    __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(c0), _mm512_castps_pd(c1));
    __m512 r = _mm512_max_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));
    /* element 4L + e of r holds block 4e + L */
    const __m512i idx = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    return _mm512_permutexvar_ps(idx, r);
}

bool oct_quant_mx_row_avx512(const float *x, int64_t cols, bool ct_recipe, int emax_elem,
                             uint8_t *scales, float *mul_out)
{
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
    for (int64_t c0 = 0; c0 < cols; c0 += 512) {
        int64_t nb = cols - c0 >= 512 ? 16 : (cols - c0) / 32;
        __m512 m[16];
        __mmask16 nan = 0;
        for (int b = 0; b < 16; b++) {
            if (b >= nb) {
                m[b] = _mm512_setzero_ps();
                continue;
            }
            __m512 v0 = _mm512_and_ps(_mm512_loadu_ps(x + c0 + 32 * b), absmask);
            __m512 v1 = _mm512_and_ps(_mm512_loadu_ps(x + c0 + 32 * b + 16), absmask);
            nan |=
                _mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v1, v1, _CMP_UNORD_Q);
            m[b] = _mm512_max_ps(v0, v1);
        }
        if (nan)
            return false;
        __m512i bits = _mm512_castps_si512(reduce16(m));
        __m512i eb = _mm512_and_si512(_mm512_srli_epi32(bits, 23), _mm512_set1_epi32(0xFF));
        __mmask16 zero = _mm512_cmpeq_epi32_mask(bits, _mm512_setzero_si512());
        __mmask16 odd = _mm512_mask_cmpeq_epi32_mask(~zero, eb, _mm512_setzero_si512()) |
                        _mm512_cmpeq_epi32_mask(eb, _mm512_set1_epi32(0xFF));
        if (odd) /* f32-subnormal or Inf amax: the scalar rule handles those */
            return false;
        __m512i e = eb;
        if (ct_recipe) {
            __mmask16 up = _mm512_cmpge_epu32_mask(
                _mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFF)), _mm512_set1_epi32(0x600000));
            e = _mm512_mask_add_epi32(e, up, e, _mm512_set1_epi32(1));
        }
        /* biased = floor(log2 amax) - emax_elem + 127 = eb(+1) - emax_elem, in [0, 254] */
        e = _mm512_sub_epi32(e, _mm512_set1_epi32(emax_elem));
        e = _mm512_max_epi32(e, _mm512_setzero_si512());
        e = _mm512_min_epi32(e, _mm512_set1_epi32(254));
        e = _mm512_maskz_mov_epi32(~zero, e); /* all-zero block -> 0 */
        /* multiplier 2^(127 - e): normal for e <= 253, 2^-127 (0x00200000) for 254 */
        __m512i mb = _mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(254), e), 23);
        mb = _mm512_mask_mov_epi32(mb, _mm512_cmpeq_epi32_mask(e, _mm512_set1_epi32(254)),
                                   _mm512_set1_epi32(0x00200000));
        __m512 mul = _mm512_castsi512_ps(mb);
        __mmask16 kb = (__mmask16)(nb >= 16 ? 0xFFFF : (1u << nb) - 1u);
        _mm_mask_storeu_epi8(scales + c0 / 32, kb, _mm512_cvtepi32_epi8(e));
        _mm512_mask_storeu_ps(mul_out + c0 / 32, kb, mul);
    }
    return true;
}

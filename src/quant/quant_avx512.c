/* quant_avx512.c — AVX-512 helpers for the quantizers with many small groups
 * (128x128 blocks, MX 1x32), where one call of the fp8 table per 32- or
 * 128-element piece costs more than the piece itself.  They compute exactly
 * what quant.c's scalar structure computes: amaxes with NaN propagation, and
 * the element op x * mul (one IEEE multiply, so bit-identical) into a row
 * buffer that a single saturating cast then encodes. */
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
    for (int64_t c = 0; c < n_seg; c++) {
        int64_t c0 = c * seg, len = cols - c0 < seg ? cols - c0 : seg;
        __m512 m = _mm512_setzero_ps();
        __mmask16 nan = 0;
        for (int64_t r = 0; r < n_rows; r++) {
            const float *p = x + r * ld + c0;
            int64_t j = 0;
            for (; j + 16 <= len; j += 16) {
                __m512 v = _mm512_and_ps(_mm512_loadu_ps(p + j), absmask);
                nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
                m = _mm512_max_ps(m, v);
            }
            if (j < len) {
                __mmask16 k = (__mmask16)((1u << (len - j)) - 1u);
                __m512 v = _mm512_and_ps(_mm512_maskz_loadu_ps(k, p + j), absmask);
                nan |= _mm512_mask_cmp_ps_mask(k, v, v, _CMP_UNORD_Q);
                m = _mm512_max_ps(m, v);
            }
        }
        amax[c] = nan ? NAN : _mm512_reduce_max_ps(m);
    }
}

/* y[j] = x[j] * mul[j / seg] for j < cols (the last segment may be short). */
void oct_quant_seg_scale_avx512(const float *x, int64_t cols, int64_t seg, const float *mul,
                                float *y)
{
    for (int64_t c0 = 0, c = 0; c0 < cols; c0 += seg, c++) {
        int64_t len = cols - c0 < seg ? cols - c0 : seg;
        __m512 s = _mm512_set1_ps(mul[c]);
        int64_t j = 0;
        for (; j + 16 <= len; j += 16)
            _mm512_storeu_ps(y + c0 + j, _mm512_mul_ps(_mm512_loadu_ps(x + c0 + j), s));
        if (j < len) {
            __mmask16 k = (__mmask16)((1u << (len - j)) - 1u);
            _mm512_mask_storeu_ps(y + c0 + j, k,
                                  _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + c0 + j), s));
        }
    }
}

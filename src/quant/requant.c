/* requant.c — fused-part requantization to one scale, and E4M3FN -> E4M3FNUZ. */
#include <math.h>

#include "core/core.h"
#include "fp8/fp8_impl.h"
#include "quant/quant_impl.h"

oct_status oct_quant_requant_parts(oct_fp8_format f, uint8_t *q, int64_t cols,
                                   const int64_t *part_rows, const float *part_scales, int n_parts,
                                   bool fp16_intermediate, float *scale_out)
{
    if (!oct_quant_elem_format_ok(f) || cols < 0 || n_parts <= 0 || !part_rows || !part_scales ||
        !scale_out)
        return OCT_ERR_INVALID_ARG;
    float smax = -INFINITY;
    for (int i = 0; i < n_parts; i++) {
        if (part_rows[i] < 0 || !(part_scales[i] > 0.0f) || isinf(part_scales[i]))
            return OCT_ERR_INVALID_ARG;
        smax = part_scales[i] > smax ? part_scales[i] : smax;
    }
    *scale_out = smax;
    const float *t = oct_fp8_decode_table(f);
    float inv = 1.0f / smax;
    float buf[1024];
    uint8_t *p = q;
    for (int i = 0; i < n_parts; i++) {
        size_t n;
        if (!oct_size_mul((size_t)part_rows[i], (size_t)cols, &n))
            return OCT_ERR_OVERFLOW;
        float s = part_scales[i];
        if (s != smax && n) {
            if (!q)
                return OCT_ERR_INVALID_ARG;
            for (size_t j = 0; j < n; j += 1024) {
                size_t m = OCT_MIN(n - j, (size_t)1024);
                for (size_t k = 0; k < m; k++) {
                    float d = t[p[j + k]] * s;
                    if (fp16_intermediate) /* vLLM: fp16(fp8) * fp32 scalar -> fp16 */
                        d = oct_f16_to_f32(oct_f32_to_f16(d));
                    buf[k] = d * inv;
                }
                oct_fp8_from_f32(f, OCT_CAST_SAT, buf, p + j, m);
            }
        }
        p += n;
    }
    return OCT_OK;
}

void oct_fp8_fn_to_fnuz(uint8_t *codes, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (codes[i] == 0x80)
            codes[i] = 0x00;
}

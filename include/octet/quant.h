/* octet/quant.h — quantization schemes, scales and the quantizers (part of octet.h, the public API:
 * docs/API.md). */
#ifndef OCTET_API_QUANT_H
#define OCTET_API_QUANT_H

#include "octet/fp8.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Scale = dequantization multiplier: real ~= decode(q) * scale.  All maths in
 * f32.  Every cast here saturates (OCT_CAST_SAT).  See docs/NUMERICS.md. */

/* Largest magnitude quantizers target: 448 (e4m3fn), 224 (e4m3fnuz: vLLM's
 * choice on MI300, 240 costs accuracy), 57344 (e5m2, e5m2fnuz). */
OCT_API float oct_quant_qmax(oct_fp8_format f);

/* Smallest dynamic scale: 1 / (qmax * 512) (vLLM's floor; 1/229376 for e4m3fn). */
OCT_API float oct_quant_scale_floor(oct_fp8_format f);

/* Dynamic per-tensor: scale = max(amax / qmax, floor); q = cast(clamp(x * (1/scale))).
 * x: [n] -> q: [n], *scale: 1 float.  A NaN anywhere makes the scale NaN (and
 * every code NaN), as PyTorch does: garbage in is never silently hidden. */
OCT_API oct_status oct_quant_tensor(oct_fp8_format f, const float *x, size_t n, uint8_t *q,
                                    float *scale);

/* Static scale (a checkpoint's input_scale): q = cast(clamp(x * (1/scale))). */
OCT_API oct_status oct_quant_static(oct_fp8_format f, const float *x, size_t n, float scale,
                                    uint8_t *q);

/* Per row of x [rows, cols] (per-token activations, per-channel weights):
 * scale_r = max(min(amax_r, ub) / qmax, floor) (ub <= 0: no bound);
 * q = cast(clamp(x / scale_r)) (true division, as vLLM's per-token kernel).
 * scales: [rows]. */
OCT_API oct_status oct_quant_rows(oct_fp8_format f, const float *x, int64_t rows, int64_t cols,
                                  float ub, uint8_t *q, float *scales);

/* 1 x group along each row (activations, group = 128): scales [rows, ceil(cols/group)],
 * the last group of a row may be partial; scale = max(amax / qmax, floor);
 * q = cast(clamp(x / scale)). */
OCT_API oct_status oct_quant_groups(oct_fp8_format f, const float *x, int64_t rows, int64_t cols,
                                    int64_t group, uint8_t *q, float *scales);

/* bn x bk weight blocks (128 x 128), ceil-counted with partial edge blocks:
 * scales [ceil(rows/bn), ceil(cols/bk)], scale = max(amax, 1e-4) / qmax
 * (vLLM per_block_cast_to_fp8); q = cast(clamp(w * (1/scale))). */
OCT_API oct_status oct_quant_blocks(oct_fp8_format f, const float *w, int64_t rows, int64_t cols,
                                    int64_t bn, int64_t bk, uint8_t *q, float *scales);

typedef enum {
    OCT_MX_OCP = 0, /* e = floor(log2 amax) - emax_elem (8 for e4m3) + 127 */
    OCT_MX_CT = 1   /* compressed-tensors: amax first rounded up to a power of two
                       when its mantissa >= 1.75 */
} oct_mx_recipe;

/* MXFP8: 1 x 32 blocks along rows, E8M0 scales [rows, cols/32] (biased
 * exponents, clamped to [0, 254]; an all-zero block gets 0); q =
 * cast(clamp(x / 2^(e-127))).  cols % 32 != 0 -> OCT_ERR_INVALID_ARG.
 * elem: OCT_FP8_E4M3FN or OCT_FP8_E5M2. */
OCT_API oct_status oct_quant_mx(oct_fp8_format elem, oct_mx_recipe recipe, const float *x,
                                int64_t rows, int64_t cols, uint8_t *q, uint8_t *scales);

/* Dequantization to f32, the inverse layouts of the functions above. */
OCT_API oct_status oct_dequant_tensor(oct_fp8_format f, const uint8_t *q, size_t n, float scale,
                                      float *x);
OCT_API oct_status oct_dequant_rows(oct_fp8_format f, const uint8_t *q, int64_t rows, int64_t cols,
                                    const float *scales, float *x);
OCT_API oct_status oct_dequant_groups(oct_fp8_format f, const uint8_t *q, int64_t rows,
                                      int64_t cols, int64_t group, const float *scales, float *x);
OCT_API oct_status oct_dequant_blocks(oct_fp8_format f, const uint8_t *q, int64_t rows,
                                      int64_t cols, int64_t bn, int64_t bk, const float *scales,
                                      float *x);
OCT_API oct_status oct_dequant_mx(oct_fp8_format elem, const uint8_t *q, int64_t rows, int64_t cols,
                                  const uint8_t *scales, float *x);

/* Fused per-tensor parts (q/k/v, gate/up) stacked row-wise in q [sum rows, cols]
 * with one scale each -> one scale (the max) for all: each part with a smaller
 * scale is dequantized and requantized in place.  fp16_intermediate = true
 * reproduces vLLM bit for bit (dequant through float16, which overflows above
 * 65504 and flushes below 2^-24); false (octet's default) dequantizes exactly in
 * f32.  *scale_out = max scale. */
OCT_API oct_status oct_quant_requant_parts(oct_fp8_format f, uint8_t *q, int64_t cols,
                                           const int64_t *part_rows, const float *part_scales,
                                           int n_parts, bool fp16_intermediate, float *scale_out);

/* E4M3FN -> E4M3FNUZ in place: byte 0x80 (-0) -> 0x00; every other byte kept,
 * so each value halves: the caller doubles the scales (weight, input, KV). */
OCT_API void oct_fp8_fn_to_fnuz(uint8_t *codes, size_t n);

/* Error of approx against ref over n values. */
typedef struct oct_quant_error {
    double sqnr_db; /* 10 log10(sum ref^2 / sum err^2); +Inf when exact */
    double max_abs; /* max |ref - approx| */
    double rel_fro; /* ||ref - approx||_F / ||ref||_F (0 when ref == 0 and exact) */
} oct_quant_error;

OCT_API oct_status oct_quant_error_measure(const float *ref, const float *approx, size_t n,
                                           oct_quant_error *out);

#ifdef __cplusplus
}
#endif
#endif

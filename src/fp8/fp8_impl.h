/* fp8_impl.h — the per-ISA conversion tables behind the public oct_fp8_* API.
 *
 * Every path must give the same bytes as the scalar reference (fp8_ref.c) for
 * every input; tests/test_fp8.c checks all paths the machine has. */
#ifndef OCTET_FP8_IMPL_H
#define OCTET_FP8_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "octet.h"

typedef struct oct_fp8_impl {
    const char *name;
    void (*from_f32)(oct_fp8_format f, oct_cast_mode m, const float *src, uint8_t *dst, size_t n);
    void (*from_bf16)(oct_fp8_format f, oct_cast_mode m, const uint16_t *src, uint8_t *dst,
                      size_t n);
    void (*from_f16)(oct_fp8_format f, oct_cast_mode m, const uint16_t *src, uint8_t *dst,
                     size_t n);
    void (*to_f32)(oct_fp8_format f, const uint8_t *src, float *dst, size_t n);
    /* The quantizers' element op fused with the cast, for src/quant:
     * y = divide ? src[i] / scale : src[i] * scale (one f32 IEEE operation, RNE);
     * if qmax > 0 and |y| > qmax, y = copysign(qmax, y) (NaN stays NaN);
     * dst[i] = encode(f, OCT_CAST_SAT, y).  qmax <= 0 means SAT alone.  A NaN
     * scale gives encode(f, OCT_CAST_SAT, scale) everywhere (which NaN an IEEE
     * NaN-times-NaN returns is not fixed, so its sign is pinned to the scale's). */
    void (*from_f32_scaled)(oct_fp8_format f, const float *src, uint8_t *dst, size_t n, float scale,
                            bool divide, float qmax);
    /* max |src[i]| (+0 when n == 0); NaN if any element is NaN. */
    float (*amax_f32)(const float *src, size_t n);
    /* from_f32_scaled(divide = false) with one multiplier per segment of `seg`
     * elements: segment c of src uses mul[c] (the last may be short).  Same
     * bytes as one from_f32_scaled call per segment (block and MX quantizers). */
    void (*from_f32_segmul)(oct_fp8_format f, const float *src, uint8_t *dst, size_t n, size_t seg,
                            const float *mul, float qmax);
} oct_fp8_impl;

extern const oct_fp8_impl oct_fp8_impl_ref;
extern const oct_fp8_impl oct_fp8_impl_avx2;
extern const oct_fp8_impl oct_fp8_impl_avx512;

/* The table for a level (the level must be supported by this CPU). */
const oct_fp8_impl *oct_fp8_impl_for(oct_cpu_level level);

/* Scalar reference, one value (the spec of every path). */
uint8_t oct_fp8_ref_encode(oct_fp8_format f, oct_cast_mode m, float x);
float oct_fp8_ref_decode(oct_fp8_format f, uint8_t code);

/* 256-entry decode tables, filled on first use (thread-safe: idempotent). */
const float *oct_fp8_decode_table(oct_fp8_format f);

#endif

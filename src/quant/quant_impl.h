/* quant_impl.h — helpers shared by the files of src/quant/ (and by kernels that
 * fuse quantization and must reproduce it bit for bit). */
#ifndef OCTET_QUANT_IMPL_H
#define OCTET_QUANT_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "octet.h"

/* True for the four element formats quantizers target (not E8M0). */
bool oct_quant_elem_format_ok(oct_fp8_format f);

/* max |x| (NaN if any element is NaN). */
float oct_quant_amax(const float *x, size_t n);

/* q = sat_cast(x * mul) and q = sat_cast(x / div), in f32, chunked. */
void oct_quant_mul_cast(oct_fp8_format f, const float *x, size_t n, float mul, uint8_t *q);
void oct_quant_div_cast(oct_fp8_format f, const float *x, size_t n, float div, uint8_t *q);

/* AVX-512 helpers (quant_avx512.c; call only at OCT_CPU_AVX512).
 * seg_amax: amax[c] over n_rows rows (stride ld) of column segment c of width
 * seg (multiple of 16), NaN-propagating. */
void oct_quant_seg_amax_avx512(const float *x, int64_t n_rows, int64_t ld, int64_t cols,
                               int64_t seg, float *amax);

/* MX 1x32 of one row on AVX-512: block exponents into scales[cols/32] and
 * the multipliers 2^(127-e) into mul[cols/32]; false (nothing usable written)
 * when a block is NaN, Inf or has an f32-subnormal amax -- the caller then
 * takes the generic path. */
bool oct_quant_mx_row_avx512(const float *x, int64_t cols, bool ct_recipe, int emax_elem,
                             uint8_t *scales, float *mul);

/* 2^k as f32, exact, for k in [-149, 127]. */
float oct_quant_pow2f(int k);

/* The MX block exponent (biased E8M0 code) for a block with this amax. */
uint8_t oct_quant_mx_exponent(oct_mx_recipe recipe, oct_fp8_format elem, float amax);

#endif

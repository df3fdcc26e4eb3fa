/* gemm.h — internals of the CPU linear kernels: the scalar activation
 * quantizers and the reference GEMM (the spec every fast path is tested
 * against).  The prepared-weight object and the kernel vtable they fill are
 * backend-neutral: kernels/linear.h.
 *
 * Data flow of one forward call (linear.c):
 *   x (f32 | bf16) -> [kernel.run: quantize/pack activations, GEMM/GEMV] -> y f32
 * Fast kernels keep weights as FP8 codes in a panel layout (see
 * gemm_avx512.c) and decode them to bf16 exactly while packing. */
#ifndef OCTET_KERNELS_CPU_GEMM_H
#define OCTET_KERNELS_CPU_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/linear.h"
#include "octet.h"

#define OCT_GEMM_QMAX 448.0f
/* Rows up to this go through the GEMV-shaped path (weights streamed once). */
#define OCT_GEMV_MAX_M 16

/* ---- scalar activation quantizers (gemm_ref.c): the exact formulas of the
 * quant section's oct_quant_* functions, E4M3FN, saturating ---- */
uint8_t oct_gemm_encode(float y);                              /* saturating RNE E4M3FN */
float oct_gemm_row_scale(const float *x, int64_t n, float ub); /* per-token / group */
/* The same from a precomputed amax (NaN when any element was NaN). */
float oct_gemm_scale_from_amax(float amax, float ub);
uint8_t oct_gemm_mx_exponent_from_amax(float amax);
float oct_gemm_tensor_scale(const float *x, int64_t n);  /* dynamic per-tensor */
uint8_t oct_gemm_mx_exponent(const float *x, int64_t n); /* OCP recipe */
/* Quantizes x [m,k] per mode into codes q [m,k] and scales (layout of sa for the
 * returned kind).  sa_f: [m * n_kb] or [m] floats; sa_e: [m * k/32] bytes (MX). */
void oct_gemm_quant_act_ref(const oct_linear_desc *d, int64_t m, int64_t k, const float *x,
                            uint8_t *q, float *sa_f, uint8_t *sa_e);

/* Activation scale (m, kb) as f32 (kb ignored for TENSOR/ROW). */
float oct_gemm_sa_at(oct_scale_kind ka, const void *sa, int64_t m, int64_t kb, int64_t n_kb);
/* Weight scale (n, kb) of a prepared linear as f32. */
static inline float oct_gemm_sb_kb(const oct_linear *l, int64_t n, int64_t kb)
{
    if (l->desc.weight_scale == OCT_SCALE_BLOCK128)
        return l->kb_scale[(n / 128) * l->n_kb + kb];
    return l->kb_scale[n * l->n_kb + kb];
}

/* Epilogue shared by every kernel (order of the CUTLASS epilogue). */
static inline float oct_gemm_epilogue(float acc, float sa, float sb, float bias)
{
    return sa * (sb * acc) + bias;
}

/* f32 -> bf16 RNE, NaN kept quiet (same as oct_f32_to_bf16). */
uint16_t oct_gemm_f32_to_bf16(float x);

#endif

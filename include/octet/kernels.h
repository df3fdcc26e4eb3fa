/* octet/kernels.h — linear layers and the kernel registry (part of octet.h, the public API:
 * docs/API.md). */
#ifndef OCTET_API_KERNELS_H
#define OCTET_API_KERNELS_H

#include "octet/fp8.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Scaled FP8 matrix multiply (docs/KERNELS.md §Semantics) and the linear-layer kernel registry.
 * See docs/KERNELS.md.  All accumulation is f32; FP8 operands are E4M3FN. */

typedef enum { OCT_SCALE_TENSOR, OCT_SCALE_ROW, OCT_SCALE_BLOCK128, OCT_SCALE_MX32 } oct_scale_kind;

/* A: [M,K] E4M3FN codes, row-major.  B: [N,K] E4M3FN codes, row-major.  Y: [M,N] f32, row-major.
   sa: TENSOR -> 1 float; ROW -> M floats (per token); BLOCK128 -> M*ceil(K/128) floats; MX32 ->
   M*(K/32) E8M0 bytes. sb: TENSOR -> 1 float; ROW -> N floats (per output channel); BLOCK128 ->
   ceil(N/128)*ceil(K/128) floats; MX32 -> N*(K/32) bytes. Y[m,n] = sa(m) * (sb(n) * sum_k A[m,k]
   B[n,k]) + bias[n] for TENSOR/ROW mixes; BLOCK128 x BLOCK128 and MX32 x MX32 scale each K block
   inside the sum.  Other mixes -> OCT_ERR_UNSUPPORTED; negative sizes, NULL pointers, MX32 with K %
   32 != 0 -> OCT_ERR_INVALID_ARG.  Uses the best kernel for oct_cpu_level_get() (B is repacked for
   the call: use oct_linear_* to repack once). */
OCT_API oct_status oct_scaled_mm_f32(int64_t M, int64_t N, int64_t K, const uint8_t *A,
                                     oct_scale_kind ka, const void *sa, const uint8_t *B,
                                     oct_scale_kind kb, const void *sb,
                                     const float *bias /* N floats or NULL */, float *Y);

/* Weight element type of a linear layer. */
typedef enum {
    OCT_WEIGHT_FP8 = 0,  /* E4M3FN codes [N,K] + scales of desc.weight_scale kind */
    OCT_WEIGHT_BF16 = 1, /* bf16 [N,K] (baseline; no scales) */
    OCT_WEIGHT_F32 = 2   /* f32 [N,K] (baseline; ref kernel only) */
} oct_weight_type;

/* What happens to a linear layer's activations at run time. */
typedef enum {
    OCT_ACT_NONE = 0,       /* not quantized: W8A16 (FP8 weights) or BF16/F32 weights;
                               f32 activations are rounded to bf16 (RNE) first */
    OCT_ACT_DYNAMIC_TOKEN,  /* per-token dynamic, as oct_quant_rows (ub = desc.act_scale_ub) */
    OCT_ACT_DYNAMIC_TENSOR, /* one dynamic scale per call, as oct_quant_tensor */
    OCT_ACT_STATIC,         /* checkpoint input_scale desc.act_static_scale, as oct_quant_static */
    OCT_ACT_GROUP128,       /* 1x128 dynamic groups, as oct_quant_groups (BLOCK128 weights) */
    OCT_ACT_MX32            /* MX 1x32 E8M0, as oct_quant_mx(OCP recipe) (MX32 weights) */
} oct_act_quant;

/* Everything kernel selection needs to know about one linear layer y = x W^T + b. */
typedef struct oct_linear_desc {
    const char *name; /* layer name for logs and errors ("model.layers.0.mlp.down_proj") */
    int64_t n, k;     /* weight [n, k]: n outputs, k inputs */
    oct_weight_type weight_type;
    oct_scale_kind weight_scale; /* FP8 only: TENSOR, ROW (per channel), BLOCK128, MX32 */
    oct_act_quant act;
    float act_static_scale; /* OCT_ACT_STATIC: the input scale (> 0) */
    float act_scale_ub;     /* OCT_ACT_DYNAMIC_TOKEN: amax upper bound, <= 0: none */
    bool has_bias;
} oct_linear_desc;

/* A kernel implementation (static, never freed). */
typedef struct oct_linear_kernel oct_linear_kernel;

/* "cuda_fp8", "cpu_avx512_bf16", "cpu_avx2_fma", "cpu_ref"; "(none)" for NULL.  Kernels and
 * their names are static: valid for the life of the process. */
OCT_API const char *oct_linear_kernel_name(const oct_linear_kernel *k);
/* Its backend family, the value --linear-backend matches: "cuda", "avx512", "avx2", "ref"
 * (static strings; "(none)" for NULL). */
OCT_API const char *oct_linear_kernel_backend(const oct_linear_kernel *k);

/* Picks the first kernel in priority order (cuda, avx512, avx2, ref) that this CPU
 * (oct_cpu_level_get) runs and that can implement `d`.  backend: NULL or
 * "auto" means the OCTET_LINEAR_BACKEND environment variable if set, else any;
 * otherwise only kernels of that backend are considered.  No capable kernel ->
 * OCT_ERR_UNSUPPORTED with a message naming the layer and each kernel's reason
 * (never a silent fallback); an unknown backend name -> OCT_ERR_INVALID_ARG.
 * Logs "Selected <kernel> for <layer>" at debug level (see the selector for
 * the per-model summary). */
OCT_API oct_status oct_linear_select(const oct_linear_desc *d, const char *backend,
                                     const oct_linear_kernel **out, oct_error *err);

/* oct_linear_select among the CPU kernels only ("auto"; a "cuda" restriction
 * from OCTET_LINEAR_BACKEND counts as auto): the one-shot oct_scaled_mm_f32 is
 * the CPU reference, also on a GPU machine, and CPU tests and benchmarks pick
 * their kernels with it. */
OCT_API oct_status oct_linear_select_host(const oct_linear_desc *d, const oct_linear_kernel **out,
                                          oct_error *err);

/* A model loader calls oct_linear_selector_pick once per layer; _log_summary
 * logs one INFO line per distinct (kernel, scheme) choice:
 * "Selected cpu_avx512_bf16 for model.layers.0.self_attn.q_proj and 223 more layers (fp8 w8a8
 * ...)". */
typedef struct oct_linear_selector oct_linear_selector;
OCT_API oct_status oct_linear_selector_create(const char *backend, oct_linear_selector **out,
                                              oct_error *err);
OCT_API oct_status oct_linear_selector_pick(oct_linear_selector *s, const oct_linear_desc *d,
                                            const oct_linear_kernel **out, oct_error *err);
/* The option its errors name ("--linear-backend" unless set: "--moe-backend"). */
OCT_API void oct_linear_selector_set_flag(oct_linear_selector *s, const char *flag);
OCT_API void oct_linear_selector_log_summary(const oct_linear_selector *s);
OCT_API void oct_linear_selector_free(oct_linear_selector *s);

/* A prepared linear layer: weights repacked once into the chosen kernel's
 * layout (the caller's buffers are copied and may be freed).  Immutable after
 * creation; forward calls may run concurrently from several threads. */
typedef struct oct_linear oct_linear;

/* weight: [n,k] FP8 codes / bf16 / f32 per d->weight_type.  weight_scale: FP8
 * only, laid out as sb of oct_scaled_mm_f32 for d->weight_scale.  bias: [n] f32
 * or NULL (must match d->has_bias).  kernel: NULL selects with backend "auto". */
OCT_API oct_status oct_linear_create(const oct_linear_desc *d, const oct_linear_kernel *kernel,
                                     const void *weight, const void *weight_scale,
                                     const float *bias, oct_linear **out, oct_error *err);
OCT_API void oct_linear_free(oct_linear *l);
/* The kernel l runs: static, valid for the life of the process (NULL for l == NULL). */
OCT_API const oct_linear_kernel *oct_linear_get_kernel(const oct_linear *l);

/* y[m,n] = x[m,k] W^T (+ bias), activations handled per d->act. */
OCT_API oct_status oct_linear_forward(const oct_linear *l, int64_t m, const float *x, float *y,
                                      oct_error *err);
/* Same with bf16 activations in and bf16 out (RNE of the f32 result). */
OCT_API oct_status oct_linear_forward_bf16(const oct_linear *l, int64_t m, const uint16_t *x,
                                           uint16_t *y, oct_error *err);
/* Pre-quantized activations (FP8 weights only): a [m,k] E4M3FN codes, sa laid
 * out as in oct_scaled_mm_f32 for `ka` (ignores d->act). */
OCT_API oct_status oct_linear_forward_q(const oct_linear *l, int64_t m, const uint8_t *a,
                                        oct_scale_kind ka, const void *sa, float *y,
                                        oct_error *err);

#ifdef __cplusplus
}
#endif
#endif

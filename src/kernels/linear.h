/* linear.h — the backend-neutral linear layer: the prepared-weight object
 * (struct oct_linear), the kernel vtable every backend's kernels fill, and the
 * descriptor checks the registry (registry.c) and linear.c share.  Kernels:
 * kernels/cpu/ (gemm_*.c) and kernels/cuda/ (registry_kernel.c).
 *
 * Data flow of one forward call (linear.c):
 *   x (f32 | bf16) -> [kernel.run: quantize/pack activations, GEMM/GEMV] -> y f32 */
#ifndef OCTET_KERNELS_LINEAR_H
#define OCTET_KERNELS_LINEAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "octet.h"

/* Weight scales of an [n, k] weight of scale kind `kind` (oct_scaled_mm_f32's
 * sb): 1, n, ceil(n/128) * ceil(k/128) floats, or n * (k/32) E8M0 bytes. */
static inline int64_t oct_scale_count(oct_scale_kind kind, int64_t n, int64_t k)
{
    switch (kind) {
    case OCT_SCALE_TENSOR: return 1;
    case OCT_SCALE_ROW: return n;
    case OCT_SCALE_BLOCK128: return oct_ceil_div(n, 128) * oct_ceil_div(k, 128);
    case OCT_SCALE_MX32: return n * (k / 32);
    }
    return 0;
}

/* K-block length in elements of a K-blocked scale kind (0: not K-blocked). */
static inline int64_t oct_scale_kblock(oct_scale_kind k)
{
    return k == OCT_SCALE_BLOCK128 ? 128 : k == OCT_SCALE_MX32 ? 32 : 0;
}

/* Activations as a kernel sees them: f32 values to quantize per desc.act, or
 * pre-quantized codes. */
typedef struct oct_act_in {
    const float *x;    /* [m,k] f32, or NULL when q is used */
    const uint8_t *q;  /* [m,k] E4M3FN codes */
    oct_scale_kind ka; /* kind of sa for q */
    const void *sa;
} oct_act_in;

struct oct_linear {
    oct_linear_desc desc; /* desc.name points at `name` */
    bool raw_borrowed;    /* w8/w16/w32 point at the caller's buffer during prepare */
    char *name;
    const oct_linear_kernel *kernel;
    int64_t n, k;
    int64_t n_kb; /* ceil(k / kblock) for K-blocked weight scales, else 0 */
    /* Reference layout (cpu_ref): the caller's arrays, copied. */
    uint8_t *w8;   /* [n,k] codes */
    uint16_t *w16; /* [n,k] bf16 */
    float *w32;    /* [n,k] f32 */
    /* Weight scales, normalized to f32 for every kernel. */
    float *col_scale; /* [n_pad] TENSOR/ROW (TENSOR expanded); 1.0 for W8A16 block/mx */
    float *kb_scale;  /* BLOCK128: [ceil(n/128), n_kb]; MX32: [n, n_kb] as 2^(e-127) */
    float *bias;      /* [n_pad] or NULL */
    /* Fast layouts (owned by the kernel that prepared them). */
    int64_t n_panels; /* ceil(n / 32) */
    int64_t kp;       /* k rounded up to even (pairs of K) */
    void *panel;      /* avx512: [n_panels][kp/2][64] fp8 codes or bf16 words */
    float *panel_kb;  /* avx512: [n_panels][n_kb][32] weight scale per column and K block */
    void *dev;        /* a device kernel's state (kernels/cuda/registry_kernel.c), else NULL */
};

typedef struct oct_linear_kernel_ops {
    /* Fills the fast layout of l (l->w8/w16/w32 and scales are already set). */
    oct_status (*prepare)(oct_linear *l, oct_error *err);
    /* y[m, n] f32.  Activations validated by the caller. */
    oct_status (*run)(const oct_linear *l, int64_t m, const oct_act_in *in, float *y,
                      oct_error *err);
    /* Frees what prepare() put in l->dev (NULL: nothing to free). */
    void (*release)(oct_linear *l);
} oct_linear_kernel_ops;

struct oct_linear_kernel {
    const char *name;
    const char *backend;
    oct_cpu_level level; /* the CPU level it needs */
    /* NULL if it can implement d, else a short reason. */
    const char *(*cannot)(const oct_linear_desc *d);
    oct_linear_kernel_ops ops;
    /* true: run() reads the raw w8/w16/w32 copy, which the layer keeps; false:
     * prepare() builds its own layout and the caller's weights are only
     * borrowed while it runs (no second copy: keeps peak load memory down). */
    bool keeps_raw;
};

/* The registered kernels (registry.c lists them in priority order). */
extern const oct_linear_kernel oct_kernel_cpu_ref;    /* kernels/cpu/gemm_ref.c */
extern const oct_linear_kernel oct_kernel_cpu_avx2;   /* kernels/cpu/gemm_avx2.c */
extern const oct_linear_kernel oct_kernel_cpu_avx512; /* kernels/cpu/gemm_avx512.c */
extern const oct_linear_kernel oct_kernel_cuda_fp8;   /* kernels/cuda/registry_kernel.c */
extern const oct_linear_kernel oct_kernel_cuda_bf16;  /* kernels/cuda/registry_kernel.c */

/* NULL if d makes sense at all (independent of any kernel), else a reason;
 * *st receives INVALID_ARG or UNSUPPORTED. */
const char *oct_linear_desc_problem(const oct_linear_desc *d, oct_status *st);
/* NULL if activation scale kind ka pairs with weight scale kind kw. */
const char *oct_scale_pair_problem(oct_scale_kind ka, oct_scale_kind kw);

/* Scale kind the activations of d end up with (TENSOR for NONE). */
oct_scale_kind oct_linear_act_kind(const oct_linear_desc *d);

#endif

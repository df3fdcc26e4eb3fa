/* gemm_ref.c — the scalar reference: activation quantizers with the exact
 * formulas of the quant section (docs/NUMERICS.md §Quantization schemes) and the scaled GEMM of
 * docs/KERNELS.md §Semantics, one sequential f32 sum per output.  Every fast kernel is tested
 * against this file; it is written for clarity, not speed. */
#include <math.h>

#include "core/core.h"
#include "fp8/fp8_impl.h"
#include "kernels/cpu/gemm.h"

uint8_t oct_gemm_encode(float y)
{
    return oct_fp8_ref_encode(OCT_FP8_E4M3FN, OCT_CAST_SAT, y);
}

uint16_t oct_gemm_f32_to_bf16(float x)
{
    return oct_f32_to_bf16(x);
}

/* max |x| that lets a NaN through (fmaxf would hide it). */
static float amax_nan(const float *x, int64_t n)
{
    float a = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float v = fabsf(x[i]);
        if (v > a || v != v)
            a = v;
        if (a != a)
            return a;
    }
    return a;
}

static float scale_floor(void)
{
    return 1.0f / (OCT_GEMM_QMAX * 512.0f);
}

float oct_gemm_row_scale(const float *x, int64_t n, float ub)
{
    return oct_gemm_scale_from_amax(amax_nan(x, n), ub);
}

float oct_gemm_scale_from_amax(float a, float ub)
{
    if (ub > 0.0f && a > ub)
        a = ub;
    float s = a / OCT_GEMM_QMAX;
    return s < scale_floor() ? scale_floor() : s;
}

float oct_gemm_tensor_scale(const float *x, int64_t n)
{
    return oct_gemm_row_scale(x, n, 0.0f);
}

uint8_t oct_gemm_mx_exponent(const float *x, int64_t n)
{
    return oct_gemm_mx_exponent_from_amax(amax_nan(x, n));
}

uint8_t oct_gemm_mx_exponent_from_amax(float a)
{
    if (a != a)
        return 0xFF; /* NaN block -> NaN scale (OCP) */
    if (a == 0.0f)
        return 0;
    if (isinf(a))
        return 254;
    int ex;
    (void)frexpf(a, &ex); /* a = f * 2^ex, f in [0.5, 1): floor(log2 a) = ex - 1 */
    int e = (ex - 1) - 8 + 127;
    return (uint8_t)(e < 0 ? 0 : e > 254 ? 254 : e);
}

void oct_gemm_quant_act_ref(const oct_linear_desc *d, int64_t m, int64_t k, const float *x,
                            uint8_t *q, float *sa_f, uint8_t *sa_e)
{
    switch (d->act) {
    case OCT_ACT_DYNAMIC_TOKEN:
        for (int64_t i = 0; i < m; i++) {
            const float *row = x + i * k;
            float s = oct_gemm_row_scale(row, k, d->act_scale_ub);
            sa_f[i] = s;
            for (int64_t j = 0; j < k; j++)
                q[i * k + j] = oct_gemm_encode(row[j] / s);
        }
        return;
    case OCT_ACT_DYNAMIC_TENSOR:
    case OCT_ACT_STATIC: {
        float s = d->act == OCT_ACT_STATIC ? d->act_static_scale : oct_gemm_tensor_scale(x, m * k);
        float inv = 1.0f / s;
        sa_f[0] = s;
        for (int64_t j = 0; j < m * k; j++)
            q[j] = oct_gemm_encode(x[j] * inv);
        return;
    }
    case OCT_ACT_GROUP128: {
        int64_t n_kb = oct_ceil_div(k, 128);
        for (int64_t i = 0; i < m; i++) {
            for (int64_t b = 0; b < n_kb; b++) {
                int64_t k0 = b * 128, len = OCT_MIN(128, k - k0);
                const float *g = x + i * k + k0;
                float s = oct_gemm_row_scale(g, len, 0.0f);
                sa_f[i * n_kb + b] = s;
                for (int64_t j = 0; j < len; j++)
                    q[i * k + k0 + j] = oct_gemm_encode(g[j] / s);
            }
        }
        return;
    }
    case OCT_ACT_MX32: {
        int64_t n_kb = k / 32;
        for (int64_t i = 0; i < m; i++) {
            for (int64_t b = 0; b < n_kb; b++) {
                const float *g = x + i * k + b * 32;
                uint8_t e = oct_gemm_mx_exponent(g, 32);
                float s = e == 0xFF ? NAN : ldexpf(1.0f, (int)e - 127);
                sa_e[i * n_kb + b] = e;
                for (int64_t j = 0; j < 32; j++)
                    q[i * k + b * 32 + j] = oct_gemm_encode(g[j] / s);
            }
        }
        return;
    }
    case OCT_ACT_NONE: break;
    }
}

float oct_gemm_sa_at(oct_scale_kind ka, const void *sa, int64_t m, int64_t kb, int64_t n_kb)
{
    switch (ka) {
    case OCT_SCALE_TENSOR: return ((const float *)sa)[0];
    case OCT_SCALE_ROW: return ((const float *)sa)[m];
    case OCT_SCALE_BLOCK128: return ((const float *)sa)[m * n_kb + kb];
    case OCT_SCALE_MX32: {
        uint8_t e = ((const uint8_t *)sa)[m * n_kb + kb];
        return e == 0xFF ? NAN : ldexpf(1.0f, (int)e - 127);
    }
    }
    return NAN;
}

/* ------------------------------------------------------------ the kernel */

static const char *ref_cannot(const oct_linear_desc *d)
{
    (void)d;
    return NULL;
}

static oct_status ref_prepare(oct_linear *l, oct_error *err)
{
    (void)l;
    (void)err;
    return OCT_OK;
}

static float weight_at(const oct_linear *l, const float *lut, int64_t n, int64_t k)
{
    size_t i = (size_t)(n * l->k + k);
    switch (l->desc.weight_type) {
    case OCT_WEIGHT_FP8: return lut[l->w8[i]];
    case OCT_WEIGHT_BF16: return oct_bf16_to_f32(l->w16[i]);
    case OCT_WEIGHT_F32: return l->w32[i];
    }
    return NAN;
}

/* Y = docs/KERNELS.md §Semantics with activations a [m,k] already as f32 values (decoded codes,
 * bf16-rounded or raw f32) and their scales (ka, sa); sa == NULL means 1. */
static void ref_mm(const oct_linear *l, int64_t m, const float *a, oct_scale_kind ka,
                   const void *sa, float *y)
{
    const float *lut = oct_fp8_decode_table(OCT_FP8_E4M3FN);
    int64_t n = l->n, k = l->k;
    bool fp8 = l->desc.weight_type == OCT_WEIGHT_FP8;
    int64_t kblk = fp8 ? oct_scale_kblock(l->desc.weight_scale) : 0;
#pragma omp parallel for schedule(static) num_threads(oct_threads_get())
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            float bias = l->bias ? l->bias[j] : 0.0f;
            float out;
            if (kblk == 0) {
                float acc = 0.0f;
                for (int64_t t = 0; t < k; t++)
                    acc += a[i * k + t] * weight_at(l, lut, j, t);
                float s_a = sa ? oct_gemm_sa_at(ka, sa, i, 0, 0) : 1.0f;
                float s_b = fp8 ? l->col_scale[j] : 1.0f;
                out = oct_gemm_epilogue(acc, s_a, s_b, bias);
            } else {
                float tot = 0.0f;
                for (int64_t b = 0; b < l->n_kb; b++) {
                    float bs = 0.0f;
                    for (int64_t t = b * kblk; t < OCT_MIN(k, (b + 1) * kblk); t++)
                        bs += a[i * k + t] * weight_at(l, lut, j, t);
                    float s_a = sa ? oct_gemm_sa_at(ka, sa, i, b, l->n_kb) : 1.0f;
                    tot += bs * s_a * oct_gemm_sb_kb(l, j, b);
                }
                out = tot + bias;
            }
            y[i * n + j] = out;
        }
    }
}

static oct_status ref_run(const oct_linear *l, int64_t m, const oct_act_in *in, float *y,
                          oct_error *err)
{
    int64_t k = l->k;
    size_t mk;
    if (!oct_size_mul((size_t)m, (size_t)k, &mk))
        return oct_error_set(err, OCT_ERR_OVERFLOW, -1, "%s: m*k overflows", l->name);
    float *a = oct_malloc(mk * sizeof(float) + 1);
    uint8_t *q = NULL;
    float *sa_f = NULL;
    uint8_t *sa_e = NULL;
    oct_status st = OCT_OK;
    if (!a)
        goto nomem;
    const float *lut = oct_fp8_decode_table(OCT_FP8_E4M3FN);
    if (in->q) {
        for (size_t i = 0; i < mk; i++)
            a[i] = lut[in->q[i]];
        ref_mm(l, m, a, in->ka, in->sa, y);
    } else if (l->desc.act == OCT_ACT_NONE) {
        /* W8A16 / BF16: activations become bf16 first; F32 weights keep f32. */
        for (size_t i = 0; i < mk; i++)
            a[i] = l->desc.weight_type == OCT_WEIGHT_F32
                       ? in->x[i]
                       : oct_bf16_to_f32(oct_f32_to_bf16(in->x[i]));
        ref_mm(l, m, a, OCT_SCALE_TENSOR, NULL, y);
    } else {
        int64_t n_kb = OCT_MAX(oct_ceil_div(k, 32), 1);
        q = oct_malloc(mk + 1);
        sa_f = oct_malloc((size_t)(m * n_kb + 1) * sizeof(float));
        sa_e = oct_malloc((size_t)(m * n_kb + 1));
        if (!q || !sa_f || !sa_e)
            goto nomem;
        oct_gemm_quant_act_ref(&l->desc, m, k, in->x, q, sa_f, sa_e);
        for (size_t i = 0; i < mk; i++)
            a[i] = lut[q[i]];
        oct_scale_kind ka = oct_linear_act_kind(&l->desc);
        ref_mm(l, m, a, ka, ka == OCT_SCALE_MX32 ? (const void *)sa_e : (const void *)sa_f, y);
    }
    goto out;
nomem:
    st = oct_error_set(err, OCT_ERR_NOMEM, -1, "%s: out of memory for activations", l->name);
out:
    oct_free(a);
    oct_free(q);
    oct_free(sa_f);
    oct_free(sa_e);
    return st;
}

const oct_linear_kernel oct_kernel_cpu_ref = {
    "cpu_ref", "ref", OCT_CPU_REF, ref_cannot, {ref_prepare, ref_run, NULL}, true,
};

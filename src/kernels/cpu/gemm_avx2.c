/* gemm_avx2.c — the AVX2 + FMA linear kernel (machines without AVX-512 BF16).
 *
 * No bf16 dot product here, so operands are decoded to f32 (exact) and
 * multiplied with FMA.  Activations are quantized with the scalar reference
 * quantizers (gemm_ref.c) and decoded once per call; weights keep the caller's
 * [n,k] FP8 / bf16 layout and are decoded 8 rows at a time into an f32 buffer
 * that every activation row then reuses (8 accumulators per row).  Simple and
 * correct; a packed micro-kernel is future work (docs/KERNELS.md). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "fp8/fp8_impl.h"
#include "kernels/cpu/gemm.h"

#define NB 8

static const char *avx2_cannot(const oct_linear_desc *d)
{
    if (d->weight_type == OCT_WEIGHT_F32)
        return "f32 weights are served by the reference kernel only";
    return NULL;
}

static oct_status avx2_prepare(oct_linear *l, oct_error *err)
{
    (void)l;
    (void)err;
    return OCT_OK;
}

static float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Sum of a[k0..k1) * b[k0..k1) for 8 weight rows b[j] at stride ldb. */
static void dot8(const float *a, const float *b, int64_t ldb, int64_t k0, int64_t k1, float out[NB])
{
    __m256 acc[NB];
    for (int j = 0; j < NB; j++)
        acc[j] = _mm256_setzero_ps();
    int64_t k = k0;
    for (; k + 8 <= k1; k += 8) {
        __m256 av = _mm256_loadu_ps(a + k);
        acc[0] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b + 0 * ldb + k), acc[0]);
        acc[1] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b + 1 * ldb + k), acc[1]);
        acc[2] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b + 2 * ldb + k), acc[2]);
        acc[3] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b + 3 * ldb + k), acc[3]);
        acc[4] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b + 4 * ldb + k), acc[4]);
        acc[5] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b + 5 * ldb + k), acc[5]);
        acc[6] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b + 6 * ldb + k), acc[6]);
        acc[7] = _mm256_fmadd_ps(av, _mm256_loadu_ps(b + 7 * ldb + k), acc[7]);
    }
    for (int j = 0; j < NB; j++) {
        float s = hsum(acc[j]);
        for (int64_t t = k; t < k1; t++)
            s += a[t] * b[j * ldb + t];
        out[j] = s;
    }
}

static oct_status avx2_run(const oct_linear *l, int64_t m, const oct_act_in *in, float *y,
                           oct_error *err)
{
    const oct_linear_desc *d = &l->desc;
    int64_t n = l->n, k = l->k;
    bool fp8 = d->weight_type == OCT_WEIGHT_FP8;
    int64_t kblk = fp8 ? oct_scale_kblock(d->weight_scale) : 0;
    int64_t n_kb = OCT_MAX(oct_ceil_div(k, 32), 1);
    size_t mk = (size_t)m * (size_t)k;
    const float *lut = oct_fp8_decode_table(OCT_FP8_E4M3FN);
    float *a = oct_malloc(mk * sizeof(float) + 4);
    uint8_t *q = NULL, *sa_e = NULL;
    float *sa_f = NULL;
    oct_status st = OCT_OK;
    if (!a)
        goto nomem;
    /* Activations as f32 values plus their scales (ka, sa). */
    oct_scale_kind ka = OCT_SCALE_TENSOR;
    const void *sa = NULL;
    if (in->q) {
        for (size_t i = 0; i < mk; i++)
            a[i] = lut[in->q[i]];
        ka = in->ka;
        sa = in->sa;
    } else if (d->act == OCT_ACT_NONE) {
        for (size_t i = 0; i < mk; i++)
            a[i] = oct_bf16_to_f32(oct_gemm_f32_to_bf16(in->x[i]));
    } else {
        q = oct_malloc(mk + 1);
        sa_f = oct_malloc((size_t)(m * n_kb + 1) * sizeof(float));
        sa_e = oct_malloc((size_t)(m * n_kb + 1));
        if (!q || !sa_f || !sa_e)
            goto nomem;
        oct_gemm_quant_act_ref(d, m, k, in->x, q, sa_f, sa_e);
        for (size_t i = 0; i < mk; i++)
            a[i] = lut[q[i]];
        ka = oct_linear_act_kind(d);
        sa = ka == OCT_SCALE_MX32 ? (const void *)sa_e : (const void *)sa_f;
    }
    int64_t groups = oct_ceil_div(n, NB);
    bool fail = false;
#pragma omp parallel num_threads(oct_threads_get())
    {
        float *wb = oct_malloc((size_t)(NB * k) * sizeof(float));
        if (!wb) {
#pragma omp atomic write
            fail = true;
        }
#pragma omp for schedule(static)
        for (int64_t g = 0; g < groups; g++) {
            if (!wb)
                continue;
            int64_t n0 = g * NB, nr = OCT_MIN(NB, n - n0);
            for (int64_t j = 0; j < NB; j++) {
                for (int64_t t = 0; t < k; t++) {
                    size_t src = (size_t)((n0 + j) * k + t);
                    wb[j * k + t] = j >= nr ? 0.0f
                                    : fp8   ? lut[l->w8[src]]
                                            : oct_bf16_to_f32(l->w16[src]);
                }
            }
            for (int64_t i = 0; i < m; i++) {
                float out[NB];
                if (kblk == 0) {
                    dot8(a + i * k, wb, k, 0, k, out);
                    float s_a = sa ? oct_gemm_sa_at(ka, sa, i, 0, 0) : 1.0f;
                    for (int64_t j = 0; j < nr; j++)
                        y[i * n + n0 + j] =
                            oct_gemm_epilogue(out[j], s_a, fp8 ? l->col_scale[n0 + j] : 1.0f,
                                              l->bias ? l->bias[n0 + j] : 0.0f);
                } else {
                    float tot[NB] = {0};
                    for (int64_t b = 0; b < l->n_kb; b++) {
                        dot8(a + i * k, wb, k, b * kblk, OCT_MIN(k, (b + 1) * kblk), out);
                        float s_a = sa ? oct_gemm_sa_at(ka, sa, i, b, l->n_kb) : 1.0f;
                        for (int64_t j = 0; j < nr; j++)
                            tot[j] += out[j] * s_a * oct_gemm_sb_kb(l, n0 + j, b);
                    }
                    for (int64_t j = 0; j < nr; j++)
                        y[i * n + n0 + j] = tot[j] + (l->bias ? l->bias[n0 + j] : 0.0f);
                }
            }
        }
        oct_free(wb);
    }
    if (fail)
        goto nomem;
    goto out;
nomem:
    st = oct_error_set(err, OCT_ERR_NOMEM, -1, "%s: out of memory", l->name);
out:
    oct_free(a);
    oct_free(q);
    oct_free(sa_f);
    oct_free(sa_e);
    return st;
}

const oct_linear_kernel oct_kernel_cpu_avx2 = {
    "cpu_avx2_fma", "avx2", OCT_CPU_AVX2, avx2_cannot, {avx2_prepare, avx2_run, NULL}, true,
};

/* check_cuda.c — the C harness of the CUDA kernels (bench/cuda/build.sh builds it).
 *
 *   check_cuda [--check-only] [--quick]
 *
 * 1. Checks every kernel against octet's CPU reference (libref.a: oct_quant_rows,
 *    oct_quant_groups, oct_scaled_mm_f32) on fresh random data with outliers, zero
 *    rows, ragged sizes and (for the quantizers) NaN/Inf rows: quantizers must match
 *    bit for bit, GEMMs within bf16 output rounding (rel. Frobenius error < 1e-2
 *    and every element written — outputs are poisoned with NaN first).
 * 2. Times them (CUDA events, median of repeats, weights rotated through enough
 *    copies to stream >= 512 MB so the 60 MB L2 never holds them) on the
 *    Mistral-7B shapes.
 * Exit status 1 if any check failed.  --check-only is what compute-sanitizer runs.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_api.h"
#include "octet.h"

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

/* The context defaults the checks restore after switching paths (linear.cu). */
#define FUSED_MAX_M_DEFAULT 2
#define FUSED_MAX_MK_DEFAULT 8192
#define EVICT_FIRST_DEFAULT 1

static int g_fail, g_pass;
static int g_sm90;      /* compute capability 9.0: octet's Hopper GEMM must run */
static long g_nan_sign; /* NaN codes whose sign differs from the x86 CPU path (see below) */

/* Codes equal, or both NaN: a NaN code's sign follows the platform's NaN
 * propagation (x86 keeps the operand NaN and its default NaN is negative; CUDA
 * returns the canonical +NaN, as PyTorch on the GPU does), so only "NaN or not"
 * is compared and sign differences are counted for the log. */
static int code_eq(uint8_t a, uint8_t b)
{
    if (a == b)
        return 1;
    if ((a & 0x7F) == 0x7F && (b & 0x7F) == 0x7F) {
        g_nan_sign++;
        return 1;
    }
    return 0;
}
static int scale_eq(float a, float b)
{
    return (a != a && b != b) || memcmp(&a, &b, 4) == 0;
}

static void report(const char *what, int ok, const char *fmt, double v)
{
    printf("%-58s %s ", what, ok ? "ok  " : "FAIL");
    printf(fmt, v);
    printf("\n");
    if (ok)
        g_pass++;
    else
        g_fail++;
}

/* ---- host data ---- */
static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static double urand(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) * (1.0 / 9007199254740992.0);
}
static float nrand(void)
{
    double u = urand() + 1e-12, v = urand();
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

static uint16_t f2bf(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float bf2f(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Activations: per-row magnitude spread, a few outliers, row 0 zeros. */
static void make_x(uint16_t *x, float *xf, int64_t m, int64_t k)
{
    for (int64_t r = 0; r < m; r++) {
        float mag = (float)pow(10.0, urand() * 4.0 - 2.0);
        for (int64_t c = 0; c < k; c++) {
            float v = r == 0 && m > 2 ? 0.0f : nrand() * mag;
            if (urand() < 0.001)
                v *= 50.0f;
            x[r * k + c] = f2bf(v);
            xf[r * k + c] = bf2f(x[r * k + c]);
        }
    }
}

static void *dalloc(size_t n)
{
    void *p = NULL;
    CK(cudaMalloc(&p, n ? n : 1));
    return p;
}
static void *dput(const void *h, size_t n)
{
    void *p = dalloc(n);
    CK(cudaMemcpy(p, h, n, cudaMemcpyHostToDevice));
    return p;
}

/* FP8 weights [n,k] with per-channel scales (CPU oct_quant_rows) and, from the
 * same values, 128x128 block codes and scales. */
typedef struct {
    int64_t n, k;
    uint8_t *q_row, *q_blk;
    float *s_row, *s_blk;
    float *wf; /* the f32 weights */
} wset;

static void make_w(wset *w, int64_t n, int64_t k)
{
    w->n = n;
    w->k = k;
    w->wf = malloc((size_t)(n * k) * 4);
    w->q_row = malloc((size_t)(n * k));
    w->q_blk = malloc((size_t)(n * k));
    w->s_row = malloc((size_t)n * 4);
    w->s_blk = malloc((size_t)(((n + 127) / 128) * ((k + 127) / 128)) * 4);
    for (int64_t i = 0; i < n * k; i++)
        w->wf[i] = nrand() * 0.02f * (i % 97 == 0 ? 8.0f : 1.0f);
    oct_quant_rows(OCT_FP8_E4M3FN, w->wf, n, k, 0.0f, w->q_row, w->s_row);
    oct_quant_blocks(OCT_FP8_E4M3FN, w->wf, n, k, 128, 128, w->q_blk, w->s_blk);
}
static void free_w(wset *w)
{
    free(w->wf);
    free(w->q_row);
    free(w->q_blk);
    free(w->s_row);
    free(w->s_blk);
}

/* rel. Frobenius error of bf16 GPU output vs f32 reference; NaN if unwritten. */
static double rel_err(const uint16_t *y, const float *ref, int64_t n)
{
    double e = 0, r = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = bf2f(y[i]);
        if (v != v)
            return NAN;
        e += (v - ref[i]) * (v - ref[i]);
        r += (double)ref[i] * ref[i];
    }
    return r > 0 ? sqrt(e / r) : sqrt(e);
}

/* ---- checks ---- */

/* Every bf16 value (NaNs set to 0) divided by a chosen scale: 8 rows of 8192
 * patterns each plus 8 +Infs, so a row's amax is +Inf and its scale is pinned by
 * the activation upper bound (s = ub / 448, or the floor; 3e38 makes 1024 s
 * overflow, which the division's cap must survive); codes compared with
 * the CPU's true division.  8 rows (the row-split kernel) and 16 copies of them
 * (one block per row; with bulk, the bulk-copy kernel on sm_90).  This checks the GPU's
 * division by the scale on every input it can get. */
static void check_quant_all_bf16(int bulk)
{
    enum { KV = 8192, K = KV + 8, MAXM = 128 };
    const int64_t k = K, rows[2] = {8, MAXM};
    const float ubs[] = {448.0f, 3.0f, 100.7f, 0.0017f, 1e-4f, 1.5e-5f, 5e37f, 3e38f, 1.17e-35f};
    uint16_t *x = malloc((size_t)(MAXM * K) * 2);
    float *xf = malloc((size_t)(MAXM * K) * 4);
    uint8_t *q_ref = malloc((size_t)(MAXM * K)), *q_gpu = malloc((size_t)(MAXM * K));
    float s_ref[MAXM], s_gpu[MAXM];
    for (int64_t r = 0; r < MAXM; r++)
        for (int64_t c = 0; c < K; c++) {
            const uint32_t p = (uint32_t)((r % 8) * KV + c);
            const int nan = (p & 0x7F80u) == 0x7F80u && (p & 0x7Fu);
            const uint16_t v = c >= KV ? 0x7F80 : nan ? 0 : (uint16_t)p;
            x[r * K + c] = v;
            xf[r * K + c] = bf2f(v);
        }
    void *dx = dput(x, (size_t)(MAXM * K) * 2);
    uint8_t *dq = dalloc((size_t)(MAXM * K));
    float *ds = dalloc(MAXM * 4);
    for (size_t u = 0; u < sizeof ubs / sizeof ubs[0]; u++)
        for (int t = 0; t < 2; t++) {
            const int64_t m = rows[t];
            CK(cudaMemset(dq, 0x55, (size_t)(m * k)));
            oct_quant_rows(OCT_FP8_E4M3FN, xf, m, k, ubs[u], q_ref, s_ref);
            const oct_status st = oct_cuda_quant_rows_bf16(dx, m, k, ubs[u], dq, ds, NULL);
            CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(q_gpu, dq, (size_t)(m * k), cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(s_gpu, ds, (size_t)m * 4, cudaMemcpyDeviceToHost));
            int64_t bad = st != OCT_OK ? -1 : 0, first = -1;
            for (int64_t i = 0; i < m * k && bad >= 0; i++)
                if (!code_eq(q_ref[i], q_gpu[i])) {
                    bad++;
                    if (first < 0)
                        first = i;
                }
            for (int64_t i = 0; i < m && bad >= 0; i++)
                bad += !scale_eq(s_ref[i], s_gpu[i]);
            char what[96];
            snprintf(what, sizeof what, "quant_rows all bf16 values m=%lld ub=%g%s", (long long)m,
                     (double)ubs[u], bulk ? " bulk" : "");
            report(what, bad == 0, "mismatches %.0f", (double)bad);
            if (first >= 0)
                printf("    first: x = 0x%04x, cpu code 0x%02x, gpu code 0x%02x\n", x[first],
                       q_ref[first], q_gpu[first]);
        }
    cudaFree(dx);
    cudaFree(dq);
    cudaFree(ds);
    free(x);
    free(xf);
    free(q_ref);
    free(q_gpu);
}

static void check_quant(int64_t m, int64_t k, int specials)
{
    uint16_t *x = malloc((size_t)(m * k) * 2);
    float *xf = malloc((size_t)(m * k) * 4);
    make_x(x, xf, m, k);
    if (specials && m >= 4) {
        x[1 * k + 3] = 0x7FC0; /* +NaN */
        x[2 * k + 5] = 0xFFC1; /* -NaN */
        x[3 * k + 1] = 0x7F80; /* +Inf */
        for (int r = 1; r < 4; r++)
            for (int64_t c = 0; c < k; c++)
                xf[r * k + c] = bf2f(x[r * k + c]);
    }
    const int64_t nkb = (k + 127) / 128;
    uint8_t *q_ref = malloc((size_t)(m * k)), *q_gpu = malloc((size_t)(m * k));
    float *s_ref = malloc((size_t)(m * nkb) * 4), *s_gpu = malloc((size_t)(m * nkb) * 4);
    void *dx = dput(x, (size_t)(m * k) * 2);
    uint8_t *dq = dalloc((size_t)(m * k));
    float *ds = dalloc((size_t)(m * nkb) * 4);
    const float ubs[2] = {0.0f, 3.0f};
    for (int u = 0; u < 2; u++) {
        CK(cudaMemset(dq, 0x55, (size_t)(m * k)));
        oct_quant_rows(OCT_FP8_E4M3FN, xf, m, k, ubs[u], q_ref, s_ref);
        oct_status st = oct_cuda_quant_rows_bf16(dx, m, k, ubs[u], dq, ds, NULL);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(q_gpu, dq, (size_t)(m * k), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(s_gpu, ds, (size_t)m * 4, cudaMemcpyDeviceToHost));
        int64_t bad = st != OCT_OK ? -1 : 0;
        for (int64_t i = 0; i < m * k && bad >= 0; i++)
            bad += !code_eq(q_ref[i], q_gpu[i]);
        for (int64_t i = 0; i < m && bad >= 0; i++)
            bad += !scale_eq(s_ref[i], s_gpu[i]);
        char what[96];
        snprintf(what, sizeof what, "quant_rows m=%lld k=%lld ub=%g%s", (long long)m, (long long)k,
                 (double)ubs[u], specials ? " nan/inf" : "");
        report(what, bad == 0, "mismatches %.0f", (double)bad);
    }
    if (k % 8 == 0) {
        CK(cudaMemset(dq, 0x55, (size_t)(m * k)));
        oct_quant_groups(OCT_FP8_E4M3FN, xf, m, k, 128, q_ref, s_ref);
        oct_status st = oct_cuda_quant_groups_bf16(dx, m, k, dq, ds, NULL);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(q_gpu, dq, (size_t)(m * k), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(s_gpu, ds, (size_t)(m * nkb) * 4, cudaMemcpyDeviceToHost));
        int64_t bad = st != OCT_OK ? -1 : 0;
        for (int64_t i = 0; i < m * k && bad >= 0; i++)
            bad += !code_eq(q_ref[i], q_gpu[i]);
        for (int64_t i = 0; i < m * nkb && bad >= 0; i++)
            bad += !scale_eq(s_ref[i], s_gpu[i]);
        char what[96];
        snprintf(what, sizeof what, "quant_groups m=%lld k=%lld%s", (long long)m, (long long)k,
                 specials ? " nan/inf" : "");
        report(what, bad == 0, "mismatches %.0f", (double)bad);
    }
    cudaFree(dx);
    cudaFree(dq);
    cudaFree(ds);
    free(x);
    free(xf);
    free(q_ref);
    free(q_gpu);
    free(s_ref);
    free(s_gpu);
}

/* GEMMs on one (m, n, k): dynamic per-token (gemv, lt), dynamic block (gemv, lt
 * both scale layouts), pre-quantized per-tensor (lt), W8A16. */
static void check_gemm(oct_cuda_ctx *ctx, int64_t m, int64_t n, int64_t k)
{
    wset w;
    make_w(&w, n, k);
    uint16_t *x = malloc((size_t)(m * k) * 2);
    float *xf = malloc((size_t)(m * k) * 4);
    make_x(x, xf, m, k);
    const int64_t nkb = (k + 127) / 128;
    uint8_t *qa = malloc((size_t)(m * k));
    float *sa = malloc((size_t)(m * nkb) * 4);
    float *ref = malloc((size_t)(m * n) * 4);
    uint16_t *y = malloc((size_t)(m * n) * 2);
    void *dx = dput(x, (size_t)(m * k) * 2);
    uint8_t *dwr = dput(w.q_row, (size_t)(n * k)), *dwb = dput(w.q_blk, (size_t)(n * k));
    float *dsr = dput(w.s_row, (size_t)n * 4);
    float *dsb = dput(w.s_blk, (size_t)(((n + 127) / 128) * nkb) * 4);
    uint16_t *dy = dalloc((size_t)(m * n) * 2);
    /* y only 8-byte aligned: the wgmma epilogue's 4-byte stores (16-byte ones need a
     * 16-byte aligned y) */
    uint16_t *dy8buf = dalloc((size_t)(m * n) * 2 + 16);
    char what[128];

#define RUN_CHECK(label, call)                                                                     \
    do {                                                                                           \
        CK(cudaMemset(dy, 0xFF, (size_t)(m * n) * 2)); /* NaN poison */                            \
        oct_status st_ = (call);                                                                   \
        CK(cudaDeviceSynchronize());                                                               \
        CK(cudaMemcpy(y, dy, (size_t)(m * n) * 2, cudaMemcpyDeviceToHost));                        \
        double e_ = st_ == OCT_OK ? rel_err(y, ref, m * n) : INFINITY;                             \
        snprintf(what, sizeof what, "%s m=%lld n=%lld k=%lld [%s]", label, (long long)m,           \
                 (long long)n, (long long)k,                                                       \
                 st_ == OCT_OK ? oct_cuda_ctx_last_kernel(ctx) : oct_status_str(st_));             \
        if (st_ == OCT_ERR_UNSUPPORTED && strstr(label, " lt"))                                    \
            printf("%-58s skip (cuBLASLt has no kernel)\n", what);                                 \
        else                                                                                       \
            report(what, e_ < 1e-2, "rel err %.2e", e_);                                           \
    } while (0)

    /* Every tile shape of octet's Hopper GEMM (wgmma_cfg 1..; a shape of the other
     * scale family answers OCT_ERR_UNSUPPORTED and is skipped), then the default. */
#define RUN_WGMMA(label, call)                                                                     \
    do {                                                                                           \
        int ran_ = 0;                                                                              \
        for (int cfg_ = 1; k % 128 == 0 && oct_cuda_ctx_set(ctx, "wgmma_cfg", cfg_) == OCT_OK;     \
             cfg_++) {                                                                             \
            CK(cudaMemset(dy, 0xFF, (size_t)(m * n) * 2));                                         \
            if ((call) == OCT_ERR_UNSUPPORTED)                                                     \
                continue;                                                                          \
            ran_++;                                                                                \
            RUN_CHECK(label, call);                                                                \
            oct_cuda_ctx_set(ctx, "gemv_max_ctas", 2); /* persistent shapes: many tiles each */    \
            RUN_CHECK(label " (<= 2 blocks)", call);                                               \
            oct_cuda_ctx_set(ctx, "gemv_max_ctas", 0);                                             \
        }                                                                                          \
        oct_cuda_ctx_set(ctx, "wgmma_cfg", 0);                                                     \
        if (k % 128 == 0 && g_sm90 && !ran_)                                                       \
            report(label " (no tile shape ran)", 0, "%.0f", 0.0);                                  \
    } while (0)

    /* RUN_WGMMA with y at dy8buf + 8 bytes */
#define RUN_WGMMA_Y8(label, call)                                                                  \
    do {                                                                                           \
        uint16_t *dy16_ = dy;                                                                      \
        dy = (uint16_t *)((char *)dy8buf + 8);                                                     \
        RUN_WGMMA(label, call);                                                                    \
        dy = dy16_;                                                                                \
    } while (0)

    /* per-token x per-channel */
    oct_quant_rows(OCT_FP8_E4M3FN, xf, m, k, 0.0f, qa, sa);
    oct_scaled_mm_f32(m, n, k, qa, OCT_SCALE_ROW, sa, w.q_row, OCT_SCALE_ROW, w.s_row, NULL, ref);
    for (int tma = 0; tma < 2 && k % 128 == 0; tma++) {
        oct_cuda_ctx_set(ctx, "gemv_tma", tma);
        oct_cuda_ctx_set(ctx, "gemv_fused_max_m", 0);
        RUN_CHECK(tma ? "dyn token gemv(tma)" : "dyn token gemv(reg)",
                  oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, dwr, OCT_SCALE_ROW, dsr, 0.0f, dy,
                                          OCT_CUDA_PATH_GEMV, NULL));
    }
    oct_cuda_ctx_set(ctx, "gemv_tma", 0);
    oct_cuda_ctx_set(ctx, "gemv_fused_max_m", 64);
    oct_cuda_ctx_set(ctx, "gemv_fused_max_mk", (int64_t)1 << 40);
    oct_cuda_ctx_set(ctx, "gemv_fused_any_grid", 1);
    if (k % 1024 == 0 && m <= 16) {
        RUN_CHECK("dyn token gemv(fused)",
                  oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, dwr, OCT_SCALE_ROW, dsr, 0.0f, dy,
                                          OCT_CUDA_PATH_GEMV, NULL));
        oct_cuda_ctx_set(ctx, "gemv_max_ctas", 3); /* many tiles per block */
        RUN_CHECK("dyn token gemv(fused,3 blocks)",
                  oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, dwr, OCT_SCALE_ROW, dsr, 0.0f, dy,
                                          OCT_CUDA_PATH_GEMV, NULL));
        oct_cuda_ctx_set(ctx, "gemv_max_ctas", 0);
    }
    oct_cuda_ctx_set(ctx, "gemv_fused_max_m", FUSED_MAX_M_DEFAULT);
    oct_cuda_ctx_set(ctx, "gemv_fused_max_mk", FUSED_MAX_MK_DEFAULT);
    oct_cuda_ctx_set(ctx, "gemv_fused_any_grid", 0);
    RUN_CHECK("dyn token lt", oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, dwr, OCT_SCALE_ROW, dsr,
                                                      0.0f, dy, OCT_CUDA_PATH_LT, NULL));
    RUN_WGMMA("dyn token wgmma", oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, dwr, OCT_SCALE_ROW, dsr,
                                                         0.0f, dy, OCT_CUDA_PATH_WGMMA, NULL));
    RUN_WGMMA_Y8("dyn token wgmma(y 8-byte aligned)",
                 oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, dwr, OCT_SCALE_ROW, dsr, 0.0f, dy,
                                         OCT_CUDA_PATH_WGMMA, NULL));
    if (k % 128 == 0)
        RUN_CHECK("dyn token wgmma(tuned)",
                  oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, dwr, OCT_SCALE_ROW, dsr, 0.0f, dy,
                                          OCT_CUDA_PATH_WGMMA, NULL));
    RUN_CHECK("dyn token auto", oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, dwr, OCT_SCALE_ROW, dsr,
                                                        0.0f, dy, OCT_CUDA_PATH_AUTO, NULL));
    if (m > 16 && m <= 64) {
        oct_cuda_ctx_set(ctx, "large_gemv", 1);
        RUN_CHECK("dyn token auto(gemv)",
                  oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, dwr, OCT_SCALE_ROW, dsr, 0.0f, dy,
                                          OCT_CUDA_PATH_AUTO, NULL));
        oct_cuda_ctx_set(ctx, "large_gemv", 0);
    }
    /* block */
    oct_quant_groups(OCT_FP8_E4M3FN, xf, m, k, 128, qa, sa);
    oct_scaled_mm_f32(m, n, k, qa, OCT_SCALE_BLOCK128, sa, w.q_blk, OCT_SCALE_BLOCK128, w.s_blk,
                      NULL, ref);
    for (int tma = 0; tma < 2 && k % 128 == 0; tma++) {
        oct_cuda_ctx_set(ctx, "gemv_tma", tma);
        RUN_CHECK(tma ? "dyn block gemv(tma)" : "dyn block gemv(reg)",
                  oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, dwb, OCT_SCALE_BLOCK128, dsb, 0.0f, dy,
                                          OCT_CUDA_PATH_GEMV, NULL));
    }
    oct_cuda_ctx_set(ctx, "gemv_tma", 0);
    /* forced cuBLASLt with block scales (K = 256 / 768: the padded scale copy) */
    RUN_CHECK("dyn block lt", oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, dwb, OCT_SCALE_BLOCK128,
                                                      dsb, 0.0f, dy, OCT_CUDA_PATH_LT, NULL));
    RUN_CHECK("dyn block auto", oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, dwb, OCT_SCALE_BLOCK128,
                                                        dsb, 0.0f, dy, OCT_CUDA_PATH_AUTO, NULL));
    if (m > 64 && m % 4 != 0) { /* no wgmma, and cuBLASLt has no block kernel: the fallback */
        oct_cuda_ctx_set(ctx, "wgmma", 0);
        RUN_CHECK("dyn block auto(no wgmma, M % 4 != 0)",
                  oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, dwb, OCT_SCALE_BLOCK128, dsb, 0.0f, dy,
                                          OCT_CUDA_PATH_AUTO, NULL));
        oct_cuda_ctx_set(ctx, "wgmma", 1);
    }
    if (m > 16 && m <= 64) { /* the streaming kernel on cuBLASLt's [k/128][m] scale layout */
        oct_cuda_ctx_set(ctx, "large_gemv", 1);
        RUN_CHECK("dyn block auto(gemv on [k/128][m] scales)",
                  oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, dwb, OCT_SCALE_BLOCK128, dsb, 0.0f, dy,
                                          OCT_CUDA_PATH_AUTO, NULL));
        oct_cuda_ctx_set(ctx, "large_gemv", 0);
    }
    RUN_WGMMA("dyn block wgmma", oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, dwb, OCT_SCALE_BLOCK128,
                                                         dsb, 0.0f, dy, OCT_CUDA_PATH_WGMMA, NULL));
    RUN_WGMMA_Y8("dyn block wgmma(y 8-byte aligned)",
                 oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, dwb, OCT_SCALE_BLOCK128, dsb, 0.0f, dy,
                                         OCT_CUDA_PATH_WGMMA, NULL));
    /* pre-quantized block, scales [m][k/128] as given (our GEMM reads them directly) */
    {
        uint8_t *dqa = dput(qa, (size_t)(m * k));
        float *dsa = dput(sa, (size_t)(m * nkb) * 4);
        RUN_WGMMA("prequant block wgmma",
                  oct_cuda_gemm_fp8(ctx, m, n, k, dqa, OCT_SCALE_BLOCK128, dsa, dwb,
                                    OCT_SCALE_BLOCK128, dsb, dy, OCT_CUDA_PATH_WGMMA, NULL));
        RUN_CHECK("prequant block auto",
                  oct_cuda_gemm_fp8(ctx, m, n, k, dqa, OCT_SCALE_BLOCK128, dsa, dwb,
                                    OCT_SCALE_BLOCK128, dsb, dy, OCT_CUDA_PATH_AUTO, NULL));
        /* without octet's GEMM the [m][k/128] scales must reach cuBLASLt transposed */
        oct_cuda_ctx_set(ctx, "wgmma", 0);
        RUN_CHECK("prequant block auto(no wgmma)",
                  oct_cuda_gemm_fp8(ctx, m, n, k, dqa, OCT_SCALE_BLOCK128, dsa, dwb,
                                    OCT_SCALE_BLOCK128, dsb, dy, OCT_CUDA_PATH_AUTO, NULL));
        oct_cuda_ctx_set(ctx, "wgmma", 1);
        cudaFree(dqa);
        cudaFree(dsa);
    }
    /* per-tensor, pre-quantized */
    {
        float st, sw1;
        uint8_t *qw = malloc((size_t)(n * k));
        oct_quant_tensor(OCT_FP8_E4M3FN, xf, (size_t)(m * k), qa, &st);
        oct_quant_tensor(OCT_FP8_E4M3FN, w.wf, (size_t)(n * k), qw, &sw1);
        oct_scaled_mm_f32(m, n, k, qa, OCT_SCALE_TENSOR, &st, qw, OCT_SCALE_TENSOR, &sw1, NULL,
                          ref);
        uint8_t *dqa = dput(qa, (size_t)(m * k)), *dqw = dput(qw, (size_t)(n * k));
        float *dst = dput(&st, 4), *dsw = dput(&sw1, 4);
        RUN_CHECK("prequant tensor lt",
                  oct_cuda_gemm_fp8(ctx, m, n, k, dqa, OCT_SCALE_TENSOR, dst, dqw, OCT_SCALE_TENSOR,
                                    dsw, dy, OCT_CUDA_PATH_LT, NULL));
        RUN_WGMMA("prequant tensor wgmma",
                  oct_cuda_gemm_fp8(ctx, m, n, k, dqa, OCT_SCALE_TENSOR, dst, dqw, OCT_SCALE_TENSOR,
                                    dsw, dy, OCT_CUDA_PATH_WGMMA, NULL));
        /* per-tensor activations x per-channel weights (static-scale schemes) */
        oct_scaled_mm_f32(m, n, k, qa, OCT_SCALE_TENSOR, &st, w.q_row, OCT_SCALE_ROW, w.s_row, NULL,
                          ref);
        RUN_WGMMA("prequant tensor x channel wgmma",
                  oct_cuda_gemm_fp8(ctx, m, n, k, dqa, OCT_SCALE_TENSOR, dst, dwr, OCT_SCALE_ROW,
                                    dsr, dy, OCT_CUDA_PATH_WGMMA, NULL));
        cudaFree(dqa);
        cudaFree(dqw);
        cudaFree(dst);
        cudaFree(dsw);
        free(qw);
    }
    /* W8A16: y = sw * sum bf16(x) * w_code_value */
    if (k % 128 == 0) {
        float *wd = malloc((size_t)(n * k) * 4);
        oct_fp8_to_f32(OCT_FP8_E4M3FN, w.q_row, wd, (size_t)(n * k));
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0;
                for (int64_t c = 0; c < k; c++)
                    s += (double)xf[i * k + c] * wd[j * k + c];
                ref[i * n + j] = (float)(s * w.s_row[j]);
            }
        free(wd);
        snprintf(what, sizeof what, "w8a16");
        CK(cudaMemset(dy, 0xFF, (size_t)(m * n) * 2));
        oct_status st_ = oct_cuda_gemv_w8a16(m, n, k, dx, dwr, dsr, dy, NULL);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(y, dy, (size_t)(m * n) * 2, cudaMemcpyDeviceToHost));
        double e_ = st_ == OCT_OK ? rel_err(y, ref, m * n) : INFINITY;
        snprintf(what, sizeof what, "w8a16 gemv m=%lld n=%lld k=%lld", (long long)m, (long long)n,
                 (long long)k);
        report(what, e_ < 1e-2, "rel err %.2e", e_);
    }
#undef RUN_WGMMA_Y8
#undef RUN_WGMMA
#undef RUN_CHECK
    cudaFree(dx);
    cudaFree(dwr);
    cudaFree(dwb);
    cudaFree(dsr);
    cudaFree(dsb);
    cudaFree(dy);
    cudaFree(dy8buf);
    free(x);
    free(xf);
    free(qa);
    free(sa);
    free(ref);
    free(y);
    free_w(&w);
}

/* The fused-quantization kernel must give exactly the bytes of quantizer +
 * streaming kernel (same codes, scales, chunk order and reduction), also with an
 * amax bound and with NaN / Inf rows (NaN outputs compare as NaN). */
static void check_fused_exact(oct_cuda_ctx *ctx, int64_t m, int64_t n, int64_t k, float ub,
                              int ctas, int persist)
{
    wset w;
    make_w(&w, n, k);
    uint16_t *x = malloc((size_t)(m * k) * 2);
    float *xf = malloc((size_t)(m * k) * 4);
    make_x(x, xf, m, k);
    if (m >= 4) {
        x[1 * k + 7] = 0x7FC0; /* NaN row */
        x[2 * k + 9] = 0xFF80; /* -Inf row */
    }
    uint16_t *y0 = malloc((size_t)(m * n) * 2), *y1 = malloc((size_t)(m * n) * 2);
    void *dx = dput(x, (size_t)(m * k) * 2);
    uint8_t *dw = dput(w.q_row, (size_t)(n * k));
    float *ds = dput(w.s_row, (size_t)n * 4);
    uint16_t *dy = dalloc((size_t)(m * n) * 2);
    oct_status st[2];
    char kern[64] = "";
    for (int f = 0; f < 2; f++) {
        oct_cuda_ctx_set(ctx, "gemv_fused_max_m", f && !persist ? 64 : 0);
        oct_cuda_ctx_set(ctx, "gemv_persist", f && persist);
        oct_cuda_ctx_set(ctx, "gemv_fused_max_mk", (int64_t)1 << 40);
        oct_cuda_ctx_set(ctx, "gemv_fused_any_grid", 1);
        oct_cuda_ctx_set(ctx, "gemv_max_ctas", f ? ctas : 0);
        CK(cudaMemset(dy, 0xFF, (size_t)(m * n) * 2));
        st[f] = oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, dw, OCT_SCALE_ROW, ds, ub, dy,
                                        OCT_CUDA_PATH_GEMV, NULL);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(f ? y1 : y0, dy, (size_t)(m * n) * 2, cudaMemcpyDeviceToHost));
        if (f)
            snprintf(kern, sizeof kern, "%s", oct_cuda_ctx_last_kernel(ctx));
    }
    oct_cuda_ctx_set(ctx, "gemv_fused_max_m", FUSED_MAX_M_DEFAULT);
    oct_cuda_ctx_set(ctx, "gemv_fused_max_mk", FUSED_MAX_MK_DEFAULT);
    oct_cuda_ctx_set(ctx, "gemv_fused_any_grid", 0);
    oct_cuda_ctx_set(ctx, "gemv_max_ctas", 0);
    oct_cuda_ctx_set(ctx, "gemv_persist", 1);
    int64_t bad =
        st[0] != OCT_OK || st[1] != OCT_OK || !strstr(kern, persist ? "persistent" : "fused") ? -1
                                                                                              : 0;
    for (int64_t i = 0; i < m * n && bad >= 0; i++) {
        const int n0 = (y0[i] & 0x7FFF) > 0x7F80, n1 = (y1[i] & 0x7FFF) > 0x7F80;
        bad += n0 != n1 || (!n0 && y0[i] != y1[i]);
    }
    char what[128];
    snprintf(what, sizeof what, "%s == quant+gemv m=%lld n=%lld k=%lld ub=%g blocks<=%d [%s]",
             persist ? "persistent" : "fused", (long long)m, (long long)n, (long long)k, (double)ub,
             ctas, kern);
    report(what, bad == 0, "differing outputs %.0f", (double)bad);
    cudaFree(dx);
    cudaFree(dw);
    cudaFree(ds);
    cudaFree(dy);
    free(x);
    free(xf);
    free(y0);
    free(y1);
    free_w(&w);
}

/* ---- timing ---- */

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

enum {
    T_DYN_AUTO,
    T_DYN_GEMV,
    T_DYN_GEMV_OLD,
    T_DYN_GEMV_TMA,
    T_DYN_LT,
    T_DYN_WG,
    T_BLK_AUTO,
    T_BLK_WG,
    T_W8A16,
    T_QUANT,
    T_COUNT
};
static const char *const k_tname[T_COUNT] = {"dyn_auto", "dyn_gemv",  "gemv_old",   "gemv_tma",
                                             "dyn_lt",   "dyn_wgmma", "block_auto", "block_wgmma",
                                             "w8a16",    "quant_only"};

static void time_shape(oct_cuda_ctx *ctx, int64_t k, int64_t n, const int64_t *ms, int nm,
                       FILE *csv)
{
    const size_t wbytes = (size_t)(n * k);
    int copies = (int)((((size_t)512 << 20) + wbytes - 1) / wbytes);
    if (copies < 2)
        copies = 2;
    uint8_t **dw = malloc(sizeof(void *) * (size_t)copies);
    uint8_t *hw = malloc(wbytes);
    for (size_t i = 0; i < wbytes; i++)
        hw[i] = (uint8_t)(urand() * 256) & 0xBF; /* random finite codes, |v| < 448 */
    for (int c = 0; c < copies; c++)
        dw[c] = dput(hw, wbytes);
    free(hw);
    float *hs = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++)
        hs[i] = 1e-3f;
    float *dsr = dput(hs, (size_t)n * 4);
    float *dsb = dalloc((size_t)(((n + 127) / 128) * ((k + 127) / 128)) * 4);
    CK(cudaMemset(dsb, 0, (size_t)(((n + 127) / 128) * ((k + 127) / 128)) * 4));
    free(hs);
    int64_t mmax = ms[nm - 1];
    uint16_t *hx = malloc((size_t)(mmax * k) * 2);
    for (int64_t i = 0; i < mmax * k; i++)
        hx[i] = f2bf(nrand());
    void *dx = dput(hx, (size_t)(mmax * k) * 2);
    free(hx);
    uint16_t *dy = dalloc((size_t)(mmax * n) * 2);
    uint8_t *dq = dalloc((size_t)(mmax * k));
    float *dqs = dalloc((size_t)mmax * 4);
    oct_cuda_ctx_reserve(ctx, mmax, k);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int mi = 0; mi < nm; mi++) {
        const int64_t m = ms[mi];
        printf("%6lld %5lldx%-6lld", (long long)m, (long long)k, (long long)n);
        for (int t = 0; t < T_COUNT; t++) {
            if ((t == T_DYN_GEMV || t == T_DYN_GEMV_OLD || t == T_DYN_GEMV_TMA || t == T_W8A16) &&
                m > 64) {
                printf(" %10s", "-");
                continue;
            }
            float times[41];
            const int reps = 41;
            oct_status st = OCT_OK;
            for (int r = -3; r < reps && st == OCT_OK; r++) {
                const uint8_t *w = dw[(r + 3) % copies];
                CK(cudaEventRecord(e0, NULL));
                switch (t) {
                case T_DYN_AUTO:
                    st = oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, w, OCT_SCALE_ROW, dsr, 0, dy,
                                                 OCT_CUDA_PATH_AUTO, NULL);
                    break;
                case T_DYN_GEMV:
                    st = oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, w, OCT_SCALE_ROW, dsr, 0, dy,
                                                 OCT_CUDA_PATH_GEMV, NULL);
                    break;
                case T_DYN_GEMV_OLD:
                    oct_cuda_ctx_set(ctx, "gemv_fused_max_m", 0);
                    oct_cuda_ctx_set(ctx, "gemv_evict_first", 0);
                    st = oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, w, OCT_SCALE_ROW, dsr, 0, dy,
                                                 OCT_CUDA_PATH_GEMV, NULL);
                    oct_cuda_ctx_set(ctx, "gemv_fused_max_m", FUSED_MAX_M_DEFAULT);
                    oct_cuda_ctx_set(ctx, "gemv_evict_first", EVICT_FIRST_DEFAULT);
                    break;
                case T_DYN_GEMV_TMA:
                    oct_cuda_ctx_set(ctx, "gemv_tma", 1);
                    st = oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, w, OCT_SCALE_ROW, dsr, 0, dy,
                                                 OCT_CUDA_PATH_GEMV, NULL);
                    oct_cuda_ctx_set(ctx, "gemv_tma", 0);
                    break;
                case T_DYN_LT:
                    st = oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, w, OCT_SCALE_ROW, dsr, 0, dy,
                                                 OCT_CUDA_PATH_LT, NULL);
                    break;
                case T_DYN_WG:
                    st = oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, w, OCT_SCALE_ROW, dsr, 0, dy,
                                                 OCT_CUDA_PATH_WGMMA, NULL);
                    break;
                case T_BLK_WG:
                    st = oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, w, OCT_SCALE_BLOCK128, dsb, 0,
                                                 dy, OCT_CUDA_PATH_WGMMA, NULL);
                    break;
                case T_BLK_AUTO:
                    st = oct_cuda_linear_fp8_dyn(ctx, m, n, k, dx, w, OCT_SCALE_BLOCK128, dsb, 0,
                                                 dy, OCT_CUDA_PATH_AUTO, NULL);
                    break;
                case T_W8A16: st = oct_cuda_gemv_w8a16(m, n, k, dx, w, dsr, dy, NULL); break;
                case T_QUANT: st = oct_cuda_quant_rows_bf16(dx, m, k, 0, dq, dqs, NULL); break;
                }
                CK(cudaEventRecord(e1, NULL));
                CK(cudaEventSynchronize(e1));
                if (r >= 0)
                    CK(cudaEventElapsedTime(&times[r], e0, e1));
            }
            if (st != OCT_OK) {
                printf(" %10s", "n/a");
                continue;
            }
            qsort(times, reps, sizeof(float), cmp_f);
            const double us = times[reps / 2] * 1e3;
            printf(" %10.1f", us);
            if (csv)
                fprintf(csv, "%lld,%lld,%lld,%s,%.2f,%.1f\n", (long long)m, (long long)k,
                        (long long)n, k_tname[t], us,
                        t == T_QUANT ? 0.0 : (double)wbytes / (us * 1e-6) / 1e9);
        }
        printf("\n");
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    for (int c = 0; c < copies; c++)
        cudaFree(dw[c]);
    free(dw);
    cudaFree(dsr);
    cudaFree(dsb);
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dq);
    cudaFree(dqs);
}

/* Per-tensor (grid-wide amax), static, MX 1x32, and the fused RMSNorm / SiLU-mul
 * per-token producers, against the CPU: oct_quant_tensor / _static / _mx on the
 * widened input, and oct_quant_rows of the f32 values computed as the CPU model
 * does.  Codes and scales bit for bit, except SiLU (CUDA's expf and glibc's may
 * differ in the last place: codes may move by one step, at most 0.5% of them). */
static void check_quant_more(int64_t m, int64_t k)
{
    const size_t mk = (size_t)(m * k);
    uint16_t *x = malloc(mk * 2), *w = malloc((size_t)k * 2), *gu = malloc(mk * 4);
    float *xf = malloc(mk * 4), *y = malloc(mk * 4), *sr = malloc((size_t)m * 4),
          *sg = malloc((size_t)m * 4);
    uint8_t *qr = malloc(mk), *qg = malloc(mk), *er = malloc(mk / 32 + 1),
            *eg = malloc(mk / 32 + 1);
    make_x(x, xf, m, k);
    x[5] = f2bf(INFINITY); /* MX: an Inf block and a NaN block in row 0 */
    x[40] = 0x7FC0;
    void *dx = dput(x, mk * 2);
    uint8_t *dq = dalloc(mk), *de = dalloc(mk / 32 + 1);
    float *ds = dalloc((size_t)(m + 1) * 4);
    char what[96];
    long bad;
#define GET(nq, ns)                                                                                \
    do {                                                                                           \
        CK(cudaDeviceSynchronize());                                                               \
        CK(cudaMemcpy(qg, dq, (nq), cudaMemcpyDeviceToHost));                                      \
        if (ns)                                                                                    \
            CK(cudaMemcpy(sg, ds, (size_t)(ns)*4, cudaMemcpyDeviceToHost));                        \
    } while (0)
    /* MX (with the Inf / NaN blocks) */
    for (size_t i = 0; i < mk; i++)
        xf[i] = bf2f(x[i]);
    oct_quant_mx(OCT_FP8_E4M3FN, OCT_MX_OCP, xf, m, k, qr, er);
    int st = oct_cuda_quant_mx_bf16(dx, m, k, dq, de, NULL);
    GET(mk, 0);
    CK(cudaMemcpy(eg, de, mk / 32, cudaMemcpyDeviceToHost));
    bad = st != OCT_OK;
    for (size_t i = 0; i < mk; i++)
        bad += !code_eq(qr[i], qg[i]);
    for (size_t i = 0; i < mk / 32; i++)
        bad += er[i] != eg[i];
    snprintf(what, sizeof what, "quant mx 1x32 m=%lld k=%lld (Inf/NaN blocks)", (long long)m,
             (long long)k);
    report(what, bad == 0, "%.0f mismatches", (double)bad);
    /* per-tensor and static: finite input */
    x[5] = x[40] = f2bf(1.0f);
    xf[5] = xf[40] = 1.0f;
    CK(cudaMemcpy(dx, x, mk * 2, cudaMemcpyHostToDevice));
    float s_ref;
    oct_quant_tensor(OCT_FP8_E4M3FN, xf, mk, qr, &s_ref);
    st = oct_cuda_quant_tensor_bf16(dx, (int64_t)mk, dq, ds, NULL);
    GET(mk, 1);
    bad = st != OCT_OK || !scale_eq(s_ref, sg[0]);
    for (size_t i = 0; i < mk; i++)
        bad += !code_eq(qr[i], qg[i]);
    snprintf(what, sizeof what, "quant per-tensor m=%lld k=%lld", (long long)m, (long long)k);
    report(what, bad == 0, "%.0f mismatches", (double)bad);
    float stat = s_ref * 0.37f; /* saturates the outliers */
    oct_quant_static(OCT_FP8_E4M3FN, xf, mk, stat, qr);
    st = oct_cuda_quant_static_bf16(dx, (int64_t)mk, stat, dq, NULL);
    GET(mk, 0);
    bad = st != OCT_OK;
    for (size_t i = 0; i < mk; i++)
        bad += !code_eq(qr[i], qg[i]);
    snprintf(what, sizeof what, "quant static m=%lld k=%lld", (long long)m, (long long)k);
    report(what, bad == 0, "%.0f mismatches", (double)bad);
    /* RMSNorm -> per-token */
    float *wf = malloc((size_t)k * 4);
    for (int64_t i = 0; i < k; i++) {
        w[i] = f2bf(1.0f + 0.3f * nrand());
        wf[i] = bf2f(w[i]);
    }
    const float eps = 1e-5f;
    for (int64_t r = 0; r < m; r++) {
        double ss = 0.0;
        for (int64_t i = 0; i < k; i++)
            ss += (double)xf[r * k + i] * (double)xf[r * k + i];
        float rr = 1.0f / sqrtf((float)(ss / (double)k) + eps);
        for (int64_t i = 0; i < k; i++)
            y[r * k + i] = wf[i] * (xf[r * k + i] * rr);
    }
    oct_quant_rows(OCT_FP8_E4M3FN, y, m, k, 0.0f, qr, sr);
    void *dw = dput(w, (size_t)k * 2);
    st = oct_cuda_rmsnorm_quant_rows_bf16(dx, dw, m, k, eps, 0.0f, dq, ds, NULL);
    GET(mk, m);
    bad = st != OCT_OK;
    for (int64_t r = 0; r < m; r++)
        bad += !scale_eq(sr[r], sg[r]);
    for (size_t i = 0; i < mk; i++)
        bad += !code_eq(qr[i], qg[i]);
    snprintf(what, sizeof what, "fused rmsnorm->per-token m=%lld k=%lld", (long long)m,
             (long long)k);
    report(what, bad == 0, "%.0f mismatches", (double)bad);
    /* SiLU-and-mul -> per-token: gu [m, 2k] */
    for (int64_t r = 0; r < m; r++)
        for (int64_t i = 0; i < 2 * k; i++)
            gu[r * 2 * k + i] = f2bf(nrand() * (i < k ? 3.0f : 1.0f));
    for (int64_t r = 0; r < m; r++)
        for (int64_t i = 0; i < k; i++) {
            float g = bf2f(gu[r * 2 * k + i]), u = bf2f(gu[r * 2 * k + k + i]);
            y[r * k + i] = g / (1.0f + expf(-g)) * u;
        }
    oct_quant_rows(OCT_FP8_E4M3FN, y, m, k, 0.0f, qr, sr);
    void *dgu = dput(gu, mk * 4);
    st = oct_cuda_silu_mul_quant_rows_bf16(dgu, m, k, 0.0f, dq, ds, NULL);
    GET(mk, m);
    long off = 0, far = st != OCT_OK;
    for (int64_t r = 0; r < m; r++)
        far += fabsf(sr[r] - sg[r]) > 1e-6f * sr[r];
    for (size_t i = 0; i < mk; i++) {
        int d = (int)(qr[i] & 0x7F) - (int)(qg[i] & 0x7F);
        off += qr[i] != qg[i];
        far += qr[i] != qg[i] && ((qr[i] ^ qg[i]) & 0x80 || d > 1 || d < -1);
    }
    snprintf(what, sizeof what, "fused silu*mul->per-token m=%lld k=%lld (1-step codes)",
             (long long)m, (long long)k);
    report(what, far == 0 && off <= (long)(mk / 200), "%.0f codes one step off", (double)off);
#undef GET
    CK(cudaFree(dx));
    CK(cudaFree(dq));
    CK(cudaFree(de));
    CK(cudaFree(ds));
    CK(cudaFree(dw));
    CK(cudaFree(dgu));
    free(x), free(w), free(gu), free(xf), free(y), free(sr), free(sg), free(qr), free(qg);
    free(er), free(eg), free(wf);
}

/* The registry's CUDA entry (kernels/cuda/registry_kernel.c): chosen for FP8
 * layers under "auto" and "cuda", refused for bf16 weights with a reason, and
 * its forward (f32 in/out through bf16 on the device) matches the CPU
 * reference kernel on the same prepared layer within bf16 rounding. */
static void check_registry_one(const char *what, const oct_linear_desc *d, const void *w,
                               const void *ws, const float *bias, int64_t m, int quantized_in)
{
    const oct_linear_kernel *kc = NULL, *kr = NULL, *ka = NULL;
    oct_error err;
    int ok = oct_linear_select(d, "cuda", &kc, &err) == OCT_OK &&
             oct_linear_select(d, "ref", &kr, &err) == OCT_OK &&
             oct_linear_select(d, "auto", &ka, &err) == OCT_OK && ka == kc &&
             !strcmp(oct_linear_kernel_name(kc), "cuda_fp8");
    oct_linear *lc = NULL, *lr = NULL;
    ok = ok && oct_linear_create(d, kc, w, ws, bias, &lc, &err) == OCT_OK &&
         oct_linear_create(d, kr, w, ws, bias, &lr, &err) == OCT_OK;
    int64_t n = d->n, k = d->k;
    float *x = malloc((size_t)(m * k) * 4), *yc = malloc((size_t)(m * n) * 4),
          *yr = malloc((size_t)(m * n) * 4);
    uint8_t *q = malloc((size_t)(m * k));
    float *sq = malloc((size_t)m * 4);
    uint16_t *yb = malloc((size_t)(m * n) * 2);
    for (int64_t i = 0; i < m * k; i++)
        x[i] = bf2f(f2bf(nrand() * (i % 131 == 0 ? 20.0f : 1.0f)));
    for (int64_t i = 0; i < m * n; i++)
        yc[i] = NAN;
    double e = NAN;
    if (ok && quantized_in) { /* a per-tensor activation scale, as fused MoE experts pass */
        ok = oct_quant_tensor(OCT_FP8_E4M3FN, x, (size_t)(m * k), q, sq) == OCT_OK &&
             oct_linear_forward_q(lc, m, q, OCT_SCALE_TENSOR, sq, yc, &err) == OCT_OK &&
             oct_linear_forward_q(lr, m, q, OCT_SCALE_TENSOR, sq, yr, &err) == OCT_OK;
    } else if (ok) {
        ok = oct_linear_forward(lc, m, x, yc, &err) == OCT_OK &&
             oct_linear_forward(lr, m, x, yr, &err) == OCT_OK;
    }
    if (ok) {
        for (int64_t i = 0; i < m * n; i++)
            yb[i] = f2bf(yc[i]);
        e = rel_err(yb, yr, m * n);
    } else {
        fprintf(stderr, "%s: %s\n", what, err.message);
    }
    char name[96];
    snprintf(name, sizeof name, "registry cuda_fp8 %s m=%lld", what, (long long)m);
    report(name, ok && e < 1e-2, "rel err %.2e", e);
    oct_linear_free(lc);
    oct_linear_free(lr);
    free(x), free(yc), free(yr), free(q), free(sq), free(yb);
}

static void check_registry(void)
{
    wset w;
    make_w(&w, 392, 1024);
    float *bias = malloc((size_t)w.n * 4);
    for (int64_t j = 0; j < w.n; j++)
        bias[j] = nrand();
    oct_linear_desc d = {.name = "row",
                         .n = w.n,
                         .k = w.k,
                         .weight_type = OCT_WEIGHT_FP8,
                         .weight_scale = OCT_SCALE_ROW,
                         .act = OCT_ACT_DYNAMIC_TOKEN};
    const int64_t ms[] = {1, 7, 40, 300};
    for (int i = 0; i < 4; i++)
        check_registry_one("per-token x per-channel", &d, w.q_row, w.s_row, NULL, ms[i], 0);
    d.has_bias = true;
    check_registry_one("per-token x per-channel, bias", &d, w.q_row, w.s_row, bias, 5, 0);
    check_registry_one("pre-quantized per-tensor x per-channel", &d, w.q_row, w.s_row, bias, 9, 1);
    d.has_bias = false;
    d.act = OCT_ACT_DYNAMIC_TENSOR;
    for (int i = 0; i < 4; i++)
        check_registry_one("dynamic per-tensor x per-channel", &d, w.q_row, w.s_row, NULL, ms[i],
                           0);
    d.act = OCT_ACT_STATIC;
    d.act_static_scale = 0.04f; /* saturates the x20 outliers, as a too-small input_scale would */
    for (int i = 0; i < 4; i++)
        check_registry_one("static per-tensor x per-channel", &d, w.q_row, w.s_row, NULL, ms[i], 0);
    d.act = OCT_ACT_NONE;
    check_registry_one("w8a16 per-channel", &d, w.q_row, w.s_row, NULL, 3, 0);
    d.act = OCT_ACT_GROUP128;
    d.weight_scale = OCT_SCALE_BLOCK128;
    for (int i = 0; i < 4; i++)
        check_registry_one("1x128 x 128x128 blocks", &d, w.q_blk, w.s_blk, NULL, ms[i], 0);
    free(bias);
    free_w(&w);
    /* the demo model's shapes (K = 256, 768: 2 and 6 K blocks), prefill and decode */
    const int64_t shapes[3][2] = {{512, 256}, {256, 768}, {1536, 256}};
    for (int s = 0; s < 3; s++) {
        make_w(&w, shapes[s][0], shapes[s][1]);
        d.n = w.n;
        d.k = w.k;
        d.act = OCT_ACT_GROUP128;
        d.weight_scale = OCT_SCALE_BLOCK128;
        check_registry_one("blocks, model shape", &d, w.q_blk, w.s_blk, NULL, 256, 0);
        check_registry_one("blocks, model shape", &d, w.q_blk, w.s_blk, NULL, 3, 0);
        d.act = OCT_ACT_DYNAMIC_TOKEN;
        d.weight_scale = OCT_SCALE_ROW;
        check_registry_one("per-token, model shape", &d, w.q_row, w.s_row, NULL, 256, 0);
        free_w(&w);
    }
    /* bf16 weights: refused with a reason under "cuda", a CPU kernel under "auto" */
    oct_linear_desc b = {.name = "lm_head", .n = 64, .k = 256, .weight_type = OCT_WEIGHT_BF16};
    const oct_linear_kernel *k = NULL;
    oct_error err;
    int refused = oct_linear_select(&b, "cuda", &k, &err) == OCT_ERR_UNSUPPORTED &&
                  strstr(err.message, "lm_head") && strstr(err.message, "FP8 weights only");
    int cpu = oct_linear_select(&b, "auto", &k, &err) == OCT_OK &&
              strcmp(oct_linear_kernel_backend(k), "cuda") != 0;
    report("registry: bf16 layer refused by cuda, CPU under auto", refused && cpu, "%.0f", 0.0);
}

int main(int argc, char **argv)
{
    int check_only = 0, quick = 0;
    const char *csv_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--check-only"))
            check_only = 1;
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc)
            csv_path = argv[++i];
    }
    int dev = 0, major = 0, minor = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    g_sm90 = major == 9 && minor == 0;
    oct_cuda_ctx *ctx = NULL;
    oct_status st = oct_cuda_ctx_create(&ctx);
    if (st != OCT_OK) {
        fprintf(stderr, "oct_cuda_ctx_create: %s\n", oct_status_str(st));
        return 2;
    }
    /* quantizers */
    check_quant(4, 4096, 1);
    for (int qs = 2; qs >= 0; qs -= 2) { /* the sm_90 bulk-copy kernels at any size, then not */
        oct_cuda_ctx_set(ctx, "quant_bulk", qs);
        check_quant_all_bf16(qs);
    }
    oct_cuda_ctx_set(ctx, "quant_bulk", 1);
    check_quant(7, 14336, 0);
    check_quant(33, 1000, 1); /* unaligned K: scalar row path, groups with a partial group */
    check_quant(5, 136, 0);
    for (int qs = 2; qs >= 0; qs -= 2) { /* the sm_90 bulk-copy kernels at any size, then not */
        printf("# quant_bulk = %d\n", qs);
        oct_cuda_ctx_set(ctx, "quant_bulk", qs);
        check_quant(130, 136, 1); /* a partial 1x128 group */
        check_quant(129, 14336, 1);
        check_quant(300, 4104, 0); /* K % 128 != 0 */
    }
    oct_cuda_ctx_set(ctx, "quant_bulk", 1); /* the shipped choice for the rest */
    check_quant_more(7, 4096);
    check_quant_more(33, 1024);
    check_quant_more(3, 14336);
    if (!quick)
        check_quant(300, 4096, 0);
    /* GEMMs: tile edges of the streaming kernel (8/16/32/64 tokens, ragged N) */
    const int64_t gm[] = {1, 3, 8, 13, 16, 17, 32, 40, 64, 100};
    for (size_t i = 0; i < sizeof gm / sizeof gm[0]; i++) {
        if (quick && gm[i] > 17)
            continue;
        check_gemm(ctx, gm[i], 264, 1024);
    }
    check_gemm(ctx, 5, 384, 4096);
    check_gemm(ctx, 3, 136, 14336); /* fused kernel, 14 chunks per warp per tile */
    for (int p = 0; p < 2; p++) {   /* fused quantization, then the persistent kernel */
        check_fused_exact(ctx, 1, 4104, 4096, 0.0f, 0, p);
        check_fused_exact(ctx, 6, 520, 2048, 3.0f, 5, p);
        check_fused_exact(ctx, 16, 264, 1024, 0.0f, 0, p);
        if (!quick) {
            check_fused_exact(ctx, 2, 8200, 4096, 0.0f, 0, p); /* > 1 tile per block */
            check_fused_exact(ctx, 11, 1000, 3072, 0.0f, 7, p);
        }
    }
    check_fused_exact(ctx, 13, 6144, 4096, 0.0f, 0, 1); /* the shape it is for */
    if (!quick)
        check_gemm(ctx, 64, 256, 14336);
    /* octet's Hopper GEMM: ragged M and N tails of every tile shape, a K loop that
     * wraps the ring several times */
    check_gemm(ctx, 200, 392, 512);
    check_gemm(ctx, 130, 264, 4096);
    if (!quick)
        check_gemm(ctx, 300, 1000, 2048);
    check_gemm(ctx, 256, 512, 256); /* the demo model's shapes: 2 and 6 K blocks */
    check_gemm(ctx, 256, 256, 768);
    check_gemm(ctx, 1, 1536, 256); /* ... and its decode steps */
    check_gemm(ctx, 1, 256, 768);
    /* odd K-step counts (3, 5): the block paths' tails of one / two buffers and halves */
    check_gemm(ctx, 7, 264, 384);
    check_gemm(ctx, 130, 520, 640);
    oct_cuda_ctx_set(ctx, "gemv_tma", 0);
    check_registry();
    printf("checks: %d passed, %d failed (NaN codes differing only in sign from x86: %ld)\n",
           g_pass, g_fail, g_nan_sign);
    if (!check_only) {
        FILE *csv = csv_path ? fopen(csv_path, "w") : NULL;
        if (csv)
            fprintf(csv, "m,k,n,variant,us,weight_GBps\n");
        const int64_t ms[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096};
        const int64_t shapes[4][2] = {{4096, 6144}, {4096, 4096}, {4096, 28672}, {14336, 4096}};
        printf("\nmedian us (CUDA events, weights rotated past L2)\n%6s %-12s", "M", "KxN");
        for (int t = 0; t < T_COUNT; t++)
            printf(" %10s", k_tname[t]);
        printf("\n");
        for (int s = 0; s < 4; s++)
            time_shape(ctx, shapes[s][0], shapes[s][1], ms,
                       quick ? 4 : (int)(sizeof ms / sizeof ms[0]), csv);
        if (csv)
            fclose(csv);
    }
    oct_cuda_ctx_free(ctx);
    return g_fail ? 1 : 0;
}

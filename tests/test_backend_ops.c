/* test_backend_ops.c — the CUDA forward-pass ops (src/kernels/cuda/ops_*.cu)
 * against a CPU reference at model shapes (H 4096, d 128, 32 / 8 heads, I 14336,
 * V 128256).  Each reference below is a small static *_ref function: RMSNorm,
 * RoPE and SiLU-mul call the CPU backend's ops (kernels/cpu/backend_cpu.c); the
 * others restate the CPU attention's and src/engine/sampler.c's math, on the
 * test's own cache buffers; all computed from the same bf16-rounded inputs the
 * device gets.  Tolerances are
 * stated per test and printed in every failure message.  Without a GPU (or in a
 * CPU-only build) it prints "skipped: no GPU". */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_api.h"
#include "octet.h"
#include "testlib.h"

/* ---------------------------------------------------------------- helpers */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

/* OCTET_TEST_QUICK=1 (runs under compute-sanitizer): fewer sampling draws, no
 * frequency checks. */
static bool quick;

static uint64_t rng_u64(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float rng_unif(void) /* [0, 1) */
{
    return (float)(rng_u64() >> 40) * 0x1p-24f;
}

static float rng_normal(void)
{
    float s = 0.0f;
    for (int i = 0; i < 4; i++)
        s += rng_unif();
    return (s - 2.0f) * 1.7320508f; /* Irwin-Hall, unit variance */
}

static uint16_t bf(float x)
{
    return oct_f32_to_bf16(x);
}

static float fb(uint16_t h)
{
    return oct_bf16_to_f32(h);
}

static void *dev_up(const void *src, size_t bytes)
{
    void *d = NULL;
    if (oct_cuda_malloc(&d, bytes) != OCT_OK)
        return NULL;
    if (src && oct_cuda_memcpy_h2d(d, src, bytes) != OCT_OK) {
        oct_cuda_free(d);
        return NULL;
    }
    return d;
}

static bool dev_down(void *dst, const void *src, size_t bytes)
{
    return oct_cuda_memcpy_d2h(dst, src, bytes) == OCT_OK;
}

/* bf16 bit pattern -> a signed integer in value order (distance in ulps). */
static int32_t bf16_ord(uint16_t h)
{
    return (h & 0x8000u) ? -(int32_t)(h & 0x7FFFu) : (int32_t)h;
}

static int32_t e4m3_ord(uint8_t c)
{
    return (c & 0x80u) ? -(int32_t)(c & 0x7Fu) : (int32_t)c;
}

/* FP8 codes: equal except where the f32 value sits on a rounding boundary
 * (the device's last-bit differences of a norm's 1/rms or expf): such codes
 * differ by one step.  Returns the number of differing codes; *bad counts
 * those more than one step apart. */
static int64_t codes_diff(const uint8_t *a, const uint8_t *b, size_t n, int64_t *bad)
{
    int64_t diff = 0;
    *bad = 0;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            diff++;
            if (abs(e4m3_ord(a[i]) - e4m3_ord(b[i])) > 1)
                (*bad)++;
        }
    return diff;
}

/* ------------------------------------------------ references: forward.c's math */

/* The CPU backend's RMSNorm of one row (kernels/cpu/backend_cpu.c). */
static void rmsnorm_ref(float *y, const float *x, const float *w, int64_t n, float eps)
{
    oct_backend *be = oct_backend_cpu();
    oct_error e;
    float *xc = malloc((size_t)n * sizeof(float));
    memcpy(xc, x, (size_t)n * sizeof(float));
    be->ops->rmsnorm(be, xc, NULL, 0.0f, w, NULL, 1, n, eps, NULL, y, &e);
    free(xc);
}

/* The CPU backend's RoPE of one head vector (a one-head q of a q|k|v row). */
static void rope_ref(float *v, int64_t d, const float *inv_freq, int64_t pos)
{
    oct_backend *be = oct_backend_cpu();
    oct_error e;
    float *row = calloc((size_t)(3 * d), sizeof(float));
    memcpy(row, v, (size_t)d * sizeof(float));
    const oct_attn_shape a = {.n_heads = 1, .n_kv_heads = 1, .head_dim = d, .inv_freq = inv_freq};
    const int32_t seq = 0;
    const oct_rows rows = {1, &seq, &pos};
    be->ops->rope_qk(be, &a, &rows, row, &e);
    memcpy(v, row, (size_t)d * sizeof(float));
    free(row);
}

/* forward.c's embedding: x = embed[tok] * embedding_multiplier. */
static void embed_ref(float *x, const uint16_t *table, int64_t H, int32_t tok, float mult)
{
    for (int64_t i = 0; i < H; i++) {
        x[i] = fb(table[(int64_t)tok * H + i]);
        if (mult != 1.0f)
            x[i] *= mult;
    }
}

/* The CPU backend's SiLU-mul of one (gate, up) pair. */
static float silu_mul_ref(float g, float u)
{
    oct_backend *be = oct_backend_cpu();
    oct_error e;
    float gu[2] = {g, u}, y = 0.0f;
    be->ops->silu_mul(be, 1, 1, gu, NULL, &y, &e);
    return y;
}

/* The CPU attention's cache index: a block holds [n_kv][block_size][d]. */
static size_t kv_index_ref(const int32_t *bt, int64_t max_blocks, int32_t s, int64_t p, int64_t h,
                           int64_t n_kv, int64_t bs, int64_t d)
{
    int64_t blk = bt[(int64_t)s * max_blocks + p / bs];
    return (size_t)(((blk * n_kv + h) * bs + p % bs) * d);
}

/* The CPU kv_store: bf16 bits, or sat RNE(x / scale) to E4M3FN. */
static void kv_store_ref(bool fp8, void *base, size_t idx, const uint16_t *src, int64_t n,
                         float scale)
{
    for (int64_t i = 0; i < n; i++) {
        if (fp8) {
            float v = fb(src[i]) / scale;
            oct_fp8_from_f32(OCT_FP8_E4M3FN, OCT_CAST_SAT, &v, (uint8_t *)base + idx + i, 1);
        } else {
            ((uint16_t *)base)[idx + (size_t)i] = src[i];
        }
    }
}

static float kv_val_ref(bool fp8, const void *base, size_t idx, float scale)
{
    if (fp8)
        return oct_fp8_decode(OCT_FP8_E4M3FN, ((const uint8_t *)base)[idx]) * scale;
    return fb(((const uint16_t *)base)[idx]);
}

/* The CPU attention for one (row, query head): scores q.k * mult over
 * [j0, p], softmax in f32 with the max subtracted, out = sum softmax * v. */
static void attention_ref(const float *q, int64_t d, int64_t p, int64_t window, bool fp8,
                          const void *kc, const void *vc, float ks, float vs, float mult,
                          const int32_t *bt, int64_t max_blocks, int32_t s, int64_t kvh,
                          int64_t n_kv, int64_t bs, float *sc, float *o)
{
    int64_t j0 = window > 0 && p >= window ? p - window + 1 : 0;
    float mx = -INFINITY;
    for (int64_t j = j0; j <= p; j++) {
        size_t idx = kv_index_ref(bt, max_blocks, s, j, kvh, n_kv, bs, d);
        float dot = 0.0f;
        for (int64_t i = 0; i < d; i++)
            dot += q[i] * kv_val_ref(fp8, kc, idx + (size_t)i, ks);
        sc[j] = dot * mult;
        mx = sc[j] > mx ? sc[j] : mx;
    }
    float sum = 0.0f;
    for (int64_t j = j0; j <= p; j++) {
        sc[j] = expf(sc[j] - mx);
        sum += sc[j];
    }
    float inv = 1.0f / sum;
    for (int64_t i = 0; i < d; i++)
        o[i] = 0.0f;
    for (int64_t j = j0; j <= p; j++) {
        size_t idx = kv_index_ref(bt, max_blocks, s, j, kvh, n_kv, bs, d);
        for (int64_t i = 0; i < d; i++)
            o[i] += sc[j] * inv * kv_val_ref(fp8, vc, idx + (size_t)i, vs);
    }
}

/* A linear layer: y = x w^T + bias, accumulated in double here (the reference
 * the f32-accumulating GEMM is held to), and sum |x w| for its tolerance. */
static void gemm_ref(const uint16_t *x, const uint16_t *w, const float *bias, int64_t m, int64_t n,
                     int64_t k, double *y, double *mag)
{
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0.0, a = 0.0;
            for (int64_t c = 0; c < k; c++) {
                double v = (double)fb(x[i * k + c]) * (double)fb(w[j * k + c]);
                s += v;
                a += fabs(v);
            }
            y[i * n + j] = s + (bias ? (double)bias[j] : 0.0);
            mag[i * n + j] = a + (bias ? fabs((double)bias[j]) : 0.0);
        }
}

/* sampler.c's filters: probabilities expf((l - max) / T), sorted by
 * descending probability then ascending id, top-k, min-p, top-p; returns the
 * kept count, idx[0..n) the kept ids in that order, prob[] per id, *total the
 * kept mass. */
static const float *cmp_prob;

static int cmp_desc_ref(const void *a, const void *b)
{
    float pa = cmp_prob[*(const int32_t *)a], pb = cmp_prob[*(const int32_t *)b];
    if (pa != pb)
        return pa < pb ? 1 : -1;
    return *(const int32_t *)a - *(const int32_t *)b;
}

static int64_t sample_set_ref(const float *logits, int64_t V, float T, int32_t top_k, float top_p,
                              float min_p, float *prob, int32_t *idx, double *total_out)
{
    int32_t best = 0;
    for (int64_t v = 1; v < V; v++)
        if (logits[v] > logits[best])
            best = (int32_t)v;
    float mx = logits[best];
    for (int64_t v = 0; v < V; v++) {
        prob[v] = expf((logits[v] - mx) / T);
        idx[v] = (int32_t)v;
    }
    cmp_prob = prob;
    qsort(idx, (size_t)V, sizeof(int32_t), cmp_desc_ref);
    int64_t n = V;
    if (top_k > 0 && top_k < n)
        n = top_k;
    if (min_p > 0.0f) {
        float cut = min_p * prob[best];
        int64_t k = 0;
        for (int64_t i = 0; i < n; i++)
            if (prob[idx[i]] >= cut)
                idx[k++] = idx[i];
        n = k;
    }
    double total = 0.0;
    for (int64_t i = 0; i < n; i++)
        total += (double)prob[idx[i]];
    if (top_p < 1.0f) {
        double acc = 0.0;
        int64_t k = 0;
        while (k < n) {
            acc += (double)prob[idx[k]];
            k++;
            if (acc >= (double)top_p * total)
                break;
        }
        n = k;
        total = acc;
    }
    *total_out = total;
    return n;
}

/* ------------------------------------------------------------------- tests */

enum { H = 4096, D = 128, NQ = 32, NKV = 8, INTER = 14336, VOCAB = 128256 };
static const float EPS = 1e-5f;

static void test_embed(void)
{
    /* exact: mult 1 copies the bits widened; mult != 1 is one f32 product */
    const int64_t V = VOCAB, n = 7;
    uint16_t *table = malloc((size_t)V * H * 2);
    REQUIRE(table);
    for (int64_t i = 0; i < V * H; i++) {
        uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ull;
        table[i] = (uint16_t)(0x3800u + ((z >> 40) & 0xFFFu)) | (uint16_t)((z >> 20) & 0x8000u);
    }
    const int32_t tok[7] = {0, (int32_t)V - 1, 12345, 12345, -1, (int32_t)V, 77};
    uint16_t *dt = dev_up(table, (size_t)V * H * 2);
    int32_t *dtok = dev_up(tok, sizeof tok);
    float *dx = dev_up(NULL, (size_t)n * H * 4);
    float *x = malloc((size_t)n * H * 4), *ref = malloc((size_t)H * 4);
    REQUIRE(dt && dtok && dx && x && ref);
    const float mults[2] = {1.0f, 0.375f};
    for (int mi = 0; mi < 2; mi++) {
        CHECK_OK(oct_cuda_embed(dtok, n, dt, V, H, mults[mi], dx, NULL));
        REQUIRE(dev_down(x, dx, (size_t)n * H * 4));
        int64_t wrong = 0;
        for (int64_t t = 0; t < n; t++) {
            if (tok[t] < 0 || tok[t] >= V) {
                for (int64_t i = 0; i < H; i++)
                    wrong += !isnan(x[t * H + i]);
                continue;
            }
            embed_ref(ref, table, H, tok[t], mults[mi]);
            wrong += memcmp(ref, x + t * H, (size_t)H * 4) != 0;
        }
        CHECKF(wrong == 0,
               "embed mult %g: %lld rows/elements differ (tolerance: exact, NaN rows "
               "for bad ids)",
               (double)mults[mi], (long long)wrong);
    }
    printf("  embed: V %lld H %d: exact\n", (long long)V, H);
    oct_cuda_free(dt);
    oct_cuda_free(dtok);
    oct_cuda_free(dx);
    free(table);
    free(x);
    free(ref);
}

/* Checks a producer's output rows [m,k] (values ref, f32) for one kind. */
static void check_act(const char *op, int kind, const float *ref, int64_t m, int64_t k,
                      const uint16_t *y, const uint8_t *q, const float *scale, float ub,
                      float static_scale)
{
    size_t n = (size_t)(m * k);
    if (kind == OCT_CUDA_ACT_BF16) {
        /* tolerance: within 1 bf16 ulp of RNE(ref) (the device's expf and the
         * order of a double sum may move the f32 value by an ulp) */
        int64_t off1 = 0, bad = 0;
        for (size_t i = 0; i < n; i++) {
            int32_t dlt = abs(bf16_ord(y[i]) - bf16_ord(bf(ref[i])));
            off1 += dlt == 1;
            bad += dlt > 1;
        }
        CHECKF(bad == 0, "%s bf16: %lld values more than 1 ulp off (tolerance 1 bf16 ulp)", op,
               (long long)bad);
        printf("  %s m %lld k %lld bf16: %lld of %zu values 1 ulp off, none more\n", op,
               (long long)m, (long long)k, (long long)off1, n);
        return;
    }
    uint8_t *rq = malloc(n);
    int64_t ng = (k + 127) / 128;
    float *rs = malloc((size_t)(m * ng) * 4);
    if (!rq || !rs) {
        free(rq);
        free(rs);
        CHECKF(false, "out of memory");
        return;
    }
    int64_t ns = 0;
    const char *kn = "static";
    if (kind == OCT_CUDA_ACT_FP8_ROW) {
        oct_quant_rows(OCT_FP8_E4M3FN, ref, m, k, ub, rq, rs);
        ns = m;
        kn = "row";
    } else if (kind == OCT_CUDA_ACT_FP8_GROUP128) {
        oct_quant_groups(OCT_FP8_E4M3FN, ref, m, k, 128, rq, rs);
        ns = m * ng;
        kn = "group128";
    } else {
        oct_quant_static(OCT_FP8_E4M3FN, ref, n, static_scale, rq);
    }
    double smax = 0.0;
    for (int64_t i = 0; i < ns; i++) {
        double r = fabs((double)scale[i] - (double)rs[i]) / (double)rs[i];
        smax = r > smax ? r : smax;
    }
    int64_t bad = 0, diff = codes_diff(q, rq, n, &bad);
    /* tolerance: scales within 2^-22 relative; codes equal but for one-step
     * differences at rounding boundaries, at most 1 in 10^4 (+2) */
    CHECKF(smax <= 0x1p-22, "%s fp8 %s: scale off by %.3g relative (tolerance 2^-22)", op, kn,
           smax);
    CHECKF(bad == 0 && diff <= (int64_t)(n / 10000) + 2,
           "%s fp8 %s: %lld codes differ, %lld by more than one step (tolerance: one step, "
           "<= n/1e4 + 2)",
           op, kn, (long long)diff, (long long)bad);
    printf("  %s m %lld k %lld fp8 %s: %lld of %zu codes one step off, scale rel err %.2g\n", op,
           (long long)m, (long long)k, kn, (long long)diff, n, smax);
    free(rq);
    free(rs);
}

/* Runs a producer for each output kind and checks it against ref [m,k]. */
typedef oct_status (*producer_fn)(void *ctx, int64_t m, const oct_cuda_act *out);

static void run_kinds(const char *op, producer_fn fn, void *ctx, const float *ref, int64_t m,
                      int64_t k)
{
    const size_t n = (size_t)(m * k);
    const int64_t ng = (k + 127) / 128;
    uint16_t *dy = dev_up(NULL, n * 2), *y = malloc(n * 2);
    uint8_t *dq = dev_up(NULL, n), *q = malloc(n);
    float *ds = dev_up(NULL, (size_t)(m * ng) * 4), *s = malloc((size_t)(m * ng) * 4);
    if (!dy || !y || !dq || !q || !ds || !s) {
        CHECKF(false, "allocation failed");
        goto out;
    }
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++)
        amax = fabsf(ref[i]) > amax ? fabsf(ref[i]) : amax;
    /* each kind one block per row, then with the meeting words of split rows */
    enum { SYNC_N = OCT_CUDA_ACT_SPLIT_ROWS * OCT_CUDA_ACT_SYNC_WORDS };
    unsigned zero[SYNC_N] = {0}, back[SYNC_N];
    unsigned *dsync = dev_up(zero, sizeof zero);
    REQUIRE(dsync);
    for (int kind = 0; kind < 10; kind++) {
        oct_cuda_act a = {0};
        a.kind = kind % 5 == 4 ? OCT_CUDA_ACT_FP8_ROW : kind % 5;
        a.y = dy;
        a.q = dq;
        a.scale = ds;
        a.ub = kind % 5 == 4 ? amax * 0.25f : 0.0f; /* a bound that clips */
        a.static_scale = amax / 300.0f;             /* some values saturate */
        a.sync = kind >= 5 ? dsync : NULL;
        oct_status st = fn(ctx, m, &a);
        CHECKF(st == OCT_OK, "%s kind %d: status %d (%s)", op, kind, st, oct_cuda_ops_last_error());
        if (st != OCT_OK)
            continue;
        if (!dev_down(y, dy, n * 2) || !dev_down(q, dq, n) ||
            !dev_down(s, ds, (size_t)(m * ng) * 4) || !dev_down(back, dsync, sizeof back)) {
            CHECKF(false, "download failed");
            break;
        }
        check_act(op, a.kind, ref, m, k, y, q, s, a.ub, a.static_scale);
        CHECKF(memcmp(back, zero, sizeof zero) == 0, "%s kind %d: the sync words are not left zero",
               op, kind);
    }
    oct_cuda_free(dsync);
out:
    oct_cuda_free(dy);
    oct_cuda_free(dq);
    oct_cuda_free(ds);
    free(y);
    free(q);
    free(s);
}

struct rms_ctx {
    float *dx;
    const float *x0; /* host copy of x before the call */
    int64_t nx;      /* rows of x */
    uint16_t *dadd;
    float add_mult;
    float *dw;
    int32_t *drows;
    int64_t k;
};

static oct_status rms_call(void *c, int64_t m, const oct_cuda_act *out)
{
    struct rms_ctx *r = c;
    /* each call starts from the same x (the add is in place) */
    if (oct_cuda_memcpy_h2d(r->dx, r->x0, (size_t)(r->nx * r->k) * 4) != OCT_OK)
        return OCT_ERR_INTERNAL;
    return oct_cuda_rmsnorm(r->dx, r->dadd, r->add_mult, r->dw, r->drows, m, r->k, EPS, out, NULL);
}

static void test_rmsnorm(void)
{
    const int64_t ms[4] = {1, 3, 17, 100};
    /* 200: a partial last 1x128 group; 4100: not a multiple of 8 (the strided
     * kernel); 40000: 8 chunks of 8 per thread on the register path */
    const int64_t ks[4] = {H, 200, 4100, 40000};
    for (int ki = 0; ki < 4; ki++)
        for (int mi = 0; mi < 4; mi++) {
            const int64_t m = ms[mi], k = ks[ki];
            if (k != H && m != 17)
                continue;
            const size_t n = (size_t)(m * k);
            float *x = malloc(n * 4), *w = malloc((size_t)k * 4), *ref = malloc(n * 4);
            float *xr = malloc(n * 4), *xd = malloc(n * 4);
            uint16_t *add = malloc(n * 2);
            REQUIRE(x && w && ref && add && xr && xd);
            for (size_t i = 0; i < n; i++) {
                x[i] = rng_normal() * 3.0f;
                add[i] = bf(rng_normal());
            }
            for (int64_t i = 0; i < k; i++)
                w[i] = 0.5f + rng_unif();
            const float am = mi % 2 ? 0.22f : 1.0f; /* Granite's residual multiplier */
            for (size_t i = 0; i < n; i++)
                xr[i] = x[i] + fb(add[i]) * am; /* x += h * residual_multiplier */
            for (int64_t t = 0; t < m; t++)
                rmsnorm_ref(ref + t * k, xr + t * k, w, k, EPS);
            struct rms_ctx c = {dev_up(x, n * 4),         x,    m, dev_up(add, n * 2), am,
                                dev_up(w, (size_t)k * 4), NULL, k};
            REQUIRE(c.dx && c.dadd && c.dw);
            run_kinds("rmsnorm+add", rms_call, &c, ref, m, k);
            /* the residual add in place: exact */
            REQUIRE(dev_down(xd, c.dx, n * 4));
            CHECKF(memcmp(xd, xr, n * 4) == 0,
                   "rmsnorm m %lld: x after the add differs "
                   "(tolerance: exact f32)",
                   (long long)m);
            /* a row map (the final norm over the rows that want logits), no add */
            if (m == 17) {
                const int32_t rows[3] = {16, 0, 16};
                float *ref3 = malloc((size_t)(3 * k) * 4);
                REQUIRE(ref3);
                for (int t = 0; t < 3; t++)
                    rmsnorm_ref(ref3 + t * k, x + rows[t] * k, w, k, EPS);
                c.dadd = NULL;
                c.drows = dev_up(rows, sizeof rows);
                REQUIRE(c.drows);
                run_kinds("rmsnorm rows", rms_call, &c, ref3, 3, k);
                oct_cuda_free(c.drows);
                free(ref3);
                c.dadd = NULL;
            }
            oct_cuda_free(c.dx);
            oct_cuda_free(c.dw);
            free(x);
            free(w);
            free(ref);
            free(add);
            free(xr);
            free(xd);
            (void)c;
        }
}

struct silu_ctx {
    uint16_t *dgu;
    int64_t I;
};

static oct_status silu_call(void *c, int64_t m, const oct_cuda_act *out)
{
    struct silu_ctx *s = c;
    return oct_cuda_silu_mul(s->dgu, m, s->I, out, NULL);
}

static void test_silu_mul(void)
{
    /* INTER on the register path, 1000 with a partial last group, 1004 (not a
     * multiple of 8) on the strided kernel */
    const int64_t ms[5] = {1, 3, 17, 3, 3}, is[5] = {INTER, INTER, INTER, 1000, 1004};
    for (int mi = 0; mi < 5; mi++) {
        const int64_t m = ms[mi], I = is[mi];
        const size_t n = (size_t)(m * I);
        uint16_t *gu = malloc(n * 4);
        float *ref = malloc(n * 4);
        REQUIRE(gu && ref);
        for (size_t i = 0; i < 2 * n; i++)
            gu[i] = bf(rng_normal() * 2.0f);
        for (int64_t t = 0; t < m; t++)
            for (int64_t i = 0; i < I; i++)
                ref[t * I + i] = silu_mul_ref(fb(gu[t * 2 * I + i]), fb(gu[t * 2 * I + I + i]));
        struct silu_ctx c = {dev_up(gu, n * 4), I};
        REQUIRE(c.dgu);
        run_kinds("silu_mul", silu_call, &c, ref, m, I);
        oct_cuda_free(c.dgu);
        free(gu);
        free(ref);
    }
}

static void test_rope(void)
{
    /* tolerance: each element within 1 bf16 ulp of RNE(ref), or within
     * 2^-16 * max|head| (a result that cancels: cosf / sinf of the device and
     * of glibc may differ by an ulp) */
    const int64_t ds[3] = {D, 64, 256};
    const int64_t ms[3] = {1, 17, 100};
    for (int di = 0; di < 3; di++)
        for (int norm = 0; norm < 2; norm++) {
            const int64_t d = ds[di], m = ms[(di + norm) % 3], nq = NQ, nkv = NKV;
            const int64_t row = (nq + 2 * nkv) * d;
            const size_t n = (size_t)(m * row);
            uint16_t *qkv = malloc(n * 2), *out = malloc(n * 2);
            float *inv = malloc((size_t)d / 2 * 4), *qn = malloc((size_t)d * 4),
                  *kn = malloc((size_t)d * 4), *v = malloc((size_t)d * 4);
            int32_t *pos = malloc((size_t)m * 4);
            REQUIRE(qkv && out && inv && qn && kn && v && pos);
            for (size_t i = 0; i < n; i++)
                qkv[i] = bf(rng_normal() * 2.0f);
            for (int64_t i = 0; i < d / 2; i++)
                inv[i] = 1.0f / powf(500000.0f, (float)(2 * i) / (float)d);
            for (int64_t i = 0; i < d; i++) {
                qn[i] = 0.5f + rng_unif();
                kn[i] = 0.5f + rng_unif();
            }
            for (int64_t t = 0; t < m; t++)
                pos[t] = t == 0 ? 0 : (int32_t)(rng_u64() % 40000);
            uint16_t *dq = dev_up(qkv, n * 2);
            int32_t *dp = dev_up(pos, (size_t)m * 4);
            float *di_ = dev_up(inv, (size_t)d / 2 * 4), *dqn = dev_up(qn, (size_t)d * 4),
                  *dkn = dev_up(kn, (size_t)d * 4);
            REQUIRE(dq && dp && di_ && dqn && dkn);
            CHECK_OK(oct_cuda_rope_qk(dq, m, nq, nkv, d, dp, di_, norm ? dqn : NULL,
                                      norm ? dkn : NULL, EPS, NULL));
            REQUIRE(dev_down(out, dq, n * 2));
            int64_t off1 = 0, bad = 0, vchg = 0;
            for (int64_t t = 0; t < m; t++)
                for (int64_t h = 0; h < nq + 2 * nkv; h++) {
                    const uint16_t *src = qkv + t * row + h * d, *got = out + t * row + h * d;
                    if (h >= nq + nkv) { /* v heads: untouched */
                        vchg += memcmp(src, got, (size_t)d * 2) != 0;
                        continue;
                    }
                    for (int64_t i = 0; i < d; i++)
                        v[i] = fb(src[i]);
                    if (norm)
                        rmsnorm_ref(v, v, h < nq ? qn : kn, d, EPS);
                    rope_ref(v, d, inv, pos[t]);
                    float hm = 0.0f;
                    for (int64_t i = 0; i < d; i++)
                        hm = fabsf(v[i]) > hm ? fabsf(v[i]) : hm;
                    for (int64_t i = 0; i < d; i++) {
                        int32_t dl = abs(bf16_ord(got[i]) - bf16_ord(bf(v[i])));
                        if (dl == 1)
                            off1++;
                        else if (dl > 1 && fabsf(fb(got[i]) - v[i]) > hm * 0x1p-16f)
                            bad++;
                    }
                }
            CHECKF(bad == 0 && vchg == 0,
                   "rope d %lld norm %d: %lld values off (tolerance 1 bf16 ulp or 2^-16 "
                   "max|head|), %lld v heads changed",
                   (long long)d, norm, (long long)bad, (long long)vchg);
            printf("  rope m %lld d %lld qk_norm %d: %lld values 1 ulp off, none beyond\n",
                   (long long)m, (long long)d, norm, (long long)off1);
            oct_cuda_free(dq);
            oct_cuda_free(dp);
            oct_cuda_free(di_);
            oct_cuda_free(dqn);
            oct_cuda_free(dkn);
            free(qkv);
            free(out);
            free(inv);
            free(qn);
            free(kn);
            free(v);
            free(pos);
        }
}

/* oct_cuda_rope_qk_store against oct_cuda_rope_qk then oct_cuda_kv_store (both
 * checked against the references above and in test_attention): the same qkv
 * and caches byte for byte, for bf16 and E4M3 caches, with padding rows
 * (slot -1) and rows in a random block order. */
static void test_rope_store(void)
{
    const int64_t ds[2] = {D, 64}, m = 19, bs = 16, nq = NQ, nkv = NKV;
    for (int di = 0; di < 2; di++)
        for (int fp8 = 0; fp8 < 2; fp8++) {
            const int64_t d = ds[di], row = (nq + 2 * nkv) * d, n_blocks = 8;
            const size_t n = (size_t)(m * row), esz = fp8 ? 1 : 2;
            const size_t cbytes = (size_t)(n_blocks * nkv * bs * d) * esz;
            uint16_t *qkv = malloc(n * 2), *oa = malloc(n * 2), *ob = malloc(n * 2);
            uint8_t *ca = malloc(2 * cbytes), *cb = malloc(2 * cbytes);
            float *inv = malloc((size_t)d / 2 * 4), *kn = malloc((size_t)d * 4);
            int32_t *pos = malloc((size_t)m * 4), *slot = malloc((size_t)m * 4);
            REQUIRE(qkv && oa && ob && ca && cb && inv && kn && pos && slot);
            for (size_t i = 0; i < n; i++)
                qkv[i] = bf(rng_normal() * 2.0f);
            for (int64_t i = 0; i < d / 2; i++)
                inv[i] = 1.0f / powf(500000.0f, (float)(2 * i) / (float)d);
            for (int64_t i = 0; i < d; i++)
                kn[i] = 0.5f + rng_unif();
            for (int64_t t = 0; t < m; t++) {
                pos[t] = (int32_t)(rng_u64() % 40000);
                slot[t] = t % 7 == 3 ? -1 : (int32_t)((t * 37) % (n_blocks * bs));
            }
            uint16_t *da = dev_up(qkv, n * 2), *db = dev_up(qkv, n * 2);
            int32_t *dp = dev_up(pos, (size_t)m * 4), *dsl = dev_up(slot, (size_t)m * 4);
            float *dinv = dev_up(inv, (size_t)d / 2 * 4), *dkn = dev_up(kn, (size_t)d * 4);
            uint8_t *dca = dev_up(NULL, 2 * cbytes), *dcb = dev_up(NULL, 2 * cbytes);
            REQUIRE(da && db && dp && dsl && dinv && dkn && dca && dcb);
            REQUIRE(oct_cuda_memzero(dca, 2 * cbytes) == OCT_OK &&
                    oct_cuda_memzero(dcb, 2 * cbytes) == OCT_OK);
            const int kind = fp8 ? OCT_CUDA_KV_E4M3 : OCT_CUDA_KV_BF16;
            const float ks = 0.03f, vs = 0.02f;
            const float *qn = di == 1 ? dkn : NULL; /* q/k norm on the d 64 case */
            CHECK_OK(oct_cuda_rope_qk(da, m, nq, nkv, d, dp, dinv, qn, qn, EPS, NULL));
            CHECK_OK(oct_cuda_kv_store(da, m, nq, nkv, d, dsl, bs, kind, dca, dca + cbytes, ks, vs,
                                       NULL));
            CHECK_OK(oct_cuda_rope_qk_store(db, m, nq, nkv, d, dp, dinv, qn, qn, EPS, dsl, bs, kind,
                                            dcb, dcb + cbytes, ks, vs, NULL));
            REQUIRE(dev_down(oa, da, n * 2) && dev_down(ob, db, n * 2) &&
                    dev_down(ca, dca, 2 * cbytes) && dev_down(cb, dcb, 2 * cbytes));
            CHECKF(memcmp(oa, ob, n * 2) == 0 && memcmp(ca, cb, 2 * cbytes) == 0,
                   "rope_qk_store d %lld %s: qkv or cache differs from rope_qk + kv_store",
                   (long long)d, fp8 ? "e4m3" : "bf16");
            void *dev[] = {da, db, dp, dsl, dinv, dkn, dca, dcb};
            for (size_t i = 0; i < OCT_ARRAY_LEN_T(dev); i++)
                oct_cuda_free(dev[i]);
            void *host[] = {qkv, oa, ob, ca, cb, inv, kn, pos, slot};
            for (size_t i = 0; i < OCT_ARRAY_LEN_T(host); i++)
                free(host[i]);
        }
    CHECKF(oct_cuda_rope_qk_store(NULL, 1, NQ, NKV, D, NULL, NULL, NULL, NULL, EPS, NULL, 16,
                                  OCT_CUDA_KV_BF16, NULL, NULL, 1.0f, 1.0f, NULL) != OCT_OK,
           "rope_qk_store without pointers is refused");
}

/* One attention configuration: sequences of the given contexts (block size bs,
 * blocks in a random order), their K/V written by oct_cuda_kv_store (checked
 * against kv_store_ref), then batches of query rows against attention_ref:
 * decode rows (the last position of each sequence, plus a padding row), a
 * prefill run (positions pre_from..ctx-1 of prefill_seq: a chunk after a cached
 * prefix when pre_from > 0), and a mixed batch (half the decode rows, the
 * padding row, the run, the other decode rows).  The prefill and mixed batches
 * run twice: every row on the decode kernel (n_tiles 0), and split by
 * oct_cuda_attention_plan (runs of 16 rows or more as query tiles on the
 * tensor-core kernel).  clip > 0: the calls pass max_ctx - clip, so the rows at
 * or past it must come out NaN, decode rows and tile rows alike.
 *
 * Tolerance: max abs error vs the f32 reference <= 2e-2 max|v|, for both
 * kernels.  The tensor-core kernel rounds P to bf16 for the PV product (each
 * weight within 2^-9 relative, the row sum taken unrounded): at most 2^-9 max|v|
 * off, and the bf16 output's own rounding is another 2^-9 |out| <= 2^-9 max|v|;
 * FP8 codes are exact in bf16.  Together under 0.4% of max|v|, well inside the
 * decode kernel's tolerance, which therefore holds for both.  The tensor-core
 * decode kernel (head size 128) rounds P the same way with a bf16 cache; with
 * an E4M3 one it rounds q and P to f16 (2^-11 relative), inside the same bound. */
struct attn_case {
    int64_t nq, nkv, d, window;
    bool fp8;
    int n_seqs;
    int64_t ctx[8];
    int prefill_seq;  /* -1: none */
    int64_t pre_from; /* first position of the prefill run */
    int64_t clip;     /* the calls' max_ctx is the longest context minus this */
    int64_t bs;       /* block size (0: 16) */
};

/* A configuration's data: host and device caches, and the query rows. */
struct attn_fix {
    const struct attn_case *c;
    int64_t nq, nkv, d, bs, row, max_ctx, call_ctx, max_blocks, total;
    float ks, vs, scale, vmax;
    int32_t *bt;      /* [n_seqs, max_blocks] */
    uint16_t *qkv;    /* [total, row]: every position of every sequence */
    int64_t *first;   /* [n_seqs] first qkv row of each sequence */
    uint8_t *kc, *vc; /* host caches (kv_store_ref) */
    int32_t *dbt;
    void *dkc, *dvc;
    /* query rows: decode rows, the padding row, the prefill run */
    int64_t m, m_dec;
    int32_t *qs, *qp; /* [m] */
    int64_t *src;     /* [m] qkv row of each query row */
};

static void attn_fix_free(struct attn_fix *f)
{
    oct_cuda_free(f->dbt);
    oct_cuda_free(f->dkc);
    oct_cuda_free(f->dvc);
    free(f->bt);
    free(f->qkv);
    free(f->first);
    free(f->kc);
    free(f->vc);
    free(f->qs);
    free(f->qp);
    free(f->src);
}

/* Block tables (a random block order), the qkv rows of every position and the
 * host caches. */
static bool attn_fix_host(struct attn_fix *f)
{
    const struct attn_case *c = f->c;
    const int64_t n_blocks = f->max_blocks * c->n_seqs;
    const size_t esz = c->fp8 ? 1 : 2, cache_elems = (size_t)(n_blocks * f->nkv * f->bs * f->d);
    f->bt = malloc((size_t)n_blocks * 4);
    f->qkv = malloc((size_t)(f->total * f->row) * 2);
    f->first = malloc((size_t)c->n_seqs * 8);
    f->kc = calloc(cache_elems, esz);
    f->vc = calloc(cache_elems, esz);
    if (!f->bt || !f->qkv || !f->first || !f->kc || !f->vc)
        return false;
    for (int64_t i = 0; i < n_blocks; i++)
        f->bt[i] = (int32_t)i;
    for (int64_t i = n_blocks - 1; i > 0; i--) {
        int64_t j = (int64_t)(rng_u64() % (uint64_t)(i + 1));
        int32_t tmp = f->bt[i];
        f->bt[i] = f->bt[j];
        f->bt[j] = tmp;
    }
    const int64_t nq = f->nq, nkv = f->nkv, d = f->d, row = f->row;
    int64_t r = 0;
    for (int s = 0; s < c->n_seqs; s++) {
        f->first[s] = r;
        for (int64_t p = 0; p < c->ctx[s]; p++, r++) {
            for (int64_t i = 0; i < row; i++)
                f->qkv[r * row + i] = bf(rng_normal() * (i >= (nq + nkv) * d ? 1.5f : 1.0f));
            for (int64_t h = 0; h < nkv; h++) {
                size_t idx = kv_index_ref(f->bt, f->max_blocks, s, p, h, nkv, f->bs, d);
                const uint16_t *k = f->qkv + r * row + nq * d + h * d;
                kv_store_ref(c->fp8, f->kc, idx, k, d, f->ks);
                kv_store_ref(c->fp8, f->vc, idx, k + nkv * d, d, f->vs);
            }
        }
    }
    f->vmax = 0.0f;
    for (int64_t i = 0; i < f->total; i++)
        for (int64_t e = (nq + nkv) * d; e < row; e++)
            f->vmax = fmaxf(f->vmax, fabsf(fb(f->qkv[i * row + e])));
    return true;
}

/* The device caches through oct_cuda_kv_store, checked against the host's. */
static bool attn_fix_device(struct attn_fix *f)
{
    const struct attn_case *c = f->c;
    const int64_t n_blocks = f->max_blocks * c->n_seqs;
    const size_t esz = c->fp8 ? 1 : 2, cache_elems = (size_t)(n_blocks * f->nkv * f->bs * f->d);
    int32_t *slot = malloc((size_t)f->total * 4);
    uint8_t *kd = malloc(cache_elems * esz), *vd = malloc(cache_elems * esz);
    uint16_t *dqkv = dev_up(f->qkv, (size_t)(f->total * f->row) * 2);
    int32_t *dslot = NULL;
    f->dbt = dev_up(f->bt, (size_t)n_blocks * 4);
    f->dkc = dev_up(NULL, cache_elems * esz);
    f->dvc = dev_up(NULL, cache_elems * esz);
    bool ok = slot && kd && vd && dqkv && f->dbt && f->dkc && f->dvc;
    for (int s = 0, r = 0; ok && s < c->n_seqs; s++)
        for (int64_t p = 0; p < c->ctx[s]; p++, r++)
            slot[r] = f->bt[s * f->max_blocks + p / f->bs] * (int32_t)f->bs + (int32_t)(p % f->bs);
    ok = ok && (dslot = dev_up(slot, (size_t)f->total * 4)) != NULL;
    const int dt = c->fp8 ? OCT_CUDA_KV_E4M3 : OCT_CUDA_KV_BF16;
    ok = ok && oct_cuda_kv_store(dqkv, f->total, f->nq, f->nkv, f->d, dslot, f->bs, dt, f->dkc,
                                 f->dvc, f->ks, f->vs, NULL) == OCT_OK;
    /* blocks never written stay as the device had them: compare written slots */
    ok = ok && dev_down(kd, f->dkc, cache_elems * esz) && dev_down(vd, f->dvc, cache_elems * esz);
    int64_t kv_bad = 0;
    for (int s = 0; ok && s < c->n_seqs; s++)
        for (int64_t p = 0; p < c->ctx[s]; p++)
            for (int64_t h = 0; h < f->nkv; h++) {
                size_t idx = kv_index_ref(f->bt, f->max_blocks, s, p, h, f->nkv, f->bs, f->d) * esz;
                kv_bad += memcmp(f->kc + idx, kd + idx, (size_t)f->d * esz) != 0;
                kv_bad += memcmp(f->vc + idx, vd + idx, (size_t)f->d * esz) != 0;
            }
    CHECKF(ok && kv_bad == 0, "kv_store %s: %lld head rows differ (tolerance: exact)",
           c->fp8 ? "e4m3" : "bf16", (long long)kv_bad);
    oct_cuda_free(dqkv);
    oct_cuda_free(dslot);
    free(slot);
    free(kd);
    free(vd);
    return ok;
}

/* The query rows: decode rows, a padding row, the prefill run. */
static bool attn_fix_rows(struct attn_fix *f)
{
    const struct attn_case *c = f->c;
    f->m_dec = c->n_seqs + 1;
    const int64_t m_pre = c->prefill_seq >= 0 ? c->ctx[c->prefill_seq] - c->pre_from : 0;
    f->m = f->m_dec + m_pre;
    f->qs = malloc((size_t)f->m * 4);
    f->qp = malloc((size_t)f->m * 4);
    f->src = malloc((size_t)f->m * 8);
    if (!f->qs || !f->qp || !f->src)
        return false;
    for (int64_t t = 0; t < f->m; t++) {
        if (t < c->n_seqs) {
            f->qs[t] = (int32_t)t;
            f->qp[t] = (int32_t)c->ctx[t] - 1;
            f->src[t] = f->first[t] + c->ctx[t] - 1;
        } else if (t == c->n_seqs) { /* padding row */
            f->qs[t] = 0;
            f->qp[t] = -1;
            f->src[t] = 0;
        } else {
            int64_t p = c->pre_from + t - f->m_dec;
            f->qs[t] = c->prefill_seq;
            f->qp[t] = (int32_t)p;
            f->src[t] = f->first[c->prefill_seq] + p;
        }
    }
    return true;
}

static bool attn_fix_make(struct attn_fix *f, const struct attn_case *c)
{
    memset(f, 0, sizeof *f);
    f->c = c;
    f->nq = c->nq;
    f->nkv = c->nkv;
    f->d = c->d;
    f->bs = c->bs > 0 ? c->bs : 16;
    f->row = (c->nq + 2 * c->nkv) * c->d;
    for (int s = 0; s < c->n_seqs; s++) {
        f->max_ctx = c->ctx[s] > f->max_ctx ? c->ctx[s] : f->max_ctx;
        f->total += c->ctx[s];
    }
    f->call_ctx = f->max_ctx - c->clip;
    f->max_blocks = (f->max_ctx + f->bs - 1) / f->bs;
    f->ks = c->fp8 ? 0.02f : 1.0f;
    f->vs = c->fp8 ? 0.015f : 1.0f;
    f->scale = 1.0f / sqrtf((float)c->d);
    return attn_fix_host(f) && attn_fix_device(f) && attn_fix_rows(f);
}

/* attention_ref for query row t, every head: o [nq * d] (sc: [max_ctx] scratch). */
static void attn_ref_row(const struct attn_fix *f, int64_t t, float *sc, float *qf, float *o)
{
    const int64_t d = f->d;
    for (int64_t h = 0; h < f->nq; h++) {
        for (int64_t i = 0; i < d; i++)
            qf[i] = fb(f->qkv[f->src[t] * f->row + h * d + i]);
        attention_ref(qf, d, f->qp[t], f->c->window, f->c->fp8, f->kc, f->vc, f->ks, f->vs,
                      f->scale, f->bt, f->max_blocks, f->qs[t], h / (f->nq / f->nkv), f->nkv, f->bs,
                      sc, o + h * d);
    }
}

/* A batch of query rows list[0..n) on the device, split by
 * oct_cuda_attention_plan when planned (else n_tiles 0: all on the decode kernel). */
struct attn_batch {
    int64_t n, nt, nd;
    uint16_t *dq, *dout;
    int32_t *dqs, *dqp, *dtiles, *ddrows;
    void *dws;
    size_t wsb;
};

static void attn_batch_free(struct attn_batch *b)
{
    oct_cuda_free(b->dq);
    oct_cuda_free(b->dout);
    oct_cuda_free(b->dqs);
    oct_cuda_free(b->dqp);
    oct_cuda_free(b->dtiles);
    oct_cuda_free(b->ddrows);
    oct_cuda_free(b->dws);
}

static bool attn_batch_up(const struct attn_fix *f, const int64_t *list, int64_t n, bool planned,
                          struct attn_batch *b)
{
    const int64_t row = f->row;
    memset(b, 0, sizeof *b);
    b->n = n;
    uint16_t *q = malloc((size_t)(n * row) * 2);
    int32_t *qs = malloc((size_t)n * 4), *qp = malloc((size_t)n * 4);
    int32_t *tiles = malloc((size_t)n * 8), *drows = malloc((size_t)n * 4);
    bool ok = q && qs && qp && tiles && drows;
    for (int64_t i = 0; ok && i < n; i++) {
        memcpy(q + i * row, f->qkv + f->src[list[i]] * row, (size_t)row * 2);
        qs[i] = f->qs[list[i]];
        qp[i] = f->qp[list[i]];
    }
    if (ok && planned)
        b->nt = oct_cuda_attention_plan(qs, qp, n, tiles, drows, &b->nd);
    ok = ok && b->nt >= 0;
    b->wsb = oct_cuda_attention_workspace_bytes(n, f->nq, f->d, f->call_ctx);
    ok = ok && (b->dq = dev_up(q, (size_t)(n * row) * 2)) &&
         (b->dout = dev_up(NULL, (size_t)(n * f->nq * f->d) * 2)) &&
         (b->dqs = dev_up(qs, (size_t)n * 4)) && (b->dqp = dev_up(qp, (size_t)n * 4)) &&
         (b->nt == 0 || (b->dtiles = dev_up(tiles, (size_t)b->nt * 8))) &&
         (b->nd == 0 || (b->ddrows = dev_up(drows, (size_t)b->nd * 4))) &&
         (b->wsb == 0 ||
          ((b->dws = dev_up(NULL, b->wsb)) && oct_cuda_memzero(b->dws, b->wsb) == OCT_OK));
    free(q);
    free(qs);
    free(qp);
    free(tiles);
    free(drows);
    return ok;
}

static oct_status attn_batch_run(const struct attn_fix *f, const struct attn_batch *b)
{
    const int dt = f->c->fp8 ? OCT_CUDA_KV_E4M3 : OCT_CUDA_KV_BF16;
    return oct_cuda_attention(b->dq, b->n, f->nq, f->nkv, f->d, b->dqs, b->dqp, f->dbt,
                              f->max_blocks, f->bs, dt, f->dkc, f->dvc, f->ks, f->vs, f->scale,
                              f->c->window, f->call_ctx, b->dtiles, b->nt, b->ddrows, b->nd,
                              b->dout, NULL, NULL, b->dws, b->wsb, NULL);
}

/* A call that writes FP8 (oct_cuda_attention_act_fits) against its own bf16
 * output (in b->dout) through the quantizers o_proj would otherwise run:
 * per-token (bound 0) and 1x128 codes and scales, bit for bit. */
static void attn_act_check(const struct attn_fix *f, const struct attn_batch *b)
{
    const int64_t n = b->n, qd = f->nq * f->d;
    if (!oct_cuda_attention_act_fits(n, qd, b->nt))
        return;
    const int dt = f->c->fp8 ? OCT_CUDA_KV_E4M3 : OCT_CUDA_KV_BF16;
    for (int kind = OCT_CUDA_ACT_FP8_ROW; kind <= OCT_CUDA_ACT_FP8_GROUP128; kind++) {
        const int64_t ns = n * (kind == OCT_CUDA_ACT_FP8_ROW ? 1 : (qd + 127) / 128);
        uint8_t *dq = dev_up(NULL, (size_t)(n * qd)), *rq = dev_up(NULL, (size_t)(n * qd));
        float *ds = dev_up(NULL, (size_t)ns * 4), *rs = dev_up(NULL, (size_t)ns * 4);
        uint8_t *hq = malloc((size_t)(2 * n * qd));
        float *hs = malloc((size_t)(2 * ns) * 4);
        const oct_cuda_act act = {.kind = kind, .q = dq, .scale = ds};
        bool ok = dq && rq && ds && rs && hq && hs;
        oct_status st =
            ok ? oct_cuda_attention(b->dq, n, f->nq, f->nkv, f->d, b->dqs, b->dqp, f->dbt,
                                    f->max_blocks, f->bs, dt, f->dkc, f->dvc, f->ks, f->vs,
                                    f->scale, f->c->window, f->call_ctx, NULL, 0, NULL, 0, b->dout,
                                    &act, NULL, b->dws, b->wsb, NULL)
               : OCT_ERR_NOMEM;
        CHECKF(st == OCT_OK, "attention FP8 output kind %d: status %d (%s)", kind, st,
               oct_cuda_ops_last_error());
        ok = ok && st == OCT_OK &&
             (kind == OCT_CUDA_ACT_FP8_ROW
                  ? oct_cuda_quant_rows_bf16(b->dout, n, qd, 0.0f, rq, rs, NULL)
                  : oct_cuda_quant_groups_bf16(b->dout, n, qd, rq, rs, NULL)) == OCT_OK &&
             dev_down(hq, dq, (size_t)(n * qd)) && dev_down(hq + n * qd, rq, (size_t)(n * qd)) &&
             dev_down(hs, ds, (size_t)ns * 4) && dev_down(hs + ns, rs, (size_t)ns * 4);
        int64_t diff = 0;
        for (int64_t i = 0; ok && i < n * qd; i++)
            diff += hq[i] != hq[n * qd + i];
        for (int64_t i = 0; ok && i < ns; i++)
            diff += memcmp(&hs[i], &hs[ns + i], 4) != 0;
        CHECKF(ok && diff == 0,
               "attention FP8 output kind %d, %lld rows: %lld codes / scales differ from the "
               "quantizer's (tolerance: none)",
               kind, (long long)n, (long long)diff);
        printf("  attention FP8 output (%s), %lld rows: codes and scales %s the quantizer's\n",
               kind == OCT_CUDA_ACT_FP8_ROW ? "per token" : "1x128 groups", (long long)n,
               ok && diff == 0 ? "equal to" : "DIFFER from");
        oct_cuda_free(dq);
        oct_cuda_free(rq);
        oct_cuda_free(ds);
        oct_cuda_free(rs);
        free(hq);
        free(hs);
    }
}

/* RoPE inside the call (oct_cuda_attention's rope), for a batch of rows each
 * its sequence's only one that oct_cuda_attention_rope_fits: the batch's qkv
 * taken as un-roped, against oct_cuda_rope_qk_store and then the call without
 * rope, on copies of the caches: the output and both caches byte-identical
 * (rows at or past max_ctx store nothing either way).  q/k norm (two
 * different weight vectors) on the E4M3 cases.  Counts its checks in
 * attn_rope_checks. */
static int attn_rope_checks;
static void attn_rope_check(const struct attn_fix *f, const struct attn_batch *b,
                            const int64_t *list)
{
    const int64_t n = b->n, d = f->d, qd = f->nq * d, row = f->row;
    for (int64_t i = 0; i < n; i++)
        for (int64_t u = 0; u < i; u++)
            if (f->qp[list[i]] >= 0 && f->qp[list[u]] >= 0 && f->qs[list[i]] == f->qs[list[u]])
                return; /* two rows of a sequence */
    if (b->nt > 0 || !oct_cuda_attention_rope_fits(n, d, 0, b->dq, f->dkc, f->dvc))
        return;
    const size_t cb = (size_t)(f->max_blocks * f->c->n_seqs * f->nkv * f->bs * d) *
                      (f->c->fp8 ? 1 : 2),
                 qb = (size_t)(n * row) * 2, ob = (size_t)(n * qd) * 2;
    uint8_t *hc = malloc(2 * cb), *hr = malloc(2 * cb);
    uint16_t *hq = malloc(qb), *oa = malloc(ob), *ob_ = malloc(ob);
    float *inv = malloc((size_t)d / 2 * 4), *nw = malloc((size_t)(2 * d) * 4);
    int32_t *slot = malloc((size_t)n * 4);
    REQUIRE(hc && hr && hq && oa && ob_ && inv && nw && slot);
    for (int64_t i = 0; i < d / 2; i++)
        inv[i] = 1.0f / powf(500000.0f, (float)(2 * i) / (float)d);
    for (int64_t i = 0; i < 2 * d; i++) /* q_norm, then k_norm */
        nw[i] = 0.5f + rng_unif();
    for (int64_t i = 0; i < n; i++) {
        const int64_t p = f->qp[list[i]];
        slot[i] = p < 0 || p >= f->call_ctx
                      ? -1
                      : f->bt[f->qs[list[i]] * f->max_blocks + p / f->bs] * (int32_t)f->bs +
                            (int32_t)(p % f->bs);
    }
    bool ok = dev_down(hc, f->dkc, cb) && dev_down(hc + cb, f->dvc, cb) && dev_down(hq, b->dq, qb);
    uint8_t *ca = dev_up(hc, 2 * cb), *cr = dev_up(hc, 2 * cb);
    uint16_t *qa = dev_up(hq, qb), *qr = dev_up(hq, qb), *outr = dev_up(NULL, ob);
    float *dinv = dev_up(inv, (size_t)d / 2 * 4), *dnw = dev_up(nw, (size_t)(2 * d) * 4);
    int32_t *dsl = dev_up(slot, (size_t)n * 4);
    ok = ok && ca && cr && qa && qr && outr && dinv && dnw && dsl;
    const int dt = f->c->fp8 ? OCT_CUDA_KV_E4M3 : OCT_CUDA_KV_BF16;
    const float *qn = f->c->fp8 ? dnw : NULL, *kn = f->c->fp8 ? dnw + d : NULL;
    const oct_cuda_rope rope = {dinv, qn, kn, EPS};
    oct_status st = ok ? oct_cuda_rope_qk_store(qr, n, f->nq, f->nkv, d, b->dqp, dinv, qn, kn, EPS,
                                                dsl, f->bs, dt, cr, cr + cb, f->ks, f->vs, NULL)
                       : OCT_ERR_NOMEM;
    if (st == OCT_OK)
        st = oct_cuda_attention(qr, n, f->nq, f->nkv, d, b->dqs, b->dqp, f->dbt, f->max_blocks,
                                f->bs, dt, cr, cr + cb, f->ks, f->vs, f->scale, f->c->window,
                                f->call_ctx, NULL, 0, NULL, 0, outr, NULL, NULL, b->dws, b->wsb,
                                NULL);
    if (st == OCT_OK)
        st = oct_cuda_attention(qa, n, f->nq, f->nkv, d, b->dqs, b->dqp, f->dbt, f->max_blocks,
                                f->bs, dt, ca, ca + cb, f->ks, f->vs, f->scale, f->c->window,
                                f->call_ctx, NULL, 0, NULL, 0, b->dout, NULL, &rope, b->dws, b->wsb,
                                NULL);
    CHECKF(st == OCT_OK, "attention with RoPE inside: status %d (%s)", st,
           oct_cuda_ops_last_error());
    ok = ok && st == OCT_OK && dev_down(oa, b->dout, ob) && dev_down(ob_, outr, ob) &&
         dev_down(hc, ca, 2 * cb) && dev_down(hr, cr, 2 * cb);
    const bool same_out = ok && memcmp(oa, ob_, ob) == 0, same_kv = ok && !memcmp(hc, hr, 2 * cb);
    CHECKF(same_out && same_kv,
           "attention %s d %lld, %lld rows, RoPE inside: output %s, caches %s (tolerance: "
           "exact)",
           f->c->fp8 ? "e4m3" : "bf16", (long long)d, (long long)n,
           same_out ? "identical" : "differ", same_kv ? "identical" : "differ");
    attn_rope_checks++;
    printf("  attention %s kv, d %lld, %lld rows, RoPE inside%s: output and caches %s\n",
           f->c->fp8 ? "e4m3" : "bf16", (long long)d, (long long)n, qn ? " (q/k norm)" : "",
           same_out && same_kv ? "byte-identical to rope_qk_store + attention" : "DIFFER");
    void *dev[] = {ca, cr, qa, qr, outr, dinv, dnw, dsl};
    for (size_t i = 0; i < OCT_ARRAY_LEN_T(dev); i++)
        oct_cuda_free(dev[i]);
    void *host[] = {hc, hr, hq, oa, ob_, inv, nw, slot};
    for (size_t i = 0; i < OCT_ARRAY_LEN_T(host); i++)
        free(host[i]);
}

/* One call over list[0..n) into out [n, nq d] (host); *nt its tiles. */
static bool attn_call(const struct attn_fix *f, const int64_t *list, int64_t n, bool planned,
                      uint16_t *out, int64_t *nt)
{
    struct attn_batch b;
    bool ok = attn_batch_up(f, list, n, planned, &b);
    CHECKF(ok, "attention batch of %lld rows", (long long)n);
    if (ok) {
        oct_status st = attn_batch_run(f, &b);
        CHECKF(st == OCT_OK, "attention: status %d (%s)", st, oct_cuda_ops_last_error());
        ok = st == OCT_OK && dev_down(out, b.dout, (size_t)(n * f->nq * f->d) * 2);
        if (ok) {
            attn_act_check(f, &b);
            attn_rope_check(f, &b, list);
        }
    }
    *nt = b.nt;
    attn_batch_free(&b);
    return ok;
}

/* out of a call over list against ref ([m, nq d] by query row): the max abs
 * error over rows in range; *bad counts padding outputs not 0 and clipped
 * outputs not NaN. */
static double attn_err(const struct attn_fix *f, const int64_t *list, int64_t n,
                       const uint16_t *out, const float *ref, int64_t *bad)
{
    const int64_t qd = f->nq * f->d;
    double maxerr = 0.0;
    *bad = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t t = list[i];
        const uint16_t *o = out + i * qd;
        for (int64_t e = 0; e < qd; e++) {
            if (f->qp[t] < 0) {
                *bad += o[e] != 0;
            } else if (f->qp[t] >= f->call_ctx) {
                *bad += !isnan(fb(o[e]));
            } else {
                double err = fabs((double)fb(o[e]) - (double)ref[t * qd + e]);
                maxerr = err > maxerr || isnan(err) ? err : maxerr;
            }
        }
    }
    return maxerr;
}

/* The decode kernel that rows of head size d take (oct_cuda_attn_decode_tc set). */
static const char *dec_kernel(int64_t d)
{
    return !oct_cuda_attn_decode_tc || d != 128 ? "CUDA-core"
           : oct_cuda_attn_decode_staged == 1   ? "tensor-core staged"
                                                : "tensor-core";
}

static void run_attention(const struct attn_case *c)
{
    struct attn_fix f;
    if (!attn_fix_make(&f, c)) {
        CHECKF(false, "attention fixture (d %lld)", (long long)c->d);
        attn_fix_free(&f);
        return;
    }
    const int64_t m = f.m, qd = f.nq * f.d, half = c->n_seqs / 2;
    float *ref = malloc((size_t)(m * qd) * 4), *sc = malloc((size_t)f.max_ctx * 4);
    float *qf = malloc((size_t)f.d * 4);
    int64_t *lists = malloc((size_t)(3 * m) * 8);
    uint16_t *out = malloc((size_t)(m * qd) * 2);
    REQUIRE(ref && sc && qf && lists && out);
    for (int64_t t = 0; t < m; t++)
        if (f.qp[t] >= 0 && f.qp[t] < f.call_ctx)
            attn_ref_row(&f, t, sc, qf, ref + t * qd);
    /* lists: decode rows + padding; the run; half the decode rows, padding, the
     * run, the other half */
    int64_t *dec = lists, *pre = lists + f.m_dec, *mix = lists + m, n_mix = 0;
    for (int64_t t = 0; t < m; t++)
        lists[t] = t;
    for (int64_t t = 0; t < half; t++)
        mix[n_mix++] = t;
    for (int64_t t = c->n_seqs; t < m; t++)
        mix[n_mix++] = t;
    for (int64_t t = half; t < c->n_seqs; t++)
        mix[n_mix++] = t;
    const int64_t *call_list[5] = {dec, pre, pre, mix, mix};
    const int64_t call_n[5] = {f.m_dec, m - f.m_dec, m - f.m_dec, n_mix, n_mix};
    const char *call_name[5] = {"decode", "prefill", "prefill planned", "mixed", "mixed planned"};
    for (int call = 0; call < 5; call++) {
        const int64_t n = call_n[call];
        int64_t nt = 0, bad = 0;
        if (n == 0)
            continue;
        if (!attn_call(&f, call_list[call], n, call == 2 || call == 4, out, &nt))
            continue;
        double maxerr = attn_err(&f, call_list[call], n, out, ref, &bad);
        CHECKF(maxerr <= 2e-2 * (double)f.vmax && bad == 0,
               "attention %s d %lld %lld/%lld window %lld %s (%s decode kernel): max abs err "
               "%.4g (tolerance %.4g = 2e-2 max|v|), %lld padding outputs not 0 or clipped "
               "ones not NaN",
               c->fp8 ? "e4m3" : "bf16", (long long)f.d, (long long)f.nq, (long long)f.nkv,
               (long long)c->window, call_name[call], dec_kernel(f.d), maxerr,
               2e-2 * (double)f.vmax, (long long)bad);
        printf("  attention %s kv, d %lld, %lld/%lld heads, window %lld, bs %lld, %s m %lld "
               "(%lld tiles, %s decode kernel; positions %lld.. of %lld, max ctx %lld): max abs "
               "err %.3g (max|v| %.3g)\n",
               c->fp8 ? "e4m3" : "bf16", (long long)f.d, (long long)f.nq, (long long)f.nkv,
               (long long)c->window, (long long)f.bs, call_name[call], (long long)n, (long long)nt,
               dec_kernel(f.d), (long long)c->pre_from,
               (long long)(c->prefill_seq >= 0 ? c->ctx[c->prefill_seq] : 0), (long long)f.call_ctx,
               maxerr, (double)f.vmax);
    }
    free(ref);
    free(sc);
    free(qf);
    free(lists);
    free(out);
    attn_fix_free(&f);
}

static void test_attention(void)
{
    const struct attn_case cases[] = {
        /* Llama 3 8B heads; block boundaries 15/16/17; 257 and 3000 split into partitions */
        {NQ, NKV, D, 0, false, 7, {1, 16, 17, 18, 256, 257, 3000}, 5, .pre_from = 0},
        {NQ, NKV, D, 0, true, 7, {1, 16, 17, 18, 256, 257, 3000}, 2, .pre_from = 0},
        /* a sliding window of 256: p = 255 (j0 = 0), 256 (j0 = 1), 2999 */
        {NQ, NKV, D, 256, false, 4, {255, 256, 257, 3000}, 2, .pre_from = 0},
        {NQ, NKV, D, 256, true, 4, {255, 256, 257, 3000}, -1, .pre_from = 0},
        /* d 256 with 8 query heads per KV head (tiles fall back to the decode
         * kernel); d 64 with 12 (two blocks per group) */
        {16, 2, 256, 0, false, 3, {5, 300, 1100}, 1, .pre_from = 0},
        {24, 2, 64, 0, true, 3, {3, 513, 1025}, 0, .pre_from = 0},
        {8, 8, 128, 0, false, 2, {40, 600}, 0, .pre_from = 0}, /* MHA: one query head per KV head */
        /* prefill tiles.  300 rows from 0: 4 x 64 + 44 */
        {NQ, NKV, D, 0, false, 3, {40, 300, 1000}, 1, .pre_from = 0},
        /* chunks after a cached prefix, first position neither tile nor block
         * aligned: 87 rows (64 + 23), E4M3; 16 rows (one tile, three warps idle);
         * 15 rows (too short: decode rows) */
        {NQ, NKV, D, 0, true, 2, {700, 50}, 0, .pre_from = 613},
        {NQ, NKV, D, 0, false, 2, {1000, 5}, 0, .pre_from = 984},
        {NQ, NKV, D, 0, false, 1, {200}, 0, .pre_from = 185},
        /* a window of 40 (under a tile: rows whose window misses a whole key
         * tile), group 8, d 64 */
        {16, 2, 64, 40, false, 2, {400, 30}, 0, .pre_from = 100},
        /* a window of 100 crossing key tiles, MHA, E4M3, a block size of 24
         * (not a power of two, tiles straddle blocks) */
        {8, 8, 128, 100, true, 2, {500, 20}, 0, .pre_from = 200, .bs = 24},
        /* group 3 (one head per block), d 64, E4M3, window 256, aligned chunk */
        {12, 4, 64, 256, true, 2, {600, 3}, 0, .pre_from = 320},
        /* a window of 64 with the chunk starting below it: p0 < window <= p */
        {NQ, NKV, D, 64, true, 2, {130, 9}, 0, .pre_from = 30},
        /* group 4, d 64, from position 0 */
        {8, 2, 64, 0, false, 2, {260, 17}, 0, .pre_from = 0},
        /* max_ctx 170 for a run 120..199: rows 170.. NaN (a whole tile of them) */
        {NQ, NKV, D, 0, false, 2, {200, 10}, 0, .pre_from = 120, .clip = 30},
        /* head size 128 with groups 2, 6 and 12 (one, three and six
         * two-head blocks per KV head), E4M3 and a window among them */
        {16, 8, 128, 50, false, 2, {333, 40}, 0, .pre_from = 10},
        {24, 4, 128, 0, false, 2, {300, 70}, 0, .pre_from = 0},
        {24, 2, 128, 0, true, 2, {260, 90}, 0, .pre_from = 64},
        /* d 256 run: the decode kernel for every row even when planned */
        {16, 2, 256, 0, false, 2, {100, 300}, 1, .pre_from = 200},
    };
    /* every case with the default decode kernels (head size 128: tensor cores,
     * K/V into registers at these row counts), then the head-size-128 ones on
     * the tensor-core kernel with K/V staged through shared memory, and on the
     * CUDA-core decode kernel */
    for (int pass = 0; pass < 3; pass++) {
        oct_cuda_attn_decode_tc = pass < 2;
        oct_cuda_attn_decode_staged = pass == 1 ? 1 : -1;
        for (size_t i = 0; i < OCT_ARRAY_LEN_T(cases); i++)
            if (pass == 0 || cases[i].d == 128)
                run_attention(&cases[i]);
    }
    oct_cuda_attn_decode_tc = -1;
    /* the decode batches of the head-size-128 cases on the default kernels */
    CHECKF(attn_rope_checks >= 8, "RoPE inside attention checked on %d batches (expected >= 8)",
           attn_rope_checks);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Milliseconds per call of a batch: the mean of reps calls after a warm-up
 * (a 2-byte copy synchronizes the device). */
static double attn_batch_ms(const struct attn_fix *f, const struct attn_batch *b, int reps)
{
    uint16_t sink;
    if (attn_batch_run(f, b) != OCT_OK || !dev_down(&sink, b->dout, 2))
        return -1.0;
    const double t0 = now_s();
    for (int i = 0; i < reps; i++)
        if (attn_batch_run(f, b) != OCT_OK)
            return -1.0;
    if (!dev_down(&sink, b->dout, 2))
        return -1.0;
    return (now_s() - t0) * 1e3 / reps;
}

/* One decode row (query row t of f) timed on its own over 200 calls, its output
 * against attention_ref. */
static void decode_row_check(const struct attn_fix *f, int64_t t, bool ok, double tol, float *sc,
                             float *qf, float *ref, uint16_t *o1)
{
    const int64_t qd = f->nq * f->d;
    struct attn_batch b1;
    bool ok1 = ok && attn_batch_up(f, &t, 1, false, &b1);
    const double ms1 = ok1 ? attn_batch_ms(f, &b1, 200) : -1.0;
    ok1 = ok1 && ms1 > 0.0 && dev_down(o1, b1.dout, (size_t)qd * 2);
    double err1 = ok1 ? 0.0 : (double)INFINITY;
    attn_ref_row(f, t, sc, qf, ref);
    for (int64_t e = 0; ok1 && e < qd; e++) {
        double x = fabs((double)fb(o1[e]) - (double)ref[e]);
        err1 = x > err1 || isnan(x) ? x : err1;
    }
    const char *kv = f->c->fp8 ? "e4m3" : "bf16";
    CHECKF(err1 <= tol, "attention decode at %lld %s (%s): max err %.4g (tolerance %.4g)",
           (long long)f->qp[t], kv, dec_kernel(f->d), err1, tol);
    printf("  attention decode at position %lld, %s kv, %s kernel: %.1f us per layer, max err "
           "%.3g\n",
           (long long)f->qp[t], kv, dec_kernel(f->d), ms1 * 1e3, err1);
    if (ok)
        attn_batch_free(&b1);
}

/* One layer's prefill of an 8192-token prompt at the Llama 3 8B shape (32 / 8
 * heads, d 128): the planned call (tensor-core tiles) against the decode kernel
 * on every row (2e-2 max|v|: each is within 2e-2 max|v| / 2 of the reference
 * in theory, see run_attention), sample rows against attention_ref, and the
 * time of both (printed; the goal for the tensor-core path is <= 2 ms, i.e.
 * >= ~275 TFLOP/s counting the 2 n^2 d heads causal FLOPs). */
static void run_attention_long(bool fp8)
{
    const struct attn_case c = {NQ, NKV, D, 0, fp8, 1, {8192}, 0, .pre_from = 0};
    struct attn_fix f;
    if (!attn_fix_make(&f, &c)) {
        CHECKF(false, "attention fixture of 8192 positions");
        attn_fix_free(&f);
        return;
    }
    const int64_t n = f.m - f.m_dec, qd = f.nq * f.d;
    int64_t *list = malloc((size_t)n * 8);
    uint16_t *o_tc = malloc((size_t)(n * qd) * 2), *o_dec = malloc((size_t)(n * qd) * 2);
    float *ref = malloc((size_t)qd * 4), *sc = malloc((size_t)f.max_ctx * 4);
    float *qf = malloc((size_t)f.d * 4);
    REQUIRE(list && o_tc && o_dec && ref && sc && qf);
    for (int64_t i = 0; i < n; i++)
        list[i] = f.m_dec + i;
    struct attn_batch btc, bdec;
    bool ok = attn_batch_up(&f, list, n, true, &btc);
    ok = attn_batch_up(&f, list, n, false, &bdec) && ok;
    CHECKF(ok && btc.nt == 128 && btc.nd == 0, "batches: %lld tiles, %lld decode rows",
           (long long)btc.nt, (long long)btc.nd);
    const double ms_tc = ok ? attn_batch_ms(&f, &btc, 20) : -1.0;
    const double ms_dec = ok ? attn_batch_ms(&f, &bdec, 2) : -1.0;
    ok = ok && ms_tc > 0.0 && ms_dec > 0.0 && dev_down(o_tc, btc.dout, (size_t)(n * qd) * 2) &&
         dev_down(o_dec, bdec.dout, (size_t)(n * qd) * 2);
    CHECKF(ok, "attention calls (%s)", oct_cuda_ops_last_error());
    double diff = 0.0, err = 0.0;
    for (int64_t i = 0; ok && i < n * qd; i++) {
        double e = fabs((double)fb(o_tc[i]) - (double)fb(o_dec[i]));
        diff = e > diff || isnan(e) ? e : diff;
    }
    const int64_t sample[] = {0, 1, 15, 63, 64, 65, 127, 1000, 4095, 4096, 8191};
    for (size_t k = 0; ok && k < OCT_ARRAY_LEN_T(sample); k++) {
        attn_ref_row(&f, list[sample[k]], sc, qf, ref);
        for (int64_t e = 0; e < qd; e++) {
            double x = fabs((double)fb(o_tc[sample[k] * qd + e]) - (double)ref[e]);
            err = x > err || isnan(x) ? x : err;
        }
    }
    const double tol = 2e-2 * (double)f.vmax;
    CHECKF(diff <= tol && err <= tol,
           "attention 8192 %s: max |tensor cores - decode| %.4g, max err vs reference %.4g "
           "(tolerance %.4g = 2e-2 max|v|)",
           fp8 ? "e4m3" : "bf16", diff, err, tol);
    const double flop = 2.0 * (double)n * (double)n * (double)f.d * (double)f.nq;
    printf("  attention prefill 8192, %s kv, 32/8 heads, d 128: tensor cores %.3f ms (%.0f "
           "TFLOP/s causal), decode kernel %.2f ms; max |tc - decode| %.3g, sample rows max err "
           "%.3g (max|v| %.3g)\n",
           fp8 ? "e4m3" : "bf16", ms_tc, flop / (ms_tc * 1e9), ms_dec, diff, err, (double)f.vmax);
    /* decode rows at positions 511 and 8191 (the end of the context), on each
     * decode kernel */
    const int64_t at[2] = {list[511], list[n - 1]};
    uint16_t *o1 = malloc((size_t)qd * 2);
    REQUIRE(o1);
    for (int tc = 1; tc >= 0; tc--) {
        oct_cuda_attn_decode_tc = tc;
        for (int k = 0; k < 2; k++)
            decode_row_check(&f, at[k], ok, tol, sc, qf, ref, o1);
    }
    oct_cuda_attn_decode_tc = -1;
    free(o1);
    attn_batch_free(&btc);
    attn_batch_free(&bdec);
    free(list);
    free(o_tc);
    free(o_dec);
    free(ref);
    free(sc);
    free(qf);
    attn_fix_free(&f);
}

static void test_attention_long(void)
{
    run_attention_long(false);
    run_attention_long(true);
}

typedef struct {
    int64_t m, n, k;
    bool bias, f32;
    float mult;
} gemm_bf16_case;

/* One oct_cuda_gemm_bf16 result (device dy) against the double reference:
 * |err| <= 2^-8 |ref| (bf16 output's rounding) + 2^-16 sum|x w| (f32
 * accumulation, any order). */
static void gemm_bf16_check(const gemm_bf16_case *c, const void *dy, float *y, const double *ref,
                            const double *mag, const char *path)
{
    const int64_t m = c->m, n = c->n, k = c->k;
    REQUIRE(dev_down(y, dy, (size_t)(m * n) * (c->f32 ? 4 : 2)));
    double maxrel = 0.0;
    int64_t bad = 0;
    for (int64_t i = 0; i < m * n; i++) {
        double g = c->f32 ? (double)y[i] : (double)fb(((uint16_t *)y)[i]);
        double rv = ref[i] * (double)c->mult, tol_acc = 0x1p-16 * mag[i] * (double)c->mult;
        double e = fabs(g - rv);
        double tol = (c->f32 ? 0.0 : 0x1p-8 * fabs(rv)) + tol_acc + 1e-30;
        bad += e > tol;
        double rel = e / (fabs(rv) + tol_acc + 1e-30);
        maxrel = rel > maxrel ? rel : maxrel;
    }
    CHECKF(bad == 0,
           "gemm_bf16 %lld x %lld x %lld bias %d f32 %d (%s): %lld outputs beyond "
           "2^-8|ref| + 2^-16 sum|xw|",
           (long long)m, (long long)n, (long long)k, c->bias, c->f32, path, (long long)bad);
    printf("  gemm_bf16 %lld x %lld x %lld bias %d %s out mult %g (%s): max err / (|ref| + "
           "2^-16 sum|xw|) %.3g\n",
           (long long)m, (long long)n, (long long)k, c->bias, c->f32 ? "f32" : "bf16",
           (double)c->mult, path, maxrel);
}

static void test_gemm_bf16(void)
{
    oct_cuda_ctx *ctx = NULL;
    REQUIRE(oct_cuda_ctx_create(&ctx) == OCT_OK);
    const gemm_bf16_case cs[] = {
        {1, 1024, H, false, false, 1.0f},  {17, 1024, H, true, false, 1.0f},
        {100, 512, H, false, false, 0.5f}, {3, VOCAB, H, false, true, 1.0f},
        {5, 6144, H, true, true, 0.125f},  {2, 333, 136, true, false, 1.0f},
        {8, 6144, H, true, false, 1.0f},   {9, 1000, 2 * H, false, false, 0.25f},
        {16, 4104, H, true, false, 1.0f},
    };
    for (size_t ci = 0; ci < OCT_ARRAY_LEN_T(cs); ci++) {
        const int64_t m = cs[ci].m, n = cs[ci].n, k = cs[ci].k;
        uint16_t *x = malloc((size_t)(m * k) * 2), *w = malloc((size_t)(n * k) * 2);
        float *b = malloc((size_t)n * 4), *y = malloc((size_t)(m * n) * 4);
        double *ref = malloc((size_t)(m * n) * 8), *mag = malloc((size_t)(m * n) * 8);
        REQUIRE(x && w && b && y && ref && mag);
        for (int64_t i = 0; i < m * k; i++)
            x[i] = bf(rng_normal());
        for (int64_t i = 0; i < n * k; i++)
            w[i] = bf(rng_normal() * 0.05f);
        for (int64_t i = 0; i < n; i++)
            b[i] = rng_normal();
        gemm_ref(x, w, cs[ci].bias ? b : NULL, m, n, k, ref, mag);
        uint16_t *dx = dev_up(x, (size_t)(m * k) * 2), *dw = dev_up(w, (size_t)(n * k) * 2);
        float *db = dev_up(b, (size_t)n * 4);
        void *dy = dev_up(NULL, (size_t)(m * n) * 4);
        REQUIRE(dx && dw && db && dy);
        /* the default choice (a bf16 y of up to 16 rows with k % 64 == 0: the
         * streaming kernel of gemv_bf16.cu), then cuBLASLt where that differs */
        const bool gemv = !cs[ci].f32 && m <= 16 && k % 64 == 0;
        for (int lt = 0; lt <= (int)gemv; lt++) {
            REQUIRE(oct_cuda_ctx_set(ctx, "gemv_bf16_max_m", lt ? 0 : 16) == OCT_OK);
            oct_status st = oct_cuda_gemm_bf16(ctx, m, n, k, dx, dw, cs[ci].bias ? db : NULL,
                                               cs[ci].mult, dy, cs[ci].f32, NULL);
            CHECKF(st == OCT_OK, "gemm_bf16 %lld x %lld x %lld: status %d (%s)", (long long)m,
                   (long long)n, (long long)k, st, oct_cuda_ops_last_error());
            if (st == OCT_OK)
                gemm_bf16_check(&cs[ci], dy, y, ref, mag, gemv && !lt ? "gemv_bf16" : "cublaslt");
        }
        if (ci == 1) /* bf16 output, bias and a multiplier: refused */
            CHECK(oct_cuda_gemm_bf16(ctx, m, n, k, dx, dw, db, 2.0f, dy, false, NULL) ==
                  OCT_ERR_UNSUPPORTED);
        oct_cuda_free(dx);
        oct_cuda_free(dw);
        oct_cuda_free(db);
        oct_cuda_free(dy);
        free(x);
        free(w);
        free(b);
        free(y);
        free(ref);
        free(mag);
    }
    oct_cuda_ctx_free(ctx);
}

/* Runs steps launches of oct_cuda_sample on logits [n,V] with params pp[n]
 * (step set per launch); ids [steps][n]. */
static bool sample_runs(const float *dl, int64_t n, int64_t V, oct_cuda_sample_params *pp,
                        int steps, int32_t *ids, float *lp)
{
    oct_cuda_sample_params *dp = dev_up(NULL, (size_t)n * sizeof *pp);
    int32_t *did = dev_up(NULL, (size_t)n * 4);
    float *dlp = dev_up(NULL, (size_t)n * 4);
    bool ok = dp && did && dlp;
    for (int s = 0; ok && s < steps; s++) {
        for (int64_t i = 0; i < n; i++)
            pp[i].step = (uint64_t)s;
        ok = oct_cuda_memcpy_h2d(dp, pp, (size_t)n * sizeof *pp) == OCT_OK &&
             oct_cuda_sample(dl, n, V, dp, did, dlp, NULL, 0, NULL) == OCT_OK &&
             dev_down(ids + (size_t)s * (size_t)n, did, (size_t)n * 4) &&
             (!lp || s > 0 || dev_down(lp, dlp, (size_t)n * 4));
    }
    oct_cuda_free(dp);
    oct_cuda_free(did);
    oct_cuda_free(dlp);
    return ok;
}

static void test_sample(void)
{
    const int64_t V = VOCAB, n = 8;
    float *lg = malloc((size_t)(n * V) * 4), *prob = malloc((size_t)V * 4);
    int32_t *idx = malloc((size_t)V * 4);
    unsigned char *inset = malloc((size_t)V);
    REQUIRE(lg && prob && idx && inset);
    for (int64_t i = 0; i < n * V; i++)
        lg[i] = rng_normal() * 3.0f;
    lg[0 * V + 70000] = lg[0 * V + 500] = 40.0f; /* a tie for the argmax: 500 wins */
    for (int64_t v = 100; v < 110; v++)          /* row 7: ten tied leaders, top-k 3 */
        lg[7 * V + v] = 30.0f;
    /* greedy rows 0-1, then filtered ones */
    oct_cuda_sample_params pp[8] = {
        {0.0f, 1.0f, 0.0f, 0, 1, 0, 0},  {0.0f, 0.5f, 0.1f, 10, 2, 0, 1},
        {0.7f, 1.0f, 0.0f, 50, 3, 0, 2}, {1.0f, 0.9f, 0.0f, 0, 4, 0, 3},
        {1.3f, 1.0f, 0.05f, 0, 5, 0, 4}, {0.8f, 0.8f, 0.02f, 40, 6, 0, 5},
        {1.0f, 1.0f, 0.0f, 1, 7, 0, 6}, /* top-k 1 = greedy */
        {1.0f, 1.0f, 0.0f, 3, 8, 0, 7},
    };
    float *dl = dev_up(lg, (size_t)(n * V) * 4);
    REQUIRE(dl);
    const int steps = quick ? 3 : 40;
    int32_t *ids = malloc((size_t)(steps * n) * 4);
    float lp[8];
    REQUIRE(ids);
    REQUIRE(sample_runs(dl, n, V, pp, steps, ids, lp));
    /* tolerance: greedy ids equal; a filtered row's every pick inside
     * sampler.c's kept set; logprob within 1e-4 of the double log-softmax */
    for (int64_t r = 0; r < n; r++) {
        const float *l = lg + r * V;
        int32_t best = 0;
        for (int64_t v = 1; v < V; v++)
            if (l[v] > l[best])
                best = (int32_t)v;
        double se = 0.0;
        for (int64_t v = 0; v < V; v++)
            se += exp((double)l[v] - (double)l[best]);
        double lref = (double)l[ids[r]] - (double)l[best] - log(se);
        CHECKF(fabs((double)lp[r] - lref) <= 1e-4 * fmax(1.0, fabs(lref)),
               "sample row %lld: logprob %.6g, reference %.6g (tolerance 1e-4)", (long long)r,
               (double)lp[r], lref);
        if (pp[r].temperature == 0.0f) {
            for (int s = 0; s < steps; s++)
                CHECKF(ids[s * n + r] == best, "greedy row %lld: id %d, argmax %d", (long long)r,
                       ids[s * n + r], best);
            continue;
        }
        double total;
        int64_t k = sample_set_ref(l, V, pp[r].temperature, pp[r].top_k, pp[r].top_p, pp[r].min_p,
                                   prob, idx, &total);
        memset(inset, 0, (size_t)V);
        for (int64_t i = 0; i < k; i++)
            inset[idx[i]] = 1;
        int64_t outside = 0, distinct = 0;
        for (int s = 0; s < steps; s++)
            outside += !inset[ids[s * n + r]];
        for (int s = 0; s < steps; s++) {
            bool seen = false;
            for (int s2 = 0; s2 < s; s2++)
                seen |= ids[s2 * n + r] == ids[s * n + r];
            distinct += !seen;
        }
        CHECKF(outside == 0, "sample row %lld: %lld of %d picks outside the kept set of %lld",
               (long long)r, (long long)outside, steps, (long long)k);
        if (r == 6)
            CHECKF(ids[r] == best, "top-k 1: id %d, argmax %d", ids[r], best);
        printf("  sample row %lld (T %g, top-k %d, top-p %g, min-p %g): kept set %lld, %d picks "
               "inside, %lld distinct\n",
               (long long)r, (double)pp[r].temperature, pp[r].top_k, (double)pp[r].top_p,
               (double)pp[r].min_p, (long long)k, steps, (long long)distinct);
    }
    /* greedy over rows of an odd length (VOCAB - 1): row 0 aligned with a tail,
     * the others off the 16-byte alignment of the vector loads */
    const int64_t V2 = VOCAB - 1;
    oct_cuda_sample_params gp[4];
    for (int r = 0; r < 4; r++)
        gp[r] = (oct_cuda_sample_params){0.0f, 1.0f, 0.0f, 0, (uint64_t)(9 + r), 0, (uint64_t)r};
    lg[V2 - 1] = 50.0f; /* row 0: the max in the tail past the vector loads, its last id */
    float *dl2 = dev_up(lg, (size_t)(4 * V2) * 4);
    REQUIRE(dl2);
    REQUIRE(sample_runs(dl2, 4, V2, gp, 1, ids, NULL));
    for (int64_t r = 0; r < 4; r++) {
        const float *l = lg + r * V2;
        int32_t best = 0;
        for (int64_t v = 1; v < V2; v++)
            if (l[v] > l[best])
                best = (int32_t)v;
        CHECKF(ids[r] == best, "greedy row %lld of %lld logits: id %d, argmax %d", (long long)r,
               (long long)V2, ids[r], best);
    }
    oct_cuda_free(dl2);
    oct_cuda_free(dl);
    free(lg);
    free(ids);

    /* frequencies: 8 live ids (logits log p_i), the rest far below; 128 rows x 50
     * steps; each id's frequency within 5 sigma + 0.005 of its probability under
     * the filters (plain, top-k 5, top-p 0.7) */
    const int64_t nr = quick ? 4 : 128;
    const int fs = quick ? 2 : 50;
    const float live_p[8] = {0.3f, 0.2f, 0.15f, 0.12f, 0.1f, 0.08f, 0.04f, 0.01f};
    const int32_t live_id[8] = {9, 100000, 5, 77777, 128255, 0, 4242, 60000};
    float *lf = malloc((size_t)(nr * V) * 4);
    int32_t *fid = malloc((size_t)(fs * nr) * 4);
    oct_cuda_sample_params *fp = malloc((size_t)nr * sizeof *fp);
    REQUIRE(lf && fid && fp);
    for (int64_t r = 0; r < nr; r++) {
        for (int64_t v = 0; v < V; v++)
            lf[r * V + v] = -60.0f;
        for (int i = 0; i < 8; i++)
            lf[r * V + live_id[i]] = logf(live_p[i]);
    }
    float *dlf = dev_up(lf, (size_t)(nr * V) * 4);
    REQUIRE(dlf);
    const struct {
        int32_t top_k;
        float top_p;
        int keep; /* live ids kept, by descending probability */
    } fcases[3] = {{0, 1.0f, 8}, {5, 1.0f, 5}, {0, 0.7f, 4}};
    for (int fc = 0; fc < 3; fc++) {
        for (int64_t r = 0; r < nr; r++)
            fp[r] = (oct_cuda_sample_params){
                1.0f, fcases[fc].top_p, 0.0f, fcases[fc].top_k, 1234u + (uint64_t)fc,
                0,    (uint64_t)r};
        REQUIRE(sample_runs(dlf, nr, V, fp, fs, fid, NULL));
        double norm = 0.0;
        for (int i = 0; i < fcases[fc].keep; i++)
            norm += (double)live_p[i];
        const double N = (double)(fs * nr);
        double worst = 0.0;
        int64_t other = 0;
        for (int i = 0; i < 8; i++) {
            int64_t cnt = 0;
            for (int64_t j = 0; j < fs * nr; j++)
                cnt += fid[j] == live_id[i];
            double pe = i < fcases[fc].keep ? (double)live_p[i] / norm : 0.0;
            double f = (double)cnt / N, tol = 5.0 * sqrt(pe * (1.0 - pe) / N) + 0.005;
            CHECKF(quick || fabs(f - pe) <= tol,
                   "sample freq case %d id %d: %.4f, expected %.4f (tolerance 5 sigma + 0.005 = "
                   "%.4f)",
                   fc, live_id[i], f, pe, tol);
            worst = fabs(f - pe) > worst ? fabs(f - pe) : worst;
        }
        for (int64_t j = 0; j < fs * nr; j++) {
            bool live = false;
            for (int i = 0; i < 8; i++)
                live |= fid[j] == live_id[i];
            other += !live;
        }
        CHECKF(other == 0, "sample freq case %d: %lld picks of dead ids", fc, (long long)other);
        printf("  sample frequencies (top-k %d, top-p %g), %d draws: max |freq - p| %.4f\n",
               fcases[fc].top_k, (double)fcases[fc].top_p, fs * (int)nr, worst);
    }
    /* a draw is named by (seed, step, stream), not by its row: rows 0 and 3
     * with one key pick alike at every step, row 1 (another stream) does not */
    for (int64_t r = 0; r < 4; r++) /* nr >= 4 */
        fp[r] = (oct_cuda_sample_params){1.0f, 1.0f, 0.0f, 0, 77, 0, r == 1 ? 6u : 5u};
    REQUIRE(sample_runs(dlf, 4, V, fp, fs, fid, NULL));
    int64_t same = 0, differ = 0;
    for (int s = 0; s < fs; s++) {
        same += fid[s * 4] == fid[s * 4 + 3];
        differ += fid[s * 4] != fid[s * 4 + 1];
    }
    CHECKF(same == fs && (quick || differ > 0),
           "sample streams: one key picked alike %lld of %d times, two keys differed %lld times",
           (long long)same, fs, (long long)differ);
    oct_cuda_free(dlf);
    free(lf);
    free(fid);
    free(fp);
    free(prob);
    free(idx);
    free(inset);
}

static void test_bad_shapes(void)
{
    /* every call returns an error status (and a message), none crashes */
    void *d = NULL;
    REQUIRE(oct_cuda_malloc(&d, 1 << 20) == OCT_OK);
    oct_cuda_act a = {OCT_CUDA_ACT_BF16, d, d, d, 0.0f, 1.0f, NULL};
    oct_cuda_act bad_kind = {9, d, d, d, 0.0f, 1.0f, NULL};
    oct_cuda_act bad_static = {OCT_CUDA_ACT_FP8_STATIC, d, d, d, 0.0f, 0.0f, NULL};
    CHECK(oct_cuda_embed(d, -1, d, 10, 10, 1.0f, d, NULL) == OCT_ERR_INVALID_ARG);
    CHECK(oct_cuda_embed(d, 1, d, 0, 10, 1.0f, d, NULL) == OCT_ERR_INVALID_ARG);
    CHECK(oct_cuda_rmsnorm(d, NULL, 1.0f, d, NULL, 1, 0, EPS, &a, NULL) == OCT_ERR_INVALID_ARG);
    CHECK(oct_cuda_rmsnorm(d, d, 1.0f, d, d, 1, 16, EPS, &a, NULL) == OCT_ERR_INVALID_ARG);
    CHECK(oct_cuda_rmsnorm(d, NULL, 1.0f, d, NULL, 1, 16, EPS, &bad_kind, NULL) ==
          OCT_ERR_INVALID_ARG);
    CHECK(oct_cuda_rmsnorm(d, NULL, 1.0f, d, NULL, 1, 16, EPS, &bad_static, NULL) ==
          OCT_ERR_INVALID_ARG);
    CHECK(oct_cuda_rmsnorm(d, NULL, 1.0f, d, NULL, 1, 16, EPS, NULL, NULL) == OCT_ERR_INVALID_ARG);
    CHECK(oct_cuda_silu_mul(NULL, 1, 16, &a, NULL) == OCT_ERR_INVALID_ARG);
    CHECK(oct_cuda_silu_mul(d, 1, -4, &a, NULL) == OCT_ERR_INVALID_ARG);
    CHECK(oct_cuda_rope_qk(d, 1, 4, 2, 7, d, d, NULL, NULL, EPS, NULL) == OCT_ERR_UNSUPPORTED);
    CHECK(oct_cuda_rope_qk(d, 1, 4, 2, 1024, d, d, NULL, NULL, EPS, NULL) == OCT_ERR_UNSUPPORTED);
    CHECK(oct_cuda_rope_qk(d, -2, 4, 2, 64, d, d, NULL, NULL, EPS, NULL) == OCT_ERR_INVALID_ARG);
    CHECK(oct_cuda_kv_store(d, 1, 4, 2, 64, d, 16, 7, d, d, 1.0f, 1.0f, NULL) ==
          OCT_ERR_INVALID_ARG);
    CHECK(oct_cuda_kv_store(d, 1, 4, 2, 64, d, 0, OCT_CUDA_KV_BF16, d, d, 1.0f, 1.0f, NULL) ==
          OCT_ERR_INVALID_ARG);
    CHECK(oct_cuda_kv_store(d, 1, 4, 2, 64, d, 16, OCT_CUDA_KV_E4M3, d, d, 0.0f, 1.0f, NULL) ==
          OCT_ERR_INVALID_ARG);
    CHECK(oct_cuda_attention(d, 1, 6, 4, 64, d, d, d, 4, 16, OCT_CUDA_KV_BF16, d, d, 1, 1, 1, 0, 64,
                             NULL, 0, NULL, 0, d, NULL, NULL, NULL, 0,
                             NULL) == OCT_ERR_INVALID_ARG); /* 6 % 4 */
    CHECK(oct_cuda_attention(d, 1, 8, 4, 260, d, d, d, 4, 16, OCT_CUDA_KV_BF16, d, d, 1, 1, 1, 0,
                             64, NULL, 0, NULL, 0, d, NULL, NULL, NULL, 0,
                             NULL) == OCT_ERR_UNSUPPORTED); /* d > 256 */
    CHECK(oct_cuda_attention(d, 1, 8, 4, 64, d, d, d, 4, 16, OCT_CUDA_KV_BF16, d, d, 1, 1, 1, 0,
                             100, NULL, 0, NULL, 0, d, NULL, NULL, NULL, 0,
                             NULL) == OCT_ERR_INVALID_ARG); /* ctx > 4 x 16 */
    CHECK(oct_cuda_attention(d, 4, 8, 4, 64, d, d, d, 200, 16, OCT_CUDA_KV_BF16, d, d, 1, 1, 1, 0,
                             3000, NULL, 0, NULL, 0, d, NULL, NULL, NULL, 0,
                             NULL) == OCT_ERR_INVALID_ARG); /* no workspace */
    CHECK(oct_cuda_attention(d, 1, 8, 4, 64, d, d, d, 4, 16, 5, d, d, 1, 1, 1, 0, 64, NULL, 0, NULL,
                             0, d, NULL, NULL, NULL, 0, NULL) == OCT_ERR_INVALID_ARG);
    /* tile lists: more tiles or decode rows than rows, a missing list */
    CHECK(oct_cuda_attention(d, 4, 8, 4, 64, d, d, d, 4, 16, OCT_CUDA_KV_BF16, d, d, 1, 1, 1, 0, 64,
                             d, 5, d, 0, d, NULL, NULL, NULL, 0, NULL) == OCT_ERR_INVALID_ARG);
    CHECK(oct_cuda_attention(d, 4, 8, 4, 64, d, d, d, 4, 16, OCT_CUDA_KV_BF16, d, d, 1, 1, 1, 0, 64,
                             d, 1, d, -1, d, NULL, NULL, NULL, 0, NULL) == OCT_ERR_INVALID_ARG);
    CHECK(oct_cuda_attention(d, 4, 8, 4, 64, d, d, d, 4, 16, OCT_CUDA_KV_BF16, d, d, 1, 1, 1, 0, 64,
                             NULL, 1, d, 1, d, NULL, NULL, NULL, 0, NULL) == OCT_ERR_INVALID_ARG);
    CHECK(oct_cuda_attention(d, 4, 8, 4, 64, d, d, d, 4, 16, OCT_CUDA_KV_BF16, d, d, 1, 1, 1, 0, 64,
                             d, 1, NULL, 2, d, NULL, NULL, NULL, 0, NULL) == OCT_ERR_INVALID_ARG);
    CHECK(oct_cuda_gemm_bf16(NULL, 1, 16, 16, d, d, NULL, 1.0f, d, false, NULL) ==
          OCT_ERR_INVALID_ARG);
    CHECK(oct_cuda_sample(d, 1, 0, d, d, NULL, NULL, 0, NULL) == OCT_ERR_INVALID_ARG);
    CHECK(oct_cuda_sample(NULL, 1, 10, d, d, NULL, NULL, 0, NULL) == OCT_ERR_INVALID_ARG);
    CHECK(oct_cuda_ops_last_error()[0] != '\0');
    /* zero rows: nothing to do */
    CHECK_OK(oct_cuda_rmsnorm(NULL, NULL, 1.0f, NULL, NULL, 0, 16, EPS, &a, NULL));
    CHECK_OK(oct_cuda_sample(NULL, 0, 10, NULL, NULL, NULL, NULL, 0, NULL));
    /* the device is still healthy */
    char byte;
    CHECK(oct_cuda_memcpy_d2h(&byte, d, 1) == OCT_OK);
    oct_cuda_free(d);
}

int main(void)
{
    quick = getenv("OCTET_TEST_QUICK") != NULL;
    if (!oct_cuda_available()) {
        printf("skipped: no GPU\n");
        return testlib_finish();
    }
    RUN(test_embed);
    RUN(test_rmsnorm);
    RUN(test_silu_mul);
    RUN(test_rope);
    RUN(test_rope_store);
    RUN(test_attention);
    if (!quick)
        RUN(test_attention_long);
    RUN(test_gemm_bf16);
    RUN(test_sample);
    RUN(test_bad_shapes);
    return testlib_finish();
}

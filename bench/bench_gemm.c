/* bench_gemm.c — `octet bench gemm [--m 1,256] [--shapes KxN,...] [--threads N]
 * [--json] [--min-ms T]`: linear-layer throughput of every CPU path in one run.
 *
 * Variants (y[M,N] = x[M,K] W[N,K]^T, f32 activations in and out):
 *   bf16           our BF16 x BF16 path (bf16 weights, activations rounded to bf16)
 *   f32_openblas   OpenBLAS sgemm / sgemv on f32 weights (an outside baseline)
 *   fp8_prequant   FP8 W8A8, activations quantized per token before timing
 *   fp8_dyn_token  FP8 W8A8 with dynamic per-token quantization inside the call
 *   fp8_w8a16      FP8 weights (per channel), bf16 activations
 *   fp8_block      128x128 weight blocks, dynamic 1x128 activation groups
 * Each variant prepares enough copies of its weights that one rotation streams
 * >= 512 MB, so small-M timings measure DRAM, not the 32 MB L3; calls rotate
 * through the copies.  A read-bandwidth probe (2 x sum over 1 GB) runs first,
 * so M = 1 rows show weight bytes per second as a share of it.  Reported time
 * is the median call of >= 3 calls and >= --min-ms (default 300) per case.
 */
#include <cblas.h>
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "octet.h"
#include "core/core.h"

#define STREAM_BYTES ((size_t)512 << 20)

enum { V_BF16, V_F32, V_PREQ, V_DYN, V_W8A16, V_BLOCK, V_COUNT };
static const char *const k_vname[V_COUNT] = {"bf16",          "f32_openblas", "fp8_prequant",
                                             "fp8_dyn_token", "fp8_w8a16",    "fp8_block"};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t g_rng = 88172645463325252ull;
static uint32_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}

__attribute__((target("avx2"))) static double sum_avx2(const float *p, size_t n)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 32 <= n; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
        a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    float t[8];
    _mm256_storeu_ps(t, s);
    return (double)(t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7]);
}

/* Read-only DRAM bandwidth, GB/s, with `threads` threads (best of 5). */
static double bandwidth_probe(int threads)
{
    size_t bytes = (size_t)1 << 30, n = bytes / 4;
    float *buf = oct_malloc_aligned(bytes);
    if (!buf)
        return 0;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t i = 0; i < n; i++)
        buf[i] = 1.0f;
    double best = 1e30, sink = 0;
    bool avx2 = oct_cpu_features_get()->avx2;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_s();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
        {
            int id = omp_get_thread_num(), nt = omp_get_num_threads();
            size_t c0 = n / 32 * (size_t)id / (size_t)nt * 32;
            size_t c1 = n / 32 * (size_t)(id + 1) / (size_t)nt * 32;
            if (avx2) {
                sink += sum_avx2(buf + c0, c1 - c0);
            } else {
                float s = 0;
                for (size_t i = c0; i < c1; i++)
                    s += buf[i];
                sink += (double)s;
            }
        }
        double t = now_s() - t0;
        best = t < best ? t : best;
    }
    oct_free_aligned(buf);
    if (sink == 12345.0)
        fprintf(stderr, " ");
    return (double)bytes / best / 1e9;
}

typedef struct shape {
    int64_t k, n;
} shape;

typedef struct result {
    int64_t m, k, n;
    int v;
    double us;
} result;

static int parse_list(const char *s, int64_t *out, int cap)
{
    int cnt = 0;
    while (*s && cnt < cap) {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s || v <= 0)
            return -1;
        out[cnt++] = v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return cnt;
}

static int parse_shapes(const char *s, shape *out, int cap)
{
    int cnt = 0;
    while (*s && cnt < cap) {
        char *end;
        long long k = strtoll(s, &end, 10);
        if (end == s || (*end != 'x' && *end != 'X'))
            return -1;
        s = end + 1;
        long long n = strtoll(s, &end, 10);
        if (end == s || k <= 0 || n <= 0)
            return -1;
        out[cnt].k = k;
        out[cnt++].n = n;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return cnt;
}

/* Everything one variant needs for one shape. */
typedef struct prepared {
    int copies;
    oct_linear **lin; /* [copies] */
    float **w32;      /* [copies] f32 weights (OpenBLAS) */
} prepared;

static void free_prepared(prepared *p)
{
    for (int c = 0; c < p->copies; c++) {
        if (p->lin)
            oct_linear_free(p->lin[c]);
        if (p->w32)
            oct_free_aligned(p->w32[c]);
    }
    free(p->lin);
    free(p->w32);
    memset(p, 0, sizeof *p);
}

static bool prepare(int v, const shape *s, const uint8_t *w8, const float *scales,
                    const float *bscales, const uint16_t *w16, prepared *p)
{
    size_t nk = (size_t)(s->n * s->k);
    size_t per = v == V_F32 ? nk * 4 : v == V_BF16 ? nk * 2 : nk;
    p->copies = (int)((STREAM_BYTES + per - 1) / per);
    if (p->copies < 1)
        p->copies = 1;
    if (v == V_F32) {
        p->w32 = calloc((size_t)p->copies, sizeof *p->w32);
        for (int c = 0; c < p->copies; c++) {
            p->w32[c] = oct_malloc_aligned(nk * 4);
            if (!p->w32[c])
                return false;
#pragma omp parallel for schedule(static)
            for (size_t i = 0; i < nk; i++)
                p->w32[c][i] = oct_bf16_to_f32(w16[i]);
        }
        return true;
    }
    oct_linear_desc d = {.name = k_vname[v], .n = s->n, .k = s->k};
    const void *w = w8, *ws = scales;
    switch (v) {
    case V_BF16:
        d.weight_type = OCT_WEIGHT_BF16;
        w = w16;
        ws = NULL;
        break;
    case V_PREQ:
    case V_DYN:
        d.weight_scale = OCT_SCALE_ROW;
        d.act = OCT_ACT_DYNAMIC_TOKEN;
        break;
    case V_W8A16: d.weight_scale = OCT_SCALE_ROW; break;
    case V_BLOCK:
        d.weight_scale = OCT_SCALE_BLOCK128;
        d.act = OCT_ACT_GROUP128;
        ws = bscales;
        break;
    }
    p->lin = calloc((size_t)p->copies, sizeof *p->lin);
    const oct_linear_kernel *kern = NULL; /* the CPU kernels: this is the CPU benchmark */
    for (int c = 0; c < p->copies; c++) {
        oct_error err;
        if ((!kern && oct_linear_select_host(&d, &kern, &err) != OCT_OK) ||
            oct_linear_create(&d, kern, w, ws, NULL, &p->lin[c], &err) != OCT_OK) {
            fprintf(stderr, "bench gemm: %s\n", err.message);
            return false;
        }
    }
    return true;
}

static int run_one(int v, const prepared *p, int c, const shape *s, int64_t m, const float *x,
                   const uint8_t *xq, const float *xs, float *y)
{
    if (v == V_F32) {
        if (m == 1)
            cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)s->n, (int)s->k, 1.0f, p->w32[c],
                        (int)s->k, x, 1, 0.0f, y, 1);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)s->n, (int)s->k, 1.0f,
                        x, (int)s->k, p->w32[c], (int)s->k, 0.0f, y, (int)s->n);
        return 0;
    }
    oct_error err;
    oct_status st = v == V_PREQ ? oct_linear_forward_q(p->lin[c], m, xq, OCT_SCALE_ROW, xs, y, &err)
                                : oct_linear_forward(p->lin[c], m, x, y, &err);
    if (st != OCT_OK) {
        fprintf(stderr, "bench gemm: %s\n", err.message);
        return -1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double time_case(int v, const prepared *p, const shape *s, int64_t m, const float *x,
                        const uint8_t *xq, const float *xs, float *y, double min_s)
{
    double times[256];
    int n = 0, c = 0;
    if (run_one(v, p, c, s, m, x, xq, xs, y) != 0) /* warm-up */
        return -1;
    double start = now_s();
    while (n < 256 && (n < 3 || now_s() - start < min_s)) {
        c = (c + 1) % p->copies;
        double t0 = now_s();
        run_one(v, p, c, s, m, x, xq, xs, y);
        times[n++] = now_s() - t0;
    }
    qsort(times, (size_t)n, sizeof(double), cmp_double);
    return times[n / 2] * 1e6;
}

int bench_gemm_main(int argc, char **argv)
{
    int64_t ms[32] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048};
    int n_m = 12;
    shape shapes[16] = {{4096, 6144}, {4096, 4096}, {4096, 28672}, {14336, 4096}};
    int n_shapes = 4, threads = 0;
    bool json = false;
    double min_s = 0.3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (strcmp(a, "--m") == 0 && val) {
            n_m = parse_list(val, ms, 32);
            i++;
        } else if (strcmp(a, "--shapes") == 0 && val) {
            n_shapes = parse_shapes(val, shapes, 16);
            i++;
        } else if (strcmp(a, "--threads") == 0 && val) {
            threads = atoi(val);
            i++;
        } else if (strcmp(a, "--min-ms") == 0 && val) {
            min_s = atof(val) / 1000.0;
            i++;
        } else {
            fprintf(stderr, "usage: octet bench gemm [--m 1,256] [--shapes KxN,...] "
                            "[--threads N] [--json] [--min-ms T]\n");
            return strcmp(a, "--help") == 0 ? 0 : 2;
        }
        if (n_m <= 0 || n_shapes <= 0) {
            fprintf(stderr, "bench gemm: bad list for %s\n", a);
            return 2;
        }
    }
    if (threads > 0)
        oct_threads_set(threads);
    threads = oct_threads_get();
    openblas_set_num_threads(threads);
    int64_t max_m = 0, max_k = 0;
    for (int i = 0; i < n_m; i++)
        max_m = ms[i] > max_m ? ms[i] : max_m;
    for (int i = 0; i < n_shapes; i++)
        max_k = shapes[i].k > max_k ? shapes[i].k : max_k;

    double bw = bandwidth_probe(threads);
    if (!json)
        printf("octet bench gemm: %d threads, cpu %s, read bandwidth %.1f GB/s\n", threads,
               oct_cpu_level_str(oct_cpu_level_get()), bw);

    result *res = calloc((size_t)(n_shapes * n_m * V_COUNT), sizeof *res);
    int n_res = 0;
    for (int si = 0; si < n_shapes; si++) {
        const shape *s = &shapes[si];
        size_t nk = (size_t)(s->n * s->k), mk = (size_t)(max_m * s->k);
        /* Random weights: bf16 in [-1, 1), FP8 codes with per-channel scales. */
        uint8_t *w8 = oct_malloc(nk);
        uint16_t *w16 = oct_malloc(nk * 2);
        float *scales = oct_malloc((size_t)s->n * 4);
        float *bscales = oct_malloc((size_t)((s->n + 127) / 128 * ((s->k + 127) / 128)) * 4);
        float *x = oct_malloc(mk * 4), *xs = oct_malloc((size_t)max_m * 4);
        uint8_t *xq = oct_malloc(mk);
        float *y = oct_malloc((size_t)(max_m * s->n) * 4);
        if (!w8 || !w16 || !scales || !bscales || !x || !xs || !xq || !y) {
            fprintf(stderr, "bench gemm: out of memory\n");
            return 1;
        }
        for (size_t i = 0; i < nk; i++) {
            uint8_t c = (uint8_t)rnd();
            w8[i] = (c & 0x7F) == 0x7F ? 0 : c;
            w16[i] = (uint16_t)(0x3C00u | (rnd() & 0x83FFu));
        }
        for (int64_t i = 0; i < s->n; i++)
            scales[i] = 0.001f;
        for (int64_t i = 0; i < (s->n + 127) / 128 * ((s->k + 127) / 128); i++)
            bscales[i] = 0.001f;
        for (size_t i = 0; i < mk; i++)
            x[i] = (float)(rnd() % 2001) / 1000.0f - 1.0f;
        oct_quant_rows(OCT_FP8_E4M3FN, x, max_m, s->k, 0.0f, xq, xs);
        for (int v = 0; v < V_COUNT; v++) {
            prepared p;
            memset(&p, 0, sizeof p);
            if (!prepare(v, s, w8, scales, bscales, w16, &p)) {
                free_prepared(&p);
                fprintf(stderr, "bench gemm: cannot prepare %s\n", k_vname[v]);
                return 1;
            }
            for (int mi = 0; mi < n_m; mi++) {
                double us = time_case(v, &p, s, ms[mi], x, xq, xs, y, min_s);
                if (us < 0)
                    return 1;
                res[n_res++] = (result){ms[mi], s->k, s->n, v, us};
            }
            free_prepared(&p);
        }
        oct_free(w8);
        oct_free(w16);
        oct_free(scales);
        oct_free(bscales);
        oct_free(x);
        oct_free(xs);
        oct_free(xq);
        oct_free(y);
    }

    if (json) {
        printf("[");
        for (int i = 0; i < n_res; i++)
            printf(
                "%s\n {\"M\": %lld, \"K\": %lld, \"N\": %lld, \"variant\": \"%s\", \"us\": %.2f, "
                "\"bandwidth_gbs\": %.2f}",
                i ? "," : "", (long long)res[i].m, (long long)res[i].k, (long long)res[i].n,
                k_vname[res[i].v], res[i].us, bw);
        printf("\n]\n");
    } else {
        printf("%6s %12s %-14s %11s %9s %9s %7s %8s\n", "M", "K->N", "variant", "us", "GFLOP/s",
               "wGB/s", "%bw", "vs_bf16");
        for (int i = 0; i < n_res; i++) {
            const result *r = &res[i];
            double bf = 0;
            for (int j = 0; j < n_res; j++)
                if (res[j].m == r->m && res[j].k == r->k && res[j].n == r->n && res[j].v == V_BF16)
                    bf = res[j].us;
            double wbytes = (double)(r->k * r->n) * (r->v == V_F32 ? 4 : r->v == V_BF16 ? 2 : 1);
            double gbs = wbytes / r->us / 1e3;
            char shp[32];
            snprintf(shp, sizeof shp, "%lld->%lld", (long long)r->k, (long long)r->n);
            printf("%6lld %12s %-14s %11.1f %9.1f %9.1f %6.0f%% %8.2f\n", (long long)r->m, shp,
                   k_vname[r->v], r->us, 2.0 * (double)(r->m * r->k * r->n) / r->us / 1e3, gbs,
                   100.0 * gbs / bw, bf > 0 ? bf / r->us : 0.0);
        }
    }
    free(res);
    return 0;
}

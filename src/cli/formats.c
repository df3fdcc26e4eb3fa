/* formats.c — `octet formats`: the FP8 formats, and a quantize/dequantize
 * round trip of every scheme on a synthetic weight matrix; `octet cpu`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"

#define CEIL_DIV(a, b) (((a) + (b)-1) / (b))

static const oct_fp8_format k_all[] = {OCT_FP8_E4M3FN, OCT_FP8_E5M2, OCT_FP8_E4M3FNUZ,
                                       OCT_FP8_E5M2FNUZ, OCT_FP8_E8M0FNU};

static void print_formats(void)
{
    printf("%-9s %-5s %4s %13s %13s %13s %5s %5s %s\n", "format", "S/E/M", "bias", "max",
           "min normal", "min subnormal", "NaNs", "Infs", "-0");
    static const char *sem[] = {"1/4/3", "1/5/2", "1/4/3", "1/5/2", "0/8/0"};
    static const int bias[] = {7, 15, 8, 16, 127};
    static const int man[] = {3, 2, 3, 2, 0};
    for (size_t i = 0; i < sizeof k_all / sizeof k_all[0]; i++) {
        oct_fp8_format f = k_all[i];
        int nans = 0, infs = 0;
        float min_sub = INFINITY;
        for (int c = 0; c < 256; c++) {
            float v = oct_fp8_decode(f, (uint8_t)c);
            nans += isnan(v) != 0;
            infs += isinf(v) != 0;
            if (v > 0.0f && v < min_sub)
                min_sub = v;
        }
        float min_normal = f == OCT_FP8_E8M0FNU ? min_sub : ldexpf(1.0f, 1 - bias[i]);
        bool neg_zero = f == OCT_FP8_E4M3FN || f == OCT_FP8_E5M2;
        printf("%-9s %-5s %4d %13.6g %13.6g %13.6g %5d %5d %s\n", oct_fp8_format_str(f), sem[i],
               bias[i], (double)oct_fp8_max(f), (double)min_normal,
               man[i] ? (double)min_sub : (double)NAN, nans, infs, neg_zero ? "yes" : "no");
    }
}

/* Deterministic Gaussian weights with a few large outliers (like real LLM
 * linear layers). */
static void make_weights(float *w, int64_t n, uint64_t seed)
{
    for (int64_t i = 0; i < n; i += 2) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        double u1 = ((double)(seed >> 11) + 0.5) / 9007199254740992.0;
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        double u2 = ((double)(seed >> 11) + 0.5) / 9007199254740992.0;
        double r = sqrt(-2.0 * log(u1)) * 0.02;
        w[i] = (float)(r * cos(6.283185307179586 * u2));
        if (i + 1 < n)
            w[i + 1] = (float)(r * sin(6.283185307179586 * u2));
    }
    for (int64_t i = 0; i < n; i += 9973)
        w[i] *= 12.0f;
}

typedef struct row {
    const char *scheme;
    const char *scales;
    oct_quant_error err;
    double bytes;
    double ms;
} row;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int round_trip(int64_t N, int64_t K)
{
    size_t n = (size_t)(N * K);
    float *w = malloc(n * sizeof *w), *d = malloc(n * sizeof *d);
    uint8_t *q = malloc(n), *e8 = malloc(n / 32 + 1);
    float *s = malloc((size_t)(N * K) / 16 * sizeof *s + 64);
    if (!w || !d || !q || !e8 || !s) {
        fprintf(stderr, "octet formats: out of memory\n");
        free(w), free(d), free(q), free(e8), free(s);
        return 1;
    }
    make_weights(w, (int64_t)n, 42);
    row rows[7];
    int nr = 0;
    double t0;
    char buf[7][64];

    t0 = now_ms();
    oct_quant_tensor(OCT_FP8_E4M3FN, w, n, q, s);
    rows[nr].ms = now_ms() - t0;
    oct_dequant_tensor(OCT_FP8_E4M3FN, q, n, s[0], d);
    oct_quant_error_measure(w, d, n, &rows[nr].err);
    rows[nr].scheme = "fp8_per_tensor (e4m3fn)";
    rows[nr].scales = "1 f32";
    rows[nr++].bytes = (double)n + 4;

    t0 = now_ms();
    oct_quant_rows(OCT_FP8_E4M3FN, w, N, K, 0.0f, q, s);
    rows[nr].ms = now_ms() - t0;
    oct_dequant_rows(OCT_FP8_E4M3FN, q, N, K, s, d);
    oct_quant_error_measure(w, d, n, &rows[nr].err);
    snprintf(buf[nr], sizeof buf[nr], "[%lld] f32", (long long)N);
    rows[nr].scheme = "per-channel (FP8_DYNAMIC)";
    rows[nr].scales = buf[nr];
    rows[nr++].bytes = (double)n + 4.0 * (double)N;

    t0 = now_ms();
    oct_quant_blocks(OCT_FP8_E4M3FN, w, N, K, 128, 128, q, s);
    rows[nr].ms = now_ms() - t0;
    oct_dequant_blocks(OCT_FP8_E4M3FN, q, N, K, 128, 128, s, d);
    oct_quant_error_measure(w, d, n, &rows[nr].err);
    snprintf(buf[nr], sizeof buf[nr], "[%lld,%lld] f32", (long long)CEIL_DIV(N, 128),
             (long long)CEIL_DIV(K, 128));
    rows[nr].scheme = "fp8_per_block 128x128";
    rows[nr].scales = buf[nr];
    rows[nr++].bytes = (double)n + 4.0 * (double)(CEIL_DIV(N, 128) * CEIL_DIV(K, 128));

    static const oct_mx_recipe rec[2] = {OCT_MX_OCP, OCT_MX_CT};
    static const char *rec_name[2] = {"mxfp8 1x32 (OCP recipe)", "mxfp8 1x32 (c-t recipe)"};
    for (int r = 0; r < 2; r++) {
        t0 = now_ms();
        oct_quant_mx(OCT_FP8_E4M3FN, rec[r], w, N, K, q, e8);
        rows[nr].ms = now_ms() - t0;
        oct_dequant_mx(OCT_FP8_E4M3FN, q, N, K, e8, d);
        oct_quant_error_measure(w, d, n, &rows[nr].err);
        snprintf(buf[nr], sizeof buf[nr], "[%lld,%lld] e8m0", (long long)N, (long long)(K / 32));
        rows[nr].scheme = rec_name[r];
        rows[nr].scales = buf[nr];
        rows[nr++].bytes = (double)n + (double)n / 32.0;
    }

    t0 = now_ms();
    oct_quant_tensor(OCT_FP8_E5M2, w, n, q, s);
    rows[nr].ms = now_ms() - t0;
    oct_dequant_tensor(OCT_FP8_E5M2, q, n, s[0], d);
    oct_quant_error_measure(w, d, n, &rows[nr].err);
    rows[nr].scheme = "per-tensor (e5m2)";
    rows[nr].scales = "1 f32";
    rows[nr++].bytes = (double)n + 4;

    printf("\nquantize -> dequantize round trip: synthetic %lldx%lld weight matrix "
           "(Gaussian, sigma 0.02, outliers x12), BF16 = %.1f MB\n",
           (long long)N, (long long)K, 2.0 * (double)n / 1e6);
    printf("%-26s %-16s %9s %11s %10s %9s %9s\n", "scheme", "scales", "SQNR dB", "max |err|",
           "rel Frob", "MB", "ms");
    for (int i = 0; i < nr; i++)
        printf("%-26s %-16s %9.2f %11.3g %10.4f %9.2f %9.2f\n", rows[i].scheme, rows[i].scales,
               rows[i].err.sqnr_db, rows[i].err.max_abs, rows[i].err.rel_fro, rows[i].bytes / 1e6,
               rows[i].ms);
    free(w), free(d), free(q), free(e8), free(s);
    return 0;
}

int cli_formats(int argc, char **argv)
{
    int64_t N = 2048, K = 2048;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
            N = K = atoll(argv[++i]);
        } else {
            fprintf(stderr, "usage: octet formats [--size N]\n");
            return 2;
        }
    }
    if (N < 32 || N % 32 != 0 || N > 16384) {
        fprintf(stderr, "octet formats: --size must be a multiple of 32 in [32, 16384]\n");
        return 2;
    }
    print_formats();
    return round_trip(N, K);
}

int cli_cpu(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    const oct_cpu_features *f = oct_cpu_features_get();
    printf("avx2=%d fma=%d f16c=%d avx512f=%d avx512bw=%d avx512vl=%d avx512dq=%d "
           "avx512bf16=%d avx512vbmi=%d neon=%d\n",
           f->avx2, f->fma, f->f16c, f->avx512f, f->avx512bw, f->avx512vl, f->avx512dq,
           f->avx512bf16, f->avx512vbmi, f->neon);
    printf("max level: %s, active level: %s, threads: %d\n", oct_cpu_level_str(oct_cpu_level_max()),
           oct_cpu_level_str(oct_cpu_level_get()), oct_threads_get());
    return 0;
}

/* bench_fp8.c — `octet bench fp8 [--n N] [--threads T] [--json]`: FP8 conversion
 * and quantization throughput per path (ref, avx2, avx512 as this CPU has them)
 * next to a memcpy of the f32 array measured in the same run.
 *
 * GB/s counts the bytes the operation reads and writes once each (f32 -> fp8:
 * 5 bytes per element; bf16/f16 -> fp8: 3; fp8 -> f32: 5; quantizers: 5 plus
 * their scales; memcpy: 2 x 4 bytes), divided by the best time of several runs.
 * The default N (64M elements, a 256 MB f32 array) is far above the 32 MB L3,
 * so this is DRAM streaming.  Conversions are single-threaded; quantizers run
 * oct_threads_set(T) OpenMP threads (default 1) and memcpy is split over the
 * same T threads, so every ratio compares like with like.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "octet.h"
#include "core/core.h"
#include "fp8/fp8_impl.h"
#include "quant/quant_impl.h"

enum {
    OP_F32_SAT,
    OP_F32_NONSAT,
    OP_BF16,
    OP_F16,
    OP_DECODE,
    OP_BF16_E5M2,
    OP_Q_TENSOR,
    OP_Q_ROWS,
    OP_Q_GROUPS,
    OP_Q_BLOCKS,
    OP_Q_MX,
    OP_P_TENSOR,
    OP_P_ROWS,
    OP_P_GROUPS,
    OP_P_BLOCKS,
    OP_P_MX,
    OP_COUNT
};

static const char *const k_op_names[OP_COUNT] = {
    "f32->e4m3fn sat",    "f32->e4m3fn nonsat",   "bf16->e4m3fn sat",    "f16->e4m3fn sat",
    "e4m3fn->f32",        "bf16->e5m2 sat",       "quant_tensor e4m3fn", "quant_rows e4m3fn",
    "quant_groups 1x128", "quant_blocks 128x128", "quant_mx e4m3fn ocp", "fused: tensor",
    "fused: rows",        "fused: groups",        "fused: blocks",       "fused: mx",
};

typedef struct bench_bufs {
    size_t n;                 /* elements */
    int64_t rows, cols;       /* n = rows * cols for the quantizers */
    float *x;                 /* [n] input */
    float *y;                 /* [n] decode output / memcpy destination */
    uint16_t *bf16;           /* [n] */
    uint16_t *f16;            /* [n] */
    uint8_t *q;               /* [n] codes */
    float *scales;            /* [n / 32 + rows] */
    uint8_t *mx_scales;       /* [n / 32] */
    const oct_fp8_impl *impl; /* the forced level's table, for the fused rows */
} bench_bufs;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t g_rng = 0x243F6A8885A308D3ull;
static uint32_t rnd32(void)
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 32);
}

/* Roughly normal activations (sum of four uniforms), sd ~ 60 so a few percent
 * exceed 448 and exercise saturation. */
static void fill_inputs(bench_bufs *b)
{
    for (size_t i = 0; i < b->n; i++) {
        float s = 0.0f;
        for (int k = 0; k < 4; k++)
            s += (float)rnd32() * (1.0f / 4294967296.0f);
        b->x[i] = (s - 2.0f) * 104.0f;
        uint32_t u;
        memcpy(&u, &b->x[i], sizeof u);
        b->bf16[i] = (uint16_t)(u >> 16);
        /* f16: random sign, exponent 1..29, mantissa: |x| in 2^-14 .. 2^15 */
        uint32_t r = rnd32();
        b->f16[i] = (uint16_t)((r & 0x83FFu) | ((1u + (r >> 16) % 29u) << 10));
    }
    memset(b->y, 0, b->n * sizeof(float));
    memset(b->q, 0, b->n);
    oct_fp8_from_f32(OCT_FP8_E4M3FN, OCT_CAST_SAT, b->x, b->q, b->n);
}

/* "fused:" rows prototype the quantizers on the fp8 table's fused entry points
 * (amax_f32, from_f32_scaled): the same scales and codes as src/quant (checked
 * before timing), with the element op and the cast in one SIMD pass. */
static float proto_dyn_scale(float amax, float qmax, float floor_)
{
    float s = amax / qmax;
    return s != s ? s : s < floor_ ? floor_ : s;
}

static void proto_tensor(const oct_fp8_impl *I, const float *x, size_t n, uint8_t *q, float *scale)
{
    float s = proto_dyn_scale(I->amax_f32(x, n), 448.0f, oct_quant_scale_floor(OCT_FP8_E4M3FN));
    *scale = s;
    I->from_f32_scaled(OCT_FP8_E4M3FN, x, q, n, 1.0f / s, false, 0.0f);
}

static void proto_groups(const oct_fp8_impl *I, const float *x, int64_t rows, int64_t cols,
                         int64_t group, uint8_t *q, float *scales)
{
    float floor_ = oct_quant_scale_floor(OCT_FP8_E4M3FN);
    int64_t ng = cols / group;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t g = 0; g < ng; g++) {
            const float *xg = x + r * cols + g * group;
            float s = proto_dyn_scale(I->amax_f32(xg, (size_t)group), 448.0f, floor_);
            scales[r * ng + g] = s;
            I->from_f32_scaled(OCT_FP8_E4M3FN, xg, q + r * cols + g * group, (size_t)group, s, true,
                               0.0f);
        }
    }
}

static void proto_blocks(const oct_fp8_impl *I, const float *w, int64_t rows, int64_t cols,
                         uint8_t *q, float *scales)
{
    int64_t nb_r = rows / 128, nb_c = cols / 128;
#pragma omp parallel for schedule(static)
    for (int64_t br = 0; br < nb_r; br++) {
        for (int64_t bc = 0; bc < nb_c; bc++) {
            float amax = 0.0f;
            for (int64_t r = br * 128; r < br * 128 + 128; r++) {
                float a = I->amax_f32(w + r * cols + bc * 128, 128);
                amax = a != a || a > amax ? a : amax; /* NaN sticks */
            }
            if (amax == amax && amax < 1e-4f)
                amax = 1e-4f;
            float s = amax / 448.0f;
            scales[br * nb_c + bc] = s;
            for (int64_t r = br * 128; r < br * 128 + 128; r++)
                I->from_f32_scaled(OCT_FP8_E4M3FN, w + r * cols + bc * 128, q + r * cols + bc * 128,
                                   128, 1.0f / s, false, 0.0f);
        }
    }
}

static void proto_mx(const oct_fp8_impl *I, const float *x, int64_t rows, int64_t cols, uint8_t *q,
                     uint8_t *scales)
{
    int64_t nb = cols / 32;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t b = 0; b < nb; b++) {
            const float *xb = x + r * cols + b * 32;
            uint8_t e = oct_quant_mx_exponent(OCT_MX_OCP, OCT_FP8_E4M3FN, I->amax_f32(xb, 32));
            scales[r * nb + b] = e;
            float s = e == 0xFF ? NAN : ldexpf(1.0f, (int)e - 127);
            I->from_f32_scaled(OCT_FP8_E4M3FN, xb, q + r * cols + b * 32, 32, s, true, 0.0f);
        }
    }
}

/* Runs op once; returns bytes counted for it. */
static double run_op(int op, bench_bufs *b)
{
    size_t n = b->n;
    double nb = (double)n;
    switch (op) {
    case OP_F32_SAT: oct_fp8_from_f32(OCT_FP8_E4M3FN, OCT_CAST_SAT, b->x, b->q, n); return 5.0 * nb;
    case OP_F32_NONSAT:
        oct_fp8_from_f32(OCT_FP8_E4M3FN, OCT_CAST_NONSAT, b->x, b->q, n);
        return 5.0 * nb;
    case OP_BF16:
        oct_fp8_from_bf16(OCT_FP8_E4M3FN, OCT_CAST_SAT, b->bf16, b->q, n);
        return 3.0 * nb;
    case OP_F16: oct_fp8_from_f16(OCT_FP8_E4M3FN, OCT_CAST_SAT, b->f16, b->q, n); return 3.0 * nb;
    case OP_DECODE: oct_fp8_to_f32(OCT_FP8_E4M3FN, b->q, b->y, n); return 5.0 * nb;
    case OP_BF16_E5M2:
        oct_fp8_from_bf16(OCT_FP8_E5M2, OCT_CAST_SAT, b->bf16, b->q, n);
        return 3.0 * nb;
    case OP_Q_TENSOR:
        oct_quant_tensor(OCT_FP8_E4M3FN, b->x, n, b->q, b->scales);
        return 5.0 * nb + 4.0;
    case OP_Q_ROWS:
        oct_quant_rows(OCT_FP8_E4M3FN, b->x, b->rows, b->cols, 0.0f, b->q, b->scales);
        return 5.0 * nb + 4.0 * (double)b->rows;
    case OP_Q_GROUPS:
        oct_quant_groups(OCT_FP8_E4M3FN, b->x, b->rows, b->cols, 128, b->q, b->scales);
        return 5.0 * nb + 4.0 * nb / 128.0;
    case OP_Q_BLOCKS:
        oct_quant_blocks(OCT_FP8_E4M3FN, b->x, b->rows, b->cols, 128, 128, b->q, b->scales);
        return 5.0 * nb + 4.0 * nb / 16384.0;
    case OP_Q_MX:
        oct_quant_mx(OCT_FP8_E4M3FN, OCT_MX_OCP, b->x, b->rows, b->cols, b->q, b->mx_scales);
        return 5.0 * nb + nb / 32.0;
    case OP_P_TENSOR: proto_tensor(b->impl, b->x, n, b->q, b->scales); return 5.0 * nb + 4.0;
    case OP_P_ROWS:
        proto_groups(b->impl, b->x, b->rows, b->cols, b->cols, b->q, b->scales);
        return 5.0 * nb + 4.0 * (double)b->rows;
    case OP_P_GROUPS:
        proto_groups(b->impl, b->x, b->rows, b->cols, 128, b->q, b->scales);
        return 5.0 * nb + 4.0 * nb / 128.0;
    case OP_P_BLOCKS:
        proto_blocks(b->impl, b->x, b->rows, b->cols, b->q, b->scales);
        return 5.0 * nb + 4.0 * nb / 16384.0;
    case OP_P_MX:
        proto_mx(b->impl, b->x, b->rows, b->cols, b->q, b->mx_scales);
        return 5.0 * nb + nb / 32.0;
    default: return 0.0;
    }
}

/* The fused prototypes give src/quant's bytes: run both once and compare
 * codes and scales (a mismatch is printed; the numbers are then meaningless). */
static int check_proto(bench_bufs *b, int lib_op, int proto_op, size_t n_scale_bytes)
{
    uint8_t *q1 = oct_malloc(b->n), *s1 = oct_malloc(n_scale_bytes);
    int bad = !q1 || !s1;
    if (!bad) {
        float *scales = b->scales;
        uint8_t *mxs = b->mx_scales;
        uint8_t *sp = lib_op == OP_Q_MX ? mxs : (uint8_t *)scales;
        run_op(lib_op, b);
        memcpy(q1, b->q, b->n);
        memcpy(s1, sp, n_scale_bytes);
        memset(b->q, 0, b->n);
        memset(sp, 0, n_scale_bytes);
        run_op(proto_op, b);
        bad = memcmp(q1, b->q, b->n) != 0 || memcmp(s1, sp, n_scale_bytes) != 0;
    }
    oct_free(q1);
    oct_free(s1);
    if (bad)
        fprintf(stderr, "octet bench fp8: '%s' does not reproduce '%s'\n", k_op_names[proto_op],
                k_op_names[lib_op]);
    return bad;
}

static void run_memcpy(bench_bufs *b, int threads)
{
    size_t bytes = b->n * sizeof(float);
    size_t per = (bytes / (size_t)threads + 63u) & ~(size_t)63u;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int t = 0; t < threads; t++) {
        size_t off = (size_t)t * per;
        if (off < bytes)
            memcpy((char *)b->y + off, (const char *)b->x + off, OCT_MIN(per, bytes - off));
    }
}

/* Best GB/s of runs until 0.6 s have passed (1 to 10 runs: the reference path
 * takes about a second per run at the default size). */
static double measure(int op, bench_bufs *b, int threads)
{
    double best = 0.0, spent = 0.0;
    for (int run = 0; run < 10 && (run == 0 || spent < 0.6); run++) {
        double t0 = now_s(), bytes;
        if (op < 0) {
            run_memcpy(b, threads);
            bytes = 2.0 * (double)(b->n * sizeof(float));
        } else {
            bytes = run_op(op, b);
        }
        double dt = now_s() - t0;
        spent += dt;
        double gbps = bytes / dt * 1e-9;
        best = gbps > best ? gbps : best;
    }
    return best;
}

static void usage(FILE *o)
{
    fprintf(o, "usage: octet bench fp8 [--n N] [--threads T] [--json]\n"
               "  --n N        elements (default 67108864, rounded down to a multiple of 524288)\n"
               "  --threads T  OpenMP threads for the quantizers and memcpy (default 1)\n"
               "  --json       print JSON instead of a table\n");
}

static const char *cpu_model(char *buf, size_t size)
{
    snprintf(buf, size, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return buf;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *p = strchr(line, ':');
            if (p) {
                p += 1 + (p[1] == ' ');
                p[strcspn(p, "\n")] = 0;
                snprintf(buf, size, "%s", p);
            }
            break;
        }
    }
    fclose(f);
    return buf;
}

int bench_fp8_main(int argc, char **argv)
{
    size_t n = (size_t)64 << 20;
    int threads = 1, json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--n") == 0 && i + 1 < argc) {
            n = (size_t)strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            threads = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    /* rows x 4096 for the quantizers, rows a multiple of 128 (whole blocks) */
    n -= n % ((size_t)128 * 4096);
    if (n == 0 || threads < 1) {
        fprintf(stderr, "octet bench fp8: --n must be >= 524288 and --threads >= 1\n");
        return 2;
    }
    bench_bufs b = {.n = n, .cols = 4096, .rows = (int64_t)(n / 4096)};
    b.x = oct_malloc_aligned(n * sizeof(float));
    b.y = oct_malloc_aligned(n * sizeof(float));
    b.bf16 = oct_malloc_aligned(n * sizeof(uint16_t));
    b.f16 = oct_malloc_aligned(n * sizeof(uint16_t));
    b.q = oct_malloc_aligned(n);
    b.scales = oct_malloc_aligned((n / 32 + (size_t)b.rows) * sizeof(float));
    b.mx_scales = oct_malloc_aligned(n / 32);
    int rc = 0;
    if (!b.x || !b.y || !b.bf16 || !b.f16 || !b.q || !b.scales || !b.mx_scales) {
        fprintf(stderr, "octet bench fp8: cannot allocate buffers for n=%zu (%.0f MB)\n", n,
                (double)n * 15.0 / 1e6);
        rc = 1;
        goto out;
    }
    fill_inputs(&b);
    oct_threads_set(threads);

    oct_cpu_level saved = oct_cpu_level_get(), max = oct_cpu_level_max();
    int n_levels = (int)max + 1;
    double gbps[3][OP_COUNT];
    double memcpy_gbps = measure(-1, &b, threads);
    for (int l = 0; l < n_levels; l++) {
        oct_cpu_force((oct_cpu_level)l);
        b.impl = oct_fp8_impl_for((oct_cpu_level)l);
        size_t nsc = (n / 128) * sizeof(float);
        if (check_proto(&b, OP_Q_TENSOR, OP_P_TENSOR, sizeof(float)) ||
            check_proto(&b, OP_Q_ROWS, OP_P_ROWS, (size_t)b.rows * sizeof(float)) ||
            check_proto(&b, OP_Q_GROUPS, OP_P_GROUPS, nsc) ||
            check_proto(&b, OP_Q_BLOCKS, OP_P_BLOCKS, (n / 16384) * sizeof(float)) ||
            check_proto(&b, OP_Q_MX, OP_P_MX, n / 32))
            rc = 1;
        for (int op = 0; op < OP_COUNT; op++)
            gbps[l][op] = measure(op, &b, threads);
    }
    /* memcpy again at the end: report the better of the two (bandwidth drifts on VMs) */
    double m2 = measure(-1, &b, threads);
    memcpy_gbps = m2 > memcpy_gbps ? m2 : memcpy_gbps;
    oct_cpu_force(saved);

    char model[256];
    cpu_model(model, sizeof model);
    if (json) {
        printf("{\"cpu\": \"%s\", \"n\": %zu, \"threads\": %d, \"memcpy_gbps\": %.3f, "
               "\"results\": [",
               model, n, threads, memcpy_gbps);
        for (int op = 0; op < OP_COUNT; op++)
            for (int l = 0; l < n_levels; l++)
                printf("%s{\"op\": \"%s\", \"path\": \"%s\", \"gbps\": %.3f, \"ratio\": %.3f}",
                       op || l ? ", " : "", k_op_names[op], oct_cpu_level_str((oct_cpu_level)l),
                       gbps[l][op], gbps[l][op] / memcpy_gbps);
        printf("]}\n");
    } else {
        printf("cpu: %s; n = %zu elements (%.0f MB of f32); threads: %d "
               "(conversions single-threaded)\n",
               model, n, (double)n * 4.0 / 1e6, threads);
        printf("memcpy: %.2f GB/s (read + write)\n", memcpy_gbps);
        printf("%-22s", "GB/s (x memcpy)");
        for (int l = 0; l < n_levels; l++)
            printf(" %16s", oct_cpu_level_str((oct_cpu_level)l));
        printf("\n");
        for (int op = 0; op < OP_COUNT; op++) {
            printf("%-22s", k_op_names[op]);
            for (int l = 0; l < n_levels; l++) {
                char cell[32];
                snprintf(cell, sizeof cell, "%.2f (%.2f)", gbps[l][op], gbps[l][op] / memcpy_gbps);
                printf(" %16s", cell);
            }
            printf("\n");
        }
    }
out:
    oct_free_aligned(b.x);
    oct_free_aligned(b.y);
    oct_free_aligned(b.bf16);
    oct_free_aligned(b.f16);
    oct_free_aligned(b.q);
    oct_free_aligned(b.scales);
    oct_free_aligned(b.mx_scales);
    return rc;
}

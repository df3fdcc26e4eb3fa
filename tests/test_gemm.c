/* test_gemm.c — every CPU linear kernel against the scalar reference
 * (gemm_ref.c), the fused activation quantization against oct_quant_*, and
 * the public API's argument checks.
 *
 * Tolerance (docs/KERNELS.md): FP8 x FP8 products are exact in f32 and the
 * kernels differ only in summation order, so |fast - ref| <= 2 (K + 4) u S
 * with u = 2^-24 and S = sum_k |a_k b_k sa sb| (the classic bound for
 * recursive summation, once for each side); data built so every partial sum
 * is representable must match bit for bit.  Set OCTET_TEST_SMALL=1 (the ASan
 * run) to shrink the largest shapes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fp8/fp8_impl.h"
#include "kernels/cpu/gemm.h"
#include "octet.h"
#include "testlib.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 11);
}
static float rndf(void) /* [-1, 1) */
{
    return (float)(rnd() & 0xFFFFFF) / 8388608.0f - 1.0f;
}
static uint8_t rnd_code(void) /* any finite E4M3FN code */
{
    uint8_t c;
    do
        c = (uint8_t)rnd();
    while ((c & 0x7F) == 0x7F);
    return c;
}

static bool small_mode(void)
{
    const char *e = getenv("OCTET_TEST_SMALL");
    return e && *e && *e != '0';
}

static const oct_cpu_level g_levels[] = {OCT_CPU_REF, OCT_CPU_AVX2, OCT_CPU_AVX512};

static bool same_or_nan(float a, float b)
{
    return (a != a && b != b) || a == b;
}

/* S(m, n) = sum_k |a b sa sb| (+ |bias|) in double: the error scale. */
static double err_scale(int64_t K, const uint8_t *A, oct_scale_kind ka, const void *sa,
                        const uint8_t *B, oct_scale_kind kb, const void *sb, int64_t m, int64_t n,
                        int64_t N)
{
    const float *lut = oct_fp8_decode_table(OCT_FP8_E4M3FN);
    int64_t blk = oct_scale_kblock(kb), n_kb = blk ? (K + blk - 1) / blk : 0;
    double s = 0;
    for (int64_t k = 0; k < K; k++) {
        int64_t b = blk ? k / blk : 0;
        double sa_v = (double)oct_gemm_sa_at(ka, sa, m, b, n_kb);
        double sb_v;
        if (kb == OCT_SCALE_TENSOR)
            sb_v = (double)((const float *)sb)[0];
        else if (kb == OCT_SCALE_ROW)
            sb_v = (double)((const float *)sb)[n];
        else if (kb == OCT_SCALE_BLOCK128)
            sb_v = (double)((const float *)sb)[(n / 128) * n_kb + b];
        else
            sb_v = ldexp(1.0, (int)((const uint8_t *)sb)[n * n_kb + b] - 127);
        s += fabs((double)lut[A[m * K + k]] * (double)lut[B[n * K + k]] * sa_v * sb_v);
    }
    (void)N;
    return s;
}

typedef struct mm_case {
    int64_t M, N, K;
    oct_scale_kind ka, kb;
    bool bias;
} mm_case;

static void *make_scales(oct_scale_kind kind, int64_t rows, int64_t K, bool weight)
{
    int64_t cnt;
    switch (kind) {
    case OCT_SCALE_TENSOR: cnt = 1; break;
    case OCT_SCALE_ROW: cnt = rows; break;
    case OCT_SCALE_BLOCK128: cnt = (weight ? (rows + 127) / 128 : rows) * ((K + 127) / 128); break;
    default: {
        uint8_t *e = malloc((size_t)(rows * (K / 32)) + 1);
        for (int64_t i = 0; i < rows * (K / 32); i++)
            e[i] = (uint8_t)(120 + rnd() % 12);
        return e;
    }
    }
    float *s = malloc((size_t)cnt * sizeof(float));
    for (int64_t i = 0; i < cnt; i++)
        s[i] = ldexpf(1.0f + 0.5f * (rndf() + 1.0f), (int)(rnd() % 9) - 8);
    return s;
}

/* Runs one case on every level and compares with the ref level. */
static void run_case(const mm_case *c, const uint8_t *A, const uint8_t *B, const void *sa,
                     const void *sb, const float *bias, bool exact)
{
    size_t mn = (size_t)(c->M * c->N);
    float *ref = malloc(mn * sizeof(float)), *y = malloc(mn * sizeof(float));
    REQUIRE(ref && y);
    REQUIRE(oct_cpu_force(OCT_CPU_REF) == OCT_OK);
    CHECK_OK(oct_scaled_mm_f32(c->M, c->N, c->K, A, c->ka, sa, B, c->kb, sb, bias, ref));
    for (size_t li = 1; li < NELEM(g_levels); li++) {
        if (oct_cpu_force(g_levels[li]) != OCT_OK)
            continue;
        const oct_linear_kernel *kern = NULL;
        oct_linear_desc d = {.name = "t",
                             .n = c->N,
                             .k = c->K,
                             .weight_type = OCT_WEIGHT_FP8,
                             .weight_scale = c->kb,
                             .has_bias = bias != NULL};
        if (oct_linear_select_host(&d, &kern, NULL) != OCT_OK || kern->level != g_levels[li])
            continue; /* no kernel of this level for the case (yet) */
        for (size_t i = 0; i < mn; i++)
            y[i] = -12345.0f;
        CHECK_OK(oct_scaled_mm_f32(c->M, c->N, c->K, A, c->ka, sa, B, c->kb, sb, bias, y));
        int bad = 0;
        for (int64_t m = 0; m < c->M && bad < 3; m++) {
            for (int64_t n = 0; n < c->N && bad < 3; n++) {
                float r = ref[m * c->N + n], v = y[m * c->N + n];
                bool ok;
                double tol = 0;
                if (exact) {
                    ok = same_or_nan(r, v);
                } else {
                    tol = 2.0 * (double)(c->K + 4) * ldexp(1.0, -24) *
                              err_scale(c->K, A, c->ka, sa, B, c->kb, sb, m, n, c->N) +
                          (bias ? fabs((double)bias[n]) * ldexp(1.0, -23) : 0.0) + 1e-30;
                    ok = (r != r && v != v) || fabs((double)r - (double)v) <= tol;
                }
                if (!ok) {
                    bad++;
                    CHECKF(ok,
                           "%s M=%lld N=%lld K=%lld ka=%d kb=%d at (%lld,%lld): ref %.9g got %.9g "
                           "tol %.3g",
                           oct_cpu_level_str(g_levels[li]), (long long)c->M, (long long)c->N,
                           (long long)c->K, c->ka, c->kb, (long long)m, (long long)n, (double)r,
                           (double)v, tol);
                }
            }
        }
    }
    oct_cpu_force(oct_cpu_level_max());
    free(ref);
    free(y);
}

static void random_case(const mm_case *c)
{
    uint8_t *A = malloc((size_t)(c->M * c->K)), *B = malloc((size_t)(c->N * c->K));
    for (int64_t i = 0; i < c->M * c->K; i++)
        A[i] = rnd_code();
    for (int64_t i = 0; i < c->N * c->K; i++)
        B[i] = rnd_code();
    void *sa = make_scales(c->ka, c->M, c->K, false), *sb = make_scales(c->kb, c->N, c->K, true);
    float *bias = NULL;
    if (c->bias) {
        bias = malloc((size_t)c->N * sizeof(float));
        for (int64_t i = 0; i < c->N; i++)
            bias[i] = rndf() * 10.0f;
    }
    run_case(c, A, B, sa, sb, bias, false);
    free(A);
    free(B);
    free(sa);
    free(sb);
    free(bias);
}

/* M in {1,3,17,129}, N in {1,15,4097}, K from 16 to 14336, every scale pair. */
static void test_random_vs_ref(void)
{
    static const oct_scale_kind pairs[][2] = {
        {OCT_SCALE_TENSOR, OCT_SCALE_TENSOR},     {OCT_SCALE_ROW, OCT_SCALE_ROW},
        {OCT_SCALE_TENSOR, OCT_SCALE_ROW},        {OCT_SCALE_ROW, OCT_SCALE_TENSOR},
        {OCT_SCALE_BLOCK128, OCT_SCALE_BLOCK128}, {OCT_SCALE_MX32, OCT_SCALE_MX32},
    };
    int64_t bigk = small_mode() ? 4096 : 14336;
    const int64_t shapes[][3] = {
        {1, 4097, 64},  {3, 15, bigk},  {17, 15, 1000}, {129, 1, 333},  {3, 4097, 17},
        {129, 15, 256}, {17, 4097, 32}, {1, 1, 16},     {16, 100, 130},
    };
    for (size_t s = 0; s < NELEM(shapes); s++) {
        for (size_t p = 0; p < NELEM(pairs); p++) {
            mm_case c = {shapes[s][0], shapes[s][1], shapes[s][2],
                         pairs[p][0],  pairs[p][1],  (s + p) % 2 == 0};
            if (c.kb == OCT_SCALE_MX32 && c.K % 32 != 0)
                c.K = (c.K + 31) / 32 * 32;
            random_case(&c);
        }
    }
}

/* Codes with exponents in [-2, 2]: every product is a multiple of 2^-10 below
 * 16, so for K <= 256 every partial sum is exact and all paths must agree bit
 * for bit (power-of-two scales keep the epilogue exact too). */
static void test_exact_small_range(void)
{
    const int64_t shapes[][3] = {{1, 64, 256}, {5, 33, 250}, {20, 70, 256}, {129, 15, 64}};
    for (size_t s = 0; s < NELEM(shapes); s++) {
        mm_case c = {shapes[s][0], shapes[s][1], shapes[s][2], OCT_SCALE_ROW, OCT_SCALE_ROW, false};
        uint8_t *A = malloc((size_t)(c.M * c.K)), *B = malloc((size_t)(c.N * c.K));
        for (int64_t i = 0; i < c.M * c.K; i++)
            A[i] = (uint8_t)((rnd() & 0x80) | ((5 + rnd() % 5) << 3) | (rnd() & 7));
        for (int64_t i = 0; i < c.N * c.K; i++)
            B[i] = (uint8_t)((rnd() & 0x80) | ((5 + rnd() % 5) << 3) | (rnd() & 7));
        float *sa = malloc((size_t)c.M * 4), *sb = malloc((size_t)c.N * 4);
        for (int64_t i = 0; i < c.M; i++)
            sa[i] = ldexpf(1.0f, (int)(rnd() % 7) - 3);
        for (int64_t i = 0; i < c.N; i++)
            sb[i] = ldexpf(1.0f, (int)(rnd() % 7) - 3);
        run_case(&c, A, B, sa, sb, NULL, true);
        free(A);
        free(B);
        free(sa);
        free(sb);
    }
}

/* All-max codes (|448| * |448| * K is exact up to K = 14336), large dynamic
 * range (tiny subnormal codes mixed with 448), zero rows. */
static void test_adversarial(void)
{
    int64_t K = small_mode() ? 2048 : 14336;
    mm_case c = {3, 17, K, OCT_SCALE_TENSOR, OCT_SCALE_ROW, false};
    uint8_t *A = malloc((size_t)(c.M * K)), *B = malloc((size_t)(c.N * K));
    for (int64_t i = 0; i < c.M * K; i++)
        A[i] = 0x7E;
    for (int64_t i = 0; i < c.N * K; i++)
        B[i] = (i / K) % 2 ? 0xFE : 0x7E;
    float sa = 1.0f, sb[17];
    for (int i = 0; i < 17; i++)
        sb[i] = 1.0f;
    run_case(&c, A, B, &sa, sb, NULL, true);
    /* Row 1 all zeros; row 2 alternates 448 and the smallest subnormal. */
    for (int64_t i = 0; i < K; i++) {
        A[K + i] = 0;
        A[2 * K + i] = i % 2 ? 0x01 : 0xFE;
        A[i] = (uint8_t)(i % 3 ? 0x81 : 0x7E);
    }
    for (int64_t i = 0; i < c.N * K; i++)
        B[i] = (uint8_t)((i % 7) ? 0x01 : 0x7E);
    run_case(&c, A, B, &sa, sb, NULL, false);
    free(A);
    free(B);
}

/* ------------------------------------------------- linear-layer forwards */

static oct_linear *make_linear(const oct_linear_desc *d, const oct_linear_kernel *k, const void *w,
                               const void *ws, const float *bias)
{
    oct_linear *l = NULL;
    oct_error err;
    oct_status st = oct_linear_create(d, k, w, ws, bias, &l, &err);
    CHECKF(st == OCT_OK, "%s", err.message);
    return l;
}

/* x -> y through kernel `k` and through the ref kernel; compare with tol. */
static void compare_forward(const oct_linear_desc *d, const oct_linear_kernel *k, const void *w,
                            const void *ws, const float *bias, int64_t M, const float *x,
                            double rel_tol)
{
    oct_linear *lf = make_linear(d, k, w, ws, bias);
    oct_linear *lr = make_linear(d, &oct_kernel_cpu_ref, w, ws, bias);
    REQUIRE(lf && lr);
    size_t mn = (size_t)(M * d->n);
    float *yf = malloc(mn * 4), *yr = malloc(mn * 4);
    oct_error err;
    CHECKF(oct_linear_forward(lf, M, x, yf, &err) == OCT_OK, "%s", err.message);
    CHECKF(oct_linear_forward(lr, M, x, yr, &err) == OCT_OK, "%s", err.message);
    int bad = 0;
    double amax = 0;
    for (size_t i = 0; i < mn; i++)
        amax = fmax(amax, fabs((double)yr[i]));
    for (size_t i = 0; i < mn && bad < 3; i++) {
        bool ok = rel_tol == 0 ? same_or_nan(yr[i], yf[i])
                               : fabs((double)yr[i] - (double)yf[i]) <= rel_tol * amax + 1e-30;
        if (!ok) {
            bad++;
            CHECKF(ok, "%s act=%d w=%d M=%lld at %zu: ref %.9g got %.9g", k->name, d->act,
                   d->weight_type, (long long)M, i, (double)yr[i], (double)yf[i]);
        }
    }
    free(yf);
    free(yr);
    oct_linear_free(lf);
    oct_linear_free(lr);
}

/* Fused quantization == oct_quant_*: an identity weight makes y[m, j] =
 * sa(m) * decode(q[m, j]) exactly, for every activation scheme. */
static void test_fused_quant_matches_quant_api(void)
{
    const int64_t K = 256, M = 19;
    uint8_t *w = calloc((size_t)(K * K), 1);
    for (int64_t i = 0; i < K; i++)
        w[i * K + i] = 0x38; /* 1.0 */
    float one = 1.0f, *blk = malloc(4 * 4);
    uint8_t *mxw = malloc((size_t)(K * K / 32));
    for (int i = 0; i < 4; i++)
        blk[i] = 1.0f;
    memset(mxw, 127, (size_t)(K * K / 32));
    float *x = malloc((size_t)(M * K) * 4);
    for (int64_t i = 0; i < M * K; i++)
        x[i] = rndf() * ldexpf(1.0f, (int)(rnd() % 40) - 20);
    for (int64_t i = 0; i < K; i++)
        x[3 * K + i] = 0.0f; /* an all-zero row: floor scale */
    x[5 * K + 7] = 3e38f;    /* huge: clamps to 448 under the per-token bound */
    const oct_act_quant acts[] = {OCT_ACT_DYNAMIC_TOKEN, OCT_ACT_DYNAMIC_TENSOR, OCT_ACT_STATIC,
                                  OCT_ACT_GROUP128,      OCT_ACT_MX32,           OCT_ACT_NONE};
    uint8_t *q = malloc((size_t)(M * K));
    float *s = malloc((size_t)(M * K) * 4), *y = malloc((size_t)(M * K) * 4);
    uint8_t *se = malloc((size_t)(M * K));
    const float *lut = oct_fp8_decode_table(OCT_FP8_E4M3FN);
    for (size_t li = 1; li < NELEM(g_levels); li++) {
        if (oct_cpu_force(g_levels[li]) != OCT_OK)
            continue;
        for (size_t ai = 0; ai < NELEM(acts); ai++) {
            oct_linear_desc d = {.name = "ident",
                                 .n = K,
                                 .k = K,
                                 .weight_type = OCT_WEIGHT_FP8,
                                 .act = acts[ai],
                                 .act_static_scale = 0.01f,
                                 .act_scale_ub = acts[ai] == OCT_ACT_DYNAMIC_TOKEN ? 0.5f : 0};
            d.weight_scale = acts[ai] == OCT_ACT_GROUP128 ? OCT_SCALE_BLOCK128
                             : acts[ai] == OCT_ACT_MX32   ? OCT_SCALE_MX32
                                                          : OCT_SCALE_TENSOR;
            const void *ws = d.weight_scale == OCT_SCALE_BLOCK128 ? (const void *)blk
                             : d.weight_scale == OCT_SCALE_MX32   ? (const void *)mxw
                                                                  : (const void *)&one;
            const oct_linear_kernel *k = NULL;
            if (oct_linear_select_host(&d, &k, NULL) != OCT_OK || k->level != g_levels[li])
                continue;
            oct_linear *l = make_linear(&d, k, w, ws, NULL);
            REQUIRE(l);
            oct_error err;
            CHECKF(oct_linear_forward(l, M, x, y, &err) == OCT_OK, "%s", err.message);
            oct_linear_free(l);
            int bad = 0;
            for (int64_t m = 0; m < M; m++) {
                for (int64_t j = 0; j < K && bad < 3; j++) {
                    float want;
                    switch (acts[ai]) {
                    case OCT_ACT_DYNAMIC_TOKEN:
                        if (j == 0)
                            CHECK_OK(oct_quant_rows(OCT_FP8_E4M3FN, x + m * K, 1, K, 0.5f,
                                                    q + m * K, s + m));
                        want = s[m] * (1.0f * lut[q[m * K + j]]);
                        break;
                    case OCT_ACT_DYNAMIC_TENSOR:
                        if (m == 0 && j == 0)
                            CHECK_OK(oct_quant_tensor(OCT_FP8_E4M3FN, x, (size_t)(M * K), q, s));
                        want = s[0] * (1.0f * lut[q[m * K + j]]);
                        break;
                    case OCT_ACT_STATIC:
                        if (m == 0 && j == 0)
                            CHECK_OK(
                                oct_quant_static(OCT_FP8_E4M3FN, x, (size_t)(M * K), 0.01f, q));
                        want = 0.01f * (1.0f * lut[q[m * K + j]]);
                        break;
                    case OCT_ACT_GROUP128:
                        if (m == 0 && j == 0)
                            CHECK_OK(oct_quant_groups(OCT_FP8_E4M3FN, x, M, K, 128, q, s));
                        want = 0.0f + lut[q[m * K + j]] * s[m * 2 + j / 128] * 1.0f;
                        break;
                    case OCT_ACT_MX32:
                        if (m == 0 && j == 0)
                            CHECK_OK(oct_quant_mx(OCT_FP8_E4M3FN, OCT_MX_OCP, x, M, K, q, se));
                        want = 0.0f +
                               lut[q[m * K + j]] * ldexpf(1.0f, se[m * 8 + j / 32] - 127) * 1.0f;
                        break;
                    default:
                        want = 1.0f * (1.0f * oct_bf16_to_f32(oct_f32_to_bf16(x[m * K + j])));
                        break;
                    }
                    float got = y[m * K + j];
                    if (!same_or_nan(want, got)) {
                        bad++;
                        CHECKF(false, "%s act=%d row %lld col %lld: want %.9g got %.9g",
                               oct_cpu_level_str(g_levels[li]), acts[ai], (long long)m,
                               (long long)j, (double)want, (double)got);
                    }
                }
            }
        }
    }
    oct_cpu_force(oct_cpu_level_max());
    free(w);
    free(blk);
    free(mxw);
    free(x);
    free(q);
    free(s);
    free(se);
    free(y);
}

/* The vector E4M3 rounding equals the scalar encoder on edge values and on
 * random bit patterns (static scale 1, identity weight). */
static void test_rounding_edges(void)
{
    const int64_t K = 64;
    uint8_t *w = calloc((size_t)(K * K), 1);
    for (int64_t i = 0; i < K; i++)
        w[i * K + i] = 0x38;
    const float edges[] = {447.0f,    448.0f,    449.0f,   463.99f,   464.0f,     464.01f,
                           479.9f,    480.0f,    1e30f,    INFINITY,  -INFINITY,  -0.0f,
                           -1e-30f,   0x1p-10f,  0x3p-10f, 0x5p-10f,  0.0136719f, 0x1p-6f,
                           0x1.fp-7f, 0x1.2p-6f, -0x1p-9f, 0x1p-149f, 240.0f,     248.0f,
                           232.0f,    1.0625f,   1.1875f,  -3.5f};
    int64_t M = 4096;
    float *x = malloc((size_t)(M * K) * 4), *y = malloc((size_t)(M * K) * 4);
    for (int64_t i = 0; i < M * K; i++) {
        if (i < (int64_t)NELEM(edges)) {
            x[i] = edges[i];
        } else {
            uint32_t u = rnd() | (rnd() << 21);
            /* bias toward e4m3's range: exponent 110..137 */
            if (i % 2)
                u = (u & 0x807FFFFFu) | ((110u + rnd() % 28u) << 23);
            memcpy(&x[i], &u, 4);
            if (x[i] != x[i])
                x[i] = 1.0f;
        }
    }
    float one = 1.0f;
    for (size_t li = 1; li < NELEM(g_levels); li++) {
        if (oct_cpu_force(g_levels[li]) != OCT_OK)
            continue;
        oct_linear_desc d = {.name = "round",
                             .n = K,
                             .k = K,
                             .weight_type = OCT_WEIGHT_FP8,
                             .weight_scale = OCT_SCALE_TENSOR,
                             .act = OCT_ACT_STATIC,
                             .act_static_scale = 1.0f};
        const oct_linear_kernel *k = NULL;
        if (oct_linear_select_host(&d, &k, NULL) != OCT_OK || k->level != g_levels[li])
            continue;
        oct_linear *l = make_linear(&d, k, w, &one, NULL);
        REQUIRE(l);
        CHECK_OK(oct_linear_forward(l, M, x, y, NULL));
        oct_linear_free(l);
        int bad = 0;
        for (int64_t i = 0; i < M * K && bad < 5; i++) {
            float want = oct_fp8_ref_decode(OCT_FP8_E4M3FN,
                                            oct_fp8_ref_encode(OCT_FP8_E4M3FN, OCT_CAST_SAT, x[i]));
            if (!same_or_nan(want, y[i])) {
                bad++;
                CHECKF(false, "%s x=%a want %a got %a", oct_cpu_level_str(g_levels[li]),
                       (double)x[i], (double)want, (double)y[i]);
            }
        }
    }
    oct_cpu_force(oct_cpu_level_max());
    free(w);
    free(x);
    free(y);
}

/* Every activation scheme and weight type through the forward API, fast
 * kernels vs ref; M covers the GEMV path (<= 16) and the blocked GEMM. */
static void test_forward_schemes(void)
{
    const int64_t N = 300, K = 520;
    uint8_t *w8 = malloc((size_t)(N * K));
    uint16_t *w16 = malloc((size_t)(N * K) * 2);
    float *x = malloc((size_t)(70 * K) * 4), *bias = malloc((size_t)N * 4);
    for (int64_t i = 0; i < N * K; i++) {
        w8[i] = rnd_code();
        w16[i] = oct_f32_to_bf16(rndf());
    }
    for (int64_t i = 0; i < 70 * K; i++)
        x[i] = rndf() * (i % 13 == 0 ? 50.0f : 1.0f);
    for (int64_t i = 0; i < N; i++)
        bias[i] = rndf();
    float *cs = make_scales(OCT_SCALE_ROW, N, K, true);
    float *bs = make_scales(OCT_SCALE_BLOCK128, N, K, true);
    uint8_t *ms = make_scales(OCT_SCALE_MX32, N, K, true);
    struct {
        oct_weight_type wt;
        oct_scale_kind ws;
        oct_act_quant act;
        const void *scale;
    } cases[] = {
        {OCT_WEIGHT_FP8, OCT_SCALE_ROW, OCT_ACT_DYNAMIC_TOKEN, cs},
        {OCT_WEIGHT_FP8, OCT_SCALE_ROW, OCT_ACT_DYNAMIC_TENSOR, cs},
        {OCT_WEIGHT_FP8, OCT_SCALE_TENSOR, OCT_ACT_STATIC, cs},
        {OCT_WEIGHT_FP8, OCT_SCALE_BLOCK128, OCT_ACT_GROUP128, bs},
        {OCT_WEIGHT_FP8, OCT_SCALE_MX32, OCT_ACT_MX32, ms},
        {OCT_WEIGHT_FP8, OCT_SCALE_ROW, OCT_ACT_NONE, cs},
        {OCT_WEIGHT_FP8, OCT_SCALE_BLOCK128, OCT_ACT_NONE, bs},
        {OCT_WEIGHT_BF16, OCT_SCALE_TENSOR, OCT_ACT_NONE, NULL},
    };
    const int64_t ms_[] = {1, 2, 5, 9, 16, 17, 70};
    for (size_t li = 1; li < NELEM(g_levels); li++) {
        if (oct_cpu_force(g_levels[li]) != OCT_OK)
            continue;
        for (size_t ci = 0; ci < NELEM(cases); ci++) {
            oct_linear_desc d = {.name = "fwd",
                                 .n = N,
                                 .k = K,
                                 .weight_type = cases[ci].wt,
                                 .weight_scale = cases[ci].ws,
                                 .act = cases[ci].act,
                                 .act_static_scale = 0.004f,
                                 .has_bias = ci % 2 == 0};
            const oct_linear_kernel *k = NULL;
            if (oct_linear_select_host(&d, &k, NULL) != OCT_OK || k->level != g_levels[li])
                continue;
            const void *wp = cases[ci].wt == OCT_WEIGHT_FP8 ? (const void *)w8 : (const void *)w16;
            for (size_t mi = 0; mi < NELEM(ms_); mi++)
                compare_forward(&d, k, wp, cases[ci].scale, d.has_bias ? bias : NULL, ms_[mi], x,
                                1e-5);
        }
    }
    oct_cpu_force(oct_cpu_level_max());
    free(w8);
    free(w16);
    free(x);
    free(bias);
    free(cs);
    free(bs);
    free(ms);
}

/* bf16 in / bf16 out equals the f32 path rounded. */
static void test_forward_bf16_io(void)
{
    const int64_t N = 40, K = 96, M = 3;
    uint8_t *w = malloc((size_t)(N * K));
    for (int64_t i = 0; i < N * K; i++)
        w[i] = rnd_code();
    float s = 0.02f;
    uint16_t xb[3 * 96], yb[3 * 40];
    float xf[3 * 96], yf[3 * 40];
    for (int i = 0; i < M * K; i++) {
        xb[i] = oct_f32_to_bf16(rndf());
        xf[i] = oct_bf16_to_f32(xb[i]);
    }
    oct_linear_desc d = {.name = "bf16io",
                         .n = N,
                         .k = K,
                         .weight_type = OCT_WEIGHT_FP8,
                         .weight_scale = OCT_SCALE_TENSOR,
                         .act = OCT_ACT_DYNAMIC_TOKEN};
    oct_linear *l = make_linear(&d, NULL, w, &s, NULL);
    REQUIRE(l);
    CHECK_OK(oct_linear_forward(l, M, xf, yf, NULL));
    CHECK_OK(oct_linear_forward_bf16(l, M, xb, yb, NULL));
    for (int i = 0; i < M * N; i++)
        CHECK_EQ_INT(yb[i], oct_f32_to_bf16(yf[i]));
    oct_linear_free(l);
    free(w);
}

/* ------------------------------------------------------------ API errors */

static void test_api_errors(void)
{
    uint8_t a[256] = {0}, b[256] = {0};
    float s[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, y[16];
    uint8_t e[8] = {127, 127, 127, 127, 127, 127, 127, 127};
    CHECK_EQ_INT(
        oct_scaled_mm_f32(-1, 1, 16, a, OCT_SCALE_TENSOR, s, b, OCT_SCALE_TENSOR, s, NULL, y),
        OCT_ERR_INVALID_ARG);
    CHECK_EQ_INT(
        oct_scaled_mm_f32(1, 0, 16, a, OCT_SCALE_TENSOR, s, b, OCT_SCALE_TENSOR, s, NULL, y),
        OCT_ERR_INVALID_ARG);
    CHECK_EQ_INT(
        oct_scaled_mm_f32(1, 1, 0, a, OCT_SCALE_TENSOR, s, b, OCT_SCALE_TENSOR, s, NULL, y),
        OCT_ERR_INVALID_ARG);
    CHECK_EQ_INT(
        oct_scaled_mm_f32(1, 1, 16, NULL, OCT_SCALE_TENSOR, s, b, OCT_SCALE_TENSOR, s, NULL, y),
        OCT_ERR_INVALID_ARG);
    CHECK_EQ_INT(
        oct_scaled_mm_f32(1, 1, 16, a, OCT_SCALE_ROW, s, b, OCT_SCALE_BLOCK128, s, NULL, y),
        OCT_ERR_UNSUPPORTED);
    CHECK_EQ_INT(oct_scaled_mm_f32(1, 1, 32, a, OCT_SCALE_MX32, e, b, OCT_SCALE_TENSOR, s, NULL, y),
                 OCT_ERR_UNSUPPORTED);
    CHECK_EQ_INT(oct_scaled_mm_f32(1, 1, 16, a, OCT_SCALE_MX32, e, b, OCT_SCALE_MX32, e, NULL, y),
                 OCT_ERR_INVALID_ARG);
    CHECK_EQ_INT(
        oct_scaled_mm_f32(1, 1, 16, a, (oct_scale_kind)9, s, b, OCT_SCALE_TENSOR, s, NULL, y),
        OCT_ERR_INVALID_ARG);
    CHECK_OK(oct_scaled_mm_f32(0, 1, 16, NULL, OCT_SCALE_TENSOR, NULL, b, OCT_SCALE_TENSOR, s, NULL,
                               NULL));
    CHECK_OK(oct_scaled_mm_f32(1, 1, 32, a, OCT_SCALE_MX32, e, b, OCT_SCALE_MX32, e, NULL, y));
    CHECK(y[0] == 0.0f);

    oct_error err;
    oct_linear *l = NULL;
    oct_linear_desc d = {.name = "model.layers.3.mlp.up_proj",
                         .n = 8,
                         .k = 16,
                         .weight_type = OCT_WEIGHT_BF16,
                         .act = OCT_ACT_DYNAMIC_TOKEN};
    CHECK_EQ_INT(oct_linear_create(&d, NULL, b, NULL, NULL, &l, &err), OCT_ERR_UNSUPPORTED);
    CHECK(strstr(err.message, "model.layers.3.mlp.up_proj") != NULL);
    CHECK(l == NULL);
    d.weight_type = OCT_WEIGHT_FP8;
    d.weight_scale = OCT_SCALE_BLOCK128;
    CHECK_EQ_INT(oct_linear_create(&d, NULL, b, s, NULL, &l, &err), OCT_ERR_UNSUPPORTED);
    d.weight_scale = OCT_SCALE_ROW;
    CHECK_EQ_INT(oct_linear_create(&d, NULL, b, NULL, NULL, &l, &err), OCT_ERR_INVALID_ARG);
    CHECK(strstr(err.message, "weight_scale") != NULL);
    CHECK_EQ_INT(oct_linear_create(&d, NULL, b, s, s, &l, &err), OCT_ERR_INVALID_ARG);
    d.act = OCT_ACT_STATIC;
    CHECK_EQ_INT(oct_linear_create(&d, NULL, b, s, NULL, &l, &err), OCT_ERR_INVALID_ARG);
    d.act = OCT_ACT_DYNAMIC_TOKEN;
    d.k = -3;
    CHECK_EQ_INT(oct_linear_create(&d, NULL, b, s, NULL, &l, &err), OCT_ERR_INVALID_ARG);
    d.k = 16;
    CHECK_OK(oct_linear_create(&d, NULL, b, s, NULL, &l, &err));
    float x[32] = {0};
    CHECK_EQ_INT(oct_linear_forward(l, -1, x, y, &err), OCT_ERR_INVALID_ARG);
    CHECK_EQ_INT(oct_linear_forward(l, 1, NULL, y, &err), OCT_ERR_INVALID_ARG);
    CHECK_EQ_INT(oct_linear_forward_q(l, 1, a, OCT_SCALE_BLOCK128, s, y, &err),
                 OCT_ERR_UNSUPPORTED);
    CHECK_OK(oct_linear_forward(l, 0, NULL, NULL, &err));
    CHECK_OK(oct_linear_forward(l, 2, x, y, &err));
    CHECK(y[0] == 0.0f && y[15] == 0.0f);
    oct_linear_free(l);
    oct_linear_free(NULL);
}

/* ------------------------------------------------------------- registry */

static char g_log[2048];
static void log_sink(oct_log_level level, const char *msg, void *user)
{
    (void)level;
    (void)user;
    size_t len = strlen(g_log);
    snprintf(g_log + len, sizeof g_log - len, "%s\n", msg);
}

static void test_registry(void)
{
    oct_linear_desc d = {.name = "model.layers.0.self_attn.q_proj",
                         .n = 64,
                         .k = 64,
                         .weight_type = OCT_WEIGHT_FP8,
                         .weight_scale = OCT_SCALE_ROW,
                         .act = OCT_ACT_DYNAMIC_TOKEN};
    const oct_linear_kernel *k = NULL;
    oct_error err;
    unsetenv("OCTET_LINEAR_BACKEND");
    CHECK_OK(oct_linear_select(&d, NULL, &k, &err));
    if (oct_cpu_level_get() == OCT_CPU_AVX512)
        CHECK(strcmp(oct_linear_kernel_name(k), "cpu_avx512_bf16") == 0);
    CHECK_OK(oct_linear_select(&d, "ref", &k, &err));
    CHECK(strcmp(oct_linear_kernel_name(k), "cpu_ref") == 0);
    CHECK(strcmp(oct_linear_kernel_backend(k), "ref") == 0);
    CHECK_OK(oct_linear_select(&d, "cpu", &k, &err)); /* the best CPU kernel */
    CHECK(strcmp(oct_linear_kernel_backend(k), "cuda") != 0);
    if (oct_cpu_level_get() == OCT_CPU_AVX512)
        CHECK(strcmp(oct_linear_kernel_name(k), "cpu_avx512_bf16") == 0);
    CHECK_EQ_INT(oct_linear_select(&d, "bogus", &k, &err), OCT_ERR_INVALID_ARG);
    CHECK(strstr(err.message, "bogus") != NULL);
    /* The environment restricts "auto"; an explicit name wins over it. */
    setenv("OCTET_LINEAR_BACKEND", "ref", 1);
    CHECK_OK(oct_linear_select(&d, "auto", &k, &err));
    CHECK(strcmp(oct_linear_kernel_name(k), "cpu_ref") == 0);
    /* The CPU reference ignores an environment that asks for the GPU. */
    setenv("OCTET_LINEAR_BACKEND", "cuda", 1);
    CHECK_OK(oct_linear_select_host(&d, &k, &err));
    CHECK(strcmp(oct_linear_kernel_backend(k), "cuda") != 0);
    {
        uint8_t a[64] = {0x38}, b[64 * 64] = {0x38};
        float sa = 1.0f, sb[64], y[64];
        for (int i = 0; i < 64; i++)
            sb[i] = 1.0f;
        CHECK_OK(
            oct_scaled_mm_f32(1, 64, 64, a, OCT_SCALE_TENSOR, &sa, b, OCT_SCALE_ROW, sb, NULL, y));
        CHECK(y[0] == 1.0f); /* one product 1.0 * 1.0 (0x38 = 1.0), the rest zero */
    }
    unsetenv("OCTET_LINEAR_BACKEND");
    /* A backend that cannot implement the layer is an error naming it. */
    d.weight_type = OCT_WEIGHT_F32;
    d.act = OCT_ACT_NONE;
    CHECK_OK(oct_linear_select(&d, "auto", &k, &err));
    CHECK(strcmp(oct_linear_kernel_name(k), "cpu_ref") == 0);
    CHECK_EQ_INT(oct_linear_select(&d, "avx512", &k, &err), OCT_ERR_UNSUPPORTED);
    CHECK(strstr(err.message, "model.layers.0.self_attn.q_proj") != NULL);
    CHECK(strstr(err.message, "--linear-backend=avx512") != NULL);
    CHECK(k == NULL);
    /* A forced CPU level below a kernel's makes it ineligible, with a reason. */
    d.weight_type = OCT_WEIGHT_FP8;
    d.act = OCT_ACT_DYNAMIC_TOKEN;
    CHECK_OK(oct_cpu_force(OCT_CPU_REF));
    CHECK_EQ_INT(oct_linear_select(&d, "avx512", &k, &err), OCT_ERR_UNSUPPORTED);
    CHECK(strstr(err.message, "needs CPU level avx512") != NULL);
    CHECK_OK(oct_linear_select(&d, NULL, &k, &err));
    CHECK(strcmp(oct_linear_kernel_name(k), "cpu_ref") == 0);
    oct_cpu_force(oct_cpu_level_max());

    /* Selector: one summary line per distinct choice, with a layer count. */
    oct_linear_selector *sel = NULL;
    CHECK_EQ_INT(oct_linear_selector_create("nope", &sel, &err), OCT_ERR_INVALID_ARG);
    CHECK_OK(oct_linear_selector_create(NULL, &sel, &err));
    REQUIRE(sel);
    const char *names[] = {"model.layers.0.mlp.up_proj", "model.layers.1.mlp.up_proj",
                           "model.layers.2.mlp.up_proj"};
    for (int i = 0; i < 3; i++) {
        d.name = names[i];
        CHECK_OK(oct_linear_selector_pick(sel, &d, &k, &err));
    }
    d.name = "lm_head";
    d.weight_type = OCT_WEIGHT_BF16;
    d.act = OCT_ACT_NONE;
    CHECK_OK(oct_linear_selector_pick(sel, &d, &k, &err));
    g_log[0] = 0;
    oct_log_set(log_sink, NULL, OCT_LOG_INFO);
    oct_linear_selector_log_summary(sel);
    oct_log_set(NULL, NULL, OCT_LOG_INFO);
    CHECKF(strstr(g_log, "for model.layers.0.mlp.up_proj and 2 more layers") != NULL, "%s", g_log);
    CHECKF(strstr(g_log, "Selected ") != NULL && strstr(g_log, " for lm_head (bf16)") != NULL, "%s",
           g_log);
    oct_linear_selector_free(sel);
    oct_linear_selector_free(NULL);
}

int main(void)
{
    RUN(test_registry);
    RUN(test_api_errors);
    RUN(test_rounding_edges);
    RUN(test_fused_quant_matches_quant_api);
    RUN(test_exact_small_range);
    RUN(test_adversarial);
    RUN(test_forward_schemes);
    RUN(test_forward_bf16_io);
    RUN(test_random_vs_ref);
    return testlib_finish();
}

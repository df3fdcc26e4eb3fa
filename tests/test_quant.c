/* test_quant.c — every quantization scheme against PyTorch (fixture made by
 * tools/make_fp8_fixtures.py: docs/NUMERICS.md's formulas written with torch ops on an
 * H200), plus the documented edge behaviour. */
#include <math.h>

#include "fixture_st.h"
#include "octet.h"
#include "testlib.h"

static fixture_st g_st;
static int g_have;

static const void *get(const char *prefix, const char *suffix, int64_t *shape, int *ndim,
                       size_t *nb)
{
    char name[128];
    snprintf(name, sizeof name, "%s.%s", prefix, suffix);
    return fixture_st_get(&g_st, name, shape, ndim, nb);
}

static int cmp_codes(const char *what, const uint8_t *want, const uint8_t *got, size_t n)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        if (want[i] != got[i] && bad++ < 5)
            fprintf(stderr, "  %s[%zu]: want 0x%02x got 0x%02x\n", what, i, want[i], got[i]);
    return bad;
}

static int cmp_f32(const char *what, const float *want, const float *got, size_t n)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        bool same = memcmp(&want[i], &got[i], 4) == 0 || (isnan(want[i]) && isnan(got[i]));
        if (!same && bad++ < 5)
            fprintf(stderr, "  %s[%zu]: want %a got %a\n", what, i, (double)want[i],
                    (double)got[i]);
    }
    return bad;
}

static void test_open(void)
{
    REQUIRE(fixture_st_open(&g_st, "quant_ref.safetensors") == 0);
    g_have = 1;
}

static void check_tensor_case(const char *p)
{
    int64_t sh[4];
    int nd;
    size_t nb;
    const float *x = get(p, "x", sh, &nd, &nb);
    REQUIRE(x);
    size_t n = nb / 4;
    uint8_t *q = malloc(n);
    float s;
    CHECK_OK(oct_quant_tensor(OCT_FP8_E4M3FN, x, n, q, &s));
    CHECKF(cmp_f32(p, get(p, "scale", NULL, NULL, NULL), &s, 1) == 0, "%s scale", p);
    CHECKF(cmp_codes(p, get(p, "q", NULL, NULL, NULL), q, n) == 0, "%s codes", p);
    char key[64];
    snprintf(key, sizeof key, "%s.sqnr_db", p);
    const float *sq =
        json_object_get(g_st.header, key) ? get(p, "sqnr_db", NULL, NULL, NULL) : NULL;
    if (sq) {
        float *deq = malloc(n * 4);
        CHECK_OK(oct_dequant_tensor(OCT_FP8_E4M3FN, q, n, s, deq));
        oct_quant_error e;
        CHECK_OK(oct_quant_error_measure(x, deq, n, &e));
        const float *ma = get(p, "max_abs", NULL, NULL, NULL);
        const float *rf = get(p, "rel_fro", NULL, NULL, NULL);
        /* torch sums in f32 on the GPU, we in f64: agree to ~1e-5 relative */
        CHECKF(isinf(sq[0]) ? isinf(e.sqnr_db) : fabs(e.sqnr_db - (double)sq[0]) < 1e-3,
               "%s sqnr %g vs %g", p, e.sqnr_db, (double)sq[0]);
        CHECKF(fabs(e.max_abs - (double)ma[0]) <= 1e-6 * fabs((double)ma[0]) + 1e-30,
               "%s max_abs %g vs %g", p, e.max_abs, (double)ma[0]);
        CHECKF(fabs(e.rel_fro - (double)rf[0]) <= 1e-5 * fabs((double)rf[0]) + 1e-12,
               "%s rel_fro %g vs %g", p, e.rel_fro, (double)rf[0]);
        free(deq);
    }
    free(q);
}

static void test_per_tensor(void)
{
    REQUIRE(g_have);
    check_tensor_case("tensor.rand");
    check_tensor_case("tensor.zero");
    check_tensor_case("tensor.outlier");
    check_tensor_case("tensor.nan"); /* documented: NaN scale, NaN codes */
}

static void check_rows_case(const char *p, oct_fp8_format f, float ub)
{
    int64_t sh[4];
    int nd;
    const float *x = get(p, "x", sh, &nd, NULL);
    REQUIRE(x && nd == 2);
    size_t n = (size_t)(sh[0] * sh[1]);
    uint8_t *q = malloc(n);
    float *s = malloc((size_t)sh[0] * 4);
    CHECK_OK(oct_quant_rows(f, x, sh[0], sh[1], ub, q, s));
    CHECKF(cmp_f32(p, get(p, "scale", NULL, NULL, NULL), s, (size_t)sh[0]) == 0, "%s scales", p);
    CHECKF(cmp_codes(p, get(p, "q", NULL, NULL, NULL), q, n) == 0, "%s codes", p);
    free(q);
    free(s);
}

static void test_per_token_and_channel(void)
{
    REQUIRE(g_have);
    check_rows_case("token.rand", OCT_FP8_E4M3FN, 0.0f);
    const float *ub = get("token.ub", "ub", NULL, NULL, NULL);
    REQUIRE(ub);
    check_rows_case("token.ub", OCT_FP8_E4M3FN, ub[0]);
    check_rows_case("token.zero", OCT_FP8_E4M3FN, 0.0f);
    check_rows_case("token_fnuz", OCT_FP8_E4M3FNUZ, 0.0f);
    /* per-channel weights use the same row rule */
    int64_t sh[4];
    const float *w = get("channel", "x", sh, NULL, NULL);
    REQUIRE(w);
    check_rows_case("channel", OCT_FP8_E4M3FN, 0.0f);
    CHECK(oct_quant_qmax(OCT_FP8_E4M3FNUZ) == 224.0f);
    CHECK(oct_quant_scale_floor(OCT_FP8_E4M3FN) == 1.0f / 229376.0f);
}

static void test_groups(void)
{
    REQUIRE(g_have);
    const char *cases[] = {"group.k300", "group.k256"};
    for (int c = 0; c < 2; c++) {
        int64_t sh[4];
        const float *x = get(cases[c], "x", sh, NULL, NULL);
        REQUIRE(x);
        int64_t ng = (sh[1] + 127) / 128;
        size_t n = (size_t)(sh[0] * sh[1]);
        uint8_t *q = malloc(n);
        float *s = malloc((size_t)(sh[0] * ng) * 4);
        CHECK_OK(oct_quant_groups(OCT_FP8_E4M3FN, x, sh[0], sh[1], 128, q, s));
        CHECKF(cmp_f32(cases[c], get(cases[c], "scale", NULL, NULL, NULL), s,
                       (size_t)(sh[0] * ng)) == 0,
               "%s scales", cases[c]);
        CHECKF(cmp_codes(cases[c], get(cases[c], "q", NULL, NULL, NULL), q, n) == 0, "%s codes",
               cases[c]);
        free(q);
        free(s);
    }
}

static void test_blocks(void)
{
    REQUIRE(g_have);
    const char *cases[] = {"block.300x200", "block.256x384"};
    for (int c = 0; c < 2; c++) {
        int64_t sh[4];
        const float *w = get(cases[c], "w", sh, NULL, NULL);
        REQUIRE(w);
        int64_t nbr = (sh[0] + 127) / 128, nbc = (sh[1] + 127) / 128;
        size_t n = (size_t)(sh[0] * sh[1]);
        uint8_t *q = malloc(n);
        float *s = malloc((size_t)(nbr * nbc) * 4);
        CHECK_OK(oct_quant_blocks(OCT_FP8_E4M3FN, w, sh[0], sh[1], 128, 128, q, s));
        CHECKF(cmp_f32(cases[c], get(cases[c], "scale", NULL, NULL, NULL), s,
                       (size_t)(nbr * nbc)) == 0,
               "%s scales", cases[c]);
        CHECKF(cmp_codes(cases[c], get(cases[c], "q", NULL, NULL, NULL), q, n) == 0, "%s codes",
               cases[c]);
        /* dequantized error is small */
        float *d = malloc(n * 4);
        CHECK_OK(oct_dequant_blocks(OCT_FP8_E4M3FN, q, sh[0], sh[1], 128, 128, s, d));
        oct_quant_error e;
        oct_quant_error_measure(w, d, n, &e);
        CHECKF(e.sqnr_db > 25.0, "%s sqnr %g dB", cases[c], e.sqnr_db);
        free(d);
        free(q);
        free(s);
    }
}

static void test_mx(void)
{
    REQUIRE(g_have);
    const char *cases[] = {"mx.ocp", "mx.ct"};
    oct_mx_recipe rec[] = {OCT_MX_OCP, OCT_MX_CT};
    for (int c = 0; c < 2; c++) {
        int64_t sh[4];
        const float *x = get(cases[c], "x", sh, NULL, NULL);
        REQUIRE(x);
        size_t n = (size_t)(sh[0] * sh[1]);
        uint8_t *q = malloc(n), *s = malloc(n / 32);
        CHECK_OK(oct_quant_mx(OCT_FP8_E4M3FN, rec[c], x, sh[0], sh[1], q, s));
        CHECKF(cmp_codes(cases[c], get(cases[c], "scale", NULL, NULL, NULL), s, n / 32) == 0,
               "%s scales", cases[c]);
        CHECKF(cmp_codes(cases[c], get(cases[c], "q", NULL, NULL, NULL), q, n) == 0, "%s codes",
               cases[c]);
        free(q);
        free(s);
    }
    /* K not divisible by 32 is a clean error */
    float x[48] = {0};
    uint8_t q[48], s[2];
    CHECK(oct_quant_mx(OCT_FP8_E4M3FN, OCT_MX_OCP, x, 1, 48, q, s) == OCT_ERR_INVALID_ARG);
}

static void test_static(void)
{
    REQUIRE(g_have);
    int64_t sh[4];
    const float *x = get("static", "x", sh, NULL, NULL);
    const float *s = get("static", "scale", NULL, NULL, NULL);
    REQUIRE(x && s);
    size_t n = (size_t)(sh[0] * sh[1]);
    uint8_t *q = malloc(n);
    CHECK_OK(oct_quant_static(OCT_FP8_E4M3FN, x, n, s[0], q));
    CHECK(cmp_codes("static", get("static", "q", NULL, NULL, NULL), q, n) == 0);
    CHECK(oct_quant_static(OCT_FP8_E4M3FN, x, n, 0.0f, q) == OCT_ERR_INVALID_ARG);
    free(q);
}

static void test_fused_parts(void)
{
    REQUIRE(g_have);
    size_t nb;
    int64_t sh[4];
    const uint8_t *qin = fixture_st_get(&g_st, "fused.q_in", sh, NULL, &nb);
    const float *sin = fixture_st_get(&g_st, "fused.scales_in", NULL, NULL, NULL);
    const int32_t *rows32 = fixture_st_get(&g_st, "fused.rows", NULL, NULL, NULL);
    REQUIRE(qin && sin && rows32);
    int64_t rows[3] = {rows32[0], rows32[1], rows32[2]};
    const char *outs[2] = {"fused.q_f32", "fused.q_fp16"};
    for (int mode = 0; mode < 2; mode++) {
        uint8_t *q = malloc(nb);
        memcpy(q, qin, nb);
        float so;
        CHECK_OK(oct_quant_requant_parts(OCT_FP8_E4M3FN, q, sh[1], rows, sin, 3, mode == 1, &so));
        CHECK(cmp_f32("fused scale", fixture_st_get(&g_st, "fused.scale_out", NULL, NULL, NULL),
                      &so, 1) == 0);
        CHECKF(cmp_codes(outs[mode], fixture_st_get(&g_st, outs[mode], NULL, NULL, NULL), q, nb) ==
                   0,
               "%s", outs[mode]);
        free(q);
    }
}

static void test_fn_to_fnuz(void)
{
    REQUIRE(g_have);
    uint8_t b[256];
    memcpy(b, fixture_st_get(&g_st, "fnuz.in", NULL, NULL, NULL), 256);
    oct_fp8_fn_to_fnuz(b, 256);
    CHECK(cmp_codes("fnuz", fixture_st_get(&g_st, "fnuz.out", NULL, NULL, NULL), b, 256) == 0);
    /* values halve; with the scale doubled the dequantized value is unchanged */
    for (int c = 0; c < 256; c++) {
        float a = oct_fp8_decode(OCT_FP8_E4M3FN, (uint8_t)c) * 0.25f;
        float z = oct_fp8_decode(OCT_FP8_E4M3FNUZ, b[c]) * 0.5f;
        if (!isnan(a) && c != 0x80)
            CHECKF(a == z, "code 0x%02x", c);
    }
}

static void test_bad_args(void)
{
    float x[4] = {1, 2, 3, 4}, s[4];
    uint8_t q[4];
    CHECK(oct_quant_rows(OCT_FP8_E8M0FNU, x, 1, 4, 0, q, s) == OCT_ERR_INVALID_ARG);
    CHECK(oct_quant_rows(OCT_FP8_E4M3FN, x, -1, 4, 0, q, s) == OCT_ERR_INVALID_ARG);
    CHECK(oct_quant_groups(OCT_FP8_E4M3FN, x, 1, 4, 0, q, s) == OCT_ERR_INVALID_ARG);
    CHECK(oct_quant_blocks(OCT_FP8_E4M3FN, x, 1, 4, 128, 0, q, s) == OCT_ERR_INVALID_ARG);
    CHECK(oct_quant_tensor(OCT_FP8_E4M3FN, NULL, 4, q, s) == OCT_ERR_INVALID_ARG);
    CHECK(oct_quant_rows(OCT_FP8_E4M3FN, x, INT64_MAX, INT64_MAX, 0, q, s) == OCT_ERR_INVALID_ARG);
}

/* Every CPU path gives the reference path's bytes and scales, on random data
 * with NaN, Inf, zero blocks and partial edge blocks. */
static void test_paths_agree(void)
{
    const int64_t R = 131, C = 4 * 128 + 72; /* partial last block; C % 32 == 8 */
    const int64_t Cmx = 512;
    float *x = malloc((size_t)(R * C) * 4);
    uint64_t seed = 99;
    for (int64_t i = 0; i < R * C; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = ldexpf((float)((int64_t)(seed >> 40) - (1 << 23)) / 8388608.0f,
                      (int)((seed >> 20) % 12) - 6);
    }
    for (int64_t c = 0; c < C; c++)
        x[5 * C + c] = 0.0f; /* zero row: zero blocks / groups */
    x[130 * C + 3] = NAN;    /* NaN in block row 1 */
    x[200 + 7 * C] = -INFINITY;
    x[2 * C + 300] = -NAN;
    size_t n = (size_t)(R * C);
    uint8_t *q0 = malloc(n), *q1 = malloc(n);
    float *s0 = malloc(n * 4), *s1 = malloc(n * 4);
    uint8_t *e0 = malloc(n), *e1 = malloc(n);
    for (int lvl = OCT_CPU_AVX2; lvl <= (int)oct_cpu_level_max(); lvl++) {
        for (int kind = 0; kind < 5; kind++) {
            for (int pass = 0; pass < 2; pass++) {
                CHECK_OK(oct_cpu_force(pass ? (oct_cpu_level)lvl : OCT_CPU_REF));
                uint8_t *q = pass ? q1 : q0, *e = pass ? e1 : e0;
                float *sc = pass ? s1 : s0;
                memset(q, 0xA5, n);
                switch (kind) {
                case 0: oct_quant_tensor(OCT_FP8_E4M3FN, x, n, q, sc); break;
                case 1: oct_quant_rows(OCT_FP8_E4M3FNUZ, x, R, C, 0, q, sc); break;
                case 2: oct_quant_groups(OCT_FP8_E4M3FN, x, R, C, 128, q, sc); break;
                case 3: oct_quant_blocks(OCT_FP8_E5M2, x, R, C, 128, 128, q, sc); break;
                case 4: oct_quant_mx(OCT_FP8_E4M3FN, OCT_MX_CT, x, R, Cmx, q, e); break;
                }
            }
            size_t ns = kind == 0   ? 1
                        : kind == 1 ? (size_t)R
                        : kind == 2 ? (size_t)(R * 5)
                        : kind == 3 ? 10
                                    : 0;
            size_t nq = kind == 4 ? (size_t)(R * Cmx) : n;
            CHECKF(memcmp(q0, q1, nq) == 0, "level %d kind %d: codes differ", lvl, kind);
            CHECKF(kind == 4 ? memcmp(e0, e1, nq / 32) == 0 : cmp_f32("scales", s0, s1, ns) == 0,
                   "level %d kind %d: scales differ", lvl, kind);
        }
    }
    oct_cpu_force(oct_cpu_level_max());
    free(x), free(q0), free(q1), free(s0), free(s1), free(e0), free(e1);
}

int main(void)
{
    RUN(test_open);
    RUN(test_per_tensor);
    RUN(test_per_token_and_channel);
    RUN(test_groups);
    RUN(test_blocks);
    RUN(test_mx);
    RUN(test_static);
    RUN(test_fused_parts);
    RUN(test_fn_to_fnuz);
    RUN(test_bad_args);
    RUN(test_paths_agree);
    if (g_have)
        fixture_st_close(&g_st);
    return testlib_finish();
}

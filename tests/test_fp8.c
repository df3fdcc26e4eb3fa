/* test_fp8.c — the five FP8 formats against PyTorch 2.11 (fixture made by
 * tools/make_fp8_fixtures.py on an H200): every bf16 and f16 pattern, ~1M f32
 * values (edges + random pools), every code's decode; both cast modes; every
 * CPU path this machine has. */
#include <math.h>

#include "fixture_st.h"
#include "fp8/fp8_impl.h"
#include "octet.h"
#include "testlib.h"

static const oct_fp8_format k_formats[] = {OCT_FP8_E4M3FN, OCT_FP8_E5M2, OCT_FP8_E4M3FNUZ,
                                           OCT_FP8_E5M2FNUZ, OCT_FP8_E8M0FNU};
static const char *k_modes[] = {"nonsat", "sat"};

static fixture_st g_st;
static int g_have;

/* The random f32 pools of the fixture script (see its docstring). */
static const uint32_t k_pool_lo[5] = {115, 108, 114, 107, 0};
static const uint32_t k_pool_span[5] = {23, 37, 23, 38, 256};

static uint64_t splitmix64(uint64_t *state)
{
    *state += 0x9E3779B97F4A7C15ull;
    uint64_t z = *state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float *g_f32; /* edges then random pools */
static size_t g_n_f32;

static void build_f32_inputs(void)
{
    int64_t shape[4];
    size_t nb;
    const int32_t *edges = fixture_st_get(&g_st, "f32.edges", shape, NULL, &nb);
    REQUIRE(edges != NULL);
    size_t n_e = nb / 4;
    long pool = atol(fixture_st_meta(&g_st, "pool"));
    g_n_f32 = n_e + 5 * (size_t)pool;
    g_f32 = malloc(g_n_f32 * sizeof(float));
    memcpy(g_f32, edges, n_e * 4);
    size_t k = n_e;
    for (int p = 0; p < 5; p++) {
        uint64_t s = 0x0C7E7u + (uint64_t)p;
        for (long i = 0; i < pool; i++) {
            uint64_t r = splitmix64(&s);
            uint32_t sign = (uint32_t)(r >> 63);
            uint32_t e = k_pool_lo[p] + (uint32_t)((r >> 32) % k_pool_span[p]);
            uint32_t bits = (sign << 31) | (e << 23) | (uint32_t)(r & 0x7FFFFFu);
            memcpy(&g_f32[k++], &bits, 4);
        }
    }
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < g_n_f32; i++) {
        uint32_t u;
        memcpy(&u, &g_f32[i], 4);
        for (int b = 0; b < 4; b++) {
            h ^= (u >> (8 * b)) & 0xFFu;
            h *= 0x100000001B3ull;
        }
    }
    char hex[32];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    CHECKF(strcmp(hex, fixture_st_meta(&g_st, "f32_digest")) == 0,
           "regenerated inputs digest %s != fixture %s", hex, fixture_st_meta(&g_st, "f32_digest"));
}

static void test_fixture_loads(void)
{
    REQUIRE(fixture_st_open(&g_st, "fp8_casts.safetensors") == 0);
    g_have = 1;
    build_f32_inputs();
}

/* Compare one path's output with the fixture; print the first few mismatches. */
static int compare(const char *what, const uint8_t *want, const uint8_t *got, size_t n,
                   const void *inputs, int in_bits)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (want[i] != got[i]) {
            if (bad < 5) {
                unsigned long long in =
                    in_bits == 16 ? ((const uint16_t *)inputs)[i] : ((const uint32_t *)inputs)[i];
                fprintf(stderr, "  %s: input 0x%llx: want 0x%02x got 0x%02x\n", what, in, want[i],
                        got[i]);
            }
            bad++;
        }
    }
    return bad;
}

static void check_all_paths(const char *src_kind)
{
    REQUIRE(g_have);
    size_t n = strcmp(src_kind, "f32") == 0 ? g_n_f32 : 65536;
    uint16_t *pats = malloc(65536 * sizeof(uint16_t));
    for (uint32_t i = 0; i < 65536; i++)
        pats[i] = (uint16_t)i;
    uint8_t *got = malloc(n);
    for (int lvl = OCT_CPU_REF; lvl <= (int)oct_cpu_level_max(); lvl++) {
        const oct_fp8_impl *impl = oct_fp8_impl_for((oct_cpu_level)lvl);
        for (size_t fi = 0; fi < OCT_ARRAY_LEN_T(k_formats); fi++) {
            for (int m = 0; m < 2; m++) {
                char name[64];
                snprintf(name, sizeof name, "%s.%s.%s", src_kind, oct_fp8_format_str(k_formats[fi]),
                         k_modes[m]);
                size_t nb;
                const uint8_t *want = fixture_st_get(&g_st, name, NULL, NULL, &nb);
                CHECKF(want && nb == n, "%s: fixture tensor missing or wrong size", name);
                if (!want || nb != n)
                    continue;
                memset(got, 0xA5, n);
                const void *in;
                if (strcmp(src_kind, "bf16") == 0) {
                    impl->from_bf16(k_formats[fi], (oct_cast_mode)m, pats, got, n);
                    in = pats;
                } else if (strcmp(src_kind, "f16") == 0) {
                    impl->from_f16(k_formats[fi], (oct_cast_mode)m, pats, got, n);
                    in = pats;
                } else {
                    impl->from_f32(k_formats[fi], (oct_cast_mode)m, g_f32, got, n);
                    in = g_f32;
                }
                int bad = compare(name, want, got, n, in, strcmp(src_kind, "f32") ? 16 : 32);
                CHECKF(bad == 0, "path %s, %s: %d of %zu codes differ from PyTorch", impl->name,
                       name, bad, n);
            }
        }
    }
    free(got);
    free(pats);
}

static void test_bf16_every_pattern(void)
{
    check_all_paths("bf16");
}

static void test_f16_every_pattern(void)
{
    check_all_paths("f16");
}

static void test_f32_edges_and_random(void)
{
    CHECK(g_n_f32 > 1000000);
    check_all_paths("f32");
}

/* Decoding every code: must round-trip through the NONSAT f32 cast (PyTorch's
 * decode is exact, so encode(decode(c)) == c for every non-NaN code), and
 * NaN codes decode to NaN. */
static void test_decode_all_codes(void)
{
    for (int lvl = OCT_CPU_REF; lvl <= (int)oct_cpu_level_max(); lvl++) {
        const oct_fp8_impl *impl = oct_fp8_impl_for((oct_cpu_level)lvl);
        for (size_t fi = 0; fi < OCT_ARRAY_LEN_T(k_formats); fi++) {
            oct_fp8_format f = k_formats[fi];
            uint8_t codes[256], back[256];
            float vals[256];
            for (int c = 0; c < 256; c++)
                codes[c] = (uint8_t)c;
            impl->to_f32(f, codes, vals, 256);
            impl->from_f32(f, OCT_CAST_NONSAT, vals, back, 256);
            for (int c = 0; c < 256; c++) {
                float ref = oct_fp8_ref_decode(f, (uint8_t)c);
                if (isnan(ref)) {
                    CHECKF(isnan(vals[c]), "%s %s code 0x%02x should be NaN", impl->name,
                           oct_fp8_format_str(f), c);
                    continue;
                }
                CHECKF(memcmp(&vals[c], &ref, 4) == 0, "%s %s code 0x%02x: %g vs %g", impl->name,
                       oct_fp8_format_str(f), c, (double)vals[c], (double)ref);
                CHECKF(back[c] == c, "%s %s code 0x%02x re-encodes to 0x%02x", impl->name,
                       oct_fp8_format_str(f), c, back[c]);
            }
        }
    }
    /* Spot values from the format table of docs/NUMERICS.md. */
    CHECK(oct_fp8_decode(OCT_FP8_E4M3FN, 0x7E) == 448.0f);
    CHECK(oct_fp8_decode(OCT_FP8_E4M3FN, 0x01) == ldexpf(1.0f, -9));
    CHECK(isnan(oct_fp8_decode(OCT_FP8_E4M3FN, 0xFF)));
    CHECK(oct_fp8_decode(OCT_FP8_E5M2, 0x7B) == 57344.0f);
    CHECK(isinf(oct_fp8_decode(OCT_FP8_E5M2, 0xFC)) && oct_fp8_decode(OCT_FP8_E5M2, 0xFC) < 0);
    CHECK(oct_fp8_decode(OCT_FP8_E4M3FNUZ, 0x7F) == 240.0f);
    CHECK(isnan(oct_fp8_decode(OCT_FP8_E4M3FNUZ, 0x80)));
    CHECK(oct_fp8_decode(OCT_FP8_E5M2FNUZ, 0x7F) == 57344.0f);
    CHECK(oct_fp8_decode(OCT_FP8_E8M0FNU, 0x00) == ldexpf(1.0f, -127));
    CHECK(oct_fp8_decode(OCT_FP8_E8M0FNU, 0xFE) == ldexpf(1.0f, 127));
    CHECK(isnan(oct_fp8_decode(OCT_FP8_E8M0FNU, 0xFF)));
}

/* The e4m3fn cast boundaries and the e8m0 cases of docs/NUMERICS.md §Encoding as
 * named expectations (independent of the fixture). */
static void test_named_edge_cases(void)
{
    struct {
        oct_fp8_format f;
        oct_cast_mode m;
        float x;
        uint8_t want;
    } cases[] = {
        {OCT_FP8_E4M3FN, OCT_CAST_NONSAT, 464.0f, 0x7E},
        {OCT_FP8_E4M3FN, OCT_CAST_NONSAT, 464.01f, 0x7F},
        {OCT_FP8_E4M3FN, OCT_CAST_SAT, 464.01f, 0x7E},
        {OCT_FP8_E4M3FN, OCT_CAST_NONSAT, 480.0f, 0x7F},
        {OCT_FP8_E4M3FN, OCT_CAST_NONSAT, -INFINITY, 0xFF},
        {OCT_FP8_E4M3FN, OCT_CAST_SAT, -INFINITY, 0xFE},
        {OCT_FP8_E4M3FN, OCT_CAST_NONSAT, -0.0f, 0x80},
        {OCT_FP8_E4M3FN, OCT_CAST_NONSAT, -1e-30f, 0x80},
        {OCT_FP8_E4M3FN, OCT_CAST_NONSAT, 0x1p-10f, 0x00}, /* tie -> even (0) */
        {OCT_FP8_E4M3FN, OCT_CAST_NONSAT, 0x3p-10f, 0x02}, /* tie -> 2^-8 */
        {OCT_FP8_E4M3FN, OCT_CAST_NONSAT, 0x5p-10f, 0x02}, /* tie -> 2^-8 */
        {OCT_FP8_E5M2, OCT_CAST_NONSAT, 61440.0f, 0x7C},   /* tie rounds to Inf */
        {OCT_FP8_E5M2, OCT_CAST_SAT, 1e6f, 0x7B},
        {OCT_FP8_E4M3FNUZ, OCT_CAST_NONSAT, -0.0f, 0x00},
        {OCT_FP8_E4M3FNUZ, OCT_CAST_NONSAT, 250.0f, 0x80},
        {OCT_FP8_E8M0FNU, OCT_CAST_NONSAT, -8.0f, 130},
        {OCT_FP8_E8M0FNU, OCT_CAST_NONSAT, 0x1.8p3f, 131}, /* 1.5 * 2^3 ties up */
        {OCT_FP8_E8M0FNU, OCT_CAST_NONSAT, 0x1.7ffffep3f, 130},
        {OCT_FP8_E8M0FNU, OCT_CAST_NONSAT, 0.0f, 0x00},
        {OCT_FP8_E8M0FNU, OCT_CAST_NONSAT, 0x1.cp127f, 0xFF}, /* 1.75 * 2^127 -> NaN */
        {OCT_FP8_E8M0FNU, OCT_CAST_SAT, INFINITY, 0xFF},
    };
    for (size_t i = 0; i < OCT_ARRAY_LEN_T(cases); i++) {
        uint8_t got = 0;
        CHECK_OK(oct_fp8_from_f32(cases[i].f, cases[i].m, &cases[i].x, &got, 1));
        CHECKF(got == cases[i].want, "%s %s(%a) = 0x%02x, want 0x%02x",
               oct_fp8_format_str(cases[i].f), k_modes[cases[i].m], (double)cases[i].x, got,
               cases[i].want);
    }
}

static void test_bad_arguments(void)
{
    float x = 1.0f;
    uint8_t q;
    CHECK(oct_fp8_from_f32((oct_fp8_format)9, OCT_CAST_SAT, &x, &q, 1) == OCT_ERR_INVALID_ARG);
    CHECK(oct_fp8_from_f32(OCT_FP8_E4M3FN, (oct_cast_mode)7, &x, &q, 1) == OCT_ERR_INVALID_ARG);
    CHECK(oct_fp8_from_f32(OCT_FP8_E4M3FN, OCT_CAST_SAT, NULL, &q, 1) == OCT_ERR_INVALID_ARG);
    CHECK(oct_fp8_to_f32(OCT_FP8_E4M3FN, &q, NULL, 1) == OCT_ERR_INVALID_ARG);
    CHECK(oct_fp8_from_f32(OCT_FP8_E4M3FN, OCT_CAST_SAT, NULL, NULL, 0) == OCT_OK);
}

static void test_half_helpers(void)
{
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float f = oct_f16_to_f32(h);
        if (isnan(f))
            continue;
        CHECKF(oct_f32_to_f16(f) == h, "f16 0x%04x round trip", i);
        float b = oct_bf16_to_f32(h);
        if (!isnan(b))
            CHECKF(oct_f32_to_bf16(b) == h, "bf16 0x%04x round trip", i);
    }
    CHECK(oct_f32_to_bf16(1.00390625f) == 0x3F80); /* tie -> even */
    CHECK(oct_f32_to_f16(65520.0f) == 0x7C00);
    CHECK(oct_f32_to_f16(65519.0f) == 0x7BFF);
}

int main(void)
{
    RUN(test_fixture_loads);
    RUN(test_bf16_every_pattern);
    RUN(test_f16_every_pattern);
    RUN(test_f32_edges_and_random);
    RUN(test_decode_all_codes);
    RUN(test_named_edge_cases);
    RUN(test_bad_arguments);
    RUN(test_half_helpers);
    if (g_have)
        fixture_st_close(&g_st);
    free(g_f32);
    return testlib_finish();
}

/* test_gemm_batch.c — batch invariance: a row's output is bit for bit the same
 * whether it runs alone (GEMV path, M = 1), in small batches (GEMV, M 5, 13, 14)
 * or in a large one (blocked GEMM).  Continuous batching relies on this: a
 * request's tokens must not depend on what else the server is running. */
#include <math.h>

#include "octet.h"
#include "testlib.h"

static float frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 11) / 9007199254740992.0 - 0.5);
}

static void check(oct_weight_type wt, oct_scale_kind ws, oct_act_quant act, int64_t N, int64_t K)
{
    const int64_t M = 41;
    uint64_t seed = (uint64_t)(wt * 100 + ws * 10 + act) + (uint64_t)K;
    float *w = malloc((size_t)(N * K) * 4), *x = malloc((size_t)(M * K) * 4);
    float *y = malloc((size_t)(M * N) * 4), *y1 = malloc((size_t)(M * N) * 4);
    uint8_t *q = malloc((size_t)(N * K));
    uint16_t *wb = malloc((size_t)(N * K) * 2);
    size_t nsc = (size_t)(N * K);
    void *sc = malloc(nsc * 4);
    for (int64_t i = 0; i < N * K; i++)
        w[i] = frand(&seed) * 0.1f;
    for (int64_t i = 0; i < M * K; i++)
        x[i] = frand(&seed) * (i % 53 == 0 ? 30.0f : 1.0f);
    const void *wptr = q;
    if (wt == OCT_WEIGHT_BF16) {
        for (int64_t i = 0; i < N * K; i++)
            wb[i] = oct_f32_to_bf16(w[i]);
        wptr = wb;
    } else if (ws == OCT_SCALE_TENSOR) {
        oct_quant_tensor(OCT_FP8_E4M3FN, w, (size_t)(N * K), q, sc);
    } else if (ws == OCT_SCALE_ROW) {
        oct_quant_rows(OCT_FP8_E4M3FN, w, N, K, 0, q, sc);
    } else if (ws == OCT_SCALE_BLOCK128) {
        oct_quant_blocks(OCT_FP8_E4M3FN, w, N, K, 128, 128, q, sc);
    } else {
        oct_quant_mx(OCT_FP8_E4M3FN, OCT_MX_OCP, w, N, K, q, sc);
    }
    oct_linear_desc d;
    memset(&d, 0, sizeof d);
    d.name = "batch";
    d.n = N;
    d.k = K;
    d.weight_type = wt;
    d.weight_scale = ws;
    d.act = act;
    oct_linear *l = NULL;
    oct_error err;
    REQUIRE(oct_linear_create(&d, NULL, wptr, wt == OCT_WEIGHT_FP8 ? sc : NULL, NULL, &l, &err) ==
            OCT_OK);
    CHECK_OK(oct_linear_forward(l, M, x, y, &err));
    /* every row alone, then rows in groups of 5 */
    int bad = 0;
    for (int64_t r = 0; r < M; r++) {
        CHECK_OK(oct_linear_forward(l, 1, x + r * K, y1 + r * N, &err));
    }
    bad += memcmp(y, y1, (size_t)(M * N) * 4) != 0;
    for (int64_t r = 0; r < M; r += 5) {
        int64_t m = M - r < 5 ? M - r : 5;
        CHECK_OK(oct_linear_forward(l, m, x + r * K, y1 + r * N, &err));
    }
    bad += 2 * (memcmp(y, y1, (size_t)(M * N) * 4) != 0);
    for (int64_t r = 0; r < M; r += 14) { /* 14, 14, 13: the 13-16 row GEMV paths */
        int64_t m = M - r < 14 ? M - r : 14;
        CHECK_OK(oct_linear_forward(l, m, x + r * K, y1 + r * N, &err));
    }
    bad += 4 * (memcmp(y, y1, (size_t)(M * N) * 4) != 0);
    CHECKF(bad == 0,
           "%s, weight scale %d, act %d, N %lld K %lld: rows differ between batch "
           "sizes (%s)",
           oct_linear_kernel_name(oct_linear_get_kernel(l)), (int)ws, (int)act, (long long)N,
           (long long)K,
           bad & 1   ? "alone vs 41"
           : bad & 2 ? "5 vs 41"
                     : "14 vs 41");
    oct_linear_free(l);
    free(w), free(x), free(y), free(y1), free(q), free(wb), free(sc);
}

static void test_batch_invariance(void)
{
    for (int lvl = OCT_CPU_REF; lvl <= (int)oct_cpu_level_max(); lvl++) {
        REQUIRE(oct_cpu_force((oct_cpu_level)lvl) == OCT_OK);
        const int64_t Ks[2] = {320, 4096 + 96};
        for (int i = 0; i < 2; i++) {
            int64_t K = Ks[i];
            check(OCT_WEIGHT_BF16, OCT_SCALE_TENSOR, OCT_ACT_NONE, 96, K);
            check(OCT_WEIGHT_FP8, OCT_SCALE_TENSOR, OCT_ACT_DYNAMIC_TOKEN, 96, K);
            check(OCT_WEIGHT_FP8, OCT_SCALE_ROW, OCT_ACT_DYNAMIC_TOKEN, 70, K);
            check(OCT_WEIGHT_FP8, OCT_SCALE_ROW, OCT_ACT_NONE, 64, K);
            check(OCT_WEIGHT_FP8, OCT_SCALE_BLOCK128, OCT_ACT_GROUP128, 160, K);
            check(OCT_WEIGHT_FP8, OCT_SCALE_MX32, OCT_ACT_MX32, 64, K);
        }
    }
    oct_cpu_force(oct_cpu_level_max());
}

int main(void)
{
    RUN(test_batch_invariance);
    return testlib_finish();
}

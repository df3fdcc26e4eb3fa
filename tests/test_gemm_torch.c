/* test_gemm_torch.c — oct_scaled_mm_f32 on every CPU path against
 * torch._scaled_mm outputs computed on an H200 (tools/make_gemm_fixtures.py,
 * fixture gemm_torch.bin; format in that script).
 *
 * Tolerance: torch returns bf16 and sums in an unknown order, so
 * |ours - torch| <= 2^-8 |torch| (one bf16 rounding each way) +
 * (K + 4) 2^-24 S, S = sa sb sum_k |a_k b_k| + |bias| (summation order). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fp8/fp8_impl.h"
#include "octet.h"
#include "testlib.h"

static uint32_t rd32(const unsigned char **p)
{
    uint32_t v;
    memcpy(&v, *p, 4);
    *p += 4;
    return v;
}

static void test_torch_scaled_mm(void)
{
    const char *path = testlib_fixture("gemm_torch.bin");
    size_t size = 0;
    unsigned char *buf = testlib_read_file(path, &size);
    CHECKF(buf != NULL,
           "fixture %s missing: run `python3 tools/make_gemm_fixtures.py DIR` on "
           "the GPU machine and copy DIR/gemm_torch.bin.gz to tests/fixtures/",
           path);
    if (!buf)
        return;
    REQUIRE(size > 12 && memcmp(buf, "OCTGEMM1", 8) == 0);
    const unsigned char *p = buf + 8, *end = buf + size;
    uint32_t n_cases = rd32(&p);
    const float *lut = oct_fp8_decode_table(OCT_FP8_E4M3FN);
    const oct_cpu_level levels[] = {OCT_CPU_REF, OCT_CPU_AVX2, OCT_CPU_AVX512};
    int checked = 0;
    for (uint32_t c = 0; c < n_cases; c++) {
        REQUIRE(end - p >= 20);
        int64_t M = rd32(&p), N = rd32(&p), K = rd32(&p);
        uint32_t mode = rd32(&p), has_bias = rd32(&p);
        size_t n_sa = mode ? (size_t)M : 1, n_sb = mode ? (size_t)N : 1;
        size_t need = (size_t)(M * K + N * K) + 4 * (n_sa + n_sb) + (has_bias ? 2 * (size_t)N : 0) +
                      2 * (size_t)(M * N);
        REQUIRE((size_t)(end - p) >= need);
        const uint8_t *A = p, *B = p + M * K;
        p += M * K + N * K;
        float *sa = malloc(n_sa * 4), *sb = malloc(n_sb * 4), *bias = NULL;
        memcpy(sa, p, n_sa * 4);
        p += n_sa * 4;
        memcpy(sb, p, n_sb * 4);
        p += n_sb * 4;
        if (has_bias) {
            bias = malloc((size_t)N * 4);
            for (int64_t j = 0; j < N; j++) {
                uint16_t h;
                memcpy(&h, p + 2 * j, 2);
                bias[j] = oct_bf16_to_f32(h);
            }
            p += 2 * N;
        }
        const unsigned char *yt = p;
        p += 2 * M * N;
        float *y = malloc((size_t)(M * N) * 4);
        oct_scale_kind kind = mode ? OCT_SCALE_ROW : OCT_SCALE_TENSOR;
        for (size_t li = 0; li < sizeof levels / sizeof levels[0]; li++) {
            if (oct_cpu_force(levels[li]) != OCT_OK)
                continue;
            CHECK_OK(oct_scaled_mm_f32(M, N, K, A, kind, sa, B, kind, sb, bias, y));
            int bad = 0;
            for (int64_t m = 0; m < M && bad < 3; m++) {
                for (int64_t n = 0; n < N && bad < 3; n++) {
                    uint16_t h;
                    memcpy(&h, yt + 2 * (m * N + n), 2);
                    double want = (double)oct_bf16_to_f32(h);
                    double s = 0;
                    for (int64_t k = 0; k < K; k++)
                        s += fabs((double)lut[A[m * K + k]] * (double)lut[B[n * K + k]]);
                    s *= (double)sa[mode ? m : 0] * (double)sb[mode ? n : 0];
                    s += bias ? fabs((double)bias[n]) : 0.0;
                    /* torch's output is bf16 (2^-8 relative), and Hopper's FP8
                     * tensor cores accumulate with only ~13-14 significant
                     * bits (DeepSeek-V3 report; we measured errors up to
                     * 1.0e-4 x sum|a b sa sb| on the H200): allow 2^-11 of
                     * that sum, 4x the worst seen.  A wrong scale, layout or
                     * code is off by far more. */
                    double tol = ldexp(fabs(want), -8) + ldexp(s, -11) + 1e-30;
                    double got = (double)y[m * N + n];
                    if (!(fabs(got - want) <= tol)) {
                        bad++;
                        CHECKF(false,
                               "%s case %u (M=%lld N=%lld K=%lld mode %u) at (%lld,%lld): torch "
                               "%.6g ours %.6g",
                               oct_cpu_level_str(levels[li]), c, (long long)M, (long long)N,
                               (long long)K, mode, (long long)m, (long long)n, want, got);
                    }
                }
            }
            checked++;
        }
        free(sa);
        free(sb);
        free(bias);
        free(y);
    }
    oct_cpu_force(oct_cpu_level_max());
    CHECK(checked > 0);
    free(buf);
}

int main(void)
{
    RUN(test_torch_scaled_mm);
    return testlib_finish();
}

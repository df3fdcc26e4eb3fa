/* test_load_memory.c — streaming online quantization keeps the peak resident
 * memory of loading at most the FP8 model + the largest layer in BF16 + 10%
 * (octet's loading goal, docs/BENCHMARKS.md §Performance goals).  A ~1 GB
 * BF16 Llama checkpoint is written on the fly (streamed, random weights), then
 * a fresh child process loads it with
 * --quantization fp8_per_block and reports its peak RSS (VmHWM).
 *
 * Under ASan the bound is not checked: ASan's shadow memory and its 256 MB
 * quarantine of freed blocks make RSS measure the sanitizer, not octet; the
 * ASan run still loads a smaller model of the same shape family end to end. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "octet.h"
#include "../bench/random_model.h"
#include "testlib.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* Child mode (a fresh exec of this binary, so its peak RSS is its own): load
 * with fp8_per_block and print model bytes, largest unit (BF16), predicted
 * and measured peak. */
static int child_main(const char *dir)
{
    oct_model_opts o;
    memset(&o, 0, sizeof o);
    o.quantization = "fp8_per_block";
    oct_model *m = NULL;
    oct_error err;
    if (oct_model_load(dir, &o, &m, &err) != OCT_OK) {
        fprintf(stderr, "child load: %s\n", err.message);
        return 1;
    }
    const oct_plan *p = oct_model_get_plan(m);
    uint64_t largest = 0;
    for (int64_t i = 0; i < oct_plan_n_layers(p); i++) {
        const oct_plan_layer *l = oct_plan_layer_at(p, i);
        uint64_t u = 0; /* the fused unit in BF16: sum of its parts */
        for (int64_t j = 0; j < oct_plan_n_layers(p); j++)
            if (strcmp(oct_plan_layer_at(p, j)->unit, l->unit) == 0)
                u += 2u * (uint64_t)oct_plan_layer_at(p, j)->n *
                     (uint64_t)oct_plan_layer_at(p, j)->k;
        largest = u > largest ? u : largest;
    }
    printf("%llu %llu %llu %llu\n", (unsigned long long)oct_plan_model_bytes(p),
           (unsigned long long)largest, (unsigned long long)oct_plan_peak_bytes(p),
           (unsigned long long)oct_model_load_peak_bytes(m));
    oct_model_free(m);
    return 0;
}

static int load_in_child(const char *dir, uint64_t out[4])
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/proc/%d/exe --load-child '%s'", (int)getpid(), dir);
    FILE *f = popen(cmd, "r");
    if (!f)
        return 1;
    unsigned long long v[4];
    int n = fscanf(f, "%llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3]);
    int rc = pclose(f);
    for (int i = 0; i < 4; i++)
        out[i] = n == 4 ? v[i] : 0;
    return n == 4 && rc == 0 ? 0 : 1;
}

static void test_peak_memory_of_online_quantization(void)
{
    /* ~1.0 GB BF16: 9 layers of hidden 2048 / intermediate 5632, vocab 8192 */
    shape s = UNDER_ASAN ? (shape){512, 1408, 2, 2048, 4, 2} : (shape){2048, 5632, 9, 8192, 16, 8};
    char dir[] = "/tmp/octet_memtest_XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    REQUIRE(random_model_write(dir, s) == 0);
    uint64_t r[4];
    int rc = load_in_child(dir, r);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    REQUIRE(rc == 0 && r[0] > 0);
    double bound = ((double)r[0] + (double)r[1]) * 1.10;
    int64_t kvd = s.hidden / s.heads * s.kv_heads;
    printf(
        "  checkpoint %.0f MB BF16 -> model %.1f MB FP8; largest unit %.1f MB BF16; peak "
        "predicted %.1f MB, measured %.1f MB; bound %.1f MB%s\n",
        (double)(s.layers *
                     (2 * s.hidden * s.hidden + 2 * s.hidden * kvd + 3 * s.hidden * s.inter) * 2 +
                 2 * s.vocab * s.hidden * 2) /
            1e6,
        (double)r[0] / 1e6, (double)r[1] / 1e6, (double)r[2] / 1e6, (double)r[3] / 1e6, bound / 1e6,
        UNDER_ASAN ? " (not checked under ASan)" : "");
    if (!UNDER_ASAN)
        CHECKF((double)r[3] <= bound,
               "peak RSS %.1f MB > FP8 model + largest BF16 layer + 10%% "
               "= %.1f MB",
               (double)r[3] / 1e6, bound / 1e6);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--load-child") == 0)
        return child_main(argv[2]);
    RUN(test_peak_memory_of_online_quantization);
    return testlib_finish();
}

/* formats.c — `octet formats` (the table of FP8 formats) and `octet cpu`. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

int cli_formats(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    static const oct_fp8_format all[] = {OCT_FP8_E4M3FN, OCT_FP8_E5M2, OCT_FP8_E4M3FNUZ,
                                         OCT_FP8_E5M2FNUZ, OCT_FP8_E8M0FNU};
    printf("%-10s %14s %14s %14s %6s %6s\n", "format", "max", "min normal", "min subnormal",
           "NaNs", "Infs");
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        oct_fp8_format f = all[i];
        float min_normal = INFINITY, min_sub = INFINITY;
        int nans = 0, infs = 0;
        for (int c = 0; c < 256; c++) {
            float v = oct_fp8_decode(f, (uint8_t)c);
            if (isnan(v)) {
                nans++;
                continue;
            }
            if (isinf(v)) {
                infs++;
                continue;
            }
            if (v > 0.0f && v < min_sub)
                min_sub = v;
        }
        /* min normal: smallest positive value whose code has a nonzero exponent */
        for (int c = 1; c < 128; c++) {
            float v = oct_fp8_decode(f, (uint8_t)c);
            if (f == OCT_FP8_E8M0FNU || (c >> (f == OCT_FP8_E5M2 || f == OCT_FP8_E5M2FNUZ ? 2 : 3)) > 0) {
                if (v > 0.0f && v < min_normal)
                    min_normal = v;
            }
        }
        printf("%-10s %14.6g %14.6g %14.6g %6d %6d\n", oct_fp8_format_str(f),
               (double)oct_fp8_max(f), (double)min_normal, (double)min_sub, nans, infs);
    }
    return 0;
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
    printf("max level: %s, active level: %s, threads: %d\n",
           oct_cpu_level_str(oct_cpu_level_max()), oct_cpu_level_str(oct_cpu_level_get()),
           oct_threads_get());
    return 0;
}

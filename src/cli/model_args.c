/* model_args.c — shared model flags and model loading with a progress bar. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/model_args.h"

void model_args_init(model_args *a)
{
    memset(a, 0, sizeof *a);
    a->progress = isatty(STDERR_FILENO);
}

const char *model_args_usage(void)
{
    return "  --model DIR                 Hugging Face model folder (required)\n"
           "  --quantization S            fp8 | fp8_per_tensor | fp8_per_block | mxfp8 | online\n"
           "  --quantization-config JSON  {\"linear\": ..., \"moe\": ..., \"ignore\": [...]}\n"
           "  --kv-cache-dtype D          auto | float32 | bf16 | fp8 | fp8_e4m3 | fp8_e5m2\n"
           "  --calculate-kv-scales       FP8 KV scales from the first prompt\n"
           "  --device D                  auto | cuda | cpu: where the whole model runs\n"
           "                              (auto: the GPU when there is one)\n"
           "  --enforce-eager             --device cuda: no CUDA graphs for decode steps\n"
           "  --linear-backend B          auto | cuda | cpu | avx512 | avx2 | ref\n"
           "  --moe-backend B             MoE experts: auto | cuda | cuda_grouped | cpu |\n"
           "                              avx512 | avx2 | ref (auto: as --linear-backend)\n"
           "  --dtype D                   auto | bfloat16 | float32 (unquantized layers)\n"
           "  --threads N                 kernel threads (default: all CPUs)\n";
}

int model_args_parse(model_args *a, int argc, char **argv, int *i, const char *cmd)
{
    const char *f = argv[*i];
    const char **slot = NULL;
    if (strcmp(f, "--model") == 0)
        slot = &a->model;
    else if (strcmp(f, "--quantization") == 0 || strcmp(f, "-q") == 0)
        slot = &a->opts.quantization;
    else if (strcmp(f, "--quantization-config") == 0)
        slot = &a->opts.quantization_config;
    else if (strcmp(f, "--kv-cache-dtype") == 0)
        slot = &a->opts.kv_cache_dtype;
    else if (strcmp(f, "--linear-backend") == 0)
        slot = &a->opts.linear_backend;
    else if (strcmp(f, "--moe-backend") == 0)
        slot = &a->opts.moe_backend;
    else if (strcmp(f, "--device") == 0)
        slot = &a->opts.device;
    else if (strcmp(f, "--dtype") == 0)
        slot = &a->opts.dtype;
    else if (strcmp(f, "--calculate-kv-scales") == 0) {
        a->opts.calculate_kv_scales = true;
        return 1;
    } else if (strcmp(f, "--enforce-eager") == 0) {
        a->opts.enforce_eager = true;
        return 1;
    } else if (strcmp(f, "--threads") == 0) {
        if (*i + 1 >= argc || atoi(argv[*i + 1]) <= 0) {
            fprintf(stderr, "octet %s: --threads needs a positive number\n", cmd);
            return -1;
        }
        a->threads = atoi(argv[++*i]);
        oct_threads_set(a->threads);
        return 1;
    } else
        return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "octet %s: %s needs a value\n", cmd, f);
        return -1;
    }
    *slot = argv[++*i];
    return 1;
}

static void progress_bar(uint64_t done, uint64_t total, const char *what, void *user)
{
    (void)user;
    int width = 30;
    int fill = total ? (int)((double)done / (double)total * width) : width;
    fprintf(stderr, "\r[%.*s%*s] %3d%% %-48.48s", fill, "##############################",
            width - fill, "", total ? (int)(100.0 * (double)done / (double)total) : 100, what);
    if (done >= total)
        fputc('\n', stderr);
    fflush(stderr);
}

int model_args_load(model_args *a, const char *cmd, oct_model **out)
{
    if (!a->model) {
        fprintf(stderr, "octet %s: --model DIR is required\n", cmd);
        return 2;
    }
    if (a->progress) {
        a->opts.progress = progress_bar;
        a->opts.progress_user = NULL;
    }
    oct_error err;
    oct_error_clear(&err);
    oct_status st = oct_model_load(a->model, &a->opts, out, &err);
    if (st != OCT_OK) {
        fprintf(stderr, "octet %s: %s\n", cmd, err.message[0] ? err.message : oct_status_str(st));
        return 1;
    }
    return 0;
}

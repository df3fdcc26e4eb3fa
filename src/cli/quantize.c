/* quantize.c — `octet quantize`: write an FP8 checkpoint (compressed-tensors
 * or quant_method "fp8") from a BF16/FP16/F32 one; see oct_checkpoint_export. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

#define MAX_IGNORE 256

static void usage(FILE *f)
{
    fprintf(f,
            "usage: octet quantize --model DIR --scheme FP8_DYNAMIC|FP8_BLOCK|MXFP8\n"
            "                      --format compressed-tensors|fp8 --out OUT\n"
            "                      [--ignore PATTERN ...] [--max-shard-size GB]\n"
            "  --ignore      exact layer name or \"re:<regex>\" (Python re.match); repeatable.\n"
            "                lm_head is never quantized.\n"
            "  --format fp8  FP8_BLOCK -> weight_scale_inv 128x128 (transformers FineGrainedFP8);\n"
            "                FP8_DYNAMIC -> one weight_scale per tensor (AutoFP8 dynamic);\n"
            "                MXFP8 needs compressed-tensors.\n");
}

typedef struct bar {
    bool tty;
    time_t last;
} bar;

static void on_progress(uint64_t done, uint64_t total, const char *tensor, void *user)
{
    bar *b = user;
    if (!b->tty)
        return;
    time_t now = time(NULL);
    if (done < total && now == b->last && done != 0)
        return;
    b->last = now;
    int width = 30;
    double frac = total ? (double)done / (double)total : 1.0;
    int fill = (int)(frac * width);
    char line[64];
    for (int i = 0; i < width; i++)
        line[i] = i < fill ? '#' : '.';
    line[width] = 0;
    fprintf(stderr, "\r[%s] %5.1f%%  %-48.48s", line, frac * 100.0, tensor);
    if (done >= total)
        fprintf(stderr, "\n");
    fflush(stderr);
}

bool cli_shard_size(const char *cmd, const char *v, size_t *bytes)
{
    char *end;
    const double gb = strtod(v, &end);
    if (*end || !(gb > 0.0) || gb > 1e6) {
        fprintf(stderr, "octet %s: --max-shard-size: '%s' is not a size in GB\n", cmd, v);
        return false;
    }
    *bytes = (size_t)(gb * 1e9);
    return true;
}

int cli_quantize(int argc, char **argv)
{
    const char *model = NULL, *scheme = NULL, *format = NULL, *out = NULL;
    const char *ignore[MAX_IGNORE];
    int n_ignore = 0;
    size_t shard_bytes = (size_t)5e9;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (!strcmp(a, "--model") && has)
            model = argv[++i];
        else if (!strcmp(a, "--scheme") && has)
            scheme = argv[++i];
        else if (!strcmp(a, "--format") && has)
            format = argv[++i];
        else if (!strcmp(a, "--out") && has)
            out = argv[++i];
        else if (!strcmp(a, "--ignore") && has) {
            if (n_ignore == MAX_IGNORE) {
                fprintf(stderr, "octet quantize: more than %d --ignore patterns\n", MAX_IGNORE);
                return 2;
            }
            ignore[n_ignore++] = argv[++i];
        } else if (!strcmp(a, "--max-shard-size") && has) {
            if (!cli_shard_size("quantize", argv[++i], &shard_bytes))
                return 2;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "octet quantize: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!model || !scheme || !format || !out) {
        usage(stderr);
        return 2;
    }
    oct_export_opts o;
    memset(&o, 0, sizeof o);
    if (!strcmp(scheme, "FP8_DYNAMIC"))
        o.scheme = OCT_EXPORT_FP8_DYNAMIC;
    else if (!strcmp(scheme, "FP8_BLOCK"))
        o.scheme = OCT_EXPORT_FP8_BLOCK;
    else if (!strcmp(scheme, "MXFP8"))
        o.scheme = OCT_EXPORT_MXFP8;
    else {
        fprintf(stderr,
                "octet quantize: --scheme '%s' is not supported (FP8_DYNAMIC, FP8_BLOCK, MXFP8; "
                "static FP8 needs --calib, not available yet)\n",
                scheme);
        return 2;
    }
    if (!strcmp(format, "compressed-tensors"))
        o.format = OCT_EXPORT_COMPRESSED_TENSORS;
    else if (!strcmp(format, "fp8"))
        o.format = OCT_EXPORT_HF_FP8;
    else {
        fprintf(stderr,
                "octet quantize: --format '%s' is not supported (compressed-tensors, fp8)\n",
                format);
        return 2;
    }
    o.ignore = ignore;
    o.n_ignore = n_ignore;
    o.max_shard_bytes = shard_bytes;
    bar b = {isatty(2) != 0, 0};
    o.progress = on_progress;
    o.progress_user = &b;

    oct_checkpoint *ck = NULL;
    oct_error err;
    oct_error_clear(&err);
    if (oct_checkpoint_open(model, NULL, &ck, &err) != OCT_OK) {
        fprintf(stderr, "octet quantize: %s\n", err.message);
        return 1;
    }
    time_t t0 = time(NULL);
    oct_status st = oct_checkpoint_export(ck, out, &o, &err);
    oct_checkpoint_free(ck);
    if (st != OCT_OK) {
        fprintf(stderr, "octet quantize: %s\n", err.message);
        return 1;
    }
    fprintf(stderr, "octet quantize: wrote %s (%s, %s) in %lds\n", out, scheme, format,
            (long)(time(NULL) - t0));
    return 0;
}

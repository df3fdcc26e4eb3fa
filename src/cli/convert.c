/* convert.c — `octet convert`: re-express a pre-quantized FP8 checkpoint in
 * another format without re-quantizing (oct_checkpoint_convert), and the
 * layer-by-layer report `octet inspect --plan --convert-to` prints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: octet convert --model DIR --format compressed-tensors|fp8|quark --out OUT\n"
               "                     [--max-shard-size GB] [--verbose]\n"
               "  Keeps every FP8 code and scale (no re-quantization): renames and reshapes\n"
               "  them as the target names them and rewrites quantization_config; a layer the\n"
               "  target cannot express is an error naming it, and nothing is written.\n"
               "  --verbose   print what happens to each layer and KV scale\n"
               "  See also: octet inspect --model DIR --plan --convert-to FORMAT\n");
}

typedef struct report {
    FILE *f;
    bool all; /* every step, not only the refused ones */
    int64_t n_refused;
} report;

static void on_step(const char *what, const char *action, bool ok, void *user)
{
    report *r = user;
    if (!ok)
        r->n_refused++;
    if (r->all || !ok)
        fprintf(r->f, "  %-44s %s%s\n", what, ok ? "" : "CANNOT: ", action);
}

int cli_convert_plan(const char *model, const char *format)
{
    oct_convert_opts o;
    memset(&o, 0, sizeof o);
    if (oct_convert_format_parse(format, &o.format) != OCT_OK) {
        fprintf(stderr,
                "octet inspect: --convert-to '%s' is not supported (compressed-tensors, fp8, "
                "quark)\n",
                format);
        return 2;
    }
    oct_checkpoint *ck = NULL;
    oct_error err;
    oct_error_clear(&err);
    if (oct_checkpoint_open(model, NULL, &ck, &err) != OCT_OK) {
        fprintf(stderr, "octet inspect: %s\n", err.message);
        return 1;
    }
    report r = {stdout, true, 0};
    o.on_step = on_step;
    o.user = &r;
    printf("convert %s (%s, %s) to %s: nothing is re-quantized\n", model,
           oct_ckpt_format_str(oct_checkpoint_format(ck)), oct_checkpoint_scheme(ck), format);
    oct_status st = oct_checkpoint_convert(ck, NULL, &o, &err);
    oct_checkpoint_free(ck);
    if (st != OCT_OK) {
        printf("not convertible: %s\n", err.message);
        return 1;
    }
    printf("convertible: every layer and KV scale has a %s name\n", format);
    return 0;
}

int cli_convert(int argc, char **argv)
{
    const char *model = NULL, *format = NULL, *out = NULL;
    size_t shard_bytes = (size_t)5e9;
    bool verbose = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
        if (!strcmp(a, "--model") && has)
            model = argv[++i];
        else if (!strcmp(a, "--format") && has)
            format = argv[++i];
        else if (!strcmp(a, "--out") && has)
            out = argv[++i];
        else if (!strcmp(a, "--verbose"))
            verbose = true;
        else if (!strcmp(a, "--max-shard-size") && has) {
            if (!cli_shard_size("convert", argv[++i], &shard_bytes))
                return 2;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "octet convert: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!model || !format || !out) {
        usage(stderr);
        return 2;
    }
    oct_convert_opts o;
    memset(&o, 0, sizeof o);
    if (oct_convert_format_parse(format, &o.format) != OCT_OK) {
        fprintf(stderr,
                "octet convert: --format '%s' is not supported (compressed-tensors, fp8, quark)\n",
                format);
        return 2;
    }
    o.max_shard_bytes = shard_bytes;
    report r = {stderr, verbose, 0};
    o.on_step = on_step;
    o.user = &r;
    oct_checkpoint *ck = NULL;
    oct_error err;
    oct_error_clear(&err);
    if (oct_checkpoint_open(model, NULL, &ck, &err) != OCT_OK) {
        fprintf(stderr, "octet convert: %s\n", err.message);
        return 1;
    }
    oct_status st = oct_checkpoint_convert(ck, out, &o, &err);
    const char *from = oct_ckpt_format_str(oct_checkpoint_format(ck));
    if (st != OCT_OK) {
        fprintf(stderr, "octet convert: %s\n", err.message);
        if (r.n_refused > 1)
            fprintf(stderr,
                    "octet convert: %lld layers or scales cannot be converted (listed "
                    "above)\n",
                    (long long)r.n_refused);
        oct_checkpoint_free(ck);
        return 1;
    }
    fprintf(stderr, "octet convert: wrote %s (%s -> %s, %s)\n", out, from, format,
            oct_checkpoint_scheme(ck));
    oct_checkpoint_free(ck);
    return 0;
}

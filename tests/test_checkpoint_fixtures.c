/* test_checkpoint_fixtures.c — the PyTorch-made checkpoints of
 * tools/make_checkpoint_fixtures.py, one per layout: the canonical
 * description, the dequantized weights (48 sampled values bit for bit, sum
 * and sum of squares) and the KV scales must match expected.json.
 * A missing fixture is a failure, with the command that makes it. */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "octet.h"
#include "testlib.h"

/* Builds a checkpoint folder of symlinks: tests/fixtures/ckpt_<v>/<f> and
 * $BUILD/fixtures/ckpt_<v>__<file>.safetensors.  Returns the number of
 * safetensors files linked. */
static int assemble(const char *v, char *out, size_t cap)
{
    snprintf(out, cap, "/tmp/octet_fx_XXXXXX");
    if (!mkdtemp(out))
        return -1;
    char dir[512], abs[PATH_MAX], link_path[1024];
    snprintf(dir, sizeof dir, "tests/fixtures/ckpt_%s", v);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char src[1024];
        snprintf(src, sizeof src, "%s/%s", dir, e->d_name);
        if (realpath(src, abs)) {
            snprintf(link_path, sizeof link_path, "%s/%s", out, e->d_name);
            if (symlink(abs, link_path) != 0)
                return -1;
        }
    }
    if (d)
        closedir(d);
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    snprintf(dir, sizeof dir, "%s/fixtures", build);
    char prefix[128];
    snprintf(prefix, sizeof prefix, "ckpt_%s__", v);
    int n = 0;
    d = opendir(dir);
    while (d && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        char src[1024];
        snprintf(src, sizeof src, "%s/%s", dir, e->d_name);
        if (realpath(src, abs)) {
            snprintf(link_path, sizeof link_path, "%s/%s", out, e->d_name + strlen(prefix));
            if (symlink(abs, link_path) == 0)
                n++;
        }
    }
    if (d)
        closedir(d);
    return n;
}

static const char *jstr(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : "";
}

static void check_linear(const oct_ckpt_linear *l, const json_t *e, const char *v)
{
    const char *name = jstr(e, "name");
    const json_t *shape = json_object_get(e, "shape");
    CHECKF(l->out_features == json_integer_value(json_array_get(shape, 0)) &&
               l->in_features == json_integer_value(json_array_get(shape, 1)),
           "%s %s: shape", v, name);
    CHECKF(!strcmp(oct_dtype_str(l->weight->dtype), jstr(e, "weight_dtype")),
           "%s %s: weight dtype %s, want %s", v, name, oct_dtype_str(l->weight->dtype),
           jstr(e, "weight_dtype"));
    CHECKF(!strcmp(oct_wscale_kind_str(l->scale_kind), jstr(e, "scale_kind")),
           "%s %s: scale kind %s, want %s", v, name, oct_wscale_kind_str(l->scale_kind),
           jstr(e, "scale_kind"));
    CHECKF(!strcmp(oct_act_kind_str(l->activation), jstr(e, "activation")),
           "%s %s: activation %s, want %s", v, name, oct_act_kind_str(l->activation),
           jstr(e, "activation"));
    CHECKF(l->act_group == json_integer_value(json_object_get(e, "act_group")),
           "%s %s: act_group %lld", v, name, (long long)l->act_group);
    const json_t *blk = json_object_get(e, "block");
    if (blk)
        CHECKF(l->block_n == json_integer_value(json_array_get(blk, 0)) &&
                   l->block_k == json_integer_value(json_array_get(blk, 1)),
               "%s %s: block %lldx%lld", v, name, (long long)l->block_n, (long long)l->block_k);
    const json_t *ss = json_object_get(e, "scale_shape");
    if (ss)
        CHECKF(l->scale_rows == json_integer_value(json_array_get(ss, 0)) &&
                   l->scale_cols == json_integer_value(json_array_get(ss, 1)),
               "%s %s: scale grid %lldx%lld", v, name, (long long)l->scale_rows,
               (long long)l->scale_cols);
    const json_t *is = json_object_get(e, "input_scale");
    if (is)
        CHECKF(l->input_scale && l->input_scale_value == (float)json_number_value(is),
               "%s %s: input scale %g", v, name, (double)l->input_scale_value);
    int64_t n = l->out_features * l->in_features;
    float *x = malloc((size_t)n * sizeof(float));
    REQUIRE(x);
    oct_error err;
    CHECKF(oct_ckpt_linear_read_f32(l, 0, l->out_features, x, &err) == OCT_OK, "%s %s: %s", v, name,
           err.message);
    size_t i;
    const json_t *smp;
    json_array_foreach(json_object_get(e, "samples"), i, smp)
    {
        int64_t idx = json_integer_value(json_array_get(smp, 0));
        float want = (float)json_number_value(json_array_get(smp, 1));
        CHECKF(idx >= 0 && idx < n && x[idx] == want, "%s %s: [%lld] = %.9g, want %.9g", v, name,
               (long long)idx, idx >= 0 && idx < n ? (double)x[idx] : 0.0, (double)want);
    }
    double sum = 0, sumsq = 0;
    for (int64_t k = 0; k < n; k++) {
        sum += (double)x[k];
        sumsq += (double)x[k] * (double)x[k];
    }
    double ws = json_number_value(json_object_get(e, "sum"));
    double wq = json_number_value(json_object_get(e, "sumsq"));
    CHECKF(fabs(sum - ws) <= 1e-9 * fmax(1.0, sqrt(wq) * sqrt((double)n)),
           "%s %s: sum %.17g, want %.17g", v, name, sum, ws);
    CHECKF(fabs(sumsq - wq) <= 1e-9 * fmax(1e-30, wq), "%s %s: sumsq %.17g, want %.17g", v, name,
           sumsq, wq);
    free(x);
}

static void run_variant(const char *v)
{
    char dir[256];
    int n = assemble(v, dir, sizeof dir);
    CHECKF(n > 0,
           "fixture ckpt_%s is missing: on the GPU machine run `python3 "
           "tools/make_checkpoint_fixtures.py OUT` and copy OUT/fixtures/* to tests/fixtures/",
           v);
    if (n <= 0) {
        testlib_rm_tree(dir);
        return;
    }
    char p[512];
    snprintf(p, sizeof p, "%s/expected.json", dir);
    json_error_t jerr;
    json_t *exp = json_load_file(p, 0, &jerr);
    CHECKF(exp != NULL, "%s: %s", p, jerr.text);
    oct_checkpoint *ck = NULL;
    oct_error err;
    oct_error_clear(&err);
    oct_status st = oct_checkpoint_open(dir, NULL, &ck, &err);
    CHECKF(st == OCT_OK, "%s: %s", v, err.message);
    if (exp && ck) {
        CHECKF(!strcmp(oct_ckpt_format_str(oct_checkpoint_format(ck)), jstr(exp, "format")),
               "%s: format %s", v, oct_ckpt_format_str(oct_checkpoint_format(ck)));
        CHECKF(!strcmp(oct_checkpoint_scheme(ck), jstr(exp, "scheme")), "%s: scheme %s, want %s", v,
               oct_checkpoint_scheme(ck), jstr(exp, "scheme"));
        const json_t *lins = json_object_get(exp, "linears");
        CHECKF(oct_checkpoint_n_linears(ck) == (int64_t)json_array_size(lins),
               "%s: %lld linears, want %zu", v, (long long)oct_checkpoint_n_linears(ck),
               json_array_size(lins));
        size_t i;
        const json_t *e;
        json_array_foreach(lins, i, e)
        {
            const oct_ckpt_linear *l = oct_checkpoint_find_linear(ck, jstr(e, "name"));
            CHECKF(l != NULL, "%s: linear %s not described", v, jstr(e, "name"));
            if (l)
                check_linear(l, e, v);
        }
        CHECKF(oct_checkpoint_kv_quantized(ck) ==
                   json_is_true(json_object_get(exp, "kv_quantized")),
               "%s: kv_quantized", v);
        const json_t *kvs = json_object_get(exp, "kv");
        CHECKF(oct_checkpoint_n_kv(ck) == (int64_t)json_array_size(kvs), "%s: %lld KV entries", v,
               (long long)oct_checkpoint_n_kv(ck));
        json_array_foreach(kvs, i, e)
        {
            const oct_ckpt_kv *k = NULL;
            for (int64_t j = 0; j < oct_checkpoint_n_kv(ck); j++)
                if (!strcmp(oct_checkpoint_kv(ck, j)->attn, jstr(e, "attn")))
                    k = oct_checkpoint_kv(ck, j);
            CHECKF(k != NULL, "%s: no KV scales for %s", v, jstr(e, "attn"));
            if (!k)
                continue;
            CHECKF(k->k_scale == (float)json_number_value(json_object_get(e, "k_scale")) &&
                       k->v_scale == (float)json_number_value(json_object_get(e, "v_scale")),
                   "%s: KV scales %g %g", v, (double)k->k_scale, (double)k->v_scale);
            CHECKF(k->k_source && !strcmp(k->k_source, jstr(e, "k_source")) && k->v_source &&
                       !strcmp(k->v_source, jstr(e, "v_source")),
                   "%s: KV sources %s %s", v, k->k_source, k->v_source);
        }
    }
    oct_checkpoint_free(ck);
    json_decref(exp);
    testlib_rm_tree(dir);
}

#define VARIANT(v)                                                                                 \
    static void test_##v(void)                                                                     \
    {                                                                                              \
        run_variant(#v);                                                                           \
    }
VARIANT(bf16)
VARIANT(ct_fp8_static)
VARIANT(ct_fp8_dynamic)
VARIANT(ct_fp8_block)
VARIANT(ct_naive_wonly)
VARIANT(ct_mxfp8)
VARIANT(quark_fp8)
VARIANT(fp8_static)
VARIANT(fp8_dynamic)
VARIANT(fp8_block)
VARIANT(fbgemm_fp8)

int main(void)
{
    RUN(test_bf16);
    RUN(test_ct_fp8_static);
    RUN(test_ct_fp8_dynamic);
    RUN(test_ct_fp8_block);
    RUN(test_ct_naive_wonly);
    RUN(test_ct_mxfp8);
    RUN(test_quark_fp8);
    RUN(test_fp8_static);
    RUN(test_fp8_dynamic);
    RUN(test_fp8_block);
    RUN(test_fbgemm_fp8);
    return testlib_finish();
}

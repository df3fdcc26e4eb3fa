/* qconfig_fp8.c — quant_method "fp8" (AutoFP8, transformers FineGrainedFP8,
 * DeepSeek-V3 / Qwen3-FP8 blocks) and "fbgemm_fp8" (docs/FORMATS.md §Layouts).
 *
 * fp8: activation_scheme "static" | "dynamic" (required); optional
 * weight_block_size [bn, bk] (then activation_scheme must be dynamic and the
 * scale is "weight_scale_inv" [ceil(N/bn), ceil(K/bk)]); otherwise one
 * "weight_scale" per tensor (0-dim) and, when static, an "input_scale".
 * ignored_layers, else modules_to_not_convert: exact names (vLLM); a name
 * that merely contains an entry (transformers' substring rule) is treated as
 * unquantized only when its weight on disk is not FP8.  kv_cache_scheme
 * "static" declares k/v_proj.output_scale KV scales.
 * fbgemm_fp8: channel weight_scale [N, 1], dynamic per-token activations
 * bounded by activation_scale_ub (required), modules_to_not_convert exact. */
#include <stdio.h>
#include <string.h>

#include "io/io.h"

typedef struct f8_priv {
    json_t *root; /* keeps the borrowed ignore strings alive */
    const char **ignore;
    int n_ignore;
    const char *ignore_key;
    io_qspec spec;
    bool fbgemm;
} f8_priv;

static void f8_free(void *p)
{
    f8_priv *f = p;
    if (!f)
        return;
    oct_free((void *)f->ignore);
    json_decref(f->root);
    oct_free(f);
}

static oct_status f8_resolve(const io_qconfig *q, const char *name, bool is_lm_head, io_qspec *out,
                             oct_error *err)
{
    (void)err;
    const f8_priv *f = q->priv;
    if (is_lm_head) {
        io_qspec_none(out, "lm_head is never quantized (vLLM ParallelLMHead)", NULL);
        return OCT_OK;
    }
    for (int i = 0; i < f->n_ignore; i++) {
        if (strcmp(f->ignore[i], name) == 0) {
            char why[96];
            snprintf(why, sizeof why, "%s: ", f->ignore_key);
            io_qspec_none(out, why, f->ignore[i]);
            return OCT_OK;
        }
    }
    /* vLLM: an "experts" prefix is skipped when it is a substring of an
     * ignore entry that itself mentions experts. */
    if (strstr(name, "experts")) {
        for (int i = 0; i < f->n_ignore; i++) {
            if (strstr(f->ignore[i], "experts") && strstr(f->ignore[i], name)) {
                io_qspec_none(out, "ignored expert: ", f->ignore[i]);
                return OCT_OK;
            }
        }
    }
    *out = f->spec;
    snprintf(out->rule, sizeof out->rule, "quant_method %s", f->fbgemm ? "fbgemm_fp8" : "fp8");
    for (int i = 0; i < f->n_ignore; i++) {
        if (f->ignore[i][0] && strstr(name, f->ignore[i])) {
            out->soft_ignore = true;
            snprintf(out->rule, sizeof out->rule, "%s contains '%s' (substring)", f->ignore_key,
                     f->ignore[i]);
            break;
        }
    }
    return OCT_OK;
}

static const struct io_qconfig_ops k_f8_ops = {f8_resolve, f8_free};

static oct_status read_ignore(const json_t *qc, const char *label, f8_priv *f, bool fbgemm,
                              oct_error *err)
{
    f->ignore_key = "modules_to_not_convert";
    if (!fbgemm) {
        const json_t *il = json_object_get(qc, "ignored_layers");
        if (il && !json_is_null(il)) {
            f->ignore_key = "ignored_layers";
            return io_json_str_array(qc, "ignored_layers", label, &f->ignore, &f->n_ignore, err);
        }
    }
    return io_json_str_array(qc, "modules_to_not_convert", label, &f->ignore, &f->n_ignore, err);
}

oct_status io_qconfig_fp8_parse(const json_t *qc, const char *label, io_qconfig *q, oct_error *err)
{
    f8_priv *f = oct_calloc(1, sizeof *f);
    if (!f)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    q->format = OCT_CKPT_FP8;
    q->ops = &k_f8_ops;
    q->priv = f;
    q->output_scale_kv = true;
    f->root = json_incref((json_t *)(uintptr_t)qc);
    OCT_TRY(read_ignore(qc, label, f, false, err));
    const char *act = NULL;
    OCT_TRY(io_json_str(qc, "activation_scheme", label, true, &act, err));
    bool dynamic;
    if (strcmp(act, "dynamic") == 0)
        dynamic = true;
    else if (strcmp(act, "static") == 0)
        dynamic = false;
    else
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.activation_scheme: unsupported activation scheme '%s' (static, "
                             "dynamic)",
                             label, act);
    const char *fmt = NULL;
    OCT_TRY(io_json_str(qc, "fmt", label, false, &fmt, err));
    if (fmt && strcmp(fmt, "e4m3") != 0)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.fmt: '%s' is not supported (only e4m3)", label, fmt);
    io_qspec *s = &f->spec;
    s->quantized = true;
    bool blocked;
    int64_t bn = 0, bk = 0;
    OCT_TRY(io_json_block_shape(qc, "weight_block_size", label, false, &blocked, &bn, &bk, err));
    if (blocked) {
        if (!dynamic)
            return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                 "%s.activation_scheme: 'static' with weight_block_size is not "
                                 "supported (block FP8 needs dynamic activations)",
                                 label);
        s->wkind = OCT_WSCALE_BLOCK;
        s->bn = bn;
        s->bk = bk;
        s->scale_name = "weight_scale_inv";
        s->act = OCT_AKIND_DYNAMIC_GROUP;
        s->act_group = s->bn; /* vLLM groups activations by weight_block_size[0] */
    } else {
        s->wkind = OCT_WSCALE_TENSOR;
        s->scale_name = "weight_scale";
        s->act = dynamic ? OCT_AKIND_DYNAMIC_TENSOR : OCT_AKIND_STATIC;
    }
    const json_t *kv = json_object_get(qc, "kv_cache_scheme");
    if (kv && !json_is_null(kv)) {
        if (json_is_string(kv) && strcmp(json_string_value(kv), "static") == 0)
            q->kv_quantized = true;
        else
            return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                 "%s.kv_cache_scheme: only \"static\" is supported", label);
    }
    return OCT_OK;
}

oct_status io_qconfig_fbgemm_parse(const json_t *qc, const char *label, io_qconfig *q,
                                   oct_error *err)
{
    f8_priv *f = oct_calloc(1, sizeof *f);
    if (!f)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    q->format = OCT_CKPT_FBGEMM_FP8;
    q->ops = &k_f8_ops;
    q->priv = f;
    f->fbgemm = true;
    f->root = json_incref((json_t *)(uintptr_t)qc);
    OCT_TRY(read_ignore(qc, label, f, true, err));
    double ub = 0.0;
    OCT_TRY(io_json_num(qc, "activation_scale_ub", label, true, &ub, err));
    if (!(ub > 0.0) || ub > 3.4e38)
        return oct_error_set(err, OCT_ERR_FORMAT, -1,
                             "%s.activation_scale_ub: %g is not a positive finite number", label,
                             ub);
    io_qspec *s = &f->spec;
    s->quantized = true;
    s->wkind = OCT_WSCALE_CHANNEL;
    s->scale_name = "weight_scale";
    s->act = OCT_AKIND_DYNAMIC_TOKEN;
    s->act_ub = (float)ub;
    return OCT_OK;
}

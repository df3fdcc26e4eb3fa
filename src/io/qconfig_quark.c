/* qconfig_quark.c — AMD Quark quantization_config (docs/FORMATS.md §Layouts).
 *
 * Accepted: an "export" object (required, as vLLM), global_quant_config,
 * layer_quant_config (pattern -> config), layer_type_quant_config,
 * exclude (exact / "re:").  A layer config {weight, input_tensors,
 * output_tensors, bias} is FP8 when weight.dtype and input_tensors.dtype are
 * "fp8_e4m3", the weight is static per_tensor | per_channel and the input is
 * static per_tensor or dynamic (per_tensor -> dynamic_tensor, per_channel /
 * per_token -> dynamic_token).  export.kv_cache_group patterns (fnmatch)
 * mark the layers whose output_tensors are the KV-cache scales (fp8_e4m3,
 * per_tensor); any other non-null output_tensors or bias is unsupported.
 * Lookup order: exclude, layer_quant_config (pattern with '*' -> fnmatch,
 * without -> "layer name is a substring of the pattern", a vLLM quirk),
 * layer_type_quant_config (keys naming a Linear class), global. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "io/io.h"

typedef struct qk_layer {
    const char *pattern; /* borrowed from root */
    io_qspec spec;
} qk_layer;

typedef struct qk_priv {
    json_t *root; /* a reference on quantization_config keeps borrowed strings alive */
    io_qspec global;
    bool has_global;
    qk_layer *layers;
    int n_layers;
    io_qspec type_linear;
    bool has_type_linear;
    io_patterns *exclude;
    const char **kv_group;
    int n_kv_group;
} qk_priv;

static void qk_free(void *p)
{
    qk_priv *k = p;
    if (!k)
        return;
    io_patterns_free(k->exclude);
    oct_free(k->layers);
    oct_free((void *)k->kv_group);
    json_decref(k->root);
    oct_free(k);
}

static bool is_null(const json_t *v)
{
    return !v || json_is_null(v);
}

/* Parses one layer config; is_kv: the layer is in kv_cache_group (its
 * output_tensors are the KV spec). */
static oct_status parse_layer_cfg(const json_t *cfg, const char *where, bool is_kv, io_qspec *s,
                                  bool *kv_ok, oct_error *err)
{
    memset(s, 0, sizeof *s);
    if (!json_is_object(cfg))
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s: expected an object", where);
    char sub[400];
    const json_t *w = json_object_get(cfg, "weight");
    const json_t *in = json_object_get(cfg, "input_tensors");
    const json_t *outp = json_object_get(cfg, "output_tensors");
    const json_t *bias = json_object_get(cfg, "bias");
    if (!is_null(bias))
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.bias: Quark models with quantized bias are not supported", where);
    if (!is_null(outp)) {
        snprintf(sub, sizeof sub, "%s.output_tensors", where);
        const char *dt = NULL, *qs = NULL;
        OCT_TRY(io_json_str(outp, "dtype", sub, true, &dt, err));
        OCT_TRY(io_json_str(outp, "qscheme", sub, false, &qs, err));
        if (!is_kv)
            return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                 "%s: Quark models with output_tensors quantized outside "
                                 "export.kv_cache_group are not supported",
                                 sub);
        if (strcmp(dt, "fp8_e4m3") != 0 || (qs && strcmp(qs, "per_tensor") != 0))
            return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                 "%s: KV-cache quantization needs dtype fp8_e4m3 and qscheme "
                                 "per_tensor (got %s, %s)",
                                 sub, dt, qs ? qs : "null");
        *kv_ok = true;
    }
    if (is_null(w)) {
        s->quantized = false;
        return OCT_OK;
    }
    snprintf(sub, sizeof sub, "%s.weight", where);
    const char *dt = NULL, *qs = NULL;
    bool dyn = false;
    OCT_TRY(io_json_str(w, "dtype", sub, true, &dt, err));
    OCT_TRY(io_json_str(w, "qscheme", sub, true, &qs, err));
    OCT_TRY(io_json_bool(w, "is_dynamic", sub, false, &dyn, err));
    if (strcmp(dt, "fp8_e4m3") != 0)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.dtype: '%s' is not supported (only fp8_e4m3)", sub, dt);
    if (dyn)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.is_dynamic: dynamic weights are not supported", sub);
    s->quantized = true;
    s->scale_name = "weight_scale";
    if (strcmp(qs, "per_tensor") == 0) {
        s->wkind = OCT_WSCALE_TENSOR;
    } else if (strcmp(qs, "per_channel") == 0) {
        s->wkind = OCT_WSCALE_CHANNEL;
        s->channel_1d_ok = true;
    } else {
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.qscheme: '%s' is not supported for FP8 weights (per_tensor, "
                             "per_channel)",
                             sub, qs);
    }
    snprintf(sub, sizeof sub, "%s.input_tensors", where);
    if (is_null(in))
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s: null (weight-only FP8) has no Quark scheme in vLLM; not "
                             "supported",
                             sub);
    OCT_TRY(io_json_str(in, "dtype", sub, true, &dt, err));
    OCT_TRY(io_json_str(in, "qscheme", sub, true, &qs, err));
    dyn = false;
    OCT_TRY(io_json_bool(in, "is_dynamic", sub, false, &dyn, err));
    if (strcmp(dt, "fp8_e4m3") != 0)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.dtype: '%s' is not supported (only fp8_e4m3)", sub, dt);
    if (!dyn && strcmp(qs, "per_tensor") == 0)
        s->act = OCT_AKIND_STATIC;
    else if (dyn && strcmp(qs, "per_tensor") == 0)
        s->act = OCT_AKIND_DYNAMIC_TENSOR;
    else if (dyn && (strcmp(qs, "per_channel") == 0 || strcmp(qs, "per_token") == 0))
        s->act = OCT_AKIND_DYNAMIC_TOKEN;
    else
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s: qscheme '%s' with is_dynamic %s is not supported", sub, qs,
                             dyn ? "true" : "false");
    return OCT_OK;
}

static bool in_kv_group(const qk_priv *k, const char *name)
{
    for (int i = 0; i < k->n_kv_group; i++)
        if (io_fnmatch(k->kv_group[i], name))
            return true;
    return false;
}

static oct_status qk_resolve(const io_qconfig *q, const char *name, bool is_lm_head, io_qspec *out,
                             oct_error *err)
{
    (void)err;
    const qk_priv *k = q->priv;
    if (is_lm_head) {
        io_qspec_none(out, "lm_head is never quantized (vLLM ParallelLMHead)", NULL);
        return OCT_OK;
    }
    int ex = io_patterns_match(k->exclude, name);
    if (ex >= 0) {
        io_qspec_none(out, "exclude: ", io_patterns_at(k->exclude, ex));
        return OCT_OK;
    }
    for (int i = 0; i < k->n_layers; i++) {
        const char *p = k->layers[i].pattern;
        bool hit = strchr(p, '*') ? io_fnmatch(p, name) : strstr(p, name) != NULL;
        if (hit) {
            *out = k->layers[i].spec;
            snprintf(out->rule, sizeof out->rule, "layer_quant_config['%s']", p);
            return OCT_OK;
        }
    }
    if (k->has_type_linear) {
        *out = k->type_linear;
        snprintf(out->rule, sizeof out->rule, "layer_type_quant_config (Linear)");
        return OCT_OK;
    }
    if (k->has_global) {
        *out = k->global;
        snprintf(out->rule, sizeof out->rule, "global_quant_config");
        return OCT_OK;
    }
    io_qspec_none(out, "no Quark config applies", NULL);
    return OCT_OK;
}

static const struct io_qconfig_ops k_qk_ops = {qk_resolve, qk_free};

oct_status io_qconfig_quark_parse(const json_t *qc, const char *label, io_qconfig *q,
                                  oct_error *err)
{
    qk_priv *k = oct_calloc(1, sizeof *k);
    if (!k)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    q->format = OCT_CKPT_QUARK;
    q->ops = &k_qk_ops;
    q->priv = k;
    q->output_scale_kv = true;
    k->root = json_incref((json_t *)(uintptr_t)qc);
    char where[400];
    const json_t *exp = json_object_get(qc, "export");
    if (!json_is_object(exp))
        return oct_error_set(err, OCT_ERR_FORMAT, -1,
                             "%s.export: the export key should be included in the configurations "
                             "of Quark quantized model",
                             label);
    snprintf(where, sizeof where, "%s.export", label);
    OCT_TRY(io_json_str_array(exp, "kv_cache_group", where, &k->kv_group, &k->n_kv_group, err));
    const char **list = NULL;
    int n_list = 0;
    OCT_TRY(io_json_str_array(qc, "exclude", label, &list, &n_list, err));
    snprintf(where, sizeof where, "%s.exclude", label);
    oct_status st = io_patterns_create(list, n_list, where, &k->exclude, err);
    oct_free((void *)list);
    if (st != OCT_OK)
        return st;
    bool kv_ok = false;
    const json_t *g = json_object_get(qc, "global_quant_config");
    if (!is_null(g)) {
        snprintf(where, sizeof where, "%s.global_quant_config", label);
        /* The global config applies to kv_cache_group layers too when no
         * layer config names them. */
        OCT_TRY(parse_layer_cfg(g, where, k->n_kv_group > 0, &k->global, &kv_ok, err));
        k->has_global = true;
    }
    const json_t *lq = json_object_get(qc, "layer_quant_config");
    if (!is_null(lq)) {
        if (!json_is_object(lq))
            return oct_error_set(err, OCT_ERR_FORMAT, -1,
                                 "%s.layer_quant_config: expected an object", label);
        k->layers = oct_calloc(json_object_size(lq) + 1, sizeof(qk_layer));
        if (!k->layers)
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        const char *pat;
        json_t *cfg;
        json_object_foreach((json_t *)(uintptr_t)lq, pat, cfg)
        {
            snprintf(where, sizeof where, "%s.layer_quant_config['%s']", label, pat);
            bool kv = in_kv_group(k, pat) || (strstr(pat, "q_proj") && k->n_kv_group > 0);
            OCT_TRY(parse_layer_cfg(cfg, where, kv, &k->layers[k->n_layers].spec, &kv_ok, err));
            k->layers[k->n_layers++].pattern = pat;
        }
    }
    const json_t *lt = json_object_get(qc, "layer_type_quant_config");
    if (!is_null(lt)) {
        if (!json_is_object(lt))
            return oct_error_set(err, OCT_ERR_FORMAT, -1,
                                 "%s.layer_type_quant_config: expected an object", label);
        const char *type;
        json_t *cfg;
        json_object_foreach((json_t *)(uintptr_t)lt, type, cfg)
        {
            if (!strcasestr(type, "Linear"))
                continue; /* types octet never builds (e.g. attention, embedding) */
            snprintf(where, sizeof where, "%s.layer_type_quant_config['%s']", label, type);
            OCT_TRY(parse_layer_cfg(cfg, where, false, &k->type_linear, &kv_ok, err));
            k->has_type_linear = true;
        }
    }
    q->kv_quantized = k->n_kv_group > 0 && kv_ok;
    return OCT_OK;
}

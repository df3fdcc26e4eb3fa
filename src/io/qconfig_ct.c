/* qconfig_ct.c — compressed-tensors quantization_config (docs/FORMATS.md §Layouts).
 *
 * Accepted: quant_method "compressed-tensors", quantization_status
 * "compressed" (or absent), format / per-group format in {float-quantized,
 * naive-quantized, mxfp8-quantized} (or absent), config_groups whose weights
 * are 8-bit float, symmetric, static, strategy tensor | channel | block
 * (block_structure [bn, bk]) | group 32 with uint8 scales (MXFP8); input
 * activations null, or 8-bit float with strategy token (dynamic), tensor
 * (dynamic or static) or group (dynamic); output_activations null;
 * kv_cache_scheme null or 8-bit float per-tensor.  Layer lookup: ignore
 * first (exact or "re:"), then targets by layer name (exact or "re:"), then
 * by class name (case-insensitive substring, "Linear" matches every linear
 * but lm_head, which vLLM builds as ParallelLMHead). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "io/io.h"

typedef struct ct_target {
    const char *text; /* borrowed from the group's targets list */
    int group;
} ct_target;

typedef struct ct_group {
    char name[64];
    io_qspec spec;
} ct_group;

typedef struct ct_priv {
    ct_group *groups;
    int n_groups;
    char **targets; /* [n_targets] owned copies */
    int *target_group;
    int n_targets;
    io_patterns *target_pat; /* the same list, compiled */
    io_patterns *ignore;
} ct_priv;

static void ct_free(void *p)
{
    ct_priv *c = p;
    if (!c)
        return;
    for (int i = 0; i < c->n_targets; i++)
        oct_free(c->targets[i]);
    oct_free(c->targets);
    oct_free(c->target_group);
    oct_free(c->groups);
    io_patterns_free(c->target_pat);
    io_patterns_free(c->ignore);
    oct_free(c);
}

/* Common checks of a QuantizationArgs: 8-bit float, symmetric. */
static oct_status check_fp8_args(const json_t *a, const char *where, oct_error *err)
{
    int64_t bits = 8;
    const char *type = NULL;
    bool sym = true;
    OCT_TRY(io_json_int(a, "num_bits", where, false, &bits, err));
    OCT_TRY(io_json_str(a, "type", where, false, &type, err));
    OCT_TRY(io_json_bool(a, "symmetric", where, false, &sym, err));
    if (type && strcmp(type, "float") != 0)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.type: '%s' is not supported (only \"float\": FP8)", where, type);
    if (bits != 8)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.num_bits: %lld is not supported (only 8: FP8)", where,
                             (long long)bits);
    if (!sym)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.symmetric: false (asymmetric FP8) is not supported", where);
    return OCT_OK;
}

/* "dynamic" may be a bool or the string "local". */
static oct_status get_dynamic(const json_t *a, const char *where, bool *dyn, oct_error *err)
{
    const json_t *d = json_object_get(a, "dynamic");
    *dyn = false;
    if (!d || json_is_null(d))
        return OCT_OK;
    if (json_is_boolean(d)) {
        *dyn = json_is_true(d);
        return OCT_OK;
    }
    if (json_is_string(d) && strcmp(json_string_value(d), "local") == 0) {
        *dyn = true;
        return OCT_OK;
    }
    return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.dynamic: expected true, false or \"local\"",
                         where);
}

static oct_status parse_weights(const json_t *w, const char *where, const char *fmt, io_qspec *s,
                                oct_error *err)
{
    OCT_TRY(check_fp8_args(w, where, err));
    bool dyn;
    OCT_TRY(get_dynamic(w, where, &dyn, err));
    if (dyn)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.dynamic: dynamic weight quantization is not supported", where);
    const char *strategy = NULL;
    OCT_TRY(io_json_str(w, "strategy", where, true, &strategy, err));
    s->scale_name = "weight_scale";
    if (strcmp(strategy, "tensor") == 0) {
        s->wkind = OCT_WSCALE_TENSOR;
    } else if (strcmp(strategy, "channel") == 0) {
        s->wkind = OCT_WSCALE_CHANNEL;
    } else if (strcmp(strategy, "block") == 0) {
        bool found;
        OCT_TRY(
            io_json_block_shape(w, "block_structure", where, true, &found, &s->bn, &s->bk, err));
        s->wkind = OCT_WSCALE_BLOCK;
    } else if (strcmp(strategy, "group") == 0) {
        int64_t gs = 0;
        const char *sdt = NULL;
        OCT_TRY(io_json_int(w, "group_size", where, true, &gs, err));
        OCT_TRY(io_json_str(w, "scale_dtype", where, false, &sdt, err));
        bool u8 = sdt && (strcmp(sdt, "torch.uint8") == 0 || strcmp(sdt, "uint8") == 0);
        bool mx_fmt = fmt && strcmp(fmt, "mxfp8-quantized") == 0;
        if (gs != 32 || !(u8 || mx_fmt))
            return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                 "%s.strategy: \"group\" with group_size %lld and scale_dtype %s "
                                 "is not supported (FP8 groups only as MXFP8: group_size 32, "
                                 "uint8 scales)",
                                 where, (long long)gs, sdt ? sdt : "null");
        s->wkind = OCT_WSCALE_MX;
        s->bn = 1;
        s->bk = 32;
    } else {
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.strategy: '%s' is not supported for FP8 weights (tensor, "
                             "channel, block, group/MXFP8)",
                             where, strategy);
    }
    return OCT_OK;
}

static oct_status parse_inputs(const json_t *a, const char *where, io_qspec *s, oct_error *err)
{
    if (!a || json_is_null(a)) {
        s->act = OCT_AKIND_NONE;
        return OCT_OK;
    }
    if (!json_is_object(a))
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s: expected an object or null", where);
    OCT_TRY(check_fp8_args(a, where, err));
    bool dyn;
    OCT_TRY(get_dynamic(a, where, &dyn, err));
    const char *strategy = NULL;
    OCT_TRY(io_json_str(a, "strategy", where, true, &strategy, err));
    if (strcmp(strategy, "token") == 0) {
        if (!dyn)
            return oct_error_set(err, OCT_ERR_FORMAT, -1,
                                 "%s.dynamic: strategy \"token\" requires dynamic: true", where);
        s->act = OCT_AKIND_DYNAMIC_TOKEN;
    } else if (strcmp(strategy, "tensor") == 0) {
        s->act = dyn ? OCT_AKIND_DYNAMIC_TENSOR : OCT_AKIND_STATIC;
    } else if (strcmp(strategy, "group") == 0) {
        if (!dyn)
            return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                 "%s.dynamic: static group activation scales are not supported",
                                 where);
        int64_t gs = 0;
        OCT_TRY(io_json_int(a, "group_size", where, true, &gs, err));
        if (gs <= 0 || gs > 65536)
            return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.group_size: %lld is out of range",
                                 where, (long long)gs);
        s->act = OCT_AKIND_DYNAMIC_GROUP;
        s->act_group = gs;
    } else {
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.strategy: '%s' is not supported for FP8 activations (token, "
                             "tensor, group)",
                             where, strategy);
    }
    return OCT_OK;
}

static bool fmt_ok(const char *f)
{
    return !f || strcmp(f, "float-quantized") == 0 || strcmp(f, "naive-quantized") == 0 ||
           strcmp(f, "mxfp8-quantized") == 0;
}

static oct_status ct_resolve(const io_qconfig *q, const char *name, bool is_lm_head, io_qspec *out,
                             oct_error *err)
{
    (void)err;
    const ct_priv *c = q->priv;
    int ig = io_patterns_match(c->ignore, name);
    if (ig >= 0) {
        io_qspec_none(out, "ignore: ", io_patterns_at(c->ignore, ig));
        return OCT_OK;
    }
    int t = io_patterns_match(c->target_pat, name);
    if (t < 0) {
        /* Class-name targets: exact / re: / case-insensitive substring of the
         * vLLM class name ("Linear" is in every *Linear class). */
        const char *cls = is_lm_head ? "ParallelLMHead" : "Linear";
        for (int i = 0; i < c->n_targets && t < 0; i++) {
            const char *tg = c->targets[i];
            if (strncmp(tg, "re:", 3) == 0)
                continue; /* compiled patterns were tried on the name above */
            if (strcasestr(is_lm_head ? cls
                                      : "QKVParallelLinear RowParallelLinear "
                                        "MergedColumnParallelLinear ReplicatedLinear",
                           tg) &&
                !strchr(tg, '.'))
                t = i;
        }
    }
    if (t < 0) {
        io_qspec_none(out, "not matched by any config_groups target", NULL);
        return OCT_OK;
    }
    *out = c->groups[c->target_group[t]].spec;
    snprintf(out->rule, sizeof out->rule, "config_groups.%s (target '%s')",
             c->groups[c->target_group[t]].name, c->targets[t]);
    return OCT_OK;
}

static const struct io_qconfig_ops k_ct_ops = {ct_resolve, ct_free};

/* The checkpoint-wide fields: a status, format, sparsity and transform that
 * octet runs; *gfmt the global format (groups may override it). */
static oct_status check_top_level(const json_t *qc, const char *label, const char **gfmt,
                                  oct_error *err)
{
    const char *status = NULL;
    OCT_TRY(io_json_str(qc, "quantization_status", label, false, &status, err));
    /* "frozen": what compressed-tensors < 0.6 wrote into saved checkpoints
     * (the weights are compressed on save all the same; vLLM does not look at
     * the status).  Earlier lifecycle states mean the weights are not FP8. */
    if (status && strcmp(status, "compressed") != 0 && strcmp(status, "frozen") != 0)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.quantization_status: '%s' is not supported (\"compressed\" or "
                             "\"frozen\")",
                             label, status);
    OCT_TRY(io_json_str(qc, "format", label, false, gfmt, err));
    if (!fmt_ok(*gfmt) && strcmp(*gfmt, "mixed-precision") != 0)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.format: '%s' is not supported (float-quantized, naive-quantized, "
                             "mxfp8-quantized)",
                             label, *gfmt);
    const json_t *sp = json_object_get(qc, "sparsity_config");
    if (sp && !json_is_null(sp) && !(json_is_object(sp) && json_object_size(sp) == 0))
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.sparsity_config: sparse checkpoints are not supported", label);
    /* compressed-tensors >= 0.11 writes "transform_config": {} when there is
     * none (vLLM tests it for truth: {} is no transform). */
    const json_t *tc = json_object_get(qc, "transform_config");
    if (tc && !json_is_null(tc) && !(json_is_object(tc) && json_object_size(tc) == 0))
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.transform_config: transforms are not supported", label);
    return OCT_OK;
}

/* One group's scheme (format, weights, input and output activations) at
 * `where` into grp. */
static oct_status parse_group_spec(const json_t *g, const char *where, const char *gfmt,
                                   ct_group *grp, oct_error *err)
{
    const char *fmt = NULL;
    char sub[360];
    OCT_TRY(io_json_str(g, "format", where, false, &fmt, err));
    if (!fmt)
        fmt = gfmt;
    if (!fmt_ok(fmt))
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.format: '%s' is not supported (float-quantized, "
                             "naive-quantized, mxfp8-quantized)",
                             where, fmt);
    const json_t *w = json_object_get(g, "weights");
    if (!w || !json_is_object(w))
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.weights: null (activation-only quantization) is not supported",
                             where);
    snprintf(sub, sizeof sub, "%s.weights", where);
    OCT_TRY(parse_weights(w, sub, fmt, &grp->spec, err));
    snprintf(sub, sizeof sub, "%s.input_activations", where);
    OCT_TRY(parse_inputs(json_object_get(g, "input_activations"), sub, &grp->spec, err));
    const json_t *oa = json_object_get(g, "output_activations");
    if (oa && !json_is_null(oa))
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.output_activations: output quantization is not supported", where);
    grp->spec.quantized = true;
    return OCT_OK;
}

/* The group's targets, appended to the target list with group index gi. */
static oct_status add_targets(ct_priv *c, const char *const *list, int n_list, int gi,
                              size_t *cap_t, oct_error *err)
{
    for (int i = 0; i < n_list; i++) {
        if ((size_t)c->n_targets == *cap_t) {
            *cap_t = *cap_t ? *cap_t * 2 : 8;
            char **nt = oct_realloc(c->targets, *cap_t * sizeof(char *));
            if (nt)
                c->targets = nt;
            int *ng2 = oct_realloc(c->target_group, *cap_t * sizeof(int));
            if (ng2)
                c->target_group = ng2;
            if (!nt || !ng2)
                return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        }
        c->targets[c->n_targets] = oct_strdup(list[i]);
        if (!c->targets[c->n_targets])
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        c->target_group[c->n_targets++] = gi;
    }
    return OCT_OK;
}

/* config_groups: each group's scheme and targets into c. */
static oct_status parse_groups(const json_t *qc, const char *label, const char *gfmt, ct_priv *c,
                               oct_error *err)
{
    const json_t *groups = json_object_get(qc, "config_groups");
    if (!json_is_object(groups))
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.config_groups: expected an object",
                             label);
    size_t ng = json_object_size(groups);
    c->groups = oct_calloc(ng ? ng : 1, sizeof(ct_group));
    if (!c->groups)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    const char *gname;
    json_t *g;
    size_t cap_t = 0;
    char where[320];
    json_object_foreach((json_t *)(uintptr_t)groups, gname, g)
    {
        snprintf(where, sizeof where, "%s.config_groups.%s", label, gname);
        if (!json_is_object(g))
            return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s: expected an object", where);
        const char **list = NULL;
        int n_list = 0;
        OCT_TRY(io_json_str_array(g, "targets", where, &list, &n_list, err));
        /* Groups that only target attention modules are folded into KV-cache
         * quantization by vLLM (dropped with a warning). */
        if (n_list == 1 && strlen(list[0]) >= 9 &&
            strcmp(list[0] + strlen(list[0]) - 9, "Attention") == 0) {
            OCT_WARN("%s targets only '%s': ignored (attention quantization is KV-cache "
                     "quantization)",
                     where, list[0]);
            oct_free((void *)list);
            continue;
        }
        ct_group *grp = &c->groups[c->n_groups];
        snprintf(grp->name, sizeof grp->name, "%s", gname);
        oct_status st = parse_group_spec(g, where, gfmt, grp, err);
        if (st == OCT_OK)
            st = add_targets(c, list, n_list, c->n_groups, &cap_t, err);
        oct_free((void *)list);
        if (st != OCT_OK)
            return st;
        c->n_groups++;
    }
    return OCT_OK;
}

/* kv_cache_scheme: static per-tensor FP8 k/v scales, or none. */
static oct_status parse_kv_scheme(const json_t *qc, const char *label, io_qconfig *q,
                                  oct_error *err)
{
    const json_t *kv = json_object_get(qc, "kv_cache_scheme");
    if (!kv || json_is_null(kv))
        return OCT_OK;
    char where[320];
    snprintf(where, sizeof where, "%s.kv_cache_scheme", label);
    if (!json_is_object(kv))
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s: expected an object or null", where);
    OCT_TRY(check_fp8_args(kv, where, err));
    const char *strategy = NULL;
    OCT_TRY(io_json_str(kv, "strategy", where, false, &strategy, err));
    if (strategy && strcmp(strategy, "tensor") != 0)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.strategy: '%s' is not supported (only per-tensor k/v "
                             "scales)",
                             where, strategy);
    bool dyn;
    OCT_TRY(get_dynamic(kv, where, &dyn, err));
    if (dyn)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.dynamic: dynamic KV-cache scales are not supported", where);
    q->kv_quantized = true;
    return OCT_OK;
}

oct_status io_qconfig_ct_parse(const json_t *qc, const char *label, io_qconfig *q, oct_error *err)
{
    ct_priv *c = oct_calloc(1, sizeof *c);
    if (!c)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    q->format = OCT_CKPT_COMPRESSED_TENSORS;
    q->ops = &k_ct_ops;
    q->priv = c;
    const char *gfmt = NULL;
    OCT_TRY(check_top_level(qc, label, &gfmt, err));
    OCT_TRY(parse_groups(qc, label, gfmt, c, err));
    char where[320];
    snprintf(where, sizeof where, "%s.config_groups[*].targets", label);
    OCT_TRY(io_patterns_create((const char *const *)c->targets, c->n_targets, where, &c->target_pat,
                               err));
    const char **list = NULL;
    int n_list = 0;
    OCT_TRY(io_json_str_array(qc, "ignore", label, &list, &n_list, err));
    snprintf(where, sizeof where, "%s.ignore", label);
    oct_status st = io_patterns_create(list, n_list, where, &c->ignore, err);
    oct_free((void *)list);
    return st != OCT_OK ? st : parse_kv_scheme(qc, label, q, err);
}

/* convert.c — `octet convert`: a pre-quantized FP8 checkpoint re-expressed in
 * another format (compressed-tensors, quant_method "fp8", Quark) without
 * re-quantizing.
 *
 * The source is read through oct_checkpoint_open, so every layer arrives as
 * its canonical description (weight scale kind and grid, activation scheme,
 * static input scale, KV-cache scales); a target either has a name for that
 * description or the conversion fails naming the layer.  Tensors are copied
 * byte for byte (FP8 codes, scales in their own dtype), only renamed
 * (weight_scale <-> weight_scale_inv, k_scale <-> k_proj.output_scale) and
 * reshaped between the layouts each format writes ([] / [1] per tensor,
 * [N] / [N, 1] per channel).  Zero points of symmetric schemes (all zero,
 * checked at open) are dropped.  Everything is decided before the first byte
 * is written; the written folder is reopened and must describe every layer
 * and KV scale exactly as the source does (else its config.json is removed
 * and the conversion fails). */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io.h"

#define COPY_CHUNK ((size_t)64 << 20)

/* What a target must say about one quantized linear. */
typedef struct cv_spec {
    oct_wscale_kind w;
    int64_t bn, bk; /* BLOCK */
    oct_act_kind a;
    int64_t act_group;  /* DYNAMIC_GROUP */
    oct_dtype mx_dtype; /* MX: U8 or F8_E8M0 */
} cv_spec;

/* One output tensor: the bytes of src under a new name and shape. */
typedef struct cv_item {
    const oct_tensor *src;
    char name[1056];
    int n_dims;
    int64_t dims[2];
} cv_item;

typedef struct cv {
    const oct_checkpoint *src;
    const oct_convert_opts *o;
    const oct_tensor_set *ts;
    cv_item *items;
    int64_t n_items, cap_items;
    bool *consumed;   /* [n tensors] written by a linear or KV item, or dropped */
    cv_spec *specs;   /* [n linears], meaningful where the linear is quantized */
    int64_t *spec_id; /* [n linears] index into uniq, -1 for unquantized */
    cv_spec *uniq;    /* [n_uniq] the distinct schemes, in order of first use */
    int64_t *uniq_count, *uniq_first, n_uniq;
    oct_status first_err;
    oct_error err;
} cv;

static const char *target_name(oct_convert_format f)
{
    switch (f) {
    case OCT_CONVERT_COMPRESSED_TENSORS: return "compressed-tensors";
    case OCT_CONVERT_FP8: return "fp8";
    case OCT_CONVERT_QUARK: return "quark";
    }
    return "?";
}

oct_status oct_convert_format_parse(const char *s, oct_convert_format *out)
{
    static const oct_convert_format all[] = {OCT_CONVERT_COMPRESSED_TENSORS, OCT_CONVERT_FP8,
                                             OCT_CONVERT_QUARK};
    for (size_t i = 0; s && out && i < OCT_ARRAY_LEN(all); i++)
        if (strcmp(s, target_name(all[i])) == 0) {
            *out = all[i];
            return OCT_OK;
        }
    return OCT_ERR_INVALID_ARG;
}

static bool spec_eq(const cv_spec *x, const cv_spec *y)
{
    return x->w == y->w && x->bn == y->bn && x->bk == y->bk && x->a == y->a &&
           x->act_group == y->act_group && x->mx_dtype == y->mx_dtype;
}

static void spec_str(const cv_spec *s, char *buf, size_t cap)
{
    char w[64];
    if (s->w == OCT_WSCALE_BLOCK)
        snprintf(w, sizeof w, "block %lldx%lld", (long long)s->bn, (long long)s->bk);
    else
        snprintf(w, sizeof w, "%s", oct_wscale_kind_str(s->w));
    if (s->a == OCT_AKIND_DYNAMIC_GROUP)
        snprintf(buf, cap, "%s weights, dynamic_group %lld activations", w,
                 (long long)s->act_group);
    else
        snprintf(buf, cap, "%s weights, %s activations", w, oct_act_kind_str(s->a));
}

static void step(cv *c, const char *what, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void step(cv *c, const char *what, bool ok, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->o->on_step)
        c->o->on_step(what, msg, ok, c->o->user);
}

/* Records the first inexpressible layer (the report goes on for the rest). */
static void refuse(cv *c, const char *layer, const char *why)
{
    step(c, layer, false, "%s", why);
    if (c->first_err == OCT_OK)
        c->first_err = oct_error_set(
            &c->err, OCT_ERR_UNSUPPORTED, -1, "%s: cannot convert to %s: layer '%s': %s",
            oct_checkpoint_dir(c->src), target_name(c->o->format), layer, why);
}

static void mark(cv *c, const oct_tensor *t)
{
    int64_t lo = 0, hi = oct_tensor_set_count(c->ts) - 1;
    while (t && lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        const oct_tensor *m = oct_tensor_set_at(c->ts, mid);
        if (m == t) {
            c->consumed[mid] = true;
            return;
        }
        if (strcmp(t->name, m->name) < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
}

static oct_status add_item(cv *c, const oct_tensor *src, const char *name, int n_dims,
                           const int64_t *dims, oct_error *err)
{
    if (c->n_items == c->cap_items) {
        int64_t nc = c->cap_items ? c->cap_items * 2 : 64;
        cv_item *ni = oct_realloc(c->items, (size_t)nc * sizeof(cv_item));
        if (!ni)
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        c->items = ni;
        c->cap_items = nc;
    }
    cv_item *it = &c->items[c->n_items];
    memset(it, 0, sizeof *it);
    it->src = src;
    if (snprintf(it->name, sizeof it->name, "%s", name) >= (int)sizeof it->name)
        return oct_error_set(err, OCT_ERR_LIMIT, -1, "tensor name too long: '%s'", name);
    it->n_dims = n_dims;
    for (int i = 0; i < n_dims; i++)
        it->dims[i] = dims[i];
    c->n_items++;
    mark(c, src);
    return OCT_OK;
}

static bool ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static bool is_lm_head(const char *name)
{
    return strcmp(name, "lm_head") == 0 || ends_with(name, ".lm_head");
}

/* Why the target cannot express spec s (NULL: it can). */
static const char *inexpressible(oct_convert_format f, const oct_ckpt_linear *l, const cv_spec *s)
{
    if (l->weight->dtype != OCT_DT_F8_E4M3)
        return "its weight is F8_E5M2; every target stores E4M3FN codes only (compressed-tensors "
               "float 8-bit, fp8 fmt e4m3, Quark fp8_e4m3)";
    if (l->act_scale_ub > 0.0f)
        return "its dynamic activations are bounded by fbgemm_fp8's activation_scale_ub, which "
               "the target has no field for";
    switch (f) {
    case OCT_CONVERT_COMPRESSED_TENSORS:
        if (s->w == OCT_WSCALE_BLOCK && l->weight_scale->dtype == OCT_DT_F8_E8M0)
            return "its block scales are E8M0; compressed-tensors block scales are floats";
        return NULL;
    case OCT_CONVERT_FP8:
        if (is_lm_head(l->name))
            return "lm_head is quantized; quant_method fp8 never quantizes lm_head";
        if (s->a == OCT_AKIND_NONE)
            return "weight-only FP8 (no activation quantization); quant_method fp8 always "
                   "quantizes activations";
        if (s->w == OCT_WSCALE_CHANNEL)
            return "per-channel weight scales; quant_method fp8 has per-tensor and block weight "
                   "scales only";
        if (s->w == OCT_WSCALE_MX)
            return "MX (E8M0 1x32) weight scales; quant_method fp8 has no MX layout";
        if (s->w == OCT_WSCALE_TENSOR && s->a != OCT_AKIND_STATIC &&
            s->a != OCT_AKIND_DYNAMIC_TENSOR)
            return "per-tensor weights need static or dynamic per-tensor activations in "
                   "quant_method fp8 (activation_scheme static | dynamic)";
        if (s->w == OCT_WSCALE_BLOCK && (s->a != OCT_AKIND_DYNAMIC_GROUP || s->act_group != s->bn))
            return "block weights need dynamic activation groups of weight_block_size[0] in "
                   "quant_method fp8";
        return NULL;
    case OCT_CONVERT_QUARK:
        if (is_lm_head(l->name))
            return "lm_head is quantized; Quark checkpoints never quantize lm_head (vLLM "
                   "ParallelLMHead)";
        if (s->w == OCT_WSCALE_BLOCK)
            return "block weight scales; Quark FP8 weights are per_tensor or per_channel";
        if (s->w == OCT_WSCALE_MX)
            return "MX (E8M0 1x32) weight scales; Quark FP8 weights are per_tensor or per_channel";
        if (s->a == OCT_AKIND_NONE)
            return "weight-only FP8 (no activation quantization) has no Quark scheme";
        if (s->a == OCT_AKIND_DYNAMIC_GROUP)
            return "dynamic group activations; Quark FP8 activations are per_tensor or per-token";
        return NULL;
    }
    return "unknown target";
}

/* The output tensors of one quantized linear. */
static oct_status plan_linear(cv *c, const oct_ckpt_linear *l, const cv_spec *s, oct_error *err)
{
    const oct_convert_format f = c->o->format;
    const int64_t N = l->out_features, K = l->in_features;
    OCT_TRY(add_item(c, l->weight, l->weight->name, 2, l->weight->dims, err));
    char name[1056];
    int64_t d[2] = {0, 0};
    int nd = 0;
    const char *sfx = "weight_scale";
    switch (s->w) {
    case OCT_WSCALE_TENSOR:
        nd = f == OCT_CONVERT_COMPRESSED_TENSORS ? 1 : 0;
        d[0] = 1;
        break;
    case OCT_WSCALE_CHANNEL:
        nd = f == OCT_CONVERT_QUARK ? 1 : 2;
        d[0] = N;
        d[1] = 1;
        break;
    case OCT_WSCALE_BLOCK:
        nd = 2;
        d[0] = l->scale_rows;
        d[1] = l->scale_cols;
        if (f == OCT_CONVERT_FP8)
            sfx = "weight_scale_inv";
        break;
    default: /* MX */
        nd = 2;
        d[0] = N;
        d[1] = K / 32;
        break;
    }
    snprintf(name, sizeof name, "%s.%s", l->name, sfx);
    OCT_TRY(add_item(c, l->weight_scale, name, nd, d, err));
    char sdesc[128];
    int64_t one = 1;
    if (s->a == OCT_AKIND_STATIC) {
        char iname[1056];
        snprintf(iname, sizeof iname, "%s.input_scale", l->name);
        OCT_TRY(add_item(c, l->input_scale, iname, f == OCT_CONVERT_COMPRESSED_TENSORS ? 1 : 0,
                         &one, err));
    }
    if (nd == 0)
        snprintf(sdesc, sizeof sdesc, "[]");
    else if (nd == 1)
        snprintf(sdesc, sizeof sdesc, "[%lld]", (long long)d[0]);
    else
        snprintf(sdesc, sizeof sdesc, "[%lld, %lld]", (long long)d[0], (long long)d[1]);
    char sp[160];
    spec_str(s, sp, sizeof sp);
    step(c, l->name, true, "%s: codes copied; '%s' -> '%s' %s %s%s", sp, l->weight_scale->name,
         name, oct_dtype_str(l->weight_scale->dtype), sdesc,
         s->a == OCT_AKIND_STATIC ? "; input_scale copied" : "");
    /* zero points of a symmetric scheme: checked zero at open, dropped */
    static const char *const zps[] = {"weight_zero_point", "input_zero_point"};
    for (size_t i = 0; i < OCT_ARRAY_LEN(zps); i++) {
        snprintf(name, sizeof name, "%s.%s", l->name, zps[i]);
        mark(c, oct_tensor_set_find(c->ts, name));
    }
    return OCT_OK;
}

/* "<x>.attn" -> the target's name of its k / v / q / prob scale. */
static bool kv_name(oct_convert_format f, const char *attn, io_kv_kind kind, char *out, size_t cap)
{
    size_t n = strlen(attn);
    int p = (int)(ends_with(attn, ".attn") ? n - 5 : n);
    static const char *const ct[] = {"k_scale", "v_scale", "q_scale", NULL};
    static const char *const os[] = {"k_proj.output_scale", "v_proj.output_scale",
                                     "q_proj.output_scale", "prob_output_scale"};
    const char *sfx = f == OCT_CONVERT_COMPRESSED_TENSORS ? ct[kind] : os[kind];
    if (!sfx)
        return false;
    snprintf(out, cap, "%.*s.%s", p, attn, sfx);
    return true;
}

static oct_status plan_kv(cv *c, oct_error *err)
{
    const oct_convert_format f = c->o->format;
    for (int64_t i = 0; i < oct_checkpoint_n_kv(c->src); i++) {
        const oct_ckpt_kv *k = oct_checkpoint_kv(c->src, i);
        const char *srcs[4] = {k->k_source, k->v_source, k->q_source, k->prob_source};
        static const char *const what[4] = {"k_scale", "v_scale", "q_scale", "prob_scale"};
        for (int j = 0; j < 4; j++) {
            if (!srcs[j])
                continue;
            const oct_tensor *t = oct_tensor_set_find(c->ts, srcs[j]);
            char label[1100], name[1100];
            snprintf(label, sizeof label, "%s %s", k->attn, what[j]);
            if (!t)
                return oct_error_set(err, OCT_ERR_INTERNAL, -1, "KV source '%s' not found",
                                     srcs[j]);
            if (!kv_name(f, k->attn, (io_kv_kind)j, name, sizeof name)) {
                char why[1200];
                snprintf(why, sizeof why,
                         "'%s' (%s) has no compressed-tensors name (kv_cache_scheme holds k, v "
                         "and q scales only)",
                         srcs[j], what[j]);
                refuse(c, label, why);
                mark(c, t);
                continue;
            }
            int64_t one = 1;
            OCT_TRY(add_item(c, t, name, f == OCT_CONVERT_COMPRESSED_TENSORS ? 1 : 0, &one, err));
            step(c, label, true, "'%s' -> '%s' %s", srcs[j], name, oct_dtype_str(t->dtype));
        }
    }
    /* KV zero points (zero, checked at open) and anything else the remapping
     * recognises but no entry kept: dropped. */
    const oct_ckpt_format sf = oct_checkpoint_format(c->src);
    const bool os_kv = sf == OCT_CKPT_FP8 || sf == OCT_CKPT_QUARK;
    for (int64_t i = 0; i < oct_tensor_set_count(c->ts); i++) {
        const oct_tensor *t = oct_tensor_set_at(c->ts, i);
        char attn[1024];
        io_kv_kind kind;
        bool zp;
        if (!c->consumed[i] && io_kv_remap(t->name, os_kv, attn, sizeof attn, &kind, &zp) && zp)
            c->consumed[i] = true;
    }
    return OCT_OK;
}

/* ---- quantization_config of each target ---------------------------------- */

/* The first linear of the scheme most quantized linears share (-1: none). */
static int64_t majority(const cv *c)
{
    int64_t best = -1;
    for (int64_t u = 0; u < c->n_uniq; u++)
        if (best < 0 || c->uniq_count[u] > c->uniq_count[best])
            best = u;
    return best < 0 ? -1 : c->uniq_first[best];
}

static json_t *unquantized_names(const cv *c)
{
    json_t *a = json_array();
    for (int64_t i = 0; i < oct_checkpoint_n_linears(c->src); i++) {
        const oct_ckpt_linear *l = oct_checkpoint_linear(c->src, i);
        if (l->scale_kind == OCT_WSCALE_NONE)
            json_array_append_new(a, json_string(l->name));
    }
    return a;
}

static json_t *ct_args(const char *strategy, bool dynamic)
{
    return json_pack("{s:i, s:s, s:b, s:s, s:b, s:n, s:n}", "num_bits", 8, "type", "float",
                     "symmetric", 1, "strategy", strategy, "dynamic", dynamic, "group_size",
                     "block_structure");
}

static json_t *ct_group(const cv_spec *s, const char **fmt)
{
    json_t *w, *in = NULL;
    const char *mx_dt = s->mx_dtype == OCT_DT_F8_E8M0 ? "torch.float8_e8m0fnu" : "torch.uint8";
    switch (s->w) {
    case OCT_WSCALE_TENSOR: w = ct_args("tensor", false); break;
    case OCT_WSCALE_CHANNEL: w = ct_args("channel", false); break;
    case OCT_WSCALE_BLOCK:
        w = ct_args("block", false);
        json_object_set_new(w, "block_structure",
                            json_pack("[I, I]", (json_int_t)s->bn, (json_int_t)s->bk));
        break;
    default:
        w = ct_args("group", false);
        json_object_set_new(w, "group_size", json_integer(32));
        json_object_set_new(w, "scale_dtype", json_string(mx_dt));
        json_object_set_new(w, "zp_dtype", json_string("torch.uint8"));
        break;
    }
    switch (s->a) {
    case OCT_AKIND_DYNAMIC_TOKEN: in = ct_args("token", true); break;
    case OCT_AKIND_DYNAMIC_TENSOR: in = ct_args("tensor", true); break;
    case OCT_AKIND_STATIC: in = ct_args("tensor", false); break;
    case OCT_AKIND_DYNAMIC_GROUP:
        in = ct_args("group", true);
        json_object_set_new(in, "group_size", json_integer(s->act_group));
        if (s->w == OCT_WSCALE_MX) {
            json_object_set_new(in, "scale_dtype", json_string(mx_dt));
            json_object_set_new(in, "zp_dtype", json_string("torch.uint8"));
        }
        break;
    default: in = json_null(); break;
    }
    *fmt = s->w == OCT_WSCALE_MX    ? "mxfp8-quantized"
           : s->a == OCT_AKIND_NONE ? "naive-quantized"
                                    : "float-quantized";
    return json_pack("{s:[], s:o, s:o, s:n, s:s}", "targets", "weights", w, "input_activations", in,
                     "output_activations", "format", *fmt);
}

/* compressed-tensors: one config group per distinct scheme.  The most common
 * one targets "Linear"; the others, and a quantized lm_head (which "Linear"
 * never matches), name their layers exactly (exact names are tried before
 * class names).  Unquantized linears are listed in ignore. */
static json_t *qconfig_ct(const cv *c)
{
    const int64_t n = oct_checkpoint_n_linears(c->src);
    const int64_t maj = majority(c);
    json_t *groups = json_object();
    const char *gfmt = NULL;
    bool mixed = false;
    int n_groups = 0;
    const int64_t maj_id = c->spec_id[maj];
    /* groups in order: the majority's first, then by first layer */
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t u = 0; u < c->n_uniq; u++) {
            if ((pass == 0) != (u == maj_id))
                continue;
            const char *fmt;
            json_t *g = ct_group(&c->uniq[u], &fmt);
            json_t *targets = json_object_get(g, "targets");
            if (u == maj_id)
                json_array_append_new(targets, json_string("Linear"));
            for (int64_t j = 0; j < n; j++) {
                const char *nm = oct_checkpoint_linear(c->src, j)->name;
                if (c->spec_id[j] == u && (u != maj_id || is_lm_head(nm)))
                    json_array_append_new(targets, json_string(nm));
            }
            if (gfmt && strcmp(gfmt, fmt) != 0)
                mixed = true;
            gfmt = fmt;
            char gname[32];
            snprintf(gname, sizeof gname, "group_%d", n_groups++);
            json_object_set_new(groups, gname, g);
        }
    }
    json_t *kv = json_null();
    if (oct_checkpoint_kv_quantized(c->src))
        kv = json_pack("{s:i, s:s, s:b, s:s, s:b}", "num_bits", 8, "type", "float", "symmetric", 1,
                       "strategy", "tensor", "dynamic", 0);
    return json_pack("{s:s, s:s, s:s, s:o, s:o, s:o}", "quant_method", "compressed-tensors",
                     "format", mixed ? "mixed-precision" : gfmt, "quantization_status",
                     "compressed", "config_groups", groups, "ignore", unquantized_names(c),
                     "kv_cache_scheme", kv);
}

/* quant_method fp8: one scheme for every quantized layer (checked by
 * check_fp8_uniform), unquantized layers in modules_to_not_convert. */
static json_t *qconfig_fp8(const cv *c)
{
    const cv_spec *s = &c->specs[majority(c)];
    json_t *q = json_object();
    json_object_set_new(q, "quant_method", json_string("fp8"));
    json_object_set_new(q, "fmt", json_string("e4m3"));
    json_object_set_new(q, "activation_scheme",
                        json_string(s->a == OCT_AKIND_STATIC ? "static" : "dynamic"));
    if (s->w == OCT_WSCALE_BLOCK)
        json_object_set_new(q, "weight_block_size",
                            json_pack("[I, I]", (json_int_t)s->bn, (json_int_t)s->bk));
    json_object_set_new(q, "modules_to_not_convert", unquantized_names(c));
    if (oct_checkpoint_kv_quantized(c->src))
        json_object_set_new(q, "kv_cache_scheme", json_string("static"));
    return q;
}

static json_t *qk_tensor(const char *qscheme, bool dynamic)
{
    return json_pack("{s:s, s:s, s:b, s:b, s:s, s:s}", "dtype", "fp8_e4m3", "qscheme", qscheme,
                     "is_dynamic", dynamic, "symmetric", 1, "round_method", "half_even",
                     "scale_type", "float");
}

static json_t *qk_layer(const cv_spec *s, bool kv_out)
{
    json_t *w = qk_tensor(s->w == OCT_WSCALE_CHANNEL ? "per_channel" : "per_tensor", false);
    if (s->w == OCT_WSCALE_CHANNEL)
        json_object_set_new(w, "ch_axis", json_integer(0));
    json_t *in = s->a == OCT_AKIND_STATIC           ? qk_tensor("per_tensor", false)
                 : s->a == OCT_AKIND_DYNAMIC_TENSOR ? qk_tensor("per_tensor", true)
                                                    : qk_tensor("per_channel", true);
    json_t *out = kv_out ? qk_tensor("per_tensor", false) : json_null();
    return json_pack("{s:o, s:o, s:o, s:n}", "weight", w, "input_tensors", in, "output_tensors",
                     out, "bias");
}

/* Which KV roles ("k_proj", "v_proj", "q_proj") carry output scales. */
static void kv_roles(const cv *c, bool role[3])
{
    role[0] = role[1] = role[2] = false;
    for (int64_t i = 0; i < oct_checkpoint_n_kv(c->src); i++) {
        const oct_ckpt_kv *k = oct_checkpoint_kv(c->src, i);
        role[0] |= k->k_source != NULL;
        role[1] |= k->v_source != NULL;
        role[2] |= k->q_source != NULL;
    }
    if (!oct_checkpoint_kv_quantized(c->src))
        role[0] = role[1] = role[2] = false;
}

static int role_of(const char *name)
{
    static const char *const r[] = {".k_proj", ".v_proj", ".q_proj"};
    for (int i = 0; i < 3; i++)
        if (ends_with(name, r[i]))
            return i;
    return -1;
}

/* Quark: the most common scheme is global_quant_config; a layer with another
 * gets a layer_quant_config entry under its exact name (listed first: Quark
 * tries entries in order).  A declared KV cache adds kv_cache_group
 * ["*k_proj", "*v_proj"] and "*k_proj" / "*v_proj" (and "*q_proj" with q
 * scales) entries whose output_tensors are the KV-cache scheme. */
static json_t *qconfig_quark(const cv *c)
{
    const int64_t n = oct_checkpoint_n_linears(c->src);
    const int64_t maj = majority(c);
    bool role[3];
    kv_roles(c, role);
    int64_t role_spec[3] = {-1, -1, -1};
    for (int64_t i = 0; i < n; i++) {
        const oct_ckpt_linear *l = oct_checkpoint_linear(c->src, i);
        int r = role_of(l->name);
        if (l->scale_kind != OCT_WSCALE_NONE && r >= 0 && role[r] && role_spec[r] < 0)
            role_spec[r] = i;
    }
    json_t *lq = json_object();
    for (int64_t i = 0; i < n; i++) {
        const oct_ckpt_linear *l = oct_checkpoint_linear(c->src, i);
        if (l->scale_kind == OCT_WSCALE_NONE)
            continue;
        int r = role_of(l->name);
        bool kv = r >= 0 && role[r];
        const cv_spec *ref = kv ? &c->specs[role_spec[r]] : &c->specs[maj];
        if (!spec_eq(&c->specs[i], ref))
            json_object_set_new(lq, l->name, qk_layer(&c->specs[i], kv));
    }
    static const char *const pats[3] = {"*k_proj", "*v_proj", "*q_proj"};
    json_t *group = json_array();
    for (int r = 0; r < 3; r++) {
        if (role_spec[r] < 0)
            continue;
        json_object_set_new(lq, pats[r], qk_layer(&c->specs[role_spec[r]], true));
        if (r < 2)
            json_array_append_new(group, json_string(pats[r]));
    }
    json_t *exp = json_pack("{s:o, s:s, s:s, s:f}", "kv_cache_group", group, "pack_method",
                            "reorder", "weight_format", "real_quantized", "min_kv_scale", 0.0);
    return json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:{}}", "quant_method", "quark", "quant_mode",
                     "eager_mode", "exclude", unquantized_names(c), "export", exp,
                     "global_quant_config", qk_layer(&c->specs[maj], false), "layer_quant_config",
                     lq, "layer_type_quant_config");
}

/* ---- checks --------------------------------------------------------------- */

static void check_fp8_uniform(cv *c)
{
    const int64_t maj = majority(c);
    char want[160], have[160], why[512];
    spec_str(&c->specs[maj], want, sizeof want);
    for (int64_t i = 0; i < oct_checkpoint_n_linears(c->src); i++) {
        const oct_ckpt_linear *l = oct_checkpoint_linear(c->src, i);
        if (l->scale_kind == OCT_WSCALE_NONE || spec_eq(&c->specs[i], &c->specs[maj]))
            continue;
        spec_str(&c->specs[i], have, sizeof have);
        snprintf(why, sizeof why,
                 "%s, but most layers are %s; quant_method fp8 has one scheme for the whole "
                 "model",
                 have, want);
        refuse(c, l->name, why);
    }
}

static oct_status assign_spec(cv *c, int64_t i, oct_error *err)
{
    for (int64_t u = 0; u < c->n_uniq; u++)
        if (spec_eq(&c->uniq[u], &c->specs[i])) {
            c->spec_id[i] = u;
            c->uniq_count[u]++;
            return OCT_OK;
        }
    const size_t k = (size_t)c->n_uniq + 1;
    cv_spec *nu = oct_realloc(c->uniq, k * sizeof(cv_spec));
    if (nu)
        c->uniq = nu;
    int64_t *nc = oct_realloc(c->uniq_count, k * sizeof(int64_t));
    if (nc)
        c->uniq_count = nc;
    int64_t *nf = oct_realloc(c->uniq_first, k * sizeof(int64_t));
    if (nf)
        c->uniq_first = nf;
    if (!nu || !nc || !nf)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    c->uniq[c->n_uniq] = c->specs[i];
    c->uniq_count[c->n_uniq] = 1;
    c->uniq_first[c->n_uniq] = i;
    c->spec_id[i] = c->n_uniq++;
    return OCT_OK;
}

static oct_status describe(cv *c, oct_error *err)
{
    const oct_checkpoint *src = c->src;
    const int64_t n = oct_checkpoint_n_linears(src);
    bool any = false;
    for (int64_t i = 0; i < n; i++) {
        const oct_ckpt_linear *l = oct_checkpoint_linear(src, i);
        c->spec_id[i] = -1;
        if (l->scale_kind == OCT_WSCALE_NONE) {
            step(c, l->name, true, "unquantized (%s): copied as %s, listed as not quantized",
                 l->rule, oct_dtype_str(l->weight->dtype));
            continue;
        }
        any = true;
        cv_spec *s = &c->specs[i];
        memset(s, 0, sizeof *s);
        s->w = l->scale_kind;
        s->bn = s->w == OCT_WSCALE_BLOCK ? l->block_n : 0;
        s->bk = s->w == OCT_WSCALE_BLOCK ? l->block_k : 0;
        s->a = l->activation;
        s->act_group = l->activation == OCT_AKIND_DYNAMIC_GROUP ? l->act_group : 0;
        s->mx_dtype = s->w == OCT_WSCALE_MX ? l->weight_scale->dtype : OCT_DT_U8;
        OCT_TRY(assign_spec(c, i, err));
        const char *why = inexpressible(c->o->format, l, s);
        if (why) {
            refuse(c, l->name, why);
            mark(c, l->weight);
            mark(c, l->weight_scale);
            mark(c, l->input_scale);
            continue;
        }
        OCT_TRY(plan_linear(c, l, s, err));
    }
    if (!any)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s: nothing to convert: the checkpoint (%s) has no FP8 layer; "
                             "convert keeps FP8 codes and scales and never quantizes (use octet "
                             "quantize)",
                             oct_checkpoint_dir(src),
                             oct_ckpt_format_str(oct_checkpoint_format(src)));
    if (c->first_err == OCT_OK && c->o->format == OCT_CONVERT_FP8)
        check_fp8_uniform(c);
    OCT_TRY(plan_kv(c, err));
    /* everything else is copied as it is */
    for (int64_t i = 0; i < oct_tensor_set_count(c->ts); i++) {
        if (c->consumed[i])
            continue;
        const oct_tensor *t = oct_tensor_set_at(c->ts, i);
        OCT_TRY(add_item(c, t, t->name, t->n_dims, t->dims, err));
    }
    return OCT_OK;
}

/* ---- writing -------------------------------------------------------------- */

/* Copies every regular file of the source folder but the tensors, their
 * index and config.json (tokenizer, generation config, chat template,
 * README, ...). */
static oct_status copy_other_files(const char *src_dir, const char *out_dir, oct_error *err)
{
    DIR *d = opendir(src_dir);
    if (!d)
        return oct_error_set(err, OCT_ERR_IO, -1, "%s: cannot list: %s", src_dir, strerror(errno));
    oct_status st = OCT_OK;
    struct dirent *e;
    while (st == OCT_OK && (e = readdir(d)) != NULL) {
        const char *nm = e->d_name;
        if (nm[0] == '.' || ends_with(nm, ".safetensors") ||
            strcmp(nm, "model.safetensors.index.json") == 0 || strcmp(nm, "config.json") == 0)
            continue;
        char *s = io_path_join(src_dir, nm), *t = io_path_join(out_dir, nm);
        if (!s || !t)
            st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        else if (io_file_exists(s))
            st = io_copy_file(s, t, err);
        oct_free(s);
        oct_free(t);
    }
    closedir(d);
    return st;
}

static oct_status write_tensors(cv *c, const char *out_dir, oct_error *err)
{
    oct_st_writer *w = NULL;
    size_t shard = c->o->max_shard_bytes ? c->o->max_shard_bytes : (size_t)5 << 30;
    oct_status st = oct_st_writer_create(out_dir, "model", shard, &w, err);
    if (st == OCT_OK)
        st = oct_st_writer_set_metadata(w, "format", "pt", err);
    for (int64_t i = 0; i < c->n_items && st == OCT_OK; i++)
        st = oct_st_writer_declare(w, c->items[i].name, c->items[i].src->dtype, c->items[i].n_dims,
                                   c->items[i].dims, err);
    if (st == OCT_OK)
        st = oct_st_writer_begin(w, err);
    for (int64_t i = 0; i < c->n_items && st == OCT_OK; i++) {
        const oct_tensor *t = c->items[i].src;
        for (size_t off = 0; off < t->size_bytes && st == OCT_OK; off += COPY_CHUNK)
            st = oct_st_writer_append(w, c->items[i].name, (const uint8_t *)t->data + off,
                                      OCT_MIN(COPY_CHUNK, t->size_bytes - off), err);
    }
    if (st == OCT_OK)
        st = oct_st_writer_finish(w, err);
    oct_st_writer_free(w);
    return st;
}

static bool same_tensor_values(const oct_tensor *a, const oct_tensor *b)
{
    if (!a || !b)
        return a == b;
    return a->dtype == b->dtype && a->size_bytes == b->size_bytes &&
           memcmp(a->data, b->data, a->size_bytes) == 0;
}

static bool same_f32(float a, float b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* The written folder describes every layer and KV scale as the source. */
static oct_status verify(const oct_checkpoint *src, const char *out_dir, oct_error *err)
{
    oct_checkpoint *out = NULL;
    oct_error e2;
    if (oct_checkpoint_open(out_dir, NULL, &out, &e2) != OCT_OK)
        return oct_error_set(err, OCT_ERR_INTERNAL, -1,
                             "%s: the converted checkpoint does not open: %s", out_dir, e2.message);
    oct_status st = OCT_OK;
    const char *bad = NULL, *what = NULL;
    if (oct_checkpoint_n_linears(out) != oct_checkpoint_n_linears(src)) {
        bad = "(all)";
        what = "number of linear layers";
    }
    for (int64_t i = 0; !bad && i < oct_checkpoint_n_linears(src); i++) {
        const oct_ckpt_linear *a = oct_checkpoint_linear(src, i);
        const oct_ckpt_linear *b = oct_checkpoint_find_linear(out, a->name);
        bad = a->name;
        if (!b)
            what = "missing";
        else if (a->scale_kind != b->scale_kind || a->block_n != b->block_n ||
                 a->block_k != b->block_k || a->scale_rows != b->scale_rows ||
                 a->scale_cols != b->scale_cols)
            what = "weight scale kind or grid";
        else if (a->activation != b->activation || a->act_group != b->act_group ||
                 !same_f32(a->act_scale_ub, b->act_scale_ub))
            what = "activation scheme";
        else if (a->fp8_format != b->fp8_format && a->scale_kind != OCT_WSCALE_NONE)
            what = "FP8 element format";
        else if (a->weight->dtype != b->weight->dtype ||
                 a->weight->size_bytes != b->weight->size_bytes)
            what = "weight dtype";
        else if (!same_tensor_values(a->weight_scale, b->weight_scale))
            what = "weight scale bytes";
        else if (!same_tensor_values(a->input_scale, b->input_scale) ||
                 !same_f32(a->input_scale_value, b->input_scale_value))
            what = "input scale";
        else if (!same_tensor_values(a->bias, b->bias))
            what = "bias";
        else
            bad = NULL;
    }
    if (!bad && (oct_checkpoint_n_kv(out) != oct_checkpoint_n_kv(src) ||
                 oct_checkpoint_kv_quantized(out) != oct_checkpoint_kv_quantized(src))) {
        bad = "(KV cache)";
        what = "KV-cache scales or their declaration";
    }
    for (int64_t i = 0; !bad && i < oct_checkpoint_n_kv(src); i++) {
        const oct_ckpt_kv *a = oct_checkpoint_kv(src, i), *b = NULL;
        for (int64_t j = 0; j < oct_checkpoint_n_kv(out); j++)
            if (strcmp(oct_checkpoint_kv(out, j)->attn, a->attn) == 0)
                b = oct_checkpoint_kv(out, j);
        if (!b || !same_f32(a->k_scale, b->k_scale) || !same_f32(a->v_scale, b->v_scale) ||
            !same_f32(a->q_scale, b->q_scale) || !same_f32(a->prob_scale, b->prob_scale)) {
            bad = a->attn;
            what = "KV-cache scales";
        }
    }
    if (bad)
        st = oct_error_set(err, OCT_ERR_INTERNAL, -1,
                           "%s: the converted checkpoint does not describe '%s' as the source "
                           "does (%s)",
                           out_dir, bad, what);
    oct_checkpoint_free(out);
    return st;
}

oct_status oct_checkpoint_convert(const oct_checkpoint *src, const char *out_dir,
                                  const oct_convert_opts *opts, oct_error *err)
{
    if (!src || !opts || (unsigned)opts->format > OCT_CONVERT_QUARK)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "oct_checkpoint_convert: bad arguments");
    cv c;
    memset(&c, 0, sizeof c);
    c.src = src;
    c.o = opts;
    c.ts = oct_checkpoint_tensors(src);
    const int64_t nt = oct_tensor_set_count(c.ts), nl = oct_checkpoint_n_linears(src);
    c.consumed = oct_calloc(nt ? (size_t)nt : 1, sizeof(bool));
    c.specs = oct_calloc(nl ? (size_t)nl : 1, sizeof(cv_spec));
    c.spec_id = oct_calloc(nl ? (size_t)nl : 1, sizeof(int64_t));
    oct_status st = OCT_OK;
    if (!c.consumed || !c.specs || !c.spec_id) {
        st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        goto out;
    }
    st = describe(&c, err);
    if (st == OCT_OK && c.first_err != OCT_OK) {
        st = c.first_err;
        if (err)
            *err = c.err;
    }
    if (st != OCT_OK || !out_dir)
        goto out;
    if (mkdir(out_dir, 0755) != 0 && errno != EEXIST) {
        st = oct_error_set(err, OCT_ERR_IO, -1, "%s: cannot create: %s", out_dir, strerror(errno));
        goto out;
    }
    char *rs = realpath(oct_checkpoint_dir(src), NULL), *ro = realpath(out_dir, NULL);
    bool same = rs && ro && strcmp(rs, ro) == 0;
    free(rs);
    free(ro);
    if (same) {
        st = oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                           "%s: the output folder is the source folder", out_dir);
        goto out;
    }
    json_t *qc = opts->format == OCT_CONVERT_COMPRESSED_TENSORS ? qconfig_ct(&c)
                 : opts->format == OCT_CONVERT_FP8              ? qconfig_fp8(&c)
                                                                : qconfig_quark(&c);
    st = write_tensors(&c, out_dir, err);
    if (st == OCT_OK)
        st = copy_other_files(oct_checkpoint_dir(src), out_dir, err);
    if (st == OCT_OK) {
        st = io_write_config(oct_checkpoint_dir(src), out_dir, qc, err);
        qc = NULL;
    }
    json_decref(qc);
    if (st == OCT_OK) {
        st = verify(src, out_dir, err);
        if (st != OCT_OK) { /* a folder without config.json is visibly incomplete */
            char *cfg = io_path_join(out_dir, "config.json");
            if (cfg)
                unlink(cfg);
            oct_free(cfg);
        }
    }
    if (st == OCT_OK)
        io_fsync_dir(out_dir);
out:
    oct_free(c.items);
    oct_free(c.consumed);
    oct_free(c.specs);
    oct_free(c.spec_id);
    oct_free(c.uniq);
    oct_free(c.uniq_count);
    oct_free(c.uniq_first);
    return st;
}

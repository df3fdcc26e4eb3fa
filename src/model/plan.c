/* plan.c — what loading will do, computed without reading weights: for every
 * unfused linear its scheme (online, checkpoint, or unquantized), the ignore
 * rule that matched, the fused unit it runs in, the kernel, the bytes; totals
 * and the predicted peak memory.  `octet inspect --plan` prints it, loading
 * executes it (load.c).
 *
 * Fusion: online and unquantized layers run fused as vLLM runs them (q/k/v ->
 * qkv_proj, gate/up -> gate_up_proj), so an online per-tensor scale covers the
 * whole fused matrix exactly as in vLLM.  Pre-quantized FP8 parts keep their
 * own scales and run unfused: no requantization, no precision lost. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "kernels/linear.h"
#include "model/model.h"

static char *keep(oct_plan *p, const char *s, oct_error *err, oct_status *st)
{
    /* layer_names is sized generously at creation; see oct_plan_build. */
    char *d = oct_strdup(s);
    if (!d) {
        *st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        return NULL;
    }
    for (int64_t i = 0;; i++) {
        if (!p->layer_names[i]) {
            p->layer_names[i] = d;
            return d;
        }
    }
}

/* E8M0 MX scales are one byte each, the others f32. */
static uint64_t scale_bytes(const oct_linear_desc *d)
{
    uint64_t n = (uint64_t)oct_scale_count(d->weight_scale, d->n, d->k);
    return d->weight_scale == OCT_SCALE_MX32 ? n : 4u * n;
}

static uint64_t unit_bytes(const oct_linear_desc *d)
{
    uint64_t nk = (uint64_t)d->n * (uint64_t)d->k;
    uint64_t b = d->weight_type == OCT_WEIGHT_FP8    ? nk + scale_bytes(d)
                 : d->weight_type == OCT_WEIGHT_BF16 ? 2 * nk
                                                     : 4 * nk;
    return b + (d->has_bias ? 4u * (uint64_t)d->n : 0);
}

/* Kernel description of a pre-quantized checkpoint linear. */
static oct_status ckpt_desc(const oct_ckpt_linear *l, oct_linear_desc *d, oct_error *err)
{
    if (l->fp8_format != OCT_FP8_E4M3FN)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s: %s weights: the CPU kernels take E4M3FN only", l->name,
                             oct_fp8_format_str(l->fp8_format));
    d->weight_type = OCT_WEIGHT_FP8;
    switch (l->scale_kind) {
    case OCT_WSCALE_TENSOR: d->weight_scale = OCT_SCALE_TENSOR; break;
    case OCT_WSCALE_CHANNEL: d->weight_scale = OCT_SCALE_ROW; break;
    case OCT_WSCALE_BLOCK:
        if (l->block_n != 128 || l->block_k != 128)
            return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                 "%s: weight blocks [%lld, %lld]: only [128, 128] is supported",
                                 l->name, (long long)l->block_n, (long long)l->block_k);
        d->weight_scale = OCT_SCALE_BLOCK128;
        break;
    case OCT_WSCALE_MX: d->weight_scale = OCT_SCALE_MX32; break;
    default: return oct_error_set(err, OCT_ERR_INTERNAL, -1, "%s: unexpected scale kind", l->name);
    }
    switch (l->activation) {
    case OCT_AKIND_NONE: d->act = OCT_ACT_NONE; break;
    case OCT_AKIND_DYNAMIC_TOKEN:
        d->act = OCT_ACT_DYNAMIC_TOKEN;
        d->act_scale_ub = l->act_scale_ub;
        break;
    case OCT_AKIND_DYNAMIC_TENSOR: d->act = OCT_ACT_DYNAMIC_TENSOR; break;
    case OCT_AKIND_DYNAMIC_GROUP:
        if (l->scale_kind == OCT_WSCALE_MX)
            d->act = OCT_ACT_MX32;
        else if (l->act_group == 128)
            d->act = OCT_ACT_GROUP128;
        else
            return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                 "%s: activation groups of %lld: only 128 is supported", l->name,
                                 (long long)l->act_group);
        break;
    case OCT_AKIND_STATIC:
        d->act = OCT_ACT_STATIC;
        d->act_static_scale = l->input_scale_value;
        break;
    default:
        return oct_error_set(err, OCT_ERR_INTERNAL, -1, "%s: unexpected activation kind", l->name);
    }
    return OCT_OK;
}

static void online_desc(oct_online_scheme s, oct_linear_desc *d)
{
    d->weight_type = OCT_WEIGHT_FP8;
    switch (s) {
    case OCT_ONLINE_PER_TENSOR:
        /* vLLM with CUTLASS: per-tensor weights, per-token dynamic activations */
        d->weight_scale = OCT_SCALE_TENSOR;
        d->act = OCT_ACT_DYNAMIC_TOKEN;
        break;
    case OCT_ONLINE_PER_BLOCK:
        d->weight_scale = OCT_SCALE_BLOCK128;
        d->act = OCT_ACT_GROUP128;
        break;
    case OCT_ONLINE_MXFP8:
        d->weight_scale = OCT_SCALE_MX32;
        d->act = OCT_ACT_MX32;
        break;
    case OCT_ONLINE_NONE: break;
    }
}

static const char *scheme_of(oct_online_scheme online, bool is_fp8)
{
    if (online != OCT_ONLINE_NONE)
        return oct_online_scheme_str(online);
    return is_fp8 ? NULL : "bf16";
}

/* One unfused linear as a unit sees it: its plan name and its weight source. */
typedef struct part_in {
    char name[192];
    const oct_ckpt_linear *src; /* 2-D checkpoint linear, or NULL: */
    const oct_tensor *stack;    /* 3-D expert tensor viewed as [E*R, k] */
    int64_t row0, n, k;
} part_in;

typedef struct plan_ctx {
    oct_plan *p;
    const char *dir;
    bool online;
    oct_weight_type plain;
    oct_linear_selector *sel;
    oct_linear_selector *moe_sel; /* expert layers (--moe-backend) */
    bool *ignore_used;
} plan_ctx;

/* Pre-quantized FP8 parts of one fused layer can run as one unit when the
 * fusion is exact: the same scheme on every part, and scales that simply
 * stack (per-channel and MX rows; 128x128 blocks when every part but the last
 * has a multiple of 128 rows; per-tensor only when all parts share one scale
 * -- vLLM would requantize the others to the max, octet keeps them apart). */
static bool ckpt_parts_fusable(const part_in *sh, int n_sh)
{
    if (n_sh < 2)
        return false;
    for (int s = 0; s < n_sh; s++)
        if (!sh[s].src || sh[s].stack)
            return false;
    oct_linear_desc d0, d;
    oct_error e;
    memset(&d0, 0, sizeof d0);
    if (ckpt_desc(sh[0].src, &d0, &e) != OCT_OK)
        return false;
    float s0 = 0.0f;
    if (d0.weight_scale == OCT_SCALE_TENSOR &&
        oct_ckpt_linear_read_scales(sh[0].src, &s0, &e) != OCT_OK)
        return false;
    for (int s = 0; s < n_sh; s++) {
        memset(&d, 0, sizeof d);
        if (ckpt_desc(sh[s].src, &d, &e) != OCT_OK || d.weight_scale != d0.weight_scale ||
            d.act != d0.act || d.act_scale_ub != d0.act_scale_ub ||
            d.act_static_scale != d0.act_static_scale ||
            (sh[s].src->bias != NULL) != (sh[0].src->bias != NULL) ||
            sh[s].src->fp8_format != sh[0].src->fp8_format)
            return false;
        if (d0.weight_scale == OCT_SCALE_BLOCK128 && s + 1 < n_sh && sh[s].n % 128 != 0)
            return false;
        if (d0.weight_scale == OCT_SCALE_TENSOR) {
            float v = 0.0f;
            if (oct_ckpt_linear_read_scales(sh[s].src, &v, &e) != OCT_OK || v != s0)
                return false;
        }
    }
    return true;
}

static oct_status match_ignore(const plan_ctx *c, const char *name, int *idx, oct_error *err)
{
    *idx = -1;
    if (!c->online || c->p->qspec.n_ignore <= 0)
        return OCT_OK;
    return oct_name_match_list((const char *const *)c->p->qspec.ignore, c->p->qspec.n_ignore, name,
                               idx, err);
}

static const char *last_component(const char *name)
{
    const char *d = strrchr(name, '.');
    return d ? d + 1 : name;
}

/* The scheme of each part (online `base` unless an ignore entry matched;
 * layer_ign >= 0: already ignored by a whole-layer entry) into sch, the
 * ignore entry that decided into ign (-1: none). */
static oct_status part_schemes(plan_ctx *c, const char *fused, const part_in *sh, int n_sh,
                               oct_online_scheme base, bool consult_ignore, int layer_ign,
                               oct_online_scheme *sch, int *ign, oct_error *err)
{
    oct_status st;
    /* the fused name itself listed in ignore ignores every part */
    int fused_ign = layer_ign;
    if (fused_ign < 0 && consult_ignore) {
        if ((st = match_ignore(c, fused, &fused_ign, err)) != OCT_OK)
            return st;
        if (fused_ign >= 0 && strncmp(c->p->qspec.ignore[fused_ign], "re:", 3) == 0)
            fused_ign = -1; /* only the exact fused name counts (docs/MODEL.md §The plan, Ignore) */
    }
    for (int s = 0; s < n_sh; s++) {
        ign[s] = fused_ign;
        sch[s] = c->online ? base : OCT_ONLINE_NONE;
        if (consult_ignore && sch[s] != OCT_ONLINE_NONE && fused_ign < 0 &&
            (st = match_ignore(c, sh[s].name, &ign[s], err)) != OCT_OK)
            return st;
        if (ign[s] >= 0) {
            c->ignore_used[ign[s]] = true;
            sch[s] = OCT_ONLINE_NONE;
        }
    }
    return OCT_OK;
}

/* The parts of a fused linear must share one scheme, and be all FP8 or all
 * not in the checkpoint (vLLM's rule and text). */
static oct_status parts_agree(const char *fused, const part_in *sh, int n_sh,
                              const oct_online_scheme *sch, bool ckpt_fp8, oct_error *err)
{
    for (int s = 1; s < n_sh; s++) {
        bool s_fp8 = sh[s].src && sh[s].src->scale_kind != OCT_WSCALE_NONE;
        if (sch[s] == sch[0] && s_fp8 == ckpt_fp8)
            continue;
        char list[160] = "";
        size_t used = 0;
        for (int t = 0; t < n_sh && used < sizeof list; t++) {
            int w = snprintf(list + used, sizeof list - used, "%s'%s'", t ? ", " : "",
                             last_component(sh[t].name));
            if (w < 0)
                break;
            used += (size_t)w;
        }
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "Found a different quantization schemes for [%s] in %s. "
                             "octet (like vLLM) requires all to use the same scheme.",
                             list, fused);
    }
    return OCT_OK;
}

/* Unit g's kernel description (from the checkpoint's FP8, the online scheme,
 * or plain weights) and its kernel. */
static oct_status unit_desc(plan_ctx *c, oct_plan_unit *g, const oct_ckpt_linear *src,
                            bool is_expert, oct_error *err)
{
    oct_status st;
    oct_linear_desc *d = &g->desc;
    memset(d, 0, sizeof *d);
    d->name = g->name;
    d->n = g->n;
    d->k = g->k;
    d->has_bias = src && src->bias != NULL;
    if (g->from_checkpoint_fp8) {
        if ((st = ckpt_desc(src, d, err)) != OCT_OK)
            return st;
    } else if (g->online != OCT_ONLINE_NONE) {
        online_desc(g->online, d);
        if (is_expert && g->online == OCT_ONLINE_PER_TENSOR) {
            /* vLLM's fused MoE: per-tensor dynamic activations (docs/MODEL.md §Activations at
             * run time) */
            d->act = OCT_ACT_DYNAMIC_TENSOR;
            g->moe_tensor_act = true;
        }
    } else {
        d->weight_type = c->plain;
        d->act = OCT_ACT_NONE;
    }
    if (d->weight_scale == OCT_SCALE_MX32 && d->weight_type == OCT_WEIGHT_FP8 && g->k % 32 != 0)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "MXFP8 requires input_size_per_partition (%lld) to be "
                             "divisible by 32. (layer %s)",
                             (long long)g->k, g->name);
    return oct_linear_selector_pick(is_expert ? c->moe_sel : c->sel, d, &g->kernel, err);
}

/* The plan entries (one per checkpoint linear) of unit g, parts s0..s1 of sh. */
static oct_status plan_entries(plan_ctx *c, const oct_plan_unit *g, const part_in *sh, int s0,
                               int s1, const int *ign, oct_error *err)
{
    oct_plan *p = c->p;
    oct_status st = OCT_OK;
    for (int s = s0; s < s1; s++) {
        oct_plan_layer *pl = &p->layers[p->n_layers];
        pl->name = keep(p, sh[s].name, err, &st);
        pl->unit = keep(p, g->name, err, &st);
        pl->n = sh[s].n;
        pl->k = sh[s].k;
        const char *sc = scheme_of(g->online, g->from_checkpoint_fp8);
        char buf[128];
        if (!sc) {
            snprintf(buf, sizeof buf, "%s (checkpoint)", oct_checkpoint_scheme(p->ckpt));
            sc = buf;
        }
        pl->scheme = keep(p, sc, err, &st);
        pl->ignore_rule = ign[s] >= 0 ? p->qspec.ignore[ign[s]] : NULL;
        pl->kernel = oct_linear_kernel_name(g->kernel);
        pl->bytes = g->bytes * (uint64_t)pl->n / (uint64_t)g->n;
        if (st != OCT_OK)
            return st;
        if (g->desc.weight_type == OCT_WEIGHT_FP8)
            p->n_quantized++;
        p->n_layers++;
    }
    return OCT_OK;
}

/* Adds the units of one role (fused parts, or a single linear) to the plan:
 * the parts' schemes, the parts-must-agree rule, then per unit its
 * description, kernel and plan entries. */
static oct_status add_units(plan_ctx *c, int64_t layer, oct_unit_role role, int64_t expert,
                            const char *fused, const part_in *sh, int n_sh, oct_online_scheme base,
                            bool consult_ignore, int layer_ign, oct_error *err)
{
    oct_plan *p = c->p;
    oct_status st;
    oct_online_scheme sch[OCT_MAX_PARTS];
    int ign[OCT_MAX_PARTS];
    bool ckpt_fp8 = sh[0].src && sh[0].src->scale_kind != OCT_WSCALE_NONE;
    if ((st = part_schemes(c, fused, sh, n_sh, base, consult_ignore, layer_ign, sch, ign, err)) ||
        (st = parts_agree(fused, sh, n_sh, sch, ckpt_fp8, err)))
        return st;
    bool is_expert = role == OCT_U_EXP_GATE_UP || role == OCT_U_EXP_DOWN;
    /* Units: fused, unless the checkpoint's FP8 parts have scales that do not
     * stack exactly (then each keeps its own). */
    bool split = ckpt_fp8 && !ckpt_parts_fusable(sh, n_sh);
    int n_units = split ? n_sh : 1;
    for (int u = 0; u < n_units; u++) {
        oct_plan_unit *g = &p->units[p->n_units];
        int s0 = split ? u : 0, s1 = split ? u + 1 : n_sh;
        snprintf(g->name, sizeof g->name, "%s", split || n_sh == 1 ? sh[s0].name : fused);
        g->n_parts = s1 - s0;
        g->k = sh[s0].k;
        g->online = sch[0];
        g->from_checkpoint_fp8 = ckpt_fp8;
        g->layer = layer;
        g->role = role;
        g->expert = expert;
        for (int s = s0; s < s1; s++) {
            g->src[s - s0] = sh[s].src;
            g->stack[s - s0] = sh[s].stack;
            g->stack_row0[s - s0] = sh[s].row0;
            g->part_n[s - s0] = sh[s].n;
            g->plan_index[s - s0] = p->n_layers + (s - s0);
            g->n += sh[s].n;
        }
        if ((st = unit_desc(c, g, sh[s0].src, is_expert, err)) != OCT_OK)
            return st;
        g->bytes = unit_bytes(&g->desc);
        uint64_t bf16 = 2u * (uint64_t)g->n * (uint64_t)g->k;
        if (bf16 > p->largest_unit_bf16)
            p->largest_unit_bf16 = bf16;
        uint64_t chunk = 4u * (uint64_t)g->k * (uint64_t)oct_load_chunk_rows(g);
        if (chunk > p->largest_chunk)
            p->largest_chunk = chunk;
        if ((st = plan_entries(c, g, sh, s0, s1, ign, err)) != OCT_OK)
            return st;
        p->model_bytes += g->bytes;
        p->bf16_bytes += bf16;
        p->n_units++;
    }
    return OCT_OK;
}

/* A 2-D checkpoint linear `name` of shape [want_n, want_k] as a part. */
static oct_status lin_part(const plan_ctx *c, const char *name, int64_t want_n, int64_t want_k,
                           part_in *out, oct_error *err)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name);
    out->src = oct_checkpoint_find_linear(c->p->ckpt, name);
    if (!out->src)
        return oct_error_set(err, OCT_ERR_NOT_FOUND, -1, "%s: tensor %s.weight is missing", c->dir,
                             name);
    if (out->src->out_features != want_n || out->src->in_features != want_k)
        return oct_error_set(err, OCT_ERR_FORMAT, -1,
                             "%s: %s.weight has shape [%lld, %lld], config.json implies "
                             "[%lld, %lld]",
                             c->dir, name, (long long)out->src->out_features,
                             (long long)out->src->in_features, (long long)want_n,
                             (long long)want_k);
    out->n = want_n;
    out->k = want_k;
    return OCT_OK;
}

/* Dense roles: the attention's q/k/v and o, the MLP's gate/up and down. */
static oct_status dense_role(plan_ctx *c, int64_t l, oct_unit_role role, oct_error *err)
{
    static const char *const qkv[] = {"q_proj", "k_proj", "v_proj"};
    static const char *const gate_up[] = {"gate_proj", "up_proj"};
    static const char *const o[] = {"o_proj"};
    static const char *const down[] = {"down_proj"};
    const oct_arch *a = &c->p->arch;
    int64_t qd = a->n_heads * a->head_dim, kvd = a->n_kv_heads * a->head_dim;
    const char *block = role == OCT_U_QKV || role == OCT_U_O ? "self_attn" : "mlp";
    const char *fused_short = role == OCT_U_QKV       ? "qkv_proj"
                              : role == OCT_U_O       ? "o_proj"
                              : role == OCT_U_GATE_UP ? "gate_up_proj"
                                                      : "down_proj";
    const char *const *parts = role == OCT_U_QKV       ? qkv
                               : role == OCT_U_O       ? o
                               : role == OCT_U_GATE_UP ? gate_up
                                                       : down;
    int n_sh = role == OCT_U_QKV ? 3 : role == OCT_U_GATE_UP ? 2 : 1;
    part_in sh[OCT_MAX_PARTS];
    char fused[192], name[192];
    snprintf(fused, sizeof fused, "model.layers.%lld.%s.%s", (long long)l, block, fused_short);
    for (int s = 0; s < n_sh; s++) {
        int64_t want_n = role == OCT_U_QKV       ? (s == 0 ? qd : kvd)
                         : role == OCT_U_O       ? a->hidden
                         : role == OCT_U_GATE_UP ? a->intermediate
                                                 : a->hidden;
        int64_t want_k = role == OCT_U_O ? qd : role == OCT_U_DOWN ? a->intermediate : a->hidden;
        snprintf(name, sizeof name, "model.layers.%lld.%s.%s", (long long)l, block, parts[s]);
        oct_status st = lin_part(c, name, want_n, want_k, &sh[s], err);
        if (st != OCT_OK)
            return st;
    }
    return add_units(c, l, role, -1, fused, sh, n_sh, c->p->qspec.linear, true, -1, err);
}

static bool float_dtype(oct_dtype dt)
{
    return dt == OCT_DT_BF16 || dt == OCT_DT_F16 || dt == OCT_DT_F32;
}

/* A 3-D expert tensor: `name`, then `name`.weight; NULL when neither exists. */
static const oct_tensor *find_stack(const oct_tensor_set *ts, const char *name)
{
    const oct_tensor *t = oct_tensor_set_find(ts, name);
    if (!t) {
        char w[256];
        snprintf(w, sizeof w, "%s.weight", name);
        t = oct_tensor_set_find(ts, w);
    }
    return t;
}

static oct_status check_stack(const plan_ctx *c, const oct_tensor *t, int64_t e, int64_t r,
                              int64_t k, oct_error *err)
{
    if (t->n_dims != 3 || t->dims[0] != e || t->dims[1] != r || t->dims[2] != k)
        return oct_error_set(err, OCT_ERR_FORMAT, -1,
                             "%s: expert tensor %s has %d dims [%lld, %lld, %lld], config.json "
                             "implies [%lld, %lld, %lld]",
                             c->dir, t->name, t->n_dims, (long long)t->dims[0],
                             (long long)(t->n_dims > 1 ? t->dims[1] : 0),
                             (long long)(t->n_dims > 2 ? t->dims[2] : 0), (long long)e,
                             (long long)r, (long long)k);
    if (!float_dtype(t->dtype))
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s: expert tensor %s is %s: pre-quantized 3-D expert tensors are "
                             "not supported (per-expert 2-D FP8 tensors are)",
                             c->dir, t->name, oct_dtype_str(t->dtype));
    return OCT_OK;
}

/* One sparse MoE block: the router (never quantized) and every expert's
 * gate/up and down units, in whichever layout the checkpoint has:
 *   per-expert 2-D   <blk>.experts.N.{w1,w3,w2} (Mixtral) / .{gate,up,down}_proj (Qwen3-MoE)
 *   fused 3-D        <blk>.experts.gate_up_proj [E, 2I, H] (gate rows then up rows),
 *                    <blk>.experts.down_proj [E, H, I] (transformers 5 in-memory layout)
 *   stacked 3-D      <blk>.input_linear.weight [E, 2I, H], <blk>.output_linear.weight
 *                    [E, H, I] (GraniteMoe; transformers chunks input_linear's output
 *                    into gate then up halves)
 * Plan names of experts are <blk>.experts.N.<proj> (the checkpoint's part names for
 * per-expert layouts, gate_proj/up_proj/down_proj for 3-D ones); the fused unit is
 * <blk>.experts.N.gate_up_proj.  An ignore entry matching <blk>.experts (vLLM's
 * FusedMoE name) keeps every expert of the layer unquantized. */
static const char *const k_mixtral_sh[] = {"w1", "w3", "w2"};
static const char *const k_qwen_sh[] = {"gate_proj", "up_proj", "down_proj"};

/* Layer l's MoE router, by the names the architecture's checkpoints use,
 * as an unquantized unit; blk: its block's prefix ("model.layers.N.mlp"). */
static oct_status moe_router(plan_ctx *c, int64_t l, char *blk, size_t blk_len, oct_error *err)
{
    typedef struct {
        const char *block, *router;
    } router_name;
    static const router_name k_mixtral[] = {{"block_sparse_moe", "gate"}, {"mlp", "gate"}};
    static const router_name k_qwen3[] = {{"mlp", "gate"}};
    static const router_name k_granite[] = {{"block_sparse_moe", "router.layer"},
                                            {"block_sparse_moe", "router"}};
    const oct_arch *a = &c->p->arch;
    const router_name *rn = a->moe == OCT_MOE_MIXTRAL ? k_mixtral
                            : a->moe == OCT_MOE_QWEN3 ? k_qwen3
                                                      : k_granite;
    size_t n_rn = a->moe == OCT_MOE_MIXTRAL ? OCT_ARRAY_LEN(k_mixtral)
                  : a->moe == OCT_MOE_QWEN3 ? OCT_ARRAY_LEN(k_qwen3)
                                            : OCT_ARRAY_LEN(k_granite);
    char name[192];
    const oct_ckpt_linear *router = NULL;
    for (size_t i = 0; i < n_rn && !router; i++) {
        snprintf(blk, blk_len, "model.layers.%lld.%s", (long long)l, rn[i].block);
        snprintf(name, sizeof name, "%s.%s", blk, rn[i].router);
        router = oct_checkpoint_find_linear(c->p->ckpt, name);
    }
    if (!router) {
        snprintf(blk, blk_len, "model.layers.%lld.%s", (long long)l, rn[0].block);
        return oct_error_set(err, OCT_ERR_NOT_FOUND, -1,
                             "%s: tensor %s.%s.weight (MoE router of %s) is missing", c->dir, blk,
                             rn[0].router, a->name);
    }
    part_in sh;
    oct_status st = lin_part(c, router->name, a->n_experts, a->hidden, &sh, err);
    /* MoE router gates are never quantized (docs/MODEL.md §Online quantization config) */
    return st != OCT_OK ? st
                        : add_units(c, l, OCT_U_ROUTER, -1, router->name, &sh, 1, OCT_ONLINE_NONE,
                                    false, -1, err);
}

/* Block blk's expert tensors when they are stacked (3-D gate/up and down,
 * or Granite's input/output_linear) into *gu3 / *dn3, shape-checked. */
static oct_status expert_stacks(const plan_ctx *c, const char *blk, const oct_tensor **gu3,
                                const oct_tensor **dn3, oct_error *err)
{
    const oct_arch *a = &c->p->arch;
    const oct_tensor_set *ts = oct_checkpoint_tensors(c->p->ckpt);
    char name[192];
    snprintf(name, sizeof name, "%s.experts.gate_up_proj", blk);
    *gu3 = find_stack(ts, name);
    snprintf(name, sizeof name, "%s.experts.down_proj", blk);
    *dn3 = find_stack(ts, name);
    if (!*gu3 && !*dn3 && a->moe == OCT_MOE_GRANITE) {
        snprintf(name, sizeof name, "%s.input_linear", blk);
        *gu3 = find_stack(ts, name);
        snprintf(name, sizeof name, "%s.output_linear", blk);
        *dn3 = find_stack(ts, name);
    }
    if (!*gu3 || !*dn3) {
        if (a->moe == OCT_MOE_GRANITE)
            return oct_error_set(err, OCT_ERR_NOT_FOUND, -1,
                                 "%s: no expert weights for %s (looked for "
                                 "%s.input_linear.weight / output_linear.weight and "
                                 "%s.experts.gate_up_proj / down_proj)",
                                 c->dir, blk, blk, blk);
        return oct_error_set(err, OCT_ERR_NOT_FOUND, -1,
                             "%s: no expert weights for %s (looked for "
                             "%s.experts.0.%s.weight and %s.experts.gate_up_proj / "
                             "down_proj)",
                             c->dir, blk, blk,
                             a->moe == OCT_MOE_MIXTRAL ? k_mixtral_sh[0] : k_qwen_sh[0], blk);
    }
    const int64_t E = a->n_experts, I = a->moe_intermediate, H = a->hidden;
    oct_status st = check_stack(c, *gu3, E, 2 * I, H, err);
    return st != OCT_OK ? st : check_stack(c, *dn3, E, H, I, err);
}

/* Expert e's gate, up and down parts: per-expert linears (names shn), or
 * rows of the stacks gu3 / dn3. */
static oct_status expert_parts(const plan_ctx *c, const char *blk, int64_t e,
                               const char *const *shn, const oct_tensor *gu3, const oct_tensor *dn3,
                               part_in *sh, oct_error *err)
{
    const int64_t I = c->p->arch.moe_intermediate, H = c->p->arch.hidden;
    char name[192];
    for (int s = 0; s < 3; s++) {
        snprintf(name, sizeof name, "%s.experts.%lld.%s", blk, (long long)e,
                 gu3 ? k_qwen_sh[s] : shn[s]);
        int64_t n = s < 2 ? I : H, k = s < 2 ? H : I;
        oct_status st;
        if (!gu3) {
            if ((st = lin_part(c, name, n, k, &sh[s], err)) != OCT_OK)
                return st;
            continue;
        }
        memset(&sh[s], 0, sizeof sh[s]);
        snprintf(sh[s].name, sizeof sh[s].name, "%s", name);
        sh[s].stack = s < 2 ? gu3 : dn3;
        sh[s].row0 = s < 2 ? e * 2 * I + s * I : e * H;
        sh[s].n = n;
        sh[s].k = k;
    }
    return OCT_OK;
}

static oct_status moe_layer(plan_ctx *c, int64_t l, oct_error *err)
{
    oct_plan *p = c->p;
    const oct_arch *a = &p->arch;
    char blk[128], name[192], fused[192];
    part_in sh[OCT_MAX_PARTS];
    oct_status st;
    if ((st = moe_router(c, l, blk, sizeof blk, err)) != OCT_OK)
        return st;
    /* expert layout: one linear per expert, or stacked tensors */
    const char *const *shn = a->moe == OCT_MOE_MIXTRAL ? k_mixtral_sh : k_qwen_sh;
    bool per_expert = false;
    const oct_tensor *gu3 = NULL, *dn3 = NULL;
    if (a->moe != OCT_MOE_GRANITE) {
        snprintf(name, sizeof name, "%s.experts.0.%s", blk, shn[0]);
        per_expert = oct_checkpoint_find_linear(p->ckpt, name) != NULL;
    }
    if (!per_expert && (st = expert_stacks(c, blk, &gu3, &dn3, err)) != OCT_OK)
        return st;
    /* the whole MoE layer by its vLLM name */
    oct_online_scheme base = p->qspec.moe;
    int layer_ign = -1;
    snprintf(name, sizeof name, "%s.experts", blk);
    if (base != OCT_ONLINE_NONE && (st = match_ignore(c, name, &layer_ign, err)) != OCT_OK)
        return st;
    for (int64_t e = 0; e < a->n_experts; e++) {
        snprintf(fused, sizeof fused, "%s.experts.%lld.gate_up_proj", blk, (long long)e);
        if ((st = expert_parts(c, blk, e, shn, gu3, dn3, sh, err)) != OCT_OK ||
            (st = add_units(c, l, OCT_U_EXP_GATE_UP, e, fused, sh, 2, base, true, layer_ign,
                            err)) != OCT_OK ||
            (st = add_units(c, l, OCT_U_EXP_DOWN, e, sh[2].name, &sh[2], 1, base, true, layer_ign,
                            err)) != OCT_OK)
            return st;
    }
    return OCT_OK;
}

/* The checkpoint, its architecture and the quantization request, checked
 * against each other: *online (BF16 weights to quantize), *plain (the dtype
 * of weights kept unquantized). */
static oct_status open_source(const char *dir, const oct_model_opts *opts, oct_plan *p,
                              bool *online, oct_weight_type *plain, oct_error *err)
{
    oct_status st = oct_checkpoint_open(dir, NULL, &p->ckpt, err);
    if (st != OCT_OK)
        return st;
    const oct_model_config *cfg = oct_checkpoint_config(p->ckpt);
    if ((st = oct_arch_from_config(dir, cfg, &p->arch, err)) != OCT_OK)
        return st;
    if ((st = oct_qspec_resolve(opts->quantization, opts->quantization_config, &p->qspec, err)))
        return st;
    oct_ckpt_format fmt = oct_checkpoint_format(p->ckpt);
    if (p->qspec.active && fmt != OCT_CKPT_BF16 &&
        !(fmt == OCT_CKPT_FP8 && strcmp(p->qspec.shorthand, "fp8") == 0 &&
          !opts->quantization_config))
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "%s is already quantized (%s, %s): drop --quantization / "
                             "--quantization-config to run its own scheme",
                             dir, oct_ckpt_format_str(fmt), oct_checkpoint_scheme(p->ckpt));
    *online = p->qspec.active && fmt == OCT_CKPT_BF16;
    const char *dt =
        opts->dtype && *opts->dtype && strcmp(opts->dtype, "auto") != 0 ? opts->dtype : "bfloat16";
    if (strcmp(dt, "bfloat16") != 0 && strcmp(dt, "float32") != 0)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "--dtype %s: expected auto, bfloat16 or float32", dt);
    p->dtype = oct_strdup(dt);
    *plain = strcmp(dt, "float32") == 0 ? OCT_WEIGHT_F32 : OCT_WEIGHT_BF16;
    return p->dtype ? OCT_OK : oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
}

/* Room for every plan entry and unit the architecture can have. */
static oct_status alloc_entries(const char *dir, oct_plan *p, oct_error *err)
{
    const oct_arch *a = &p->arch;
    int64_t L = a->n_layers;
    /* per layer: q, k, v, o, gate, up, down (+ router and 3 per expert) */
    int64_t per_layer = 7 + (a->moe != OCT_MOE_NONE ? 1 + 3 * a->n_experts : 0);
    size_t entries;
    if (!oct_size_mul((size_t)L, (size_t)per_layer, &entries) || entries > ((size_t)1 << 28))
        return oct_error_set(err, OCT_ERR_LIMIT, -1,
                             "%s: %lld layers of %lld linear layers each is more than octet "
                             "plans for",
                             dir, (long long)L, (long long)per_layer);
    p->layers = oct_calloc(entries, sizeof *p->layers);
    p->units = oct_calloc(entries, sizeof *p->units);
    p->layer_names = oct_calloc(entries * 3 + 8, sizeof(char *));
    if (!p->layers || !p->units || !p->layer_names)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    return OCT_OK;
}

/* The kernel selectors: --linear-backend's, and for experts --moe-backend's
 * (cuda_grouped: the device's, fed by cuda layers). */
static oct_status make_selectors(const oct_model_opts *opts, plan_ctx *c, oct_error *err)
{
    const char *mb = opts->moe_backend;
    const bool moe_own = mb && *mb && strcmp(mb, "auto") != 0;
    if (moe_own && strcmp(mb, "cuda_grouped") == 0)
        mb = "cuda";
    oct_status st;
    if ((st = oct_linear_selector_create(opts->linear_backend, &c->sel, err)) != OCT_OK ||
        (st = oct_linear_selector_create(moe_own ? mb : opts->linear_backend, &c->moe_sel, err)) !=
            OCT_OK)
        return st;
    if (moe_own)
        oct_linear_selector_set_flag(c->moe_sel, "--moe-backend");
    return OCT_OK;
}

/* Every layer's roles: attention, then the MLP or the MoE block. */
static oct_status plan_layers(plan_ctx *c, oct_error *err)
{
    const oct_arch *a = &c->p->arch;
    oct_status st = OCT_OK;
    for (int64_t l = 0; l < a->n_layers && st == OCT_OK; l++) {
        if ((st = dense_role(c, l, OCT_U_QKV, err)) != OCT_OK ||
            (st = dense_role(c, l, OCT_U_O, err)) != OCT_OK)
            return st;
        if (a->moe != OCT_MOE_NONE)
            st = moe_layer(c, l, err);
        else if ((st = dense_role(c, l, OCT_U_GATE_UP, err)) == OCT_OK)
            st = dense_role(c, l, OCT_U_DOWN, err);
    }
    return st;
}

/* What the plan adds up to: bytes with the embeddings, the load's peak, the
 * warnings for ignore entries that matched nothing, the one-line summary. */
static void finish_plan(const plan_ctx *c)
{
    oct_plan *p = c->p;
    const oct_arch *a = &p->arch;
    /* Embeddings and lm_head stay in the checkpoint dtype (BF16): never quantized. */
    uint64_t emb = 2u * (uint64_t)a->vocab * (uint64_t)a->hidden;
    uint64_t norms = 4u * (uint64_t)a->hidden * (uint64_t)(2 * a->n_layers + 1);
    p->model_bytes += emb /* lm_head copy */ + norms;
    p->bf16_bytes += (a->tie_embeddings ? emb : 2 * emb) + norms / 2;
    /* Peak while loading: everything loaded so far, the embedding table read
     * through the mmap for lm_head, plus one unit's BF16 pages and its FP8
     * codes before they are repacked, and the f32 rows it is read in. */
    p->peak_bytes = p->model_bytes + OCT_MAX(emb, p->largest_unit_bf16 * 3 / 2) + p->largest_chunk +
                    (16u << 20);
    for (int i = 0; i < p->qspec.n_ignore; i++)
        if (!c->ignore_used[i])
            OCT_WARN("ignore entry '%s' matched no layer (names look like "
                     "model.layers.0.self_attn.q_proj; a fused name like "
                     "model.layers.0.self_attn.qkv_proj works only as an exact name%s)",
                     p->qspec.ignore[i],
                     a->moe != OCT_MOE_NONE
                         ? "; experts: model.layers.0.<block>.experts for a whole MoE layer, "
                           "model.layers.0.<block>.experts.3.<proj> for one expert; see "
                           "inspect --plan"
                         : "");
    if (c->online)
        snprintf(p->summary, sizeof p->summary,
                 "online %s: %lld of %lld linear layers quantized, %.1f MB BF16 -> %.1f MB "
                 "(%s kept in BF16)",
                 p->qspec.shorthand[0] ? p->qspec.shorthand : "quantization_config",
                 (long long)p->n_quantized, (long long)p->n_layers, (double)p->bf16_bytes / 1e6,
                 (double)p->model_bytes / 1e6,
                 a->moe != OCT_MOE_NONE ? "embeddings, lm_head and MoE routers"
                                        : "embeddings and lm_head");
    else
        snprintf(p->summary, sizeof p->summary,
                 "%s checkpoint (%s): %lld of %lld linear layers FP8, %.1f MB as loaded",
                 oct_ckpt_format_str(oct_checkpoint_format(p->ckpt)),
                 oct_checkpoint_scheme(p->ckpt), (long long)p->n_quantized, (long long)p->n_layers,
                 (double)p->model_bytes / 1e6);
}

static oct_status build(const char *dir, const oct_model_opts *opts, oct_plan *p, oct_error *err)
{
    oct_model_opts dflt;
    memset(&dflt, 0, sizeof dflt);
    if (!opts)
        opts = &dflt;
    bool online = false;
    oct_weight_type plain = OCT_WEIGHT_BF16;
    oct_status st;
    if ((st = open_source(dir, opts, p, &online, &plain, err)) || (st = alloc_entries(dir, p, err)))
        return st;
    plan_ctx c = {p, dir, online, plain, NULL, NULL, NULL};
    c.ignore_used = oct_calloc((size_t)(p->qspec.n_ignore + 1), sizeof(bool));
    if (!c.ignore_used)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    if ((st = make_selectors(opts, &c, err)) == OCT_OK && (st = plan_layers(&c, err)) == OCT_OK) {
        finish_plan(&c);
        oct_linear_selector_log_summary(c.sel);
        oct_linear_selector_log_summary(c.moe_sel);
    }
    oct_linear_selector_free(c.sel);
    oct_linear_selector_free(c.moe_sel);
    oct_free(c.ignore_used);
    return st;
}

/* Checkpoint linears of layers at or past num_hidden_layers are not loaded:
 * said once, with the first of them. */
static void warn_extra_layers(const oct_plan *p)
{
    const oct_checkpoint *ck = p->ckpt;
    int64_t extra = 0;
    const char *first = NULL;
    for (int64_t i = 0; i < oct_checkpoint_n_linears(ck); i++) {
        const char *name = oct_checkpoint_linear(ck, i)->name, *at = strstr(name, "layers.");
        char *end = NULL;
        long long l = at ? strtoll(at + 7, &end, 10) : -1;
        if (at && end != at + 7 && *end == '.' && l >= p->arch.n_layers) {
            extra++;
            first = first ? first : name;
        }
    }
    if (extra)
        OCT_WARN("%lld linear layers of the checkpoint lie beyond num_hidden_layers (%lld) and "
                 "are not loaded (first: %s)",
                 (long long)extra, (long long)p->arch.n_layers, first);
}

oct_status oct_plan_build(const char *dir, const oct_model_opts *opts, oct_plan **out,
                          oct_error *err)
{
    *out = NULL;
    oct_plan *p = oct_calloc(1, sizeof *p);
    if (!p)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    oct_status st = build(dir, opts, p, err);
    if (st != OCT_OK) {
        oct_plan_free(p);
        return st;
    }
    warn_extra_layers(p);
    *out = p;
    return OCT_OK;
}

oct_status oct_plan_create(const char *dir, const oct_model_opts *opts, oct_plan **out,
                           oct_error *err)
{
    return oct_plan_build(dir, opts, out, err);
}

void oct_plan_free(oct_plan *p)
{
    if (!p)
        return;
    if (p->layer_names)
        for (int64_t i = 0; p->layer_names[i]; i++)
            oct_free(p->layer_names[i]);
    oct_free(p->layer_names);
    oct_free(p->layers);
    oct_free(p->units);
    oct_free(p->dtype);
    oct_qspec_free(&p->qspec);
    oct_arch_free(&p->arch);
    oct_checkpoint_free(p->ckpt);
    oct_free(p);
}

int64_t oct_plan_n_layers(const oct_plan *p)
{
    return p->n_layers;
}
const oct_plan_layer *oct_plan_layer_at(const oct_plan *p, int64_t i)
{
    return i >= 0 && i < p->n_layers ? &p->layers[i] : NULL;
}
uint64_t oct_plan_model_bytes(const oct_plan *p)
{
    return p->model_bytes;
}
uint64_t oct_plan_bf16_bytes(const oct_plan *p)
{
    return p->bf16_bytes;
}
uint64_t oct_plan_peak_bytes(const oct_plan *p)
{
    return p->peak_bytes;
}
int64_t oct_plan_n_quantized(const oct_plan *p)
{
    return p->n_quantized;
}
const char *oct_plan_summary(const oct_plan *p)
{
    return p->summary;
}

const oct_checkpoint *oct_plan_checkpoint(const oct_plan *p)
{
    return p ? p->ckpt : NULL;
}

/* plan.c — what loading will do, computed without reading weights: for every
 * unfused linear its scheme (online, checkpoint, or unquantized), the ignore
 * rule that matched, the fused unit it runs in, the kernel, the bytes; totals
 * and the predicted peak memory.  `octet inspect --plan` prints it, loading
 * executes it (load.c).
 *
 * Fusion: online and unquantized layers run fused as vLLM runs them (q/k/v ->
 * qkv_proj, gate/up -> gate_up_proj), so an online per-tensor scale covers the
 * whole fused matrix exactly as in vLLM.  Pre-quantized FP8 shards keep their
 * own scales and run unfused: no requantization, no precision lost. */
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "model/model.h"

static const char *const k_qkv[] = {"q_proj", "k_proj", "v_proj"};
static const char *const k_gate_up[] = {"gate_proj", "up_proj"};

typedef struct role_def {
    const char *block;   /* "self_attn" | "mlp" */
    const char *fused;   /* fused name */
    const char *const *shards;
    int n_shards;
} role_def;

static const char *const k_o[] = {"o_proj"};
static const char *const k_down[] = {"down_proj"};
static const role_def k_roles[OCT_G_PER_LAYER] = {
    [OCT_G_QKV] = {"self_attn", "qkv_proj", k_qkv, 3},
    [OCT_G_O] = {"self_attn", "o_proj", k_o, 1},
    [OCT_G_GATE_UP] = {"mlp", "gate_up_proj", k_gate_up, 2},
    [OCT_G_DOWN] = {"mlp", "down_proj", k_down, 1},
};

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

static uint64_t scale_bytes(const oct_linear_desc *d)
{
    int64_t n = d->n, k = d->k;
    switch (d->weight_scale) {
    case OCT_SCALE_TENSOR: return 4;
    case OCT_SCALE_ROW: return 4u * (uint64_t)n;
    case OCT_SCALE_BLOCK128: return 4u * (uint64_t)(oct_ceil_div(n, 128) * oct_ceil_div(k, 128));
    case OCT_SCALE_MX32: return (uint64_t)(n * (k / 32));
    }
    return 0;
}

static uint64_t unit_bytes(const oct_linear_desc *d)
{
    uint64_t nk = (uint64_t)d->n * (uint64_t)d->k;
    uint64_t b = d->weight_type == OCT_WEIGHT_FP8 ? nk + scale_bytes(d)
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
    default:
        return oct_error_set(err, OCT_ERR_INTERNAL, -1, "%s: unexpected scale kind", l->name);
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
        return oct_error_set(err, OCT_ERR_INTERNAL, -1, "%s: unexpected activation kind",
                             l->name);
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

static const char *scheme_of(const oct_ckpt_linear *l, oct_online_scheme online, bool is_fp8)
{
    (void)l;
    if (online != OCT_ONLINE_NONE)
        return oct_online_scheme_str(online);
    return is_fp8 ? NULL : "bf16";
}

static oct_status build(const char *dir, const oct_model_opts *opts, oct_plan *p, oct_error *err)
{
    oct_model_opts dflt;
    memset(&dflt, 0, sizeof dflt);
    if (!opts)
        opts = &dflt;
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
    bool online = p->qspec.active && fmt == OCT_CKPT_BF16;
    const char *dt = opts->dtype && *opts->dtype && strcmp(opts->dtype, "auto") != 0
                         ? opts->dtype
                         : "bfloat16";
    if (strcmp(dt, "bfloat16") != 0 && strcmp(dt, "float32") != 0)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "--dtype %s: expected auto, bfloat16 or float32", dt);
    p->dtype = oct_strdup(dt);
    oct_weight_type plain = strcmp(dt, "float32") == 0 ? OCT_WEIGHT_F32 : OCT_WEIGHT_BF16;

    const oct_arch *a = &p->arch;
    int64_t L = a->n_layers;
    int64_t max_layers = L * 7, max_groups = L * 7;
    p->layers = oct_calloc((size_t)max_layers, sizeof *p->layers);
    p->groups = oct_calloc((size_t)max_groups, sizeof *p->groups);
    p->layer_names = oct_calloc((size_t)(max_layers * 3 + 8), sizeof(char *));
    if (!p->layers || !p->groups || !p->layer_names || !p->dtype)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");

    int64_t qd = a->n_heads * a->head_dim, kvd = a->n_kv_heads * a->head_dim;
    bool *ignore_used = oct_calloc((size_t)(p->qspec.n_ignore + 1), sizeof(bool));
    oct_linear_selector *sel = NULL;
    if (!ignore_used)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    if ((st = oct_linear_selector_create(opts->linear_backend, &sel, err)) != OCT_OK)
        goto out;
    for (int64_t l = 0; l < L; l++) {
        for (int r = 0; r < OCT_G_PER_LAYER; r++) {
            const role_def *rd = &k_roles[r];
            const oct_ckpt_linear *src[OCT_MAX_SHARDS] = {0};
            oct_online_scheme sch[OCT_MAX_SHARDS];
            int ign[OCT_MAX_SHARDS];
            char names[OCT_MAX_SHARDS][192], fused[192];
            snprintf(fused, sizeof fused, "model.layers.%lld.%s.%s", (long long)l, rd->block,
                     rd->fused);
            /* the fused name itself listed in ignore ignores every shard */
            int fused_ign = -1;
            if (online && p->qspec.n_ignore > 0 &&
                (st = oct_name_match_list((const char *const *)p->qspec.ignore,
                                          p->qspec.n_ignore, fused, &fused_ign, err)) != OCT_OK)
                goto out;
            if (fused_ign >= 0 && strncmp(p->qspec.ignore[fused_ign], "re:", 3) == 0)
                fused_ign = -1; /* only the exact fused name counts (spec §3.5 rule 3) */
            for (int s = 0; s < rd->n_shards; s++) {
                snprintf(names[s], sizeof names[s], "model.layers.%lld.%s.%s", (long long)l,
                         rd->block, rd->shards[s]);
                src[s] = oct_checkpoint_find_linear(p->ckpt, names[s]);
                if (!src[s]) {
                    st = oct_error_set(err, OCT_ERR_NOT_FOUND, -1,
                                       "%s: tensor %s.weight is missing", dir, names[s]);
                    goto out;
                }
                int64_t want_n = r == OCT_G_QKV ? (s == 0 ? qd : kvd)
                                 : r == OCT_G_O ? a->hidden
                                 : r == OCT_G_GATE_UP ? a->intermediate
                                                      : a->hidden;
                int64_t want_k = r == OCT_G_O ? qd : r == OCT_G_DOWN ? a->intermediate : a->hidden;
                if (src[s]->out_features != want_n || src[s]->in_features != want_k) {
                    st = oct_error_set(err, OCT_ERR_FORMAT, -1,
                                       "%s: %s.weight has shape [%lld, %lld], config.json implies "
                                       "[%lld, %lld]",
                                       dir, names[s], (long long)src[s]->out_features,
                                       (long long)src[s]->in_features, (long long)want_n,
                                       (long long)want_k);
                    goto out;
                }
                ign[s] = fused_ign;
                sch[s] = online ? p->qspec.linear : OCT_ONLINE_NONE;
                if (online && sch[s] != OCT_ONLINE_NONE && fused_ign < 0 &&
                    p->qspec.n_ignore > 0) {
                    if ((st = oct_name_match_list((const char *const *)p->qspec.ignore,
                                                  p->qspec.n_ignore, names[s], &ign[s], err)))
                        goto out;
                }
                if (ign[s] >= 0) {
                    ignore_used[ign[s]] = true;
                    sch[s] = OCT_ONLINE_NONE;
                }
            }
            bool ckpt_fp8 = src[0]->scale_kind != OCT_WSCALE_NONE;
            for (int s = 1; s < rd->n_shards; s++) {
                bool s_fp8 = src[s]->scale_kind != OCT_WSCALE_NONE;
                if (sch[s] != sch[0] || s_fp8 != ckpt_fp8) {
                    char list[128] = "";
                    for (int t = 0; t < rd->n_shards; t++)
                        snprintf(list + strlen(list), sizeof list - strlen(list), "%s'%s'",
                                 t ? ", " : "", rd->shards[t]);
                    st = oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                                       "Found a different quantization schemes for [%s] in %s. "
                                       "octet (like vLLM) requires all to use the same scheme.",
                                       list, fused);
                    goto out;
                }
            }
            /* Units: fused unless the checkpoint's FP8 shards keep their own scales. */
            int n_units = ckpt_fp8 ? rd->n_shards : 1;
            for (int u = 0; u < n_units; u++) {
                oct_plan_group *g = &p->groups[p->n_groups];
                int s0 = ckpt_fp8 ? u : 0, s1 = ckpt_fp8 ? u + 1 : rd->n_shards;
                snprintf(g->name, sizeof g->name, "%s", ckpt_fp8 || rd->n_shards == 1 ? names[s0]
                                                                                      : fused);
                g->n_shards = s1 - s0;
                g->k = src[s0]->in_features;
                g->online = sch[0];
                g->from_checkpoint_fp8 = ckpt_fp8;
                for (int s = s0; s < s1; s++) {
                    g->src[s - s0] = src[s];
                    g->n += src[s]->out_features;
                }
                oct_linear_desc *d = &g->desc;
                memset(d, 0, sizeof *d);
                d->name = g->name;
                d->n = g->n;
                d->k = g->k;
                d->has_bias = src[s0]->bias != NULL;
                if (ckpt_fp8) {
                    if ((st = ckpt_desc(src[s0], d, err)) != OCT_OK)
                        goto out;
                } else if (g->online != OCT_ONLINE_NONE) {
                    online_desc(g->online, d);
                } else {
                    d->weight_type = plain;
                    d->act = OCT_ACT_NONE;
                }
                if ((d->weight_scale == OCT_SCALE_MX32 && d->weight_type == OCT_WEIGHT_FP8 &&
                     g->k % 32 != 0)) {
                    st = oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                                       "MXFP8 requires input_size_per_partition (%lld) to be "
                                       "divisible by 32. (layer %s)",
                                       (long long)g->k, g->name);
                    goto out;
                }
                if ((st = oct_linear_selector_pick(sel, d, &g->kernel, err)) != OCT_OK)
                    goto out;
                g->bytes = unit_bytes(d);
                uint64_t bf16 = 2u * (uint64_t)g->n * (uint64_t)g->k;
                if (bf16 > p->largest_group_bf16)
                    p->largest_group_bf16 = bf16;
                for (int s = s0; s < s1; s++) {
                    oct_plan_layer *pl = &p->layers[p->n_layers];
                    g->plan_index[s - s0] = p->n_layers;
                    pl->name = keep(p, names[s], err, &st);
                    pl->group = keep(p, g->name, err, &st);
                    pl->n = src[s]->out_features;
                    pl->k = src[s]->in_features;
                    const char *sc = scheme_of(src[s], g->online, ckpt_fp8);
                    char buf[128];
                    if (!sc) {
                        snprintf(buf, sizeof buf, "%s (checkpoint)",
                                 oct_checkpoint_scheme(p->ckpt));
                        sc = buf;
                    }
                    pl->scheme = keep(p, sc, err, &st);
                    pl->ignore_rule = ign[s] >= 0 ? p->qspec.ignore[ign[s]] : NULL;
                    pl->kernel = oct_linear_kernel_name(g->kernel);
                    pl->bytes = g->bytes * (uint64_t)pl->n / (uint64_t)g->n;
                    if (st != OCT_OK)
                        goto out;
                    if (d->weight_type == OCT_WEIGHT_FP8)
                        p->n_quantized++;
                    p->n_layers++;
                }
                p->model_bytes += g->bytes;
                p->bf16_bytes += bf16;
                p->n_groups++;
            }
        }
    }
    /* Embeddings and lm_head stay in the checkpoint dtype (BF16): never quantized. */
    uint64_t emb = 2u * (uint64_t)a->vocab * (uint64_t)a->hidden;
    uint64_t norms = 4u * (uint64_t)a->hidden * (uint64_t)(2 * L + 1);
    p->model_bytes += emb /* lm_head copy */ + norms;
    p->bf16_bytes += (a->tie_embeddings ? emb : 2 * emb) + norms / 2;
    /* Peak while loading: everything loaded so far, the embedding table read
     * through the mmap for lm_head, plus one unit's BF16 pages and its FP8
     * codes before they are repacked. */
    p->peak_bytes = p->model_bytes + OCT_MAX(emb, p->largest_group_bf16 * 3 / 2) + (16u << 20);
    for (int i = 0; i < p->qspec.n_ignore; i++)
        if (!ignore_used[i])
            OCT_WARN("ignore entry '%s' matched no layer (names look like "
                     "model.layers.0.self_attn.q_proj; a fused name like "
                     "model.layers.0.self_attn.qkv_proj works only as an exact name)",
                     p->qspec.ignore[i]);
    if (online)
        snprintf(p->summary, sizeof p->summary,
                 "online %s: %lld of %lld linear layers quantized, %.1f MB BF16 -> %.1f MB "
                 "(embeddings and lm_head kept in BF16)",
                 p->qspec.shorthand[0] ? p->qspec.shorthand : "quantization_config",
                 (long long)p->n_quantized, (long long)p->n_layers, (double)p->bf16_bytes / 1e6,
                 (double)p->model_bytes / 1e6);
    else
        snprintf(p->summary, sizeof p->summary,
                 "%s checkpoint (%s): %lld of %lld linear layers FP8, %.1f MB as loaded",
                 oct_ckpt_format_str(fmt), oct_checkpoint_scheme(p->ckpt),
                 (long long)p->n_quantized, (long long)p->n_layers, (double)p->model_bytes / 1e6);
    oct_linear_selector_log_summary(sel);
out:
    oct_linear_selector_free(sel);
    oct_free(ignore_used);
    return st;
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
    oct_free(p->groups);
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

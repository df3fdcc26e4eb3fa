/* arch.c — architecture parameters from config.json: the fields io/ parses
 * into oct_model_config plus the per-family extras (Granite multipliers,
 * Mistral sliding window, Qwen3 q/k norm).  A field that would change the
 * maths and that octet does not implement is an error naming it. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "io/json.h"
#include "model/model.h"

typedef struct family {
    const char *arch;
    bool qkv_bias_default;
    bool qk_norm;
    bool granite;
    oct_moe_kind moe;
    bool sliding_when_set; /* sliding_window applies whenever set (Mistral, Mixtral) */
} family;

static const family k_families[] = {
    {"LlamaForCausalLM", false, false, false, OCT_MOE_NONE, false},
    {"MistralForCausalLM", false, false, false, OCT_MOE_NONE, true},
    {"Qwen2ForCausalLM", true, false, false, OCT_MOE_NONE, false},
    {"Qwen3ForCausalLM", false, true, false, OCT_MOE_NONE, false},
    {"GraniteForCausalLM", false, false, true, OCT_MOE_NONE, false},
    {"MixtralForCausalLM", false, false, false, OCT_MOE_MIXTRAL, true},
    {"Qwen3MoeForCausalLM", false, true, false, OCT_MOE_QWEN3, false},
    {"GraniteMoeForCausalLM", false, false, true, OCT_MOE_GRANITE, false},
};

/* A float field with a default; a value of another type is an error. */
static oct_status num_or(const json_t *o, const char *key, const char *where, float *out,
                         oct_error *err)
{
    double v = (double)*out;
    oct_status st = io_json_num(o, key, where, false, &v, err);
    *out = (float)v;
    return st;
}

/* Sliding window, Granite's multipliers and attention bias, read from the
 * config object `c` (text_config where there is one). */
static oct_status arch_extras(const family *fam, const json_t *c, oct_arch *out, oct_error *err)
{
    const char *L = "config.json";
    int64_t sw = INT64_MIN; /* absent or null: none */
    bool use = false, bias = false;
    OCT_TRY(io_json_int(c, "sliding_window", L, false, &sw, err));
    OCT_TRY(io_json_bool(c, "use_sliding_window", L, false, &use, err));
    if (sw != INT64_MIN && sw <= 0 && (fam->sliding_when_set || use))
        return oct_error_set(err, OCT_ERR_FORMAT, -1,
                             "%s.sliding_window: %lld (a window is positive; null for none)", L,
                             (long long)sw);
    if (sw > 0 && (fam->sliding_when_set || use))
        out->sliding_window = sw;
    if (fam->granite) {
        OCT_TRY(num_or(c, "embedding_multiplier", L, &out->embedding_multiplier, err));
        OCT_TRY(num_or(c, "residual_multiplier", L, &out->residual_multiplier, err));
        OCT_TRY(num_or(c, "attention_multiplier", L, &out->attention_multiplier, err));
        OCT_TRY(num_or(c, "logits_scaling", L, &out->logits_scaling, err));
    }
    OCT_TRY(io_json_bool(c, "attention_bias", L, false, &bias, err));
    if (bias)
        out->qkv_bias = out->o_bias = true;
    if (strcmp(fam->arch, "Qwen2ForCausalLM") == 0)
        out->o_bias = false; /* Qwen2: bias on q, k, v only */
    return OCT_OK;
}

/* HF's llama3 RoPE frequency adjustment (transformers _compute_llama3_parameters). */
static void llama3_scale(float *inv, int64_t n, double factor, double low, double high,
                         double old_ctx)
{
    double low_wl = old_ctx / low, high_wl = old_ctx / high;
    for (int64_t i = 0; i < n; i++) {
        double f = (double)inv[i];
        double wl = 2.0 * M_PI / f;
        double g = wl > low_wl ? f / factor : f;
        bool medium = !(wl < high_wl) && !(wl > low_wl);
        if (medium) {
            double smooth = (old_ctx / wl - low) / (high - low);
            g = (1.0 - smooth) * g / factor + smooth * g;
        }
        inv[i] = (float)g;
    }
}

/* MoE sizes and routing rule.  Fields that would change the maths and that
 * octet does not implement are errors naming them. */
static oct_status moe_params(const char *dir, const oct_model_config *cfg, json_t *c,
                             oct_moe_kind kind, oct_arch *out, oct_error *err)
{
    out->moe = kind;
    out->n_experts = cfg->n_experts;
    out->top_k = cfg->n_experts_per_tok;
    out->moe_intermediate =
        kind == OCT_MOE_QWEN3 ? cfg->moe_intermediate_size : cfg->intermediate_size;
    /* Mixtral and GraniteMoe always renormalise (Granite: softmax over the
     * top-k logits, the same numbers); Qwen3-MoE iff norm_topk_prob
     * (transformers' default false). */
    out->norm_topk = true;
    if (kind == OCT_MOE_QWEN3) {
        out->norm_topk = false;
        OCT_TRY(io_json_bool(c, "norm_topk_prob", "config.json", false, &out->norm_topk, err));
        json_t *step = json_object_get(c, "decoder_sparse_step");
        if (step && !json_is_null(step) &&
            !(json_is_integer(step) && json_integer_value(step) == 1))
            return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                 "%s/config.json: decoder_sparse_step other than 1 (dense MLP "
                                 "layers between MoE layers) is not supported",
                                 dir);
        json_t *only = json_object_get(c, "mlp_only_layers");
        if (only && !json_is_null(only) && !(json_is_array(only) && json_array_size(only) == 0))
            return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                 "%s/config.json: mlp_only_layers (dense MLP layers in an MoE "
                                 "model) is not supported; only [] is",
                                 dir);
        json_t *shared = json_object_get(c, "shared_expert_intermediate_size");
        if (json_is_integer(shared) && json_integer_value(shared) > 0)
            return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                 "%s/config.json: shared_expert_intermediate_size (shared "
                                 "experts) is not supported",
                                 dir);
    }
    if (kind == OCT_MOE_GRANITE) {
        json_t *shared = json_object_get(c, "shared_intermediate_size");
        if (json_is_integer(shared) && json_integer_value(shared) > 0)
            return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                 "%s/config.json: shared_intermediate_size (GraniteMoeShared "
                                 "shared experts) is not supported",
                                 dir);
    }
    if (out->n_experts <= 0 || out->top_k <= 0 || out->top_k > out->n_experts ||
        out->moe_intermediate <= 0)
        return oct_error_set(err, OCT_ERR_FORMAT, -1,
                             "%s/config.json: MoE sizes: %s = %lld, num_experts_per_tok = %lld, "
                             "%s = %lld (need 0 < num_experts_per_tok <= experts, a positive "
                             "expert size)",
                             dir, kind == OCT_MOE_QWEN3 ? "num_experts" : "num_local_experts",
                             (long long)out->n_experts, (long long)out->top_k,
                             kind == OCT_MOE_QWEN3 ? "moe_intermediate_size" : "intermediate_size",
                             (long long)out->moe_intermediate);
    return OCT_OK;
}

oct_status oct_arch_from_config(const char *dir, const oct_model_config *cfg, oct_arch *out,
                                oct_error *err)
{
    memset(out, 0, sizeof *out);
    const family *fam = NULL;
    for (size_t i = 0; i < OCT_ARRAY_LEN(k_families); i++)
        if (strcmp(cfg->architecture, k_families[i].arch) == 0)
            fam = &k_families[i];
    if (!fam)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s/config.json: architectures[0] = \"%s\" is not supported "
                             "(supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                             "Qwen3ForCausalLM, GraniteForCausalLM, MixtralForCausalLM, "
                             "Qwen3MoeForCausalLM, GraniteMoeForCausalLM)",
                             dir, cfg->architecture);
    if (cfg->hidden_act[0] && strcmp(cfg->hidden_act, "silu") != 0)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s/config.json: hidden_act = \"%s\" is not supported (silu only)",
                             dir, cfg->hidden_act);
    snprintf(out->name, sizeof out->name, "%s", cfg->architecture);
    out->n_layers = cfg->n_layers;
    out->hidden = cfg->hidden_size;
    out->intermediate = cfg->intermediate_size;
    out->n_heads = cfg->n_heads;
    out->n_kv_heads = cfg->n_kv_heads > 0 ? cfg->n_kv_heads : cfg->n_heads;
    out->head_dim = cfg->head_dim;
    out->vocab = cfg->vocab_size;
    out->max_pos = cfg->max_position_embeddings;
    out->rms_eps = (float)cfg->rms_norm_eps;
    out->tie_embeddings = cfg->tie_word_embeddings;
    out->qkv_bias = fam->qkv_bias_default || cfg->attention_bias;
    out->o_bias = cfg->attention_bias && !fam->qkv_bias_default;
    out->mlp_bias = cfg->mlp_bias;
    out->qk_norm = fam->qk_norm;
    out->embedding_multiplier = 1.0f;
    out->residual_multiplier = 1.0f;
    out->logits_scaling = 1.0f;
    out->rope_attention_factor = 1.0f;
    if (out->n_layers <= 0 || out->hidden <= 0 || out->n_heads <= 0 || out->head_dim <= 0 ||
        out->vocab <= 0 || (out->intermediate <= 0 && fam->moe == OCT_MOE_NONE) ||
        out->n_heads % out->n_kv_heads != 0 || out->head_dim % 2 != 0)
        return oct_error_set(err, OCT_ERR_FORMAT, -1,
                             "%s/config.json: inconsistent sizes (layers %lld, hidden %lld, heads "
                             "%lld/%lld, head_dim %lld, vocab %lld)",
                             dir, (long long)out->n_layers, (long long)out->hidden,
                             (long long)out->n_heads, (long long)out->n_kv_heads,
                             (long long)out->head_dim, (long long)out->vocab);
    out->attention_multiplier = 1.0f / sqrtf((float)out->head_dim);

    /* Extras not in oct_model_config. */
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_t *root = NULL;
    oct_status st = io_json_open_file(path, OCT_JSON_MAX_FILE, &root, err);
    if (st != OCT_OK)
        return st;
    json_t *tc = json_object_get(root, "text_config");
    json_t *c = json_is_object(tc) ? tc : root;
    st = arch_extras(fam, c, out, err);
    if (st == OCT_OK && fam->moe != OCT_MOE_NONE)
        st = moe_params(dir, cfg, c, fam->moe, out, err);
    io_json_close(root);
    if (st != OCT_OK)
        return st;

    int64_t half = out->head_dim / 2;
    out->inv_freq = oct_malloc((size_t)half * sizeof(float));
    if (!out->inv_freq)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    double theta = cfg->rope_theta > 0 ? cfg->rope_theta : 10000.0;
    for (int64_t i = 0; i < half; i++) {
        float p = (float)pow(theta, (double)(2 * i) / (double)out->head_dim);
        out->inv_freq[i] = 1.0f / p;
    }
    const char *rt = cfg->rope_type;
    if (!rt[0] || strcmp(rt, "default") == 0) {
        /* plain RoPE */
    } else if (strcmp(rt, "linear") == 0) {
        for (int64_t i = 0; i < half; i++)
            out->inv_freq[i] = (float)((double)out->inv_freq[i] / cfg->rope_factor);
    } else if (strcmp(rt, "llama3") == 0) {
        if (!(cfg->rope_factor > 0) || !(cfg->rope_low_freq_factor > 0) ||
            !(cfg->rope_high_freq_factor > cfg->rope_low_freq_factor) ||
            cfg->rope_original_max_position_embeddings <= 0)
            st = oct_error_set(err, OCT_ERR_FORMAT, -1,
                               "%s/config.json: rope_scaling (llama3) needs factor, "
                               "low_freq_factor < high_freq_factor and "
                               "original_max_position_embeddings",
                               dir);
        else
            llama3_scale(out->inv_freq, half, cfg->rope_factor, cfg->rope_low_freq_factor,
                         cfg->rope_high_freq_factor,
                         (double)cfg->rope_original_max_position_embeddings);
    } else {
        st = oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                           "%s/config.json: rope_scaling.rope_type = \"%s\" is not supported "
                           "(default, linear, llama3)",
                           dir, rt);
    }
    if (st != OCT_OK)
        oct_arch_free(out);
    return st;
}

void oct_arch_free(oct_arch *a)
{
    if (!a)
        return;
    oct_free(a->inv_freq);
    a->inv_freq = NULL;
}

/* arch.c — architecture parameters from the oct_model_config io/ parsed out
 * of config.json, with what each family makes of them (Granite multipliers,
 * Mistral sliding window, Qwen2 q/k/v bias, Qwen3 q/k norm).  A field that
 * would change the maths and that octet does not implement is an error naming
 * it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
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

/* Sliding window and Granite's multipliers, where the family applies them. */
static void arch_extras(const family *fam, const oct_model_config *cfg, oct_arch *out)
{
    if (fam->sliding_when_set || cfg->use_sliding_window)
        out->sliding_window = cfg->sliding_window;
    if (fam->granite) {
        out->embedding_multiplier = (float)cfg->embedding_multiplier;
        out->residual_multiplier = (float)cfg->residual_multiplier;
        if (cfg->attention_multiplier > 0)
            out->attention_multiplier = (float)cfg->attention_multiplier;
        out->logits_scaling = (float)cfg->logits_scaling;
    }
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
static oct_status moe_params(const char *dir, const oct_model_config *cfg, oct_moe_kind kind,
                             oct_arch *out, oct_error *err)
{
    out->moe = kind;
    out->n_experts = cfg->n_experts;
    out->top_k = cfg->n_experts_per_tok;
    out->moe_intermediate =
        kind == OCT_MOE_QWEN3 ? cfg->moe_intermediate_size : cfg->intermediate_size;
    /* Mixtral and GraniteMoe always renormalise (Granite: softmax over the
     * top-k logits, the same numbers); Qwen3-MoE iff norm_topk_prob
     * (transformers' default false). */
    out->norm_topk = kind == OCT_MOE_QWEN3 ? cfg->norm_topk_prob : true;
    if (kind == OCT_MOE_QWEN3) {
        if (cfg->decoder_sparse_step != 1)
            return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                 "%s/config.json: decoder_sparse_step other than 1 (dense MLP "
                                 "layers between MoE layers) is not supported",
                                 dir);
        if (cfg->n_mlp_only_layers != 0)
            return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                 "%s/config.json: mlp_only_layers (dense MLP layers in an MoE "
                                 "model) is not supported; only [] is",
                                 dir);
        if (cfg->shared_expert_intermediate_size > 0)
            return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                 "%s/config.json: shared_expert_intermediate_size (shared "
                                 "experts) is not supported",
                                 dir);
    }
    if (kind == OCT_MOE_GRANITE && cfg->shared_intermediate_size > 0)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s/config.json: shared_intermediate_size (GraniteMoeShared "
                             "shared experts) is not supported",
                             dir);
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
    out->o_bias = cfg->attention_bias && !fam->qkv_bias_default; /* Qwen2: q, k, v only */
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

    arch_extras(fam, cfg, out);
    oct_status st = OCT_OK;
    if (fam->moe != OCT_MOE_NONE && (st = moe_params(dir, cfg, fam->moe, out, err)) != OCT_OK)
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

/* model_config.c — config.json: architecture, sizes, rope settings and the
 * keys only some families use (sliding window, Granite multipliers, MoE
 * routing).
 *
 * Accepted: a JSON object with the Hugging Face keys below (a nested
 * "text_config" object, as multimodal wrappers have, takes precedence for the
 * model keys).  Required: hidden_size, num_hidden_layers,
 * num_attention_heads, vocab_size.  Defaults follow transformers'
 * LlamaConfig. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

static void copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

static oct_status parse_rope(const json_t *rs, const char *where, oct_model_config *c,
                             oct_error *err)
{
    if (!rs || json_is_null(rs))
        return OCT_OK;
    if (!json_is_object(rs))
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s: expected an object", where);
    const char *type = NULL;
    OCT_TRY(io_json_str(rs, "rope_type", where, false, &type, err));
    if (!type)
        OCT_TRY(io_json_str(rs, "type", where, false, &type, err));
    if (type)
        copy_str(c->rope_type, sizeof c->rope_type, type);
    OCT_TRY(io_json_num(rs, "factor", where, false, &c->rope_factor, err));
    OCT_TRY(io_json_num(rs, "low_freq_factor", where, false, &c->rope_low_freq_factor, err));
    OCT_TRY(io_json_num(rs, "high_freq_factor", where, false, &c->rope_high_freq_factor, err));
    OCT_TRY(io_json_int(rs, "original_max_position_embeddings", where, false,
                        &c->rope_original_max_position_embeddings, err));
    /* transformers 5 moved rope_theta into rope_parameters. */
    OCT_TRY(io_json_num(rs, "rope_theta", where, false, &c->rope_theta, err));
    return OCT_OK;
}

/* eos_token_id: an integer or a list of integers (generation_config.json
 * and config.json both write either). */
static oct_status parse_eos(const json_t *m, const char *L, int64_t *ids, int *n, oct_error *err)
{
    const json_t *eos = json_object_get(m, "eos_token_id");
    if (!eos || json_is_null(eos))
        return OCT_OK;
    if (json_is_integer(eos)) {
        ids[0] = (int64_t)json_integer_value(eos);
        *n = 1;
        return OCT_OK;
    }
    if (!json_is_array(eos))
        return io_json_type_error(m, "eos_token_id", L, "an integer or a list of integers", err);
    size_t i;
    const json_t *v;
    *n = 0;
    json_array_foreach(eos, i, v)
    {
        if (!json_is_integer(v))
            return io_json_type_error(m, "eos_token_id", L, "an integer or a list of integers",
                                      err);
        if (*n < 8)
            ids[(*n)++] = (int64_t)json_integer_value(v);
    }
    return OCT_OK;
}

/* vLLM's _get_and_verify_max_len (vllm/config), the derivation half: the
 * smallest of the length keys, 2048 when none is set, then rope scaling. */
static oct_status derive_max_len(const json_t *m, const char *L, oct_model_config *c,
                                 oct_error *err)
{
    static const char *const keys[] = {
        "max_position_embeddings", "n_positions",         "max_seq_len",    "seq_length",
        "model_max_length",        "max_sequence_length", "max_seq_length", "seq_len"};
    double derived = -1.0;
    const char *key = "default";
    for (size_t i = 0; i < OCT_ARRAY_LEN(keys); i++) {
        int64_t v = -1;
        OCT_TRY(io_json_limit(m, keys[i], L, false, &v, err));
        if (v < 0)
            continue;
        if (strcmp(keys[i], "model_max_length") == 0)
            c->model_max_length = v;
        /* "no limit" (int(1e30)): vLLM takes the number itself, min() then
         * ignores it whenever another key is set. */
        double d = v == INT64_MAX ? 1e30 : (double)v;
        if (derived < 0 || d < derived) {
            derived = d;
            key = keys[i];
        }
    }
    if (derived < 0)
        derived = 2048.0;
    /* rope_scaling (transformers 4) or rope_parameters (transformers 5). */
    const json_t *rs = json_object_get(m, "rope_scaling");
    const char *rs_key = "rope_scaling";
    if (!json_is_object(rs)) {
        rs = json_object_get(m, "rope_parameters");
        rs_key = "rope_parameters";
    }
    if (json_is_object(rs)) {
        char where[200];
        snprintf(where, sizeof where, "%s.%s", L, rs_key);
        const char *type = NULL;
        OCT_TRY(io_json_str(rs, "rope_type", where, false, &type, err));
        if (!type)
            OCT_TRY(io_json_str(rs, "type", where, false, &type, err));
        if (!type)
            type = "default";
        if (strcmp(type, "su") != 0 && strcmp(type, "longrope") != 0 &&
            strcmp(type, "llama3") != 0) {
            double factor = 1.0;
            OCT_TRY(io_json_num(rs, "factor", where, false, &factor, err));
            if (strcmp(type, "yarn") == 0) {
                int64_t orig = 0;
                OCT_TRY(
                    io_json_int(rs, "original_max_position_embeddings", where, true, &orig, err));
                derived = (double)orig;
            }
            derived *= factor;
        }
    }
    if (!(derived >= 1.0))
        return oct_error_set(err, OCT_ERR_FORMAT, -1,
                             "%s: the maximum model length derived from %s is %g", L, key, derived);
    c->max_model_len = derived > 9.2e18 ? INT64_MAX : (int64_t)derived;
    copy_str(c->max_model_len_key, sizeof c->max_model_len_key, key);
    return OCT_OK;
}

/* A Granite multiplier: a number that stays positive and finite as a float;
 * absent (or null) leaves *out. */
static oct_status parse_multiplier(const json_t *m, const char *key, const char *L, double *out,
                                   oct_error *err)
{
    const json_t *v = json_object_get(m, key);
    if (!v || json_is_null(v))
        return OCT_OK;
    OCT_TRY(io_json_num(m, key, L, false, out, err));
    if (!(*out >= (double)FLT_MIN && *out <= (double)FLT_MAX))
        return oct_error_set(err, OCT_ERR_FORMAT, -1,
                             "%s.%s: %g (a multiplier is positive and finite)", L, key, *out);
    return OCT_OK;
}

/* Keys only some families use (model/arch.c decides where they apply):
 * sliding window, Granite's multipliers, Qwen3-MoE's and GraniteMoe's
 * routing and shared-expert keys. */
static oct_status parse_family_keys(const json_t *m, const char *L, oct_model_config *c,
                                    oct_error *err)
{
    OCT_TRY(io_json_int(m, "sliding_window", L, false, &c->sliding_window, err));
    if (json_is_integer(json_object_get(m, "sliding_window")) && c->sliding_window < 1)
        return oct_error_set(err, OCT_ERR_FORMAT, -1,
                             "%s.sliding_window: %lld (a window is positive; null for none)", L,
                             (long long)c->sliding_window);
    OCT_TRY(io_json_bool(m, "use_sliding_window", L, false, &c->use_sliding_window, err));
    OCT_TRY(parse_multiplier(m, "embedding_multiplier", L, &c->embedding_multiplier, err));
    OCT_TRY(parse_multiplier(m, "residual_multiplier", L, &c->residual_multiplier, err));
    OCT_TRY(parse_multiplier(m, "attention_multiplier", L, &c->attention_multiplier, err));
    OCT_TRY(parse_multiplier(m, "logits_scaling", L, &c->logits_scaling, err));
    OCT_TRY(io_json_bool(m, "norm_topk_prob", L, false, &c->norm_topk_prob, err));
    OCT_TRY(io_json_int(m, "decoder_sparse_step", L, false, &c->decoder_sparse_step, err));
    const json_t *only = json_object_get(m, "mlp_only_layers");
    if (json_is_array(only))
        c->n_mlp_only_layers = (int64_t)json_array_size(only);
    else if (only && !json_is_null(only))
        return io_json_type_error(m, "mlp_only_layers", L, "a list of layer indices", err);
    OCT_TRY(io_json_int(m, "shared_expert_intermediate_size", L, false,
                        &c->shared_expert_intermediate_size, err));
    OCT_TRY(
        io_json_int(m, "shared_intermediate_size", L, false, &c->shared_intermediate_size, err));
    return OCT_OK;
}

static oct_status parse_model(const json_t *m, const char *L, oct_model_config *c, oct_error *err)
{
    const char *s = NULL;
    OCT_TRY(io_json_str(m, "model_type", L, false, &s, err));
    if (s)
        copy_str(c->model_type, sizeof c->model_type, s);
    OCT_TRY(io_json_str(m, "hidden_act", L, false, &s, err));
    if (s)
        copy_str(c->hidden_act, sizeof c->hidden_act, s);
    OCT_TRY(io_json_int(m, "hidden_size", L, true, &c->hidden_size, err));
    OCT_TRY(io_json_int(m, "intermediate_size", L, false, &c->intermediate_size, err));
    OCT_TRY(io_json_int(m, "num_hidden_layers", L, true, &c->n_layers, err));
    OCT_TRY(io_json_int(m, "num_attention_heads", L, true, &c->n_heads, err));
    c->n_kv_heads = c->n_heads;
    OCT_TRY(io_json_int(m, "num_key_value_heads", L, false, &c->n_kv_heads, err));
    OCT_TRY(io_json_int(m, "vocab_size", L, true, &c->vocab_size, err));
    OCT_TRY(io_json_int(m, "max_position_embeddings", L, false, &c->max_position_embeddings, err));
    if (json_is_integer(json_object_get(m, "max_position_embeddings")) &&
        c->max_position_embeddings < 1)
        return oct_error_set(err, OCT_ERR_FORMAT, -1,
                             "%s.max_position_embeddings: %lld (a context length is positive)", L,
                             (long long)c->max_position_embeddings);
    OCT_TRY(io_json_num(m, "rms_norm_eps", L, false, &c->rms_norm_eps, err));
    OCT_TRY(io_json_num(m, "rope_theta", L, false, &c->rope_theta, err));
    OCT_TRY(io_json_bool(m, "tie_word_embeddings", L, false, &c->tie_word_embeddings, err));
    OCT_TRY(io_json_bool(m, "attention_bias", L, false, &c->attention_bias, err));
    OCT_TRY(io_json_bool(m, "mlp_bias", L, false, &c->mlp_bias, err));
    char where[160];
    snprintf(where, sizeof where, "%s.rope_scaling", L);
    OCT_TRY(parse_rope(json_object_get(m, "rope_scaling"), where, c, err));
    snprintf(where, sizeof where, "%s.rope_parameters", L);
    OCT_TRY(parse_rope(json_object_get(m, "rope_parameters"), where, c, err));
    /* MoE sizes under their common names (Mixtral, Qwen-MoE, DeepSeek). */
    OCT_TRY(io_json_int(m, "num_local_experts", L, false, &c->n_experts, err));
    OCT_TRY(io_json_int(m, "num_experts", L, false, &c->n_experts, err));
    OCT_TRY(io_json_int(m, "n_routed_experts", L, false, &c->n_experts, err));
    OCT_TRY(io_json_int(m, "num_experts_per_tok", L, false, &c->n_experts_per_tok, err));
    OCT_TRY(io_json_int(m, "moe_intermediate_size", L, false, &c->moe_intermediate_size, err));
    c->head_dim = 0;
    OCT_TRY(io_json_int(m, "head_dim", L, false, &c->head_dim, err));
    OCT_TRY(io_json_int(m, "bos_token_id", L, false, &c->bos_token_id, err));
    OCT_TRY(parse_eos(m, L, c->eos_token_ids, &c->n_eos, err));
    OCT_TRY(parse_family_keys(m, L, c, err));
    OCT_TRY(derive_max_len(m, L, c, err));
    return OCT_OK;
}

/* Bounds far beyond any published model, so that no product of sizes a file
 * gives can overflow what the plan and the loader compute from them. */
static oct_status check_sizes(const oct_model_config *c, const char *L, oct_error *err)
{
    struct {
        const char *key;
        int64_t v, lo, hi;
    } f[] = {
        {"hidden_size", c->hidden_size, 1, (int64_t)1 << 18},
        {"intermediate_size", c->intermediate_size, 0, (int64_t)1 << 20},
        {"num_hidden_layers", c->n_layers, 1, 4096},
        {"num_attention_heads", c->n_heads, 1, 4096},
        {"num_key_value_heads", c->n_kv_heads, 1, 4096},
        {"head_dim", c->head_dim, 1, (int64_t)1 << 16},
        {"vocab_size", c->vocab_size, 1, (int64_t)1 << 24},
        {"num_local_experts / num_experts / n_routed_experts", c->n_experts, 0, (int64_t)1 << 16},
        {"num_experts_per_tok", c->n_experts_per_tok, 0, (int64_t)1 << 16},
        {"moe_intermediate_size", c->moe_intermediate_size, 0, (int64_t)1 << 20},
        {"max_position_embeddings", c->max_position_embeddings, 0, (int64_t)1 << 32},
        {"sliding_window", c->sliding_window, 0, (int64_t)1 << 32},
        {"shared_expert_intermediate_size", c->shared_expert_intermediate_size, 0,
         (int64_t)1 << 20},
        {"shared_intermediate_size", c->shared_intermediate_size, 0, (int64_t)1 << 20},
    };
    for (size_t i = 0; i < OCT_ARRAY_LEN(f); i++)
        if (f[i].v < f[i].lo || f[i].v > f[i].hi)
            return oct_error_set(err, OCT_ERR_FORMAT, -1,
                                 "%s.%s: %lld is out of range (%lld..%lld)", L, f[i].key,
                                 (long long)f[i].v, (long long)f[i].lo, (long long)f[i].hi);
    if (!(c->rms_norm_eps > 0) || !isfinite(c->rms_norm_eps) || !(c->rope_theta > 0) ||
        !isfinite(c->rope_theta))
        return oct_error_set(err, OCT_ERR_FORMAT, -1,
                             "%s: rms_norm_eps (%g) and rope_theta (%g) must be positive and "
                             "finite",
                             L, c->rms_norm_eps, c->rope_theta);
    /* An id outside the vocabulary can never be generated: said, not fatal
     * (test-sized configs keep their published ids). */
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_token_ids[i] < 0 || c->eos_token_ids[i] >= c->vocab_size)
            OCT_WARN("%s.eos_token_id: %lld is outside the vocabulary (%lld): it never stops "
                     "generation",
                     L, (long long)c->eos_token_ids[i], (long long)c->vocab_size);
    if (c->bos_token_id < -1 || c->bos_token_id >= c->vocab_size)
        OCT_WARN("%s.bos_token_id: %lld is outside the vocabulary (%lld)", L,
                 (long long)c->bos_token_id, (long long)c->vocab_size);
    if (c->n_experts_per_tok > c->n_experts && c->n_experts > 0)
        return oct_error_set(err, OCT_ERR_FORMAT, -1,
                             "%s.num_experts_per_tok %lld exceeds the %lld experts", L,
                             (long long)c->n_experts_per_tok, (long long)c->n_experts);
    if (c->n_heads % c->n_kv_heads != 0)
        return oct_error_set(err, OCT_ERR_FORMAT, -1,
                             "%s.num_attention_heads %lld is not a multiple of "
                             "num_key_value_heads %lld",
                             L, (long long)c->n_heads, (long long)c->n_kv_heads);
    return OCT_OK;
}

oct_status oct_model_config_parse(const char *json, size_t len, const char *label,
                                  oct_model_config *out, oct_error *err)
{
    if (!json || !out)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "oct_model_config_parse: bad arguments");
    const char *L = label ? label : "config.json";
    memset(out, 0, sizeof *out);
    out->rms_norm_eps = 1e-6;
    out->rope_theta = 10000.0;
    out->torch_dtype = OCT_DT_BF16;
    out->bos_token_id = -1;
    out->embedding_multiplier = 1.0;
    out->residual_multiplier = 1.0;
    out->logits_scaling = 1.0;
    out->decoder_sparse_step = 1;
    copy_str(out->rope_type, sizeof out->rope_type, "default");
    copy_str(out->hidden_act, sizeof out->hidden_act, "silu");
    json_t *root = NULL;
    oct_status st = io_json_open(json, len, L, &root, err);
    if (st != OCT_OK)
        return st;
    if (!json_is_object(root)) {
        io_json_close(root);
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s: not a JSON object", L);
    }
    const json_t *arch = json_object_get(root, "architectures");
    if (json_is_array(arch) && json_is_string(json_array_get(arch, 0)))
        copy_str(out->architecture, sizeof out->architecture,
                 json_string_value(json_array_get(arch, 0)));
    else if (arch && !json_is_null(arch))
        st = oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.architectures: expected a list of strings",
                           L);
    const char *dt = NULL;
    if (st == OCT_OK)
        st = io_json_str(root, "torch_dtype", L, false, &dt, err);
    if (st == OCT_OK && !dt)
        st = io_json_str(root, "dtype", L, false, &dt, err); /* transformers 5 name */
    if (st == OCT_OK && dt) {
        if (strcmp(dt, "bfloat16") == 0)
            out->torch_dtype = OCT_DT_BF16;
        else if (strcmp(dt, "float16") == 0)
            out->torch_dtype = OCT_DT_F16;
        else if (strcmp(dt, "float32") == 0)
            out->torch_dtype = OCT_DT_F32;
        else
            st = oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                               "%s.torch_dtype: '%s' is not supported (bfloat16, float16, "
                               "float32)",
                               L, dt);
    }
    const json_t *text = json_object_get(root, "text_config");
    char where[160];
    if (st == OCT_OK && json_is_object(text)) {
        snprintf(where, sizeof where, "%s.text_config", L);
        st = parse_model(text, where, out, err);
    } else if (st == OCT_OK) {
        st = parse_model(root, L, out, err);
    }
    if (st == OCT_OK && out->head_dim == 0 && out->n_heads > 0)
        out->head_dim = out->hidden_size / out->n_heads;
    if (st == OCT_OK)
        st = check_sizes(out, L, err);
    const json_t *qc = json_object_get(root, "quantization_config");
    if (!qc)
        qc = json_object_get(root, "compression_config");
    if (!qc && json_is_object(text))
        qc = json_object_get(text, "quantization_config");
    out->has_quantization_config = qc && !json_is_null(qc);
    io_json_close(root);
    return st;
}

oct_status oct_model_config_load(const char *path, oct_model_config *out, oct_error *err)
{
    char *text = NULL;
    size_t len = 0;
    oct_status st = io_read_text(path, OCT_JSON_MAX_FILE, &text, &len, err);
    if (st != OCT_OK)
        return st;
    st = oct_model_config_parse(text, len, path, out, err);
    oct_free(text);
    return st;
}

oct_status oct_model_config_max_len(const oct_model_config *c, int64_t requested, int64_t *out,
                                    oct_error *err)
{
    if (!c || !out)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "oct_model_config_max_len: bad arguments");
    int64_t derived = c->max_model_len > 0 ? c->max_model_len : 2048;
    if (requested <= 0) {
        *out = derived;
        return OCT_OK;
    }
    if (requested > derived && !(c->model_max_length > 0 && requested <= c->model_max_length)) {
        char mml[32] = "None";
        if (c->model_max_length > 0)
            snprintf(mml, sizeof mml, "%lld", (long long)c->model_max_length);
        const char *allow = getenv("OCTET_ALLOW_LONG_MAX_MODEL_LEN");
        if (allow && atoi(allow) == 1) {
            OCT_WARN("User-specified max_model_len (%lld) is greater than the derived "
                     "max_model_len (%s=%lld or model_max_length=%s in model's config.json). "
                     "This may lead to incorrect model outputs. Make sure the value is correct "
                     "and within the model context size.",
                     (long long)requested, c->max_model_len_key, (long long)derived, mml);
        } else {
            return oct_error_set(
                err, OCT_ERR_INVALID_ARG, -1,
                "User-specified max_model_len (%lld) is greater than the derived max_model_len "
                "(%s=%lld or model_max_length=%s in model's config.json). This may lead to "
                "incorrect model outputs. To allow overriding this maximum, set the env var "
                "OCTET_ALLOW_LONG_MAX_MODEL_LEN=1",
                (long long)requested, c->max_model_len_key, (long long)derived, mml);
        }
    }
    *out = requested;
    return OCT_OK;
}

int oct_model_config_eos_ids(const oct_model_config *c, int32_t *out, int cap)
{
    int n = 0;
    if (!c || !out)
        return 0;
    for (int pass = 0; pass < 2; pass++) {
        const int64_t *ids = pass ? c->gen_eos_token_ids : c->eos_token_ids;
        int m = pass ? c->n_gen_eos : c->n_eos;
        for (int i = 0; i < m && n < cap; i++) {
            if (ids[i] < 0 || ids[i] > INT32_MAX)
                continue;
            bool dup = false;
            for (int j = 0; j < n; j++)
                dup |= out[j] == (int32_t)ids[i];
            if (!dup)
                out[n++] = (int32_t)ids[i];
        }
    }
    return n;
}

oct_status io_generation_config_read(const char *dir, oct_model_config *c, oct_error *err)
{
    c->n_gen_eos = 0;
    char *path = io_path_join(dir, "generation_config.json");
    if (!path)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    if (!io_file_exists(path)) {
        oct_free(path);
        return OCT_OK; /* optional file */
    }
    json_t *root = NULL;
    oct_status st = io_json_open_file(path, OCT_JSON_MAX_FILE, &root, err);
    if (st == OCT_OK && !json_is_object(root))
        st = oct_error_set(err, OCT_ERR_FORMAT, -1, "%s: not a JSON object", path);
    if (st == OCT_OK)
        st = parse_eos(root, path, c->gen_eos_token_ids, &c->n_gen_eos, err);
    io_json_close(root);
    oct_free(path);
    return st;
}

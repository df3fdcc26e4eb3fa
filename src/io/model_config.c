/* model_config.c — config.json: architecture, sizes, rope settings.
 *
 * Accepted: a JSON object with the Hugging Face keys below (a nested
 * "text_config" object, as multimodal wrappers have, takes precedence for the
 * model keys).  Required: hidden_size, num_hidden_layers,
 * num_attention_heads, vocab_size.  Defaults follow transformers'
 * LlamaConfig. */
#include <stdio.h>
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
    const json_t *eos = json_object_get(m, "eos_token_id");
    if (json_is_integer(eos)) {
        c->eos_token_ids[0] = (int64_t)json_integer_value(eos);
        c->n_eos = 1;
    } else if (json_is_array(eos)) {
        size_t i;
        const json_t *v;
        c->n_eos = 0;
        json_array_foreach(eos, i, v)
        {
            if (!json_is_integer(v))
                return oct_error_set(err, OCT_ERR_FORMAT, -1,
                                     "%s.eos_token_id[%zu]: expected an integer", L, i);
            if (c->n_eos < (int)OCT_ARRAY_LEN(c->eos_token_ids))
                c->eos_token_ids[c->n_eos++] = (int64_t)json_integer_value(v);
        }
    } else if (eos && !json_is_null(eos)) {
        return oct_error_set(err, OCT_ERR_FORMAT, -1,
                             "%s.eos_token_id: expected an integer or a list", L);
    }
    return OCT_OK;
}

static oct_status check_sizes(const oct_model_config *c, const char *L, oct_error *err)
{
    static const int64_t lim = (int64_t)1 << 40;
    struct {
        const char *key;
        int64_t v;
        bool may_be_zero;
    } f[] = {
        {"hidden_size", c->hidden_size, false},
        {"intermediate_size", c->intermediate_size, true},
        {"num_hidden_layers", c->n_layers, false},
        {"num_attention_heads", c->n_heads, false},
        {"num_key_value_heads", c->n_kv_heads, false},
        {"head_dim", c->head_dim, false},
        {"vocab_size", c->vocab_size, false},
    };
    for (size_t i = 0; i < OCT_ARRAY_LEN(f); i++)
        if (f[i].v < (f[i].may_be_zero ? 0 : 1) || f[i].v > lim)
            return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.%s: %lld is out of range", L,
                                 f[i].key, (long long)f[i].v);
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

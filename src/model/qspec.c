/* qspec.c — resolves --quantization and --quantization-config into one online
 * quantization request, with vLLM's schemas, merge rules and error texts
 * (docs/MODEL.md §Online quantization config). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "model/model.h"

/* --quantization values that are online shorthands. */
static const char *const k_online[] = {"fp8", "fp8_per_tensor", "fp8_per_block", "mxfp8", "online"};
/* Shorthands usable inside the config (docs/MODEL.md §Online quantization config). */
static const char *const k_shorthands[] = {"fp8_per_tensor", "fp8_per_block", "mxfp8",
                                           "int8_per_channel_weight_only"};
/* QUANT_KEY_NAMES. */
static const char *const k_keys[] = {"fp8_per_tensor_static",
                                     "fp8_per_tensor_dynamic",
                                     "fp8_per_token",
                                     "fp8_per_block_static",
                                     "fp8_per_block_dynamic",
                                     "mxfp8",
                                     "mxfp4",
                                     "int8_per_channel_static"};

const char *oct_online_scheme_str(oct_online_scheme s)
{
    switch (s) {
    case OCT_ONLINE_NONE: return "none";
    case OCT_ONLINE_PER_TENSOR: return "fp8_per_tensor";
    case OCT_ONLINE_PER_BLOCK: return "fp8_per_block";
    case OCT_ONLINE_MXFP8: return "mxfp8";
    }
    return "?";
}

static bool in_list(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0)
            return true;
    return false;
}

static void list_str(char *buf, size_t cap, const char *const *list, size_t n)
{
    size_t o = 0;
    o += (size_t)snprintf(buf + o, cap - o, "[");
    for (size_t i = 0; i < n && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s'%s'", i ? ", " : "", list[i]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}

/* Shorthand -> (linear, moe) schemes. */
static oct_status shorthand_schemes(const char *q, oct_online_scheme *lin, oct_online_scheme *moe,
                                    oct_error *err)
{
    if (strcmp(q, "fp8") == 0 || strcmp(q, "fp8_per_tensor") == 0) {
        *lin = *moe = OCT_ONLINE_PER_TENSOR;
    } else if (strcmp(q, "fp8_per_block") == 0) {
        *lin = *moe = OCT_ONLINE_PER_BLOCK;
    } else if (strcmp(q, "mxfp8") == 0) {
        *lin = *moe = OCT_ONLINE_MXFP8;
    } else if (strcmp(q, "int8_per_channel_weight_only") == 0) {
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "int8_per_channel_weight_only is not an FP8 scheme; octet does not "
                             "implement it");
    } else {
        *lin = *moe = OCT_ONLINE_NONE;
    }
    return OCT_OK;
}

/* A weight key name -> scheme, for layer kind `cls` ("Linear" / "MoE"). */
static oct_status weight_key(const char *cls, const char *key, oct_online_scheme *out,
                             oct_error *err)
{
    char keys[512];
    if (!in_list(key, k_keys, OCT_ARRAY_LEN(k_keys))) {
        char all[1024];
        const char *names[OCT_ARRAY_LEN(k_keys) + OCT_ARRAY_LEN(k_shorthands)];
        size_t n = 0;
        for (size_t i = 0; i < OCT_ARRAY_LEN(k_shorthands); i++)
            names[n++] = k_shorthands[i];
        for (size_t i = 0; i < OCT_ARRAY_LEN(k_keys); i++)
            names[n++] = k_keys[i];
        list_str(all, sizeof all, names, n);
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "unknown quantization name '%s'; expected one of %s", key, all);
    }
    if (strcmp(key, "fp8_per_tensor_static") == 0)
        *out = OCT_ONLINE_PER_TENSOR;
    else if (strcmp(key, "fp8_per_block_static") == 0)
        *out = OCT_ONLINE_PER_BLOCK;
    else if (strcmp(key, "mxfp8") == 0)
        *out = OCT_ONLINE_MXFP8;
    else {
        static const char *const ok[] = {"fp8_per_tensor_static", "fp8_per_block_static", "mxfp8"};
        list_str(keys, sizeof keys, ok, OCT_ARRAY_LEN(ok));
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "online quantization for %s with weight=%s is not supported; "
                             "supported weight keys: %s",
                             cls, key, keys);
    }
    return OCT_OK;
}

/* "linear" / "moe" entry: a string (shorthand or weight key) or an object
 * {"weight": ..., "activation": ...}.  *set = false when null/absent/empty. */
static oct_status parse_slot(json_t *v, const char *slot, const char *cls, bool is_linear,
                             oct_online_scheme *out, bool *set, oct_error *err)
{
    *set = false;
    if (!v || json_is_null(v))
        return OCT_OK;
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (!*s)
            return OCT_OK;
        if (in_list(s, k_shorthands, OCT_ARRAY_LEN(k_shorthands))) {
            oct_online_scheme lin, moe;
            oct_status st = shorthand_schemes(s, &lin, &moe, err);
            if (st != OCT_OK)
                return st;
            *out = is_linear ? lin : moe;
            if (*out == OCT_ONLINE_NONE)
                return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                                     "online shorthand '%s' does not define a %s spec", s, slot);
            *set = true;
            return OCT_OK;
        }
        *set = true;
        return weight_key(cls, s, out, err);
    }
    if (json_is_object(v)) {
        json_t *act = json_object_get(v, "activation");
        if (act && !json_is_null(act)) {
            char *a = json_dumps(act, JSON_ENCODE_ANY | JSON_COMPACT);
            oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                          "activation override (activation=%s) is not yet supported for online "
                          "%s",
                          a ? a : "?", cls);
            free(a);
            return OCT_ERR_UNSUPPORTED;
        }
        json_t *w = json_object_get(v, "weight");
        if (!w || json_is_null(w))
            return OCT_OK;
        if (!json_is_string(w))
            return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                                 "quantization_config.%s.weight must be a string", slot);
        *set = true;
        return weight_key(cls, json_string_value(w), out, err);
    }
    return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                         "quantization_config.%s must be a string or an object with \"weight\"",
                         slot);
}

static oct_status parse_ignore(json_t *v, oct_qspec *q, oct_error *err)
{
    if (!v || json_is_null(v))
        return OCT_OK;
    if (!json_is_array(v))
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "quantization_config.ignore must be a list of strings");
    size_t n = json_array_size(v);
    if (n == 0)
        return OCT_OK;
    q->ignore = oct_calloc(n, sizeof(char *));
    if (!q->ignore)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_string(e))
            return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                                 "quantization_config.ignore[%zu] must be a string", i);
        q->ignore[i] = oct_strdup(json_string_value(e));
        if (!q->ignore[i])
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        q->n_ignore = (int)i + 1;
    }
    return OCT_OK;
}

/* The top-level keys of --quantization-config: unknown ones are an error (a
 * typo must not be silently ignored), and so is mixing the current schema
 * with the older one; *legacy: the older one. */
static oct_status check_keys(json_t *root, bool *legacy, oct_error *err)
{
    const char *key;
    json_t *val;
    bool current = false;
    *legacy = false;
    json_object_foreach(root, key, val)
    {
        if (strcmp(key, "linear") == 0 || strcmp(key, "moe") == 0)
            current = true;
        else if (strcmp(key, "global_scheme") == 0 || strcmp(key, "linear_scheme_override") == 0 ||
                 strcmp(key, "moe_scheme_override") == 0)
            *legacy = true;
        else if (strcmp(key, "ignore") != 0)
            return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                                 "--quantization-config: unknown key \"%s\" (expected linear, "
                                 "moe, ignore; or the older global_scheme, "
                                 "linear_scheme_override, moe_scheme_override, ignore)",
                                 key);
    }
    if (*legacy && current)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "--quantization-config mixes the current keys (linear, moe) with "
                             "the older ones (global_scheme, *_scheme_override)");
    return OCT_OK;
}

/* The older schema: linear = linear_scheme_override or global_scheme (the
 * same for moe); --quantization qz (schemes sh_lin / sh_moe) fills
 * global_scheme, and a conflicting one is an error. */
static oct_status legacy_slots(json_t *root, const char *qz, oct_online_scheme sh_lin,
                               oct_online_scheme sh_moe, oct_online_scheme *lin,
                               oct_online_scheme *moe, oct_error *err)
{
    oct_status st;
    json_t *g = json_object_get(root, "global_scheme");
    const char *gs = json_is_string(g) ? json_string_value(g) : NULL;
    if (gs && qz && strcmp(qz, "online") != 0 && strcmp(gs, qz) != 0 &&
        !(strcmp(qz, "fp8") == 0 && strcmp(gs, "fp8_per_tensor") == 0))
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "quantization='%s' conflicts with "
                             "quantization_config['global_scheme']='%s'. These must match when "
                             "both are specified.",
                             qz, gs);
    oct_online_scheme glin = sh_lin, gmoe = sh_moe;
    bool gset = false, lin_set = false, moe_set = false;
    if (g && !json_is_null(g) &&
        ((st = parse_slot(g, "global_scheme", "Linear", true, &glin, &gset, err)) ||
         (st = parse_slot(g, "global_scheme", "MoE", false, &gmoe, &gset, err))))
        return st;
    if ((st = parse_slot(json_object_get(root, "linear_scheme_override"), "linear_scheme_override",
                         "Linear", true, lin, &lin_set, err)) ||
        (st = parse_slot(json_object_get(root, "moe_scheme_override"), "moe_scheme_override", "MoE",
                         false, moe, &moe_set, err)))
        return st;
    if (!lin_set)
        *lin = glin;
    if (!moe_set)
        *moe = gmoe;
    return OCT_OK;
}

/* The current schema: each slot from the explicit config if set, else the
 * shorthand's. */
static oct_status current_slots(json_t *root, oct_online_scheme sh_lin, oct_online_scheme sh_moe,
                                oct_online_scheme *lin, oct_online_scheme *moe, oct_error *err)
{
    oct_status st;
    bool lin_set = false, moe_set = false;
    if ((st = parse_slot(json_object_get(root, "linear"), "linear", "Linear", true, lin, &lin_set,
                         err)) ||
        (st = parse_slot(json_object_get(root, "moe"), "moe", "MoE", false, moe, &moe_set, err)))
        return st;
    if (!lin_set)
        *lin = sh_lin;
    if (!moe_set)
        *moe = sh_moe;
    return OCT_OK;
}

/* --quantization-config's JSON over the shorthand's schemes into q. */
static oct_status resolve_config(const char *config_json, const char *qz, oct_online_scheme sh_lin,
                                 oct_online_scheme sh_moe, oct_qspec *q, oct_error *err)
{
    json_error_t jerr;
    json_t *root = json_loads(config_json, 0, &jerr);
    if (!root)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, jerr.position,
                             "--quantization-config: invalid JSON at column %d: %s", jerr.column,
                             jerr.text);
    oct_status st = OCT_OK;
    bool legacy = false;
    oct_online_scheme lin = OCT_ONLINE_NONE, moe = OCT_ONLINE_NONE;
    if (!json_is_object(root))
        st = oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                           "--quantization-config must be a JSON object");
    else if ((st = check_keys(root, &legacy, err)) == OCT_OK)
        st = legacy ? legacy_slots(root, qz, sh_lin, sh_moe, &lin, &moe, err)
                    : current_slots(root, sh_lin, sh_moe, &lin, &moe, err);
    if (st == OCT_OK && lin == OCT_ONLINE_NONE && moe == OCT_ONLINE_NONE)
        st = oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                           "OnlineQuantizationConfig requires at least one of "
                           "quantization_config.linear or quantization_config.moe to be set.");
    if (st == OCT_OK) {
        q->active = true;
        q->linear = lin;
        q->moe = moe;
        st = parse_ignore(json_object_get(root, "ignore"), q, err);
    }
    json_decref(root);
    return st;
}

static oct_status resolve(const char *quantization, const char *config_json, oct_qspec *q,
                          oct_error *err)
{
    const char *qz =
        quantization && *quantization && strcmp(quantization, "none") != 0 ? quantization : NULL;
    if (qz && !in_list(qz, k_online, OCT_ARRAY_LEN(k_online))) {
        char all[256];
        list_str(all, sizeof all, k_online, OCT_ARRAY_LEN(k_online));
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "--quantization %s is not an online FP8 method; expected one of %s "
                             "(pre-quantized checkpoints are detected from config.json)",
                             qz, all);
    }
    oct_online_scheme sh_lin = OCT_ONLINE_NONE, sh_moe = OCT_ONLINE_NONE;
    if (qz) {
        snprintf(q->shorthand, sizeof q->shorthand, "%s", qz);
        oct_status st = shorthand_schemes(qz, &sh_lin, &sh_moe, err);
        if (st != OCT_OK)
            return st;
    }
    if (config_json && *config_json)
        return resolve_config(config_json, qz, sh_lin, sh_moe, q, err);
    if (qz && strcmp(qz, "online") == 0)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                             "OnlineQuantizationConfig requires at least one of "
                             "quantization_config.linear or quantization_config.moe to be "
                             "set.");
    q->active = qz != NULL;
    q->linear = sh_lin;
    q->moe = sh_moe;
    return OCT_OK;
}

oct_status oct_qspec_resolve(const char *quantization, const char *config_json, oct_qspec *out,
                             oct_error *err)
{
    memset(out, 0, sizeof *out);
    oct_status st = resolve(quantization, config_json, out, err);
    if (st != OCT_OK)
        oct_qspec_free(out);
    return st;
}

void oct_qspec_free(oct_qspec *q)
{
    if (!q)
        return;
    for (int i = 0; i < q->n_ignore; i++)
        oct_free(q->ignore[i]);
    oct_free(q->ignore);
    q->ignore = NULL;
    q->n_ignore = 0;
}

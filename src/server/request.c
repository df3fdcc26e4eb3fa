/* request.c — parse and validate /v1/completions and /v1/chat/completions
 * bodies.  Accepted shape (OpenAI, plus vLLM's extras top_k, min_p,
 * repetition_penalty, ignore_eos); unknown fields are ignored, null means
 * "not given", a known field of the wrong type or out of range is a 400
 * naming it. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "server/request.h"

void srv_error_set(srv_error *e, int http, const char *type, const char *param, const char *fmt,
                   ...)
{
    if (!e)
        return;
    e->http = http;
    e->type = type;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

int srv_json_depth(const char *s, size_t len)
{
    int depth = 0, max = 0;
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max)
                max = depth;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return max;
}

#define BAD(param, ...)                                                                            \
    do {                                                                                           \
        srv_error_set(err, 400, "invalid_request_error", param, __VA_ARGS__);                      \
        goto fail;                                                                                 \
    } while (0)

/* Field lookup: NULL when absent or null. */
static json_t *get(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return v && !json_is_null(v) ? v : NULL;
}

static bool get_number(json_t *o, const char *key, double lo, double hi, float *out, srv_error *err)
{
    json_t *v = get(o, key);
    if (!v)
        return true;
    if (!json_is_number(v)) {
        srv_error_set(err, 400, "invalid_request_error", key, "'%s' must be a number", key);
        return false;
    }
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi)) {
        srv_error_set(err, 400, "invalid_request_error", key,
                      "'%s' must be between %g and %g (got %g)", key, lo, hi, d);
        return false;
    }
    *out = (float)d;
    return true;
}

static bool get_int(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out,
                    srv_error *err)
{
    json_t *v = get(o, key);
    if (!v)
        return true;
    if (!json_is_integer(v)) {
        srv_error_set(err, 400, "invalid_request_error", key, "'%s' must be an integer", key);
        return false;
    }
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) {
        srv_error_set(err, 400, "invalid_request_error", key,
                      "'%s' must be between %lld and %lld (got %lld)", key, (long long)lo,
                      (long long)hi, (long long)x);
        return false;
    }
    *out = (int64_t)x;
    return true;
}

static bool get_bool(json_t *o, const char *key, bool *out, srv_error *err)
{
    json_t *v = get(o, key);
    if (!v)
        return true;
    if (!json_is_boolean(v)) {
        srv_error_set(err, 400, "invalid_request_error", key, "'%s' must be a boolean", key);
        return false;
    }
    *out = json_is_true(v);
    return true;
}

static bool parse_stop(json_t *o, srv_request *r, srv_error *err)
{
    json_t *v = get(o, "stop");
    if (!v)
        return true;
    if (json_is_string(v)) {
        if (json_string_length(v) == 0)
            return true;
        r->stop[r->n_stop] = oct_strndup(json_string_value(v), json_string_length(v));
        if (!r->stop[r->n_stop]) {
            srv_error_set(err, 500, "server_error", "stop", "out of memory");
            return false;
        }
        r->n_stop++;
        return true;
    }
    if (!json_is_array(v)) {
        srv_error_set(err, 400, "invalid_request_error", "stop",
                      "'stop' must be a string or an array of strings");
        return false;
    }
    if (json_array_size(v) > SRV_MAX_STOP) {
        srv_error_set(err, 400, "invalid_request_error", "stop",
                      "'stop' has %zu entries; at most %d are allowed", json_array_size(v),
                      SRV_MAX_STOP);
        return false;
    }
    size_t i;
    json_t *s;
    json_array_foreach(v, i, s)
    {
        if (!json_is_string(s)) {
            srv_error_set(err, 400, "invalid_request_error", "stop", "'stop[%zu]' must be a string",
                          i);
            return false;
        }
        if (json_string_length(s) == 0)
            continue;
        r->stop[r->n_stop] = oct_strndup(json_string_value(s), json_string_length(s));
        if (!r->stop[r->n_stop]) {
            srv_error_set(err, 500, "server_error", "stop", "out of memory");
            return false;
        }
        r->n_stop++;
    }
    return true;
}

/* "prompt": a string, [string], [int, ...] or [[int, ...]]. */
static bool parse_prompt(json_t *o, const srv_limits *lim, srv_request *r, srv_error *err)
{
    json_t *v = get(o, "prompt");
    if (!v) {
        srv_error_set(err, 400, "invalid_request_error", "prompt", "'prompt' is required");
        return false;
    }
    if (json_is_array(v) && json_array_size(v) == 1 &&
        (json_is_string(json_array_get(v, 0)) || json_is_array(json_array_get(v, 0))))
        v = json_array_get(v, 0);
    if (json_is_string(v)) {
        r->prompt_len = json_string_length(v);
        r->prompt = oct_strndup(json_string_value(v), r->prompt_len);
        if (!r->prompt) {
            srv_error_set(err, 500, "server_error", "prompt", "out of memory");
            return false;
        }
        return true;
    }
    if (!json_is_array(v)) {
        srv_error_set(err, 400, "invalid_request_error", "prompt",
                      "'prompt' must be a string or an array of token ids");
        return false;
    }
    size_t n = json_array_size(v);
    if (n == 0 || (int64_t)n > lim->max_prompt_ids) {
        srv_error_set(err, 400, "invalid_request_error", "prompt",
                      "'prompt' must hold 1 to %lld token ids (got %zu; several prompts in one "
                      "request are not supported)",
                      (long long)lim->max_prompt_ids, n);
        return false;
    }
    r->prompt_ids = oct_malloc(n * sizeof(int32_t));
    if (!r->prompt_ids) {
        srv_error_set(err, 500, "server_error", "prompt", "out of memory");
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(v, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > INT32_MAX) {
            srv_error_set(err, 400, "invalid_request_error", "prompt",
                          "'prompt[%zu]' must be a non-negative token id", i);
            return false;
        }
        r->prompt_ids[i] = (int32_t)json_integer_value(t);
    }
    r->n_prompt_ids = (int64_t)n;
    return true;
}

/* "messages": [{"role": str, "content": str | null | [{"type": "text", "text": str}]}].
 * List content is joined with "\n" (what vLLM does for text-only parts). */
static bool parse_messages(json_t *o, srv_request *r, srv_error *err)
{
    json_t *v = get(o, "messages");
    if (!v || !json_is_array(v) || json_array_size(v) == 0) {
        srv_error_set(err, 400, "invalid_request_error", "messages",
                      "'messages' must be a non-empty array");
        return false;
    }
    json_t *clean = json_array();
    if (!clean)
        goto nomem;
    size_t i;
    json_t *m;
    json_array_foreach(v, i, m)
    {
        char param[64];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(m)) {
            srv_error_set(err, 400, "invalid_request_error", param, "'%s' must be an object",
                          param);
            goto fail;
        }
        json_t *role = json_object_get(m, "role");
        if (!json_is_string(role)) {
            srv_error_set(err, 400, "invalid_request_error", param, "'%s.role' must be a string",
                          param);
            goto fail;
        }
        json_t *c = json_object_get(m, "content");
        json_t *flat = NULL;
        if (!c || json_is_null(c)) {
            flat = json_string("");
        } else if (json_is_string(c)) {
            flat = json_incref(c);
        } else if (json_is_array(c)) {
            size_t cap = 1, len = 0;
            char *buf = oct_malloc(cap);
            size_t j;
            json_t *part;
            bool ok = buf != NULL;
            json_array_foreach(c, j, part)
            {
                json_t *ty = json_object_get(part, "type"), *tx = json_object_get(part, "text");
                if (!ok)
                    break;
                if (!json_is_object(part) || !json_is_string(ty) ||
                    strcmp(json_string_value(ty), "text") != 0 || !json_is_string(tx)) {
                    oct_free(buf);
                    srv_error_set(err, 400, "invalid_request_error", param,
                                  "'%s.content[%zu]' must be {\"type\": \"text\", \"text\": "
                                  "string} (only text parts are supported)",
                                  param, j);
                    goto fail;
                }
                size_t tl = json_string_length(tx), need = len + tl + 2;
                if (need > cap) {
                    char *nb = oct_realloc(buf, need * 2);
                    if (!nb) {
                        ok = false;
                        break;
                    }
                    buf = nb;
                    cap = need * 2;
                }
                if (j > 0)
                    buf[len++] = '\n';
                memcpy(buf + len, json_string_value(tx), tl);
                len += tl;
            }
            if (ok)
                flat = json_stringn(buf, len);
            oct_free(buf);
        } else {
            srv_error_set(err, 400, "invalid_request_error", param,
                          "'%s.content' must be a string, an array of text parts or null", param);
            goto fail;
        }
        json_t *copy = json_copy(m);
        if (!flat || !copy || json_object_set_new(copy, "content", flat) != 0 ||
            json_array_append_new(clean, copy) != 0) {
            json_decref(copy);
            goto nomem;
        }
    }
    r->messages_json = json_dumps(clean, JSON_COMPACT);
    json_decref(clean);
    if (!r->messages_json) {
        srv_error_set(err, 500, "server_error", "messages", "out of memory");
        return false;
    }
    return true;
nomem:
    srv_error_set(err, 500, "server_error", "messages", "out of memory");
fail:
    json_decref(clean);
    return false;
}

bool srv_request_parse(const char *body, size_t len, srv_kind kind, const srv_limits *lim,
                       srv_request *out, srv_error *err)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->max_tokens = -1;
    out->n = 1;
    out->logprobs = -1;
    oct_sampling_default(&out->sampling);
    json_t *o = NULL;
    int depth = srv_json_depth(body, len);
    if (depth > lim->max_depth)
        BAD("", "the JSON body nests %d levels deep; the limit is %d", depth, lim->max_depth);
    json_error_t je;
    o = json_loadb(body, len, 0, &je);
    if (!o)
        BAD("", "malformed JSON at line %d, column %d: %s", je.line, je.column, je.text);
    if (!json_is_object(o))
        BAD("", "the request body must be a JSON object");

    json_t *v = get(o, "model");
    if (v) {
        if (!json_is_string(v))
            BAD("model", "'model' must be a string");
        if (!(out->model = oct_strdup(json_string_value(v))))
            BAD("model", "out of memory");
    }
    if (kind == SRV_COMPLETIONS) {
        if (!parse_prompt(o, lim, out, err))
            goto fail;
    } else if (!parse_messages(o, out, err)) {
        goto fail;
    }
    const char *mt_key = kind == SRV_CHAT && get(o, "max_completion_tokens")
                             ? "max_completion_tokens"
                             : "max_tokens";
    if (!get_int(o, mt_key, 1, lim->max_tokens, &out->max_tokens, err))
        goto fail;
    int64_t x = 1;
    if (!get_int(o, "n", 1, lim->max_n, &x, err))
        goto fail;
    out->n = (int)x;
    oct_sampling *sp = &out->sampling;
    if (!get_number(o, "temperature", 0, 100, &sp->temperature, err) ||
        !get_number(o, "top_p", 1e-9, 1, &sp->top_p, err) ||
        !get_number(o, "min_p", 0, 1, &sp->min_p, err) ||
        !get_number(o, "presence_penalty", -2, 2, &sp->presence_penalty, err) ||
        !get_number(o, "frequency_penalty", -2, 2, &sp->frequency_penalty, err) ||
        !get_number(o, "repetition_penalty", 1e-6, 100, &sp->repetition_penalty, err))
        goto fail;
    x = 0;
    if (!get_int(o, "top_k", -1, INT32_MAX, &x, err))
        goto fail;
    sp->top_k = x < 0 ? 0 : (int)x; /* -1 (vLLM) and 0 both mean off */
    if (get(o, "seed")) {
        json_t *s = get(o, "seed");
        if (!json_is_integer(s))
            BAD("seed", "'seed' must be an integer");
        sp->seed = (uint64_t)json_integer_value(s);
        out->seed_set = true;
    }
    if (!parse_stop(o, out, err) || !get_bool(o, "stream", &out->stream, err) ||
        !get_bool(o, "ignore_eos", &out->ignore_eos, err))
        goto fail;
    if ((v = get(o, "stream_options"))) {
        if (!json_is_object(v))
            BAD("stream_options", "'stream_options' must be an object");
        json_t *iu = get(v, "include_usage");
        if (iu && !json_is_boolean(iu))
            BAD("stream_options.include_usage", "'stream_options.include_usage' must be a boolean");
        out->include_usage = iu && json_is_true(iu);
    }
    if (kind == SRV_COMPLETIONS) {
        if (!get_bool(o, "echo", &out->echo, err))
            goto fail;
        x = -1;
        if (!get_int(o, "logprobs", 0, SRV_MAX_LOGPROBS, &x, err))
            goto fail;
        out->logprobs = (int)x;
    } else {
        bool lp = false;
        if (!get_bool(o, "logprobs", &lp, err))
            goto fail;
        x = 0;
        if (!get_int(o, "top_logprobs", 0, SRV_MAX_LOGPROBS, &x, err))
            goto fail;
        if (x > 0 && !lp)
            BAD("top_logprobs", "'top_logprobs' needs 'logprobs': true");
        out->logprobs = lp ? (int)x : -1;
    }
    json_decref(o);
    return true;
fail:
    json_decref(o);
    srv_request_free(out);
    return false;
}

void srv_request_free(srv_request *r)
{
    if (!r)
        return;
    oct_free(r->model);
    oct_free(r->prompt);
    oct_free(r->prompt_ids);
    free(r->messages_json); /* jansson's allocation */
    for (int i = 0; i < r->n_stop; i++)
        oct_free(r->stop[i]);
    memset(r, 0, sizeof *r);
    r->logprobs = -1;
}

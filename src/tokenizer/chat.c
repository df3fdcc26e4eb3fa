/* chat.c — oct_chat_render: a model's chat template (Jinja) rendered with
 * the variables transformers' apply_chat_template passes: messages, tools
 * (none), documents (none), add_generation_prompt, bos_token, eos_token (and
 * the other special tokens of tokenizer_config.json), plus caller extras. */
#include <string.h>

#include "tokenizer/jinja.h"

/* Used when a model ships no template. */
static const char k_fallback_template[] =
    "{% for message in messages %}{{ message['role'] + ': ' + message['content'] }}\n\n"
    "{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}";

static oct_status nomem(oct_error *err)
{
    return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
}

static oct_status render(const oct_tokenizer *tok, const char *template_src, json_t *messages,
                         json_t *extra, bool add_generation_prompt, char **out, size_t *out_len,
                         oct_error *err)
{
    const char *src = template_src                ? template_src
                      : tok && tok->chat_template ? tok->chat_template
                                                  : k_fallback_template;
    json_t *ctx = json_object();
    if (!ctx)
        return nomem(err);
    int bad = json_object_set(ctx, "messages", messages);
    bad |= json_object_set_new(ctx, "tools", json_null());
    bad |= json_object_set_new(ctx, "documents", json_null());
    bad |= json_object_set_new(ctx, "add_generation_prompt", json_boolean(add_generation_prompt));
    if (tok) {
        const char *names[] = {"bos_token", "eos_token", "unk_token", "pad_token"};
        const char *vals[] = {tok->bos_token, tok->eos_token, tok->unk_token, tok->pad_token};
        for (size_t i = 0; i < OCT_ARRAY_LEN(names); i++)
            if (vals[i])
                bad |= json_object_set_new(ctx, names[i], json_string(vals[i]));
    }
    if (extra)
        bad |= json_object_update(ctx, extra);
    if (bad) {
        json_decref(ctx);
        return nomem(err);
    }
    tok_buf b = {0};
    oct_status st = jinja_render(src, strlen(src), ctx, &b, err);
    json_decref(ctx);
    if (st) {
        tok_buf_free(&b);
        return st;
    }
    if (!b.data && !tok_buf_append(&b, "", 0))
        return nomem(err);
    *out = b.data;
    if (out_len)
        *out_len = b.len;
    return OCT_OK;
}

oct_status oct_chat_render(const oct_tokenizer *tok, const oct_chat_message *messages,
                           int64_t n_messages, bool add_generation_prompt, char **out,
                           size_t *out_len, oct_error *err)
{
    if (!out || n_messages < 0 || (n_messages && !messages))
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "chat render: bad argument");
    *out = NULL;
    json_t *msgs = json_array();
    if (!msgs)
        return nomem(err);
    for (int64_t i = 0; i < n_messages; i++) {
        const char *role = messages[i].role ? messages[i].role : "";
        const char *content = messages[i].content;
        json_t *m = json_pack("{s:s, s:o}", "role", role, "content",
                              content ? json_string(content) : json_null());
        if (!m || json_array_append_new(msgs, m)) {
            json_decref(msgs);
            return content && !json_string(content)
                       ? oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                                       "chat render: message %lld is not valid UTF-8", (long long)i)
                       : nomem(err);
        }
    }
    oct_status st = render(tok, NULL, msgs, NULL, add_generation_prompt, out, out_len, err);
    json_decref(msgs);
    return st;
}

oct_status oct_chat_render_json(const oct_tokenizer *tok, const char *template_src,
                                const char *messages_json, const char *extra_json,
                                bool add_generation_prompt, char **out, size_t *out_len,
                                oct_error *err)
{
    if (!out || !messages_json)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "chat render: NULL argument");
    *out = NULL;
    json_error_t je;
    json_t *msgs = json_loads(messages_json, 0, &je);
    if (!msgs || !json_is_array(msgs)) {
        json_decref(msgs);
        return oct_error_set(err, OCT_ERR_INVALID_ARG, msgs ? -1 : je.position,
                             "chat render: messages must be a JSON array%s%s", msgs ? "" : ": ",
                             msgs ? "" : je.text);
    }
    json_t *extra = NULL;
    if (extra_json) {
        extra = json_loads(extra_json, 0, &je);
        if (!extra || !json_is_object(extra)) {
            json_decref(msgs);
            json_decref(extra);
            return oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                                 "chat render: extra variables must be a JSON object");
        }
    }
    oct_status st =
        render(tok, template_src, msgs, extra, add_generation_prompt, out, out_len, err);
    json_decref(msgs);
    json_decref(extra);
    return st;
}

/* octet/tokenizer.h — the tokenizer and chat templates (part of octet.h, the public API:
 * docs/API.md). */
#ifndef OCTET_API_TOKENIZER_H
#define OCTET_API_TOKENIZER_H

#include "octet/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Hugging Face tokenizer.json (BPE models) with the exact behaviour of the
 * `tokenizers` library, plus chat templates (a Jinja2 subset).  See
 * docs/TOKENIZER.md for the supported components.
 *
 * Thread safety: a loaded oct_tokenizer is immutable; encode / decode /
 * chat render may run on it from many threads at once.  A stream decoder is
 * used by one thread at a time.  Token ids are int32_t. */

typedef struct oct_tokenizer oct_tokenizer;

/* Loads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json
 * (bos/eos tokens, add_bos_token/add_eos_token, chat_template) and
 * DIR/chat_template.jinja (takes precedence over the config's template).
 * Any component or option octet does not implement is an error naming it
 * (OCT_ERR_UNSUPPORTED); malformed files give OCT_ERR_FORMAT.  *out is owned
 * by the caller (oct_tokenizer_free). */
OCT_API oct_status oct_tokenizer_load(const char *dir, oct_tokenizer **out, oct_error *err);

/* The same from memory: `config_json` (tokenizer_config.json) may be NULL. */
OCT_API oct_status oct_tokenizer_load_json(const char *tokenizer_json, size_t tokenizer_len,
                                           const char *config_json, size_t config_len,
                                           oct_tokenizer **out, oct_error *err);

OCT_API void oct_tokenizer_free(oct_tokenizer *tok);

/* A growable id array filled by the library; reuse it across calls, release
 * with oct_token_ids_free. */
typedef struct oct_token_ids {
    int32_t *ids; /* [n] */
    int64_t n;
    int64_t cap;
} oct_token_ids;

OCT_API void oct_token_ids_free(oct_token_ids *v); /* frees ids and zeroes *v */

/* Encodes UTF-8 text (len bytes) into out (replacing its contents).
 * add_special_tokens = true applies the post-processor (what
 * tokenizers.Tokenizer.encode(text) does by default).  Invalid UTF-8 is
 * OCT_ERR_INVALID_ARG with the byte offset. */
OCT_API oct_status oct_tokenizer_encode(const oct_tokenizer *tok, const char *text, size_t len,
                                        bool add_special_tokens, oct_token_ids *out,
                                        oct_error *err);

/* Decodes ids into a NUL-terminated UTF-8 string *text_out (length *len_out,
 * may be NULL), owned by the caller: release with oct_tokenizer_text_free.
 * Unknown ids are skipped, as in `tokenizers`. */
OCT_API oct_status oct_tokenizer_decode(const oct_tokenizer *tok, const int32_t *ids, int64_t n,
                                        bool skip_special_tokens, char **text_out, size_t *len_out,
                                        oct_error *err);

OCT_API void oct_tokenizer_text_free(char *text);

/* Incremental decoder for streaming: feed ids one by one; each push yields
 * the newly completed text (never a partial UTF-8 character, never a
 * trailing U+FFFD that a later token may complete).  The concatenation of
 * all pushes plus the final flush equals oct_tokenizer_decode of all ids. */
typedef struct oct_detokenizer oct_detokenizer;

/* *out is owned by the caller (oct_detokenizer_free); it keeps tok, which must
 * outlive it. */
OCT_API oct_status oct_detokenizer_new(const oct_tokenizer *tok, bool skip_special_tokens,
                                       oct_detokenizer **out, oct_error *err);
/* *text (len *len) is owned by d and valid until the next call on d (or its free). */
OCT_API oct_status oct_detokenizer_push(oct_detokenizer *d, int32_t id, const char **text,
                                        size_t *len, oct_error *err);
/* Emits whatever is still held back (e.g. an incomplete character as U+FFFD);
 * *text as for push: owned by d, valid until the next call on d. */
OCT_API oct_status oct_detokenizer_flush(oct_detokenizer *d, const char **text, size_t *len,
                                         oct_error *err);
OCT_API void oct_detokenizer_free(oct_detokenizer *d);

/* Vocabulary size including added tokens (largest id + 1). */
OCT_API int64_t oct_tokenizer_vocab_size(const oct_tokenizer *tok);
/* Token string of an id (NUL-terminated, owned by tok, valid while tok lives),
 * NULL when unknown. */
OCT_API const char *oct_tokenizer_id_to_token(const oct_tokenizer *tok, int32_t id);
/* Id of a token string (added tokens first, then the model vocab); -1 if none. */
OCT_API int32_t oct_tokenizer_token_to_id(const oct_tokenizer *tok, const char *token);
/* True for added tokens marked "special" (skipped by skip_special_tokens). */
OCT_API bool oct_tokenizer_is_special(const oct_tokenizer *tok, int32_t id);
/* From tokenizer_config.json: ids of bos_token / eos_token, -1 when absent. */
OCT_API int32_t oct_tokenizer_bos_id(const oct_tokenizer *tok);
OCT_API int32_t oct_tokenizer_eos_id(const oct_tokenizer *tok);
/* Token strings from tokenizer_config.json (NULL when absent); owned by tok,
 * valid while tok lives. */
OCT_API const char *oct_tokenizer_bos_token(const oct_tokenizer *tok);
OCT_API const char *oct_tokenizer_eos_token(const oct_tokenizer *tok);
/* The chat template text (NULL when the model has none); owned by tok, valid
 * while tok lives. */
OCT_API const char *oct_tokenizer_chat_template(const oct_tokenizer *tok);

/* ---------------------------------------------------------- chat templates */

typedef struct oct_chat_message {
    const char *role;    /* "system", "user", "assistant", "tool", ... */
    const char *content; /* UTF-8 */
} oct_chat_message;

/* Renders the tokenizer's chat template with messages, add_generation_prompt
 * and bos_token / eos_token (as transformers' apply_chat_template with
 * tokenize=False).  A model without a template uses octet's plain fallback
 * ("<role>: <content>\n\n" per message, "assistant: " as generation
 * prompt).  Template errors (unsupported syntax, raise_exception) are
 * OCT_ERR_FORMAT / OCT_ERR_UNSUPPORTED with the template line.  *out
 * (NUL-terminated, length *out_len, may be NULL) is released with
 * oct_tokenizer_text_free. */
OCT_API oct_status oct_chat_render(const oct_tokenizer *tok, const oct_chat_message *messages,
                                   int64_t n_messages, bool add_generation_prompt, char **out,
                                   size_t *out_len, oct_error *err);

/* General form: messages as a JSON array of objects (any fields: content may
 * be null or a list, tool_calls, ...), `extra_json` a JSON object of further
 * template variables (e.g. {"enable_thinking": false, "tools": [...]}) or
 * NULL.  `template_src` NULL uses the tokenizer's template; `tok` may be NULL
 * when template_src is given (bos_token/eos_token then come from
 * extra_json). */
OCT_API oct_status oct_chat_render_json(const oct_tokenizer *tok, const char *template_src,
                                        const char *messages_json, const char *extra_json,
                                        bool add_generation_prompt, char **out, size_t *out_len,
                                        oct_error *err);

#ifdef __cplusplus
}
#endif
#endif

/* tokenizer.c — loading tokenizer.json + tokenizer_config.json into an
 * oct_tokenizer, its lifecycle and the id <-> token accessors.
 *
 * tokenizer.json top level accepted: version, truncation (null), padding
 * (null or BatchLongest, a no-op for one text), added_tokens, normalizer,
 * pre_tokenizer, model (BPE), post_processor, decoder. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "io/json.h"
#include "tokenizer/tok_internal.h"

static oct_status nomem(oct_error *err)
{
    return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
}

void tok_trie_free(tok_trie *t)
{
    oct_free(t->nodes);
    memset(t, 0, sizeof *t);
}

static int32_t trie_new_node(tok_trie *t, unsigned char byte)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        tok_trie_node *p = oct_realloc(t->nodes, cap * sizeof *p);
        if (!p)
            return -1;
        t->nodes = p;
        t->cap = cap;
    }
    t->nodes[t->n] = (tok_trie_node){-1, -1, -1, byte};
    return (int32_t)t->n++;
}

bool tok_trie_insert(tok_trie *t, const char *s, size_t n, int32_t token)
{
    if (n == 0)
        return true;
    if (t->n == 0) {
        if (trie_new_node(t, 0) < 0)
            return false;
        for (int i = 0; i < 256; i++)
            t->root_next[i] = -1;
    }
    unsigned char b0 = (unsigned char)s[0];
    int32_t cur = t->root_next[b0];
    if (cur < 0) {
        if ((cur = trie_new_node(t, b0)) < 0)
            return false;
        t->root_next[b0] = cur;
    }
    for (size_t i = 1; i < n; i++) {
        unsigned char b = (unsigned char)s[i];
        int32_t c = t->nodes[cur].first_child;
        while (c >= 0 && t->nodes[c].byte != b)
            c = t->nodes[c].next_sibling;
        if (c < 0) {
            if ((c = trie_new_node(t, b)) < 0)
                return false;
            t->nodes[c].next_sibling = t->nodes[cur].first_child;
            t->nodes[cur].first_child = c;
        }
        cur = c;
    }
    if (t->nodes[cur].token < 0) /* the first token with this content wins */
        t->nodes[cur].token = token;
    return true;
}

void oct_tokenizer_free(oct_tokenizer *t)
{
    if (!t)
        return;
    tok_bpe_free(&t->bpe);
    tok_norm_free(t->normalizer);
    tok_pre_free(t->pre);
    tok_post_free(t->post);
    tok_dec_free(t->decoder);
    for (size_t i = 0; i < t->n_added; i++)
        oct_free(t->added[i].content);
    oct_free(t->added);
    tok_strmap_free(&t->added_map);
    tok_trie_free(&t->trie_raw);
    tok_trie_free(&t->trie_norm);
    if (t->id_str)
        for (int64_t i = 0; i < t->n_ids; i++)
            oct_free(t->id_str[i]);
    oct_free(t->id_str);
    oct_free(t->id_len);
    oct_free(t->id_added);
    oct_free(t->bos_token);
    oct_free(t->eos_token);
    oct_free(t->unk_token);
    oct_free(t->pad_token);
    oct_free(t->chat_template);
    oct_free(t);
}

static oct_status set_id_str(oct_tokenizer *t, int32_t id, const char *s, size_t n, oct_error *err)
{
    if (id < 0 || id >= t->n_ids)
        return oct_error_set(err, OCT_ERR_INTERNAL, -1, "id %d out of range", (int)id);
    char *c = oct_strndup(s, n);
    if (!c)
        return nomem(err);
    oct_free(t->id_str[id]);
    t->id_str[id] = c;
    t->id_len[id] = (uint32_t)n;
    return OCT_OK;
}

static oct_status parse_added(oct_tokenizer *t, const json_t *arr, oct_error *err)
{
    if (!arr || json_is_null(arr))
        return OCT_OK;
    if (!json_is_array(arr))
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "added_tokens: expected an array");
    size_t n = json_array_size(arr);
    t->added = oct_calloc(n + 1, sizeof *t->added);
    if (!t->added)
        return nomem(err);
    static const char *const keys[] = {"id",     "content",    "single_word", "lstrip",
                                       "rstrip", "normalized", "special",     NULL};
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(arr, i);
        char path[64];
        snprintf(path, sizeof path, "added_tokens[%zu]", i);
        if (!json_is_object(e))
            return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s: expected an object", path);
        tok_added *a = &t->added[t->n_added];
        const char *content;
        size_t len;
        const json_t *id = json_object_get(e, "id");
        oct_status st;
        if ((st = tok_json_known_keys(e, keys, path, err)) ||
            (st = tok_json_str(e, "content", true, &content, &len, path, err)) ||
            (st = tok_json_bool(e, "single_word", false, &a->single_word, path, err)) ||
            (st = tok_json_bool(e, "lstrip", false, &a->lstrip, path, err)) ||
            (st = tok_json_bool(e, "rstrip", false, &a->rstrip, path, err)) ||
            (st = tok_json_bool(e, "normalized", true, &a->normalized, path, err)) ||
            (st = tok_json_bool(e, "special", false, &a->special, path, err)))
            return st;
        if (!json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) >= INT32_MAX)
            return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.id: expected a non-negative integer",
                                 path);
        /* `tokenizers` keeps the model's id for a content already in the vocab */
        int32_t vid;
        a->id = tok_strmap_get(&t->bpe.vocab, content, len, &vid) ? vid
                                                                  : (int32_t)json_integer_value(id);
        a->content = oct_strndup(content, len);
        if (!a->content)
            return nomem(err);
        a->len = len;
        if (len == 0) {
            oct_free(a->content); /* an empty token can never match */
            a->content = NULL;
            continue;
        }
        int32_t prev;
        if (tok_strmap_get(&t->added_map, content, len, &prev)) {
            oct_free(a->content);
            a->content = NULL;
            continue; /* duplicate content: the first definition wins */
        }
        if (!tok_strmap_put(&t->added_map, content, len, (int32_t)t->n_added)) {
            oct_free(a->content);
            a->content = NULL;
            return nomem(err);
        }
        t->n_added++;
    }
    return OCT_OK;
}

/* Builds the two tries; normalized tokens are matched in normalized text, so
 * their contents go through the normalizer first (as `tokenizers` does). */
static oct_status build_tries(oct_tokenizer *t, oct_error *err)
{
    tok_buf nb = {0};
    tok_work w = {0};
    oct_status st = OCT_OK;
    w.md = pcre2_match_data_create(4, NULL);
    if (!w.md)
        return nomem(err);
    for (size_t i = 0; i < t->n_added; i++) {
        tok_added *a = &t->added[i];
        if (a->normalized && t->normalizer) {
            if ((st = tok_norm_apply(t->normalizer, a->content, a->len, &nb, &w, err)))
                break;
            if (!tok_trie_insert(&t->trie_norm, nb.data, nb.len, (int32_t)i)) {
                st = nomem(err);
                break;
            }
        } else if (!tok_trie_insert(a->normalized ? &t->trie_norm : &t->trie_raw, a->content,
                                    a->len, (int32_t)i)) {
            st = nomem(err);
            break;
        }
    }
    tok_buf_free(&nb);
    tok_work_free(&w);
    return st;
}

static oct_status build_id_table(oct_tokenizer *t, const json_t *vocab, oct_error *err)
{
    int64_t max_id = -1;
    const char *key;
    const json_t *val;
    json_object_foreach(tok_json_mut(vocab), key, val)
    {
        if (json_integer_value(val) > max_id)
            max_id = json_integer_value(val);
    }
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].id > max_id)
            max_id = t->added[i].id;
    /* real vocabularies stay far below this; a bigger id is a broken file and
     * would only make us allocate gigabytes */
    if (max_id >= (1 << 24))
        return oct_error_set(err, OCT_ERR_LIMIT, -1, "token id %lld is too large (limit %d)",
                             (long long)max_id, (1 << 24) - 1);
    t->n_ids = max_id + 1;
    size_t n = (size_t)t->n_ids;
    t->id_str = oct_calloc(n + 1, sizeof *t->id_str);
    t->id_len = oct_calloc(n + 1, sizeof *t->id_len);
    t->id_added = oct_calloc(n + 1, sizeof *t->id_added);
    if (!t->id_str || !t->id_len || !t->id_added)
        return nomem(err);
    for (size_t i = 0; i < n; i++)
        t->id_added[i] = -1;
    oct_status st;
    json_object_foreach(tok_json_mut(vocab), key, val)
    {
        if ((st = set_id_str(t, (int32_t)json_integer_value(val), key, strlen(key), err)))
            return st;
    }
    for (size_t i = 0; i < t->n_added; i++) {
        tok_added *a = &t->added[i];
        if ((st = set_id_str(t, a->id, a->content, a->len, err)))
            return st;
        t->id_added[a->id] = (int32_t)i;
    }
    return OCT_OK;
}

/* A token field of tokenizer_config.json: "text" or {"content": "text", ...}
 * (transformers writes the object form with "__type": "AddedToken"). */
static oct_status config_token(const json_t *cfg, const char *key, char **out, oct_error *err)
{
    const json_t *v = json_object_get(cfg, key);
    const json_t *obj = cfg;
    const char *k = key, *where = "tokenizer_config.json";
    char sub[96];
    if (v && json_is_object(v)) {
        snprintf(sub, sizeof sub, "tokenizer_config.json.%s", key);
        obj = v;
        k = "content";
        where = sub;
        v = json_object_get(v, "content");
    }
    if (!v || json_is_null(v))
        return OCT_OK;
    if (!json_is_string(v))
        return io_json_type_error(obj, k, where, "a string or {\"content\": ...}", err);
    *out = oct_strndup(json_string_value(v), json_string_length(v));
    return *out ? OCT_OK : nomem(err);
}

static oct_status parse_config(oct_tokenizer *t, const char *cfg_text, size_t len, oct_error *err)
{
    json_t *cfg = NULL;
    oct_status st = io_json_open(cfg_text, len, "tokenizer_config.json", &cfg, err);
    if (st != OCT_OK)
        return st;
    if (!json_is_object(cfg)) {
        st = oct_error_set(err, OCT_ERR_FORMAT, -1, "tokenizer_config.json: expected an object");
        goto out;
    }
    if ((st = config_token(cfg, "bos_token", &t->bos_token, err)) ||
        (st = config_token(cfg, "eos_token", &t->eos_token, err)) ||
        (st = config_token(cfg, "unk_token", &t->unk_token, err)) ||
        (st = config_token(cfg, "pad_token", &t->pad_token, err)))
        goto out;
    const char *L = "tokenizer_config.json";
    if ((st = io_json_bool(cfg, "add_bos_token", L, false, &t->add_bos, err)) ||
        (st = io_json_bool(cfg, "add_eos_token", L, false, &t->add_eos, err)))
        goto out;
    t->has_add_bos = json_is_boolean(json_object_get(cfg, "add_bos_token"));
    t->has_add_eos = json_is_boolean(json_object_get(cfg, "add_eos_token"));
    const json_t *ct = json_object_get(cfg, "chat_template");
    if (json_is_string(ct)) {
        t->chat_template = oct_strndup(json_string_value(ct), json_string_length(ct));
        if (!t->chat_template)
            st = nomem(err);
    } else if (json_is_array(ct)) {
        /* [{"name": "default", "template": "..."}, ...]: take "default" */
        for (size_t i = 0; i < json_array_size(ct); i++) {
            const json_t *e = json_array_get(ct, i);
            const char *name = json_string_value(json_object_get(e, "name"));
            const json_t *tpl = json_object_get(e, "template");
            if (name && strcmp(name, "default") == 0 && json_is_string(tpl)) {
                t->chat_template = oct_strndup(json_string_value(tpl), json_string_length(tpl));
                if (!t->chat_template)
                    st = nomem(err);
            }
        }
    } else if (ct && !json_is_null(ct)) {
        st = io_json_type_error(cfg, "chat_template", L, "a string or a list", err);
    }
out:
    io_json_close(cfg);
    return st;
}

static int32_t lookup_id(const oct_tokenizer *t, const char *s)
{
    if (!s)
        return -1;
    int32_t v;
    size_t n = strlen(s);
    if (tok_strmap_get(&t->added_map, s, n, &v))
        return t->added[v].id;
    if (tok_strmap_get(&t->bpe.vocab, s, n, &v))
        return v;
    return -1;
}

oct_status oct_tokenizer_load_json(const char *tokenizer_json, size_t tokenizer_len,
                                   const char *config_json, size_t config_len, oct_tokenizer **out,
                                   oct_error *err)
{
    if (!out || !tokenizer_json)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "tokenizer: NULL argument");
    *out = NULL;
    json_t *root = NULL;
    oct_status st = io_json_open(tokenizer_json, tokenizer_len, "tokenizer.json", &root, err);
    if (st != OCT_OK)
        return st;
    oct_tokenizer *t = oct_calloc(1, sizeof *t);
    if (!t) {
        io_json_close(root);
        return nomem(err);
    }
    t->bos_id = t->eos_id = -1;
    static const char *const keys[] = {
        "version",       "truncation",     "padding", "added_tokens", "normalizer",
        "pre_tokenizer", "post_processor", "decoder", "model",        NULL};
    if (!json_is_object(root)) {
        st = oct_error_set(err, OCT_ERR_FORMAT, -1, "tokenizer.json: expected an object");
        goto fail;
    }
    if ((st = tok_json_known_keys(root, keys, "tokenizer.json", err)))
        goto fail;
    const json_t *trunc = json_object_get(root, "truncation");
    if (trunc && !json_is_null(trunc)) {
        st = oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                           "tokenizer.json: truncation: only null is supported");
        goto fail;
    }
    const json_t *pad = json_object_get(root, "padding");
    if (pad && !json_is_null(pad)) {
        const json_t *strat = json_object_get(pad, "strategy");
        if (!(json_is_string(strat) && strcmp(json_string_value(strat), "BatchLongest") == 0)) {
            st = oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                               "tokenizer.json: padding: only null or BatchLongest (which does "
                               "nothing for one text) is supported");
            goto fail;
        }
    }
    const json_t *model = json_object_get(root, "model");
    if ((st = tok_bpe_parse(model, &t->bpe, err)))
        goto fail;
    const json_t *j;
    if ((j = json_object_get(root, "normalizer")) && !json_is_null(j) &&
        (st = tok_norm_parse(j, &t->normalizer, "normalizer", err)))
        goto fail;
    if ((j = json_object_get(root, "pre_tokenizer")) && !json_is_null(j) &&
        (st = tok_pre_parse(j, &t->pre, "pre_tokenizer", err)))
        goto fail;
    if ((j = json_object_get(root, "post_processor")) && !json_is_null(j) &&
        (st = tok_post_parse(j, &t->post, "post_processor", err)))
        goto fail;
    if ((j = json_object_get(root, "decoder")) && !json_is_null(j) &&
        (st = tok_dec_parse(j, &t->decoder, "decoder", err)))
        goto fail;
    if ((st = parse_added(t, json_object_get(root, "added_tokens"), err)) ||
        (st = build_tries(t, err)) ||
        (st = build_id_table(t, json_object_get(model, "vocab"), err)))
        goto fail;
    if (config_json && (st = parse_config(t, config_json, config_len, err)))
        goto fail;
    t->bos_id = lookup_id(t, t->bos_token);
    t->eos_id = lookup_id(t, t->eos_token);
    /* a named eos the vocabulary lacks never stops generation: said, not fatal */
    if (t->eos_token && t->eos_id < 0)
        OCT_WARN("tokenizer_config.json: eos_token '%.80s' is not in the vocabulary; it never "
                 "stops generation",
                 t->eos_token);
    io_json_close(root);
    *out = t;
    return OCT_OK;
fail:
    io_json_close(root);
    oct_tokenizer_free(t);
    return st;
}

/* Reads a whole file; *data NULL with OCT_OK when missing and optional. */
static oct_status read_file(const char *path, bool optional, char **data, size_t *len,
                            oct_error *err)
{
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (optional && errno == ENOENT)
            return OCT_OK;
        return oct_error_set(err, OCT_ERR_IO, -1, "%s: %s", path, strerror(errno));
    }
    tok_buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (!tok_buf_append(&b, chunk, n)) {
            fclose(f);
            tok_buf_free(&b);
            return nomem(err);
        }
    bool bad = ferror(f) != 0;
    fclose(f);
    if (bad) {
        tok_buf_free(&b);
        return oct_error_set(err, OCT_ERR_IO, -1, "%s: read error", path);
    }
    if (!b.data && !tok_buf_append(&b, "", 0))
        return nomem(err);
    *data = b.data;
    *len = b.len;
    return OCT_OK;
}

/* special_tokens_map.json (older repos keep bos/eos there): fills the tokens
 * tokenizer_config.json did not set. */
static oct_status special_tokens_map(oct_tokenizer *t, const char *text, size_t len, oct_error *err)
{
    json_t *m = NULL;
    oct_status st = io_json_open(text, len, "special_tokens_map.json", &m, err);
    if (st != OCT_OK)
        return st;
    char **slot[] = {&t->bos_token, &t->eos_token, &t->unk_token, &t->pad_token};
    const char *key[] = {"bos_token", "eos_token", "unk_token", "pad_token"};
    for (size_t i = 0; st == OCT_OK && i < 4; i++)
        if (!*slot[i] && json_is_object(m))
            st = config_token(m, key[i], slot[i], err);
    io_json_close(m);
    t->bos_id = lookup_id(t, t->bos_token);
    t->eos_id = lookup_id(t, t->eos_token);
    return st;
}

oct_status oct_tokenizer_load(const char *dir, oct_tokenizer **out, oct_error *err)
{
    if (!dir || !out)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "tokenizer: NULL argument");
    *out = NULL;
    char path[4096];
    char *tj = NULL, *cj = NULL, *jinja = NULL, *sm = NULL;
    size_t tl, cl, jl, sl;
    oct_status st;
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if ((st = read_file(path, false, &tj, &tl, err)))
        return st;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if ((st = read_file(path, true, &cj, &cl, err)))
        goto out;
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    if ((st = read_file(path, true, &jinja, &jl, err)))
        goto out;
    snprintf(path, sizeof path, "%s/special_tokens_map.json", dir);
    if ((st = read_file(path, true, &sm, &sl, err)))
        goto out;
    if ((st = oct_tokenizer_load_json(tj, tl, cj, cl, out, err)) ||
        (sm && (st = special_tokens_map(*out, sm, sl, err)))) {
        oct_error_prefix(err, "%s", dir);
        oct_tokenizer_free(*out);
        *out = NULL;
        goto out;
    }
    if (jinja) {
        oct_free((*out)->chat_template);
        (*out)->chat_template = jinja;
        jinja = NULL;
    }
out:
    oct_free(tj);
    oct_free(cj);
    oct_free(jinja);
    oct_free(sm);
    return st;
}

/* -------------------------------------------------------------- accessors */

const char *tok_id_str(const oct_tokenizer *t, int32_t id, size_t *len)
{
    if (!t || id < 0 || id >= t->n_ids || !t->id_str[id])
        return NULL;
    if (len)
        *len = t->id_len[id];
    return t->id_str[id];
}

int64_t oct_tokenizer_vocab_size(const oct_tokenizer *t)
{
    return t ? t->n_ids : 0;
}

const char *oct_tokenizer_id_to_token(const oct_tokenizer *t, int32_t id)
{
    return tok_id_str(t, id, NULL);
}

int32_t oct_tokenizer_token_to_id(const oct_tokenizer *t, const char *token)
{
    return t ? lookup_id(t, token) : -1;
}

bool oct_tokenizer_is_special(const oct_tokenizer *t, int32_t id)
{
    if (!t || id < 0 || id >= t->n_ids || t->id_added[id] < 0)
        return false;
    return t->added[t->id_added[id]].special;
}

int32_t oct_tokenizer_bos_id(const oct_tokenizer *t)
{
    return t ? t->bos_id : -1;
}

int32_t oct_tokenizer_eos_id(const oct_tokenizer *t)
{
    return t ? t->eos_id : -1;
}

const char *oct_tokenizer_bos_token(const oct_tokenizer *t)
{
    return t ? t->bos_token : NULL;
}

const char *oct_tokenizer_eos_token(const oct_tokenizer *t)
{
    return t ? t->eos_token : NULL;
}

const char *oct_tokenizer_chat_template(const oct_tokenizer *t)
{
    return t ? t->chat_template : NULL;
}

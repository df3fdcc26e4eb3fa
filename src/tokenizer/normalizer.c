/* normalizer.c — tokenizer.json "normalizer": Sequence, NFC/NFD/NFKC/NFKD,
 * Lowercase, Strip, Replace, Prepend.  Anything else is a load error. */
#include <string.h>

#include "tokenizer/tok_internal.h"

void tok_norm_free(tok_norm *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->n_children; i++)
        tok_norm_free(n->children[i]);
    oct_free(n->children);
    if (n->re)
        pcre2_code_free(n->re);
    oct_free(n->str);
    oct_free(n);
}

/* Parses a {"String": s} / {"Regex": r} pattern object into a compiled regex
 * (a String becomes a literal pattern). */
static oct_status parse_pattern(const json_t *j, const char *path, pcre2_code **re, oct_error *err)
{
    if (!json_is_object(j))
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.pattern: expected an object", path);
    const json_t *s = json_object_get(j, "String");
    const json_t *r = json_object_get(j, "Regex");
    char what[256];
    snprintf(what, sizeof what, "%s.pattern", path);
    if (s && json_is_string(s))
        return tok_regex_compile(json_string_value(s), json_string_length(s), true, re, what, err);
    if (r && json_is_string(r))
        return tok_regex_compile(json_string_value(r), json_string_length(r), false, re, what, err);
    return oct_error_set(err, OCT_ERR_FORMAT, -1,
                         "%s.pattern: expected {\"String\": ...} or {\"Regex\": ...}", path);
}

static oct_status norm_slot(const json_t *elem, void *slot, const char *path, oct_error *err)
{
    return tok_norm_parse(elem, slot, path, err);
}

oct_status tok_norm_parse(const json_t *j, tok_norm **out, const char *path, oct_error *err)
{
    *out = NULL;
    if (!json_is_object(j))
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s: expected an object", path);
    const char *type;
    oct_status st = tok_json_str(j, "type", true, &type, NULL, path, err);
    if (st)
        return st;
    tok_norm *n = oct_calloc(1, sizeof *n);
    if (!n)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    static const char *const k_type[] = {"type", NULL};
    if (strcmp(type, "Sequence") == 0) {
        void *kids;
        n->kind = TOK_NORM_SEQUENCE;
        st = tok_json_sequence(j, "normalizers", path, norm_slot, sizeof *n->children, &kids,
                               &n->n_children, err);
        n->children = kids;
        if (st)
            goto fail;
    } else if (strcmp(type, "NFC") == 0 || strcmp(type, "NFD") == 0 || strcmp(type, "NFKC") == 0 ||
               strcmp(type, "NFKD") == 0) {
        n->kind = strcmp(type, "NFC") == 0    ? TOK_NORM_NFC
                  : strcmp(type, "NFD") == 0  ? TOK_NORM_NFD
                  : strcmp(type, "NFKC") == 0 ? TOK_NORM_NFKC
                                              : TOK_NORM_NFKD;
        if ((st = tok_json_known_keys(j, k_type, path, err)))
            goto fail;
    } else if (strcmp(type, "Lowercase") == 0) {
        n->kind = TOK_NORM_LOWERCASE;
        if ((st = tok_json_known_keys(j, k_type, path, err)))
            goto fail;
    } else if (strcmp(type, "Strip") == 0) {
        static const char *const keys[] = {"type", "strip_left", "strip_right", NULL};
        n->kind = TOK_NORM_STRIP;
        if ((st = tok_json_known_keys(j, keys, path, err)) ||
            (st = tok_json_bool(j, "strip_left", false, &n->strip_left, path, err)) ||
            (st = tok_json_bool(j, "strip_right", false, &n->strip_right, path, err)))
            goto fail;
    } else if (strcmp(type, "Replace") == 0) {
        static const char *const keys[] = {"type", "pattern", "content", NULL};
        n->kind = TOK_NORM_REPLACE;
        const char *content;
        size_t len;
        if ((st = tok_json_known_keys(j, keys, path, err)) ||
            (st = tok_json_str(j, "content", true, &content, &len, path, err)) ||
            (st = parse_pattern(json_object_get(j, "pattern"), path, &n->re, err)))
            goto fail;
        n->str = oct_strndup(content, len);
        n->str_len = len;
        if (!n->str) {
            st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
            goto fail;
        }
    } else if (strcmp(type, "Prepend") == 0) {
        static const char *const keys[] = {"type", "prepend", NULL};
        n->kind = TOK_NORM_PREPEND;
        const char *p;
        size_t len;
        if ((st = tok_json_known_keys(j, keys, path, err)) ||
            (st = tok_json_str(j, "prepend", true, &p, &len, path, err)))
            goto fail;
        n->str = oct_malloc(len + 1);
        if (!n->str) {
            st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
            goto fail;
        }
        memcpy(n->str, p, len);
        n->str[len] = 0;
        n->str_len = len;
    } else {
        st = oct_error_set(err, OCT_ERR_UNSUPPORTED, -1, "%s: unsupported normalizer '%s'", path,
                           type);
        goto fail;
    }
    *out = n;
    return OCT_OK;
fail:
    tok_norm_free(n);
    return st;
}

static oct_status nomem(oct_error *err)
{
    return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
}

/* Replaces every match of re in s with `with`. */
static oct_status replace_all(const pcre2_code *re, const char *s, size_t len, const char *with,
                              size_t with_len, tok_buf *out, tok_work *w, oct_error *err)
{
    oct_status st = tok_regex_find_all(re, w->md, s, len, &w->ranges, err);
    if (st)
        return st;
    size_t prev = 0;
    for (size_t i = 0; i < w->ranges.n; i++) {
        size_t a = w->ranges.v[2 * i], b = w->ranges.v[2 * i + 1];
        if (!tok_buf_append(out, s + prev, a - prev) || !tok_buf_append(out, with, with_len))
            return nomem(err);
        prev = b;
    }
    if (!tok_buf_append(out, s + prev, len - prev))
        return nomem(err);
    return OCT_OK;
}

oct_status tok_norm_apply(const tok_norm *n, const char *s, size_t len, tok_buf *out, tok_work *w,
                          oct_error *err)
{
    out->len = 0;
    if (out->data)
        out->data[0] = 0;
    switch (n->kind) {
    case TOK_NORM_SEQUENCE: {
        /* ping-pong between out and a local buffer */
        tok_buf tmp = {0};
        if (!tok_buf_append(out, s, len))
            return nomem(err);
        for (size_t i = 0; i < n->n_children; i++) {
            oct_status st = tok_norm_apply(n->children[i], out->data, out->len, &tmp, w, err);
            if (st) {
                tok_buf_free(&tmp);
                return st;
            }
            tok_buf t = *out;
            *out = tmp;
            tmp = t;
        }
        tok_buf_free(&tmp);
        return OCT_OK;
    }
    case TOK_NORM_NFC:
    case TOK_NORM_NFD:
    case TOK_NORM_NFKC:
    case TOK_NORM_NFKD: {
        tok_nf_form f = n->kind == TOK_NORM_NFC    ? TOK_NF_C
                        : n->kind == TOK_NORM_NFD  ? TOK_NF_D
                        : n->kind == TOK_NORM_NFKC ? TOK_NF_KC
                                                   : TOK_NF_KD;
        if (!tok_unicode_normalize(f, s, len, out))
            return nomem(err);
        return OCT_OK;
    }
    case TOK_NORM_LOWERCASE:
        if (!tok_unicode_lowercase(s, len, out))
            return nomem(err);
        return OCT_OK;
    case TOK_NORM_STRIP: {
        size_t a = 0, b = len;
        if (n->strip_left)
            while (a < b) {
                uint32_t cp;
                size_t l = tok_utf8_next(s + a, b - a, &cp);
                if (!tok_is_whitespace(cp))
                    break;
                a += l;
            }
        if (n->strip_right)
            while (b > a) {
                size_t p = b - 1;
                while (p > a && ((unsigned char)s[p] & 0xC0) == 0x80)
                    p--;
                uint32_t cp;
                tok_utf8_next(s + p, b - p, &cp);
                if (!tok_is_whitespace(cp))
                    break;
                b = p;
            }
        if (!tok_buf_append(out, s + a, b - a))
            return nomem(err);
        return OCT_OK;
    }
    case TOK_NORM_REPLACE: return replace_all(n->re, s, len, n->str, n->str_len, out, w, err);
    case TOK_NORM_PREPEND:
        if (len > 0 && !tok_buf_append(out, n->str, n->str_len))
            return nomem(err);
        if (!tok_buf_append(out, s, len))
            return nomem(err);
        return OCT_OK;
    }
    return oct_error_set(err, OCT_ERR_INTERNAL, -1, "bad normalizer kind");
}

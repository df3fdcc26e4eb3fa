/* decoder.c — tokenizer.json "decoder": Sequence, ByteLevel, Metaspace,
 * Replace, ByteFallback, Fuse, Strip.  Each works on a list of token strings
 * and returns a list (like `tokenizers`' decode_chain); the final text is
 * the concatenation. */
#include <string.h>

#include "tokenizer/tok_internal.h"

void tok_dec_free(tok_dec *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n_children; i++)
        tok_dec_free(d->children[i]);
    oct_free(d->children);
    if (d->re)
        pcre2_code_free(d->re);
    oct_free(d->str);
    oct_free(d);
}

static oct_status nomem(oct_error *err)
{
    return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
}

static oct_status one_char(const json_t *j, const char *key, const char *dflt, const char *path,
                           uint32_t *cp, oct_error *err)
{
    const char *s;
    size_t n;
    oct_status st = tok_json_str(j, key, dflt == NULL, &s, &n, path, err);
    if (st)
        return st;
    if (!s) {
        s = dflt;
        n = strlen(dflt);
    }
    if (n == 0 || tok_utf8_len((unsigned char)s[0]) != n)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.%s: only a single character is supported", path, key);
    tok_utf8_next(s, n, cp);
    return OCT_OK;
}

static oct_status dec_slot(const json_t *elem, void *slot, const char *path, oct_error *err)
{
    return tok_dec_parse(elem, slot, path, err);
}

oct_status tok_dec_parse(const json_t *j, tok_dec **out, const char *path, oct_error *err)
{
    *out = NULL;
    if (!json_is_object(j))
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s: expected an object", path);
    const char *type;
    oct_status st = tok_json_str(j, "type", true, &type, NULL, path, err);
    if (st)
        return st;
    tok_dec *d = oct_calloc(1, sizeof *d);
    if (!d)
        return nomem(err);
    if (strcmp(type, "Sequence") == 0) {
        void *kids;
        d->kind = TOK_DEC_SEQUENCE;
        st = tok_json_sequence(j, "decoders", path, dec_slot, sizeof *d->children, &kids,
                               &d->n_children, err);
        d->children = kids;
        if (st)
            goto fail;
    } else if (strcmp(type, "ByteLevel") == 0) {
        static const char *const keys[] = {"type", "add_prefix_space", "trim_offsets", "use_regex",
                                           NULL};
        d->kind = TOK_DEC_BYTELEVEL;
        if ((st = tok_json_known_keys(j, keys, path, err)))
            goto fail;
    } else if (strcmp(type, "Metaspace") == 0) {
        static const char *const keys[] = {
            "type", "replacement", "add_prefix_space", "prepend_scheme", "split", "str_rep", NULL};
        d->kind = TOK_DEC_METASPACE;
        const char *ps;
        if ((st = tok_json_known_keys(j, keys, path, err)) ||
            (st = one_char(j, "replacement", "\xE2\x96\x81", path, &d->ch, err)) ||
            (st = tok_json_str(j, "prepend_scheme", false, &ps, NULL, path, err)))
            goto fail;
        if (ps) {
            if (strcmp(ps, "always") && strcmp(ps, "never") && strcmp(ps, "first")) {
                st = oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                   "%s.prepend_scheme: unsupported value '%s'", path, ps);
                goto fail;
            }
            d->prepend = strcmp(ps, "never") != 0;
        } else if ((st = tok_json_bool(j, "add_prefix_space", true, &d->prepend, path, err))) {
            goto fail;
        }
    } else if (strcmp(type, "Replace") == 0) {
        static const char *const keys[] = {"type", "pattern", "content", NULL};
        d->kind = TOK_DEC_REPLACE;
        const char *content;
        size_t len;
        const json_t *pat = json_object_get(j, "pattern");
        const json_t *s = json_object_get(pat, "String");
        const json_t *r = json_object_get(pat, "Regex");
        char what[300];
        snprintf(what, sizeof what, "%s.pattern", path);
        if ((st = tok_json_known_keys(j, keys, path, err)) ||
            (st = tok_json_str(j, "content", true, &content, &len, path, err)))
            goto fail;
        if (json_is_string(s))
            st = tok_regex_compile(json_string_value(s), json_string_length(s), true, &d->re, what,
                                   err);
        else if (json_is_string(r))
            st = tok_regex_compile(json_string_value(r), json_string_length(r), false, &d->re, what,
                                   err);
        else
            st = oct_error_set(err, OCT_ERR_FORMAT, -1,
                               "%s.pattern: expected {\"String\": ...} or {\"Regex\": ...}", path);
        if (st)
            goto fail;
        d->str = oct_malloc(len + 1);
        if (!d->str) {
            st = nomem(err);
            goto fail;
        }
        memcpy(d->str, content, len);
        d->str[len] = 0;
        d->str_len = len;
    } else if (strcmp(type, "ByteFallback") == 0 || strcmp(type, "Fuse") == 0) {
        static const char *const keys[] = {"type", NULL};
        d->kind = type[0] == 'B' ? TOK_DEC_BYTEFALLBACK : TOK_DEC_FUSE;
        if ((st = tok_json_known_keys(j, keys, path, err)))
            goto fail;
    } else if (strcmp(type, "Strip") == 0) {
        static const char *const keys[] = {"type", "content", "start", "stop", NULL};
        d->kind = TOK_DEC_STRIP;
        const json_t *a = json_object_get(j, "start"), *b = json_object_get(j, "stop");
        if ((st = tok_json_known_keys(j, keys, path, err)) ||
            (st = one_char(j, "content", NULL, path, &d->ch, err)))
            goto fail;
        if (!json_is_integer(a) || !json_is_integer(b) || json_integer_value(a) < 0 ||
            json_integer_value(b) < 0) {
            st = oct_error_set(err, OCT_ERR_FORMAT, -1,
                               "%s: start and stop must be non-negative integers", path);
            goto fail;
        }
        d->start = json_integer_value(a);
        d->stop = json_integer_value(b);
    } else {
        st =
            oct_error_set(err, OCT_ERR_UNSUPPORTED, -1, "%s: unsupported decoder '%s'", path, type);
        goto fail;
    }
    *out = d;
    return OCT_OK;
fail:
    tok_dec_free(d);
    return st;
}

/* ------------------------------------------------------------ string list */

bool tok_strlist_push(tok_strlist *l, const char *s, size_t n)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        size_t *o = oct_realloc(l->off, cap * sizeof *o);
        if (!o)
            return false;
        l->off = o;
        size_t *ln = oct_realloc(l->len, cap * sizeof *ln);
        if (!ln)
            return false;
        l->len = ln;
        l->cap = cap;
    }
    l->off[l->n] = l->bytes.len;
    l->len[l->n] = n;
    if (!tok_buf_append(&l->bytes, s, n))
        return false;
    l->n++;
    return true;
}

void tok_strlist_clear(tok_strlist *l)
{
    l->n = 0;
    l->bytes.len = 0;
}

void tok_strlist_free(tok_strlist *l)
{
    tok_buf_free(&l->bytes);
    oct_free(l->off);
    oct_free(l->len);
    memset(l, 0, sizeof *l);
}

#define STR(l, i) ((l)->bytes.data + (l)->off[i])

/* Appends token i of `in` to `b`, with every occurrence of code point `from`
 * replaced by `to` (or dropped when drop is true). */
static bool replace_char(tok_buf *b, const char *s, size_t n, uint32_t from, bool drop)
{
    for (size_t k = 0; k < n;) {
        uint32_t cp;
        size_t l = tok_utf8_next(s + k, n - k, &cp);
        if (cp == from) {
            if (!drop && !tok_buf_putc(b, ' '))
                return false;
        } else if (!tok_buf_append(b, s + k, l)) {
            return false;
        }
        k += l;
    }
    return true;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool flush_bytes(tok_strlist *out, tok_buf *pending)
{
    if (!pending->len)
        return true;
    bool ok = true;
    if (tok_utf8_validate(pending->data, pending->len) == pending->len) {
        ok = tok_strlist_push(out, pending->data, pending->len);
    } else {
        for (size_t i = 0; i < pending->len && ok; i++)
            ok = tok_strlist_push(out, "\xEF\xBF\xBD", 3);
    }
    pending->len = 0;
    return ok;
}

static oct_status apply_one(const tok_dec *d, tok_strlist *in, tok_strlist *out, tok_work *w,
                            oct_error *err)
{
    tok_buf tmp = {0};
    oct_status st = OCT_OK;
    tok_strlist_clear(out);
    switch (d->kind) {
    case TOK_DEC_SEQUENCE:
        st = OCT_ERR_INTERNAL; /* handled by tok_dec_apply */
        break;
    case TOK_DEC_BYTELEVEL: {
        const tok_bytemap *bm = tok_bytemap_get();
        for (size_t i = 0; i < in->n; i++) {
            const char *s = STR(in, i);
            size_t n = in->len[i];
            size_t mark = tmp.len;
            bool all = true;
            for (size_t k = 0; k < n && all;) {
                uint32_t cp;
                size_t l = tok_utf8_next(s + k, n - k, &cp);
                if (cp < 324 && bm->cp_to_byte[cp] >= 0) {
                    if (!tok_buf_putc(&tmp, (char)bm->cp_to_byte[cp]))
                        goto nomem;
                } else {
                    all = false;
                }
                k += l;
            }
            if (!all) {
                tmp.len = mark;
                if (!tok_buf_append(&tmp, s, n))
                    goto nomem;
            }
        }
        tok_buf lossy = {0};
        if (!tok_utf8_lossy(&lossy, (const unsigned char *)tmp.data, tmp.len) ||
            !tok_strlist_push(out, lossy.data ? lossy.data : "", lossy.len)) {
            tok_buf_free(&lossy);
            goto nomem;
        }
        tok_buf_free(&lossy);
        break;
    }
    case TOK_DEC_METASPACE:
        for (size_t i = 0; i < in->n; i++) {
            tmp.len = 0;
            if (!replace_char(&tmp, STR(in, i), in->len[i], d->ch, i == 0 && d->prepend) ||
                !tok_strlist_push(out, tmp.data ? tmp.data : "", tmp.len))
                goto nomem;
        }
        break;
    case TOK_DEC_REPLACE:
        for (size_t i = 0; i < in->n; i++) {
            const char *s = STR(in, i);
            size_t n = in->len[i];
            if ((st = tok_regex_find_all(d->re, w->md, s, n, &w->ranges, err)))
                break;
            tmp.len = 0;
            size_t prev = 0;
            for (size_t k = 0; k < w->ranges.n; k++) {
                if (!tok_buf_append(&tmp, s + prev, w->ranges.v[2 * k] - prev) ||
                    !tok_buf_append(&tmp, d->str, d->str_len))
                    goto nomem;
                prev = w->ranges.v[2 * k + 1];
            }
            if (!tok_buf_append(&tmp, s + prev, n - prev) ||
                !tok_strlist_push(out, tmp.data, tmp.len))
                goto nomem;
        }
        break;
    case TOK_DEC_BYTEFALLBACK:
        for (size_t i = 0; i < in->n; i++) {
            const char *s = STR(in, i);
            size_t n = in->len[i];
            int hi, lo;
            if (n == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' && (hi = hexval(s[3])) >= 0 &&
                (lo = hexval(s[4])) >= 0) {
                if (!tok_buf_putc(&tmp, (char)(hi * 16 + lo)))
                    goto nomem;
                continue;
            }
            if (!flush_bytes(out, &tmp) || !tok_strlist_push(out, STR(in, i), n))
                goto nomem;
        }
        if (!flush_bytes(out, &tmp))
            goto nomem;
        break;
    case TOK_DEC_FUSE:
        for (size_t i = 0; i < in->n; i++)
            if (!tok_buf_append(&tmp, STR(in, i), in->len[i]))
                goto nomem;
        if (!tok_strlist_push(out, tmp.data ? tmp.data : "", tmp.len))
            goto nomem;
        break;
    case TOK_DEC_STRIP:
        for (size_t i = 0; i < in->n; i++) {
            const char *s = STR(in, i);
            size_t n = in->len[i];
            size_t a = 0, b = n;
            for (int64_t k = 0; k < d->start && a < b; k++) {
                uint32_t cp;
                size_t l = tok_utf8_next(s + a, b - a, &cp);
                if (cp != d->ch)
                    break;
                a += l;
            }
            for (int64_t k = 0; k < d->stop && b > a; k++) {
                size_t p = b - 1;
                while (p > a && ((unsigned char)s[p] & 0xC0) == 0x80)
                    p--;
                uint32_t cp;
                tok_utf8_next(s + p, b - p, &cp);
                if (cp != d->ch)
                    break;
                b = p;
            }
            if (!tok_strlist_push(out, STR(in, i) + a, b - a))
                goto nomem;
        }
        break;
    }
    tok_buf_free(&tmp);
    return st;
nomem:
    tok_buf_free(&tmp);
    return nomem(err);
}

static oct_status dec_apply(const tok_dec *d, tok_strlist *in, tok_strlist *out, tok_work *w,
                            oct_error *err)
{
    if (d->kind != TOK_DEC_SEQUENCE) {
        oct_status st = apply_one(d, in, out, w, err);
        return st;
    }
    /* ping-pong: the result of each stage becomes the next stage's input */
    tok_strlist *a = in, *b = out;
    for (size_t i = 0; i < d->n_children; i++) {
        oct_status st = dec_apply(d->children[i], a, b, w, err);
        if (st)
            return st;
        tok_strlist *t = a;
        a = b;
        b = t;
    }
    if (a != out) {
        tok_strlist t = *out;
        *out = *a;
        *a = t;
    }
    return OCT_OK;
}

oct_status tok_dec_apply(const tok_dec *d, tok_strlist *in, tok_strlist *out, oct_error *err)
{
    tok_work w = {0};
    w.md = pcre2_match_data_create(4, NULL);
    if (!w.md)
        return nomem(err);
    oct_status st = dec_apply(d, in, out, &w, err);
    tok_work_free(&w);
    return st;
}

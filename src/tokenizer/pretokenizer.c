/* pretokenizer.c — tokenizer.json "pre_tokenizer": Sequence, ByteLevel,
 * Split, Metaspace, Digits, Punctuation, Whitespace, WhitespaceSplit.
 *
 * Every splitter is expressed as a regex plus a split behavior, exactly like
 * `tokenizers` does it: the matches and the gaps between them partition the
 * piece; the behavior decides which parts are kept, merged or dropped; empty
 * parts are dropped. */
#include <pthread.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

/* The regex ByteLevel uses when use_regex is true (GPT-2's). */
static const char k_gpt2_regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* Rust char::is_whitespace as a one-character class. */
static const char k_ws_char[] =
    "[\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}]";

/* Rust char::is_ascii_punctuation || unicode punctuation (P*), one character. */
static const char k_punct_char[] =
    "[\\p{P}\\x{21}-\\x{2F}\\x{3A}-\\x{40}\\x{5B}-\\x{60}\\x{7B}-\\x{7E}]";

/* ------------------------------------------------------- byte <-> unicode */

static tok_bytemap g_bytemap;
static pthread_once_t g_bytemap_once = PTHREAD_ONCE_INIT;

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the
 * other 68 bytes map to U+0100.. in byte order. */
static void bytemap_init(void)
{
    int next = 256;
    for (int i = 0; i < 324; i++)
        g_bytemap.cp_to_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        int cp = printable ? b : next++;
        g_bytemap.cp_to_byte[cp] = (int16_t)b;
        if (cp < 0x80) {
            g_bytemap.utf8[b][0] = (char)cp;
            g_bytemap.utf8_len[b] = 1;
        } else {
            g_bytemap.utf8[b][0] = (char)(0xC0 | (cp >> 6));
            g_bytemap.utf8[b][1] = (char)(0x80 | (cp & 0x3F));
            g_bytemap.utf8_len[b] = 2;
        }
    }
}

const tok_bytemap *tok_bytemap_get(void)
{
    pthread_once(&g_bytemap_once, bytemap_init);
    return &g_bytemap;
}

/* ------------------------------------------------------------------ parse */

void tok_pre_free(tok_pre *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_children; i++)
        tok_pre_free(p->children[i]);
    oct_free(p->children);
    if (p->re)
        pcre2_code_free(p->re);
    oct_free(p);
}

static oct_status parse_behavior(const json_t *j, const char *path, tok_split_behavior dflt,
                                 tok_split_behavior *out, oct_error *err)
{
    const char *b;
    oct_status st = tok_json_str(j, "behavior", false, &b, NULL, path, err);
    if (st)
        return st;
    if (!b)
        *out = dflt;
    else if (strcmp(b, "Removed") == 0)
        *out = TOK_SPLIT_REMOVED;
    else if (strcmp(b, "Isolated") == 0)
        *out = TOK_SPLIT_ISOLATED;
    else if (strcmp(b, "MergedWithPrevious") == 0)
        *out = TOK_SPLIT_MERGED_PREV;
    else if (strcmp(b, "MergedWithNext") == 0)
        *out = TOK_SPLIT_MERGED_NEXT;
    else if (strcmp(b, "Contiguous") == 0)
        *out = TOK_SPLIT_CONTIGUOUS;
    else
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1, "%s.behavior: unsupported value '%s'",
                             path, b);
    return OCT_OK;
}

static oct_status parse_prepend_scheme(const json_t *j, const char *path, tok_prepend_scheme *out,
                                       oct_error *err)
{
    const char *s;
    oct_status st = tok_json_str(j, "prepend_scheme", false, &s, NULL, path, err);
    if (st)
        return st;
    if (!s) {
        /* older files: add_prefix_space (default true) */
        bool aps;
        if ((st = tok_json_bool(j, "add_prefix_space", true, &aps, path, err)))
            return st;
        *out = aps ? TOK_PREPEND_ALWAYS : TOK_PREPEND_NEVER;
    } else if (strcmp(s, "always") == 0) {
        *out = TOK_PREPEND_ALWAYS;
    } else if (strcmp(s, "never") == 0) {
        *out = TOK_PREPEND_NEVER;
    } else if (strcmp(s, "first") == 0) {
        *out = TOK_PREPEND_FIRST;
    } else {
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "%s.prepend_scheme: unsupported value '%s'", path, s);
    }
    return OCT_OK;
}

static oct_status parse_replacement(const json_t *j, const char *path, uint32_t *cp, char *utf8,
                                    size_t *len, oct_error *err)
{
    const char *r;
    size_t n;
    oct_status st = tok_json_str(j, "replacement", false, &r, &n, path, err);
    if (st)
        return st;
    if (!r) {
        r = "\xE2\x96\x81"; /* U+2581 */
        n = 3;
    }
    if (n == 0 || n > 4 || tok_utf8_len((unsigned char)r[0]) != n)
        return oct_error_set(err, OCT_ERR_FORMAT, -1,
                             "%s.replacement: expected exactly one character", path);
    tok_utf8_next(r, n, cp);
    memcpy(utf8, r, n);
    utf8[n] = 0;
    *len = n;
    return OCT_OK;
}

static oct_status pre_slot(const json_t *elem, void *slot, const char *path, oct_error *err)
{
    return tok_pre_parse(elem, slot, path, err);
}

oct_status tok_pre_parse(const json_t *j, tok_pre **out, const char *path, oct_error *err)
{
    *out = NULL;
    if (!json_is_object(j))
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s: expected an object", path);
    const char *type;
    oct_status st = tok_json_str(j, "type", true, &type, NULL, path, err);
    if (st)
        return st;
    tok_pre *p = oct_calloc(1, sizeof *p);
    if (!p)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    char what[300];
    snprintf(what, sizeof what, "%s", path);
    if (strcmp(type, "Sequence") == 0) {
        void *kids;
        p->kind = TOK_PRE_SEQUENCE;
        st = tok_json_sequence(j, "pretokenizers", path, pre_slot, sizeof *p->children, &kids,
                               &p->n_children, err);
        p->children = kids;
        if (st)
            goto fail;
    } else if (strcmp(type, "ByteLevel") == 0) {
        static const char *const keys[] = {"type", "add_prefix_space", "trim_offsets", "use_regex",
                                           NULL};
        p->kind = TOK_PRE_BYTELEVEL;
        if ((st = tok_json_known_keys(j, keys, path, err)) ||
            (st = tok_json_bool(j, "add_prefix_space", true, &p->add_prefix_space, path, err)) ||
            (st = tok_json_bool(j, "use_regex", true, &p->use_regex, path, err)))
            goto fail;
        p->behavior = TOK_SPLIT_ISOLATED;
        if (p->use_regex && (st = tok_regex_compile(k_gpt2_regex, sizeof k_gpt2_regex - 1, false,
                                                    &p->re, what, err)))
            goto fail;
    } else if (strcmp(type, "Split") == 0) {
        static const char *const keys[] = {"type", "pattern", "behavior", "invert", NULL};
        p->kind = TOK_PRE_SPLIT;
        const json_t *pat = json_object_get(j, "pattern");
        const json_t *s = json_object_get(pat, "String");
        const json_t *r = json_object_get(pat, "Regex");
        if ((st = tok_json_known_keys(j, keys, path, err)) ||
            (st = parse_behavior(j, path, TOK_SPLIT_ISOLATED, &p->behavior, err)) ||
            (st = tok_json_bool(j, "invert", false, &p->invert, path, err)))
            goto fail;
        snprintf(what, sizeof what, "%s.pattern", path);
        if (json_is_string(s))
            st = tok_regex_compile(json_string_value(s), json_string_length(s), true, &p->re, what,
                                   err);
        else if (json_is_string(r))
            st = tok_regex_compile(json_string_value(r), json_string_length(r), false, &p->re, what,
                                   err);
        else
            st = oct_error_set(err, OCT_ERR_FORMAT, -1,
                               "%s.pattern: expected {\"String\": ...} or {\"Regex\": ...}", path);
        if (st)
            goto fail;
    } else if (strcmp(type, "Metaspace") == 0) {
        static const char *const keys[] = {
            "type", "replacement", "add_prefix_space", "prepend_scheme", "split", "str_rep", NULL};
        p->kind = TOK_PRE_METASPACE;
        if ((st = tok_json_known_keys(j, keys, path, err)) ||
            (st = parse_replacement(j, path, &p->replacement, p->rep_utf8, &p->rep_len, err)) ||
            (st = parse_prepend_scheme(j, path, &p->prepend, err)) ||
            (st = tok_json_bool(j, "split", true, &p->split, path, err)))
            goto fail;
        p->behavior = TOK_SPLIT_MERGED_NEXT;
        if (p->split && (st = tok_regex_compile(p->rep_utf8, p->rep_len, true, &p->re, what, err)))
            goto fail;
    } else if (strcmp(type, "Digits") == 0) {
        static const char *const keys[] = {"type", "individual_digits", NULL};
        bool individual;
        p->kind = TOK_PRE_SPLIT;
        if ((st = tok_json_known_keys(j, keys, path, err)) ||
            (st = tok_json_bool(j, "individual_digits", false, &individual, path, err)))
            goto fail;
        p->behavior = individual ? TOK_SPLIT_ISOLATED : TOK_SPLIT_CONTIGUOUS;
        if ((st = tok_regex_compile("\\p{N}", 5, false, &p->re, what, err)))
            goto fail;
    } else if (strcmp(type, "Punctuation") == 0) {
        static const char *const keys[] = {"type", "behavior", NULL};
        p->kind = TOK_PRE_SPLIT;
        if ((st = tok_json_known_keys(j, keys, path, err)) ||
            (st = parse_behavior(j, path, TOK_SPLIT_ISOLATED, &p->behavior, err)) ||
            (st = tok_regex_compile(k_punct_char, sizeof k_punct_char - 1, false, &p->re, what,
                                    err)))
            goto fail;
    } else if (strcmp(type, "Whitespace") == 0) {
        static const char *const keys[] = {"type", NULL};
        p->kind = TOK_PRE_SPLIT;
        p->behavior = TOK_SPLIT_REMOVED;
        p->invert = true;
        if ((st = tok_json_known_keys(j, keys, path, err)) ||
            (st = tok_regex_compile("\\w+|[^\\w\\s]+", 12, false, &p->re, what, err)))
            goto fail;
    } else if (strcmp(type, "WhitespaceSplit") == 0) {
        static const char *const keys[] = {"type", NULL};
        p->kind = TOK_PRE_SPLIT;
        p->behavior = TOK_SPLIT_REMOVED;
        if ((st = tok_json_known_keys(j, keys, path, err)) ||
            (st = tok_regex_compile(k_ws_char, sizeof k_ws_char - 1, false, &p->re, what, err)))
            goto fail;
    } else {
        st = oct_error_set(err, OCT_ERR_UNSUPPORTED, -1, "%s: unsupported pre_tokenizer '%s'", path,
                           type);
        goto fail;
    }
    *out = p;
    return OCT_OK;
fail:
    tok_pre_free(p);
    return st;
}

/* ------------------------------------------------------------------ apply */

static oct_status nomem(oct_error *err)
{
    return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
}

/* One part of a piece: [a, b) relative to the piece, and whether it matched. */
typedef struct part {
    size_t a, b;
    bool match;
} part;

/* Emits the kept parts of `seg` into w->alt.  The parts come from the match
 * ranges in w->ranges (relative to the piece) and the gaps between them. */
static oct_status split_seg(const tok_seg *seg, tok_split_behavior behavior, bool invert,
                            tok_work *w, oct_error *err)
{
    /* Build the partition on the fly and fold it with the behavior; `pend`
     * holds the part not yet emitted (merges may still extend it). */
    size_t n_r = w->ranges.n;
    size_t len = seg->len;
    bool have_pend = false;
    part pend = {0, 0, false};
    bool prev_match = false;

    /* For MergedWithNext we fold from the right: collect all parts first. */
    part *parts = NULL;
    size_t n_parts = 0;
    size_t cap = 2 * n_r + 2;
    parts = oct_malloc(cap * sizeof *parts);
    if (!parts)
        return nomem(err);
    size_t prev = 0;
    for (size_t i = 0; i < n_r; i++) {
        size_t a = w->ranges.v[2 * i], b = w->ranges.v[2 * i + 1];
        if (a > prev)
            parts[n_parts++] = (part){prev, a, invert};
        parts[n_parts++] = (part){a, b, !invert};
        prev = b;
    }
    if (prev < len)
        parts[n_parts++] = (part){prev, len, invert};

    oct_status st = OCT_OK;
#define EMIT(p)                                                                                    \
    do {                                                                                           \
        if ((p).b > (p).a && !tok_segs_push(&w->alt, seg->off + (p).a, (p).b - (p).a, -1,          \
                                            seg->origin0 && (p).a == 0)) {                         \
            st = nomem(err);                                                                       \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

    switch (behavior) {
    case TOK_SPLIT_ISOLATED:
        for (size_t i = 0; i < n_parts; i++)
            EMIT(parts[i]);
        break;
    case TOK_SPLIT_REMOVED:
        for (size_t i = 0; i < n_parts; i++)
            if (!parts[i].match)
                EMIT(parts[i]);
        break;
    case TOK_SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < n_parts; i++) {
            if (have_pend && parts[i].match == prev_match) {
                pend.b = parts[i].b;
            } else {
                if (have_pend)
                    EMIT(pend);
                pend = parts[i];
                have_pend = true;
            }
            prev_match = parts[i].match;
        }
        if (have_pend)
            EMIT(pend);
        break;
    case TOK_SPLIT_MERGED_PREV:
        for (size_t i = 0; i < n_parts; i++) {
            if (parts[i].match && !prev_match && have_pend) {
                pend.b = parts[i].b;
            } else {
                if (have_pend)
                    EMIT(pend);
                pend = parts[i];
                have_pend = true;
            }
            prev_match = parts[i].match;
        }
        if (have_pend)
            EMIT(pend);
        break;
    case TOK_SPLIT_MERGED_NEXT: {
        /* fold right to left into parts[] in place (reversed), then emit */
        size_t n_out = 0;
        for (size_t k = n_parts; k-- > 0;) {
            part p = parts[k];
            if (p.match && !prev_match && n_out > 0)
                parts[n_parts - n_out].a = p.a; /* extend the last folded part */
            else
                parts[n_parts - 1 - n_out++] = p;
            prev_match = p.match;
        }
        /* folded parts sit in parts[n_parts - n_out .. n_parts) in order */
        for (size_t i = n_parts - n_out; i < n_parts; i++)
            EMIT(parts[i]);
        break;
    }
    }
#undef EMIT
out:
    oct_free(parts);
    return st;
}

/* Applies one splitter (regex + behavior) to every non-token piece. */
static oct_status apply_split(const pcre2_code *re, tok_split_behavior behavior, bool invert,
                              tok_work *w, oct_error *err)
{
    w->alt.n = 0;
    for (size_t i = 0; i < w->segs.n; i++) {
        tok_seg seg = w->segs.v[i];
        if (seg.id >= 0) {
            if (!tok_segs_push(&w->alt, seg.off, seg.len, seg.id, seg.origin0))
                return nomem(err);
            continue;
        }
        oct_status st =
            tok_regex_find_all(re, w->md, w->text.data + seg.off, seg.len, &w->ranges, err);
        if (st)
            return st;
        if ((st = split_seg(&seg, behavior, invert, w, err)))
            return st;
    }
    tok_segs t = w->segs;
    w->segs = w->alt;
    w->alt = t;
    return OCT_OK;
}

/* Rewrites each non-token piece through fn (which writes into w->scratch). */
static oct_status rewrite_pieces(const tok_pre *p, tok_work *w, oct_error *err)
{
    const tok_bytemap *bm = tok_bytemap_get();
    for (size_t i = 0; i < w->segs.n; i++) {
        tok_seg *seg = &w->segs.v[i];
        if (seg->id >= 0)
            continue;
        tok_buf *s = &w->scratch;
        s->len = 0;
        const char *src = w->text.data + seg->off;
        if (p->kind == TOK_PRE_BYTELEVEL) {
            if (!tok_buf_reserve(s, seg->len * 2))
                return nomem(err);
            for (size_t k = 0; k < seg->len; k++) {
                unsigned char b = (unsigned char)src[k];
                memcpy(s->data + s->len, bm->utf8[b], bm->utf8_len[b]);
                s->len += bm->utf8_len[b];
            }
            s->data[s->len] = 0;
        } else { /* METASPACE: ' ' -> replacement, then the prepend scheme */
            bool prepend = false;
            bool starts_rep = seg->len >= p->rep_len && memcmp(src, p->rep_utf8, p->rep_len) == 0;
            bool starts_space = seg->len >= 1 && src[0] == ' ';
            if (p->prepend == TOK_PREPEND_ALWAYS)
                prepend = !starts_rep && !starts_space;
            else if (p->prepend == TOK_PREPEND_FIRST)
                prepend = !starts_rep && !starts_space && seg->origin0;
            if (prepend && !tok_buf_append(s, p->rep_utf8, p->rep_len))
                return nomem(err);
            for (size_t k = 0; k < seg->len; k++) {
                bool ok = src[k] == ' ' ? tok_buf_append(s, p->rep_utf8, p->rep_len)
                                        : tok_buf_putc(s, src[k]);
                if (!ok)
                    return nomem(err);
            }
        }
        size_t off = w->text.len;
        if (!tok_buf_append(&w->text, s->data, s->len))
            return nomem(err);
        seg->off = off;
        seg->len = s->len;
    }
    return OCT_OK;
}

oct_status tok_pre_apply(const tok_pre *p, tok_work *w, oct_error *err)
{
    oct_status st;
    switch (p->kind) {
    case TOK_PRE_SEQUENCE:
        for (size_t i = 0; i < p->n_children; i++)
            if ((st = tok_pre_apply(p->children[i], w, err)))
                return st;
        return OCT_OK;
    case TOK_PRE_SPLIT: return apply_split(p->re, p->behavior, p->invert, w, err);
    case TOK_PRE_BYTELEVEL:
        if (p->add_prefix_space) {
            for (size_t i = 0; i < w->segs.n; i++) {
                tok_seg *seg = &w->segs.v[i];
                if (seg->id >= 0 || (seg->len > 0 && w->text.data[seg->off] == ' '))
                    continue;
                size_t off = w->text.len;
                /* reserve first: the source bytes live in the same buffer */
                if (!tok_buf_reserve(&w->text, seg->len + 1))
                    return nomem(err);
                tok_buf_putc(&w->text, ' ');
                tok_buf_append(&w->text, w->text.data + seg->off, seg->len);
                seg->off = off;
                seg->len++;
            }
        }
        if (p->use_regex && (st = apply_split(p->re, TOK_SPLIT_ISOLATED, false, w, err)))
            return st;
        return rewrite_pieces(p, w, err);
    case TOK_PRE_METASPACE:
        if ((st = rewrite_pieces(p, w, err)))
            return st;
        if (p->split)
            return apply_split(p->re, TOK_SPLIT_MERGED_NEXT, false, w, err);
        return OCT_OK;
    }
    return oct_error_set(err, OCT_ERR_INTERNAL, -1, "bad pre_tokenizer kind");
}

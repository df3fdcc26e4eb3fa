/* encode.c — the encode pipeline (added tokens, normalizer, pre-tokenizer,
 * BPE, post-processor), decode, and the incremental (streaming) decoder. */
#include <string.h>

#include "tokenizer/tok_internal.h"

static oct_status nomem(oct_error *err)
{
    return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
}

/* Approximation of the regex \w used for single_word added tokens: ASCII
 * letters, digits, '_' and any non-space character beyond ASCII. */
static bool is_word_cp(uint32_t cp)
{
    if (cp < 0x80)
        return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
               cp == '_';
    return !tok_is_whitespace(cp);
}

static uint32_t last_cp(const char *s, size_t n)
{
    size_t p = n - 1;
    while (p > 0 && ((unsigned char)s[p] & 0xC0) == 0x80)
        p--;
    uint32_t cp;
    tok_utf8_next(s + p, n - p, &cp);
    return cp;
}

/* Splits one piece on the added tokens of `trie` into w->alt, with the
 * semantics of `tokenizers`' AddedVocabulary: leftmost-longest,
 * non-overlapping matches; single_word, lstrip and rstrip adjust or veto a
 * match; text between matches stays a piece to encode. */
static oct_status split_added(const oct_tokenizer *t, const tok_trie *trie, const tok_seg *seg,
                              tok_work *w, oct_error *err)
{
    const char *s = w->text.data + seg->off;
    size_t n = seg->len;
    size_t start_offset = 0;
    size_t i = 0;
    while (i < n) {
        int32_t node = trie->root_next[(unsigned char)s[i]];
        if (node < 0) {
            i++;
            continue;
        }
        int32_t best = -1;
        size_t best_end = 0;
        size_t j = i + 1;
        for (;;) {
            if (trie->nodes[node].token >= 0) {
                best = trie->nodes[node].token;
                best_end = j;
            }
            if (j >= n)
                break;
            int32_t c = trie->nodes[node].first_child;
            while (c >= 0 && trie->nodes[c].byte != (unsigned char)s[j])
                c = trie->nodes[c].next_sibling;
            if (c < 0)
                break;
            node = c;
            j++;
        }
        if (best < 0) {
            i++;
            continue;
        }
        const tok_added *a = &t->added[best];
        size_t start = i, stop = best_end;
        i = best_end; /* the matcher resumes after the raw match */
        if (a->single_word) {
            bool start_ok = start == 0 || !is_word_cp(last_cp(s, start));
            uint32_t next_cp = 0;
            if (stop < n)
                tok_utf8_next(s + stop, n - stop, &next_cp);
            bool stop_ok = stop == n || !is_word_cp(next_cp);
            if (!start_ok || !stop_ok)
                continue;
        }
        if (a->lstrip) {
            size_t ns = start;
            while (ns > 0) {
                size_t p = ns - 1;
                while (p > 0 && ((unsigned char)s[p] & 0xC0) == 0x80)
                    p--;
                uint32_t cp;
                tok_utf8_next(s + p, ns - p, &cp);
                if (!tok_is_whitespace(cp))
                    break;
                ns = p;
            }
            start = ns > start_offset ? ns : start_offset;
        }
        if (a->rstrip) {
            while (stop < n) {
                uint32_t cp;
                size_t l = tok_utf8_next(s + stop, n - stop, &cp);
                if (!tok_is_whitespace(cp))
                    break;
                stop += l;
            }
        }
        if (start_offset < start &&
            !tok_segs_push(&w->alt, seg->off + start_offset, start - start_offset, -1,
                           seg->origin0 && start_offset == 0))
            return nomem(err);
        if (!tok_segs_push(&w->alt, seg->off + start, stop - start, a->id, false))
            return nomem(err);
        start_offset = stop;
    }
    if (start_offset < n && !tok_segs_push(&w->alt, seg->off + start_offset, n - start_offset, -1,
                                           seg->origin0 && start_offset == 0))
        return nomem(err);
    return OCT_OK;
}

static void swap_segs(tok_work *w)
{
    tok_segs t = w->segs;
    w->segs = w->alt;
    w->alt = t;
}

static oct_status encode_ids(const oct_tokenizer *t, const char *text, size_t len, bool add_special,
                             tok_work *w, tok_ids *ids, oct_error *err)
{
    oct_status st;
    if (!tok_buf_append(&w->text, text, len) || !tok_segs_push(&w->segs, 0, len, -1, true))
        return nomem(err);

    /* 1. added tokens matched on the raw text */
    if (t->trie_raw.n) {
        w->alt.n = 0;
        for (size_t i = 0; i < w->segs.n; i++)
            if ((st = split_added(t, &t->trie_raw, &w->segs.v[i], w, err)))
                return st;
        swap_segs(w);
    }
    /* 2. normalize each remaining piece, then match the normalized tokens */
    if (t->normalizer || t->trie_norm.n) {
        w->alt.n = 0;
        for (size_t i = 0; i < w->segs.n; i++) {
            tok_seg seg = w->segs.v[i];
            if (seg.id < 0 && t->normalizer) {
                if ((st = tok_norm_apply(t->normalizer, w->text.data + seg.off, seg.len,
                                         &w->scratch, w, err)))
                    return st;
                seg.off = w->text.len;
                seg.len = w->scratch.len;
                if (!tok_buf_append(&w->text, w->scratch.data, w->scratch.len))
                    return nomem(err);
            }
            if (seg.id < 0 && t->trie_norm.n) {
                if ((st = split_added(t, &t->trie_norm, &seg, w, err)))
                    return st;
            } else if ((seg.id >= 0 || seg.len > 0) &&
                       !tok_segs_push(&w->alt, seg.off, seg.len, seg.id, seg.origin0)) {
                return nomem(err);
            }
        }
        swap_segs(w);
    }
    /* 3. pre-tokenize */
    if (t->pre && (st = tok_pre_apply(t->pre, w, err)))
        return st;
    /* 4. the model */
    for (size_t i = 0; i < w->segs.n; i++) {
        const tok_seg *seg = &w->segs.v[i];
        if (seg->id >= 0) {
            if (!tok_ids_push(ids, seg->id))
                return nomem(err);
        } else if ((st = tok_bpe_encode(&t->bpe, w->text.data + seg->off, seg->len, w, ids, err))) {
            return st;
        }
    }
    /* 5. post-processor */
    if (add_special && t->post && tok_post_apply(t->post, ids) != OCT_OK)
        return nomem(err);
    return OCT_OK;
}

oct_status oct_tokenizer_encode(const oct_tokenizer *t, const char *text, size_t len,
                                bool add_special_tokens, oct_token_ids *out, oct_error *err)
{
    if (!t || !out || (!text && len))
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "encode: NULL argument");
    size_t bad = tok_utf8_validate(text ? text : "", len);
    if (bad != len)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, (int64_t)bad,
                             "encode: invalid UTF-8 at byte %zu", bad);
    tok_work w = {0};
    w.md = pcre2_match_data_create(4, NULL);
    tok_ids ids = {out->ids, 0, (size_t)out->cap};
    oct_status st =
        w.md ? encode_ids(t, text ? text : "", len, add_special_tokens, &w, &ids, err) : nomem(err);
    out->ids = ids.v;
    out->cap = (int64_t)ids.cap;
    out->n = st == OCT_OK ? (int64_t)ids.n : 0;
    tok_work_free(&w);
    return st;
}

void oct_token_ids_free(oct_token_ids *v)
{
    if (!v)
        return;
    oct_free(v->ids);
    v->ids = NULL;
    v->n = v->cap = 0;
}

/* ------------------------------------------------------------------ decode */

static oct_status decode_to(const oct_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
                            tok_buf *out, oct_error *err)
{
    tok_strlist in = {0}, res = {0};
    oct_status st = OCT_OK;
    out->len = 0;
    if (!tok_buf_append(out, "", 0))
        return nomem(err);
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *s = tok_id_str(t, ids[i], &len);
        if (!s || (skip_special && oct_tokenizer_is_special(t, ids[i])))
            continue;
        if (!tok_strlist_push(&in, s, len)) {
            st = nomem(err);
            goto out;
        }
    }
    if (t->decoder) {
        if ((st = tok_dec_apply(t->decoder, &in, &res, err)))
            goto out;
        for (size_t i = 0; i < res.n; i++)
            if (!tok_buf_append(out, res.bytes.data + res.off[i], res.len[i])) {
                st = nomem(err);
                goto out;
            }
    } else {
        for (size_t i = 0; i < in.n; i++)
            if ((i > 0 && !tok_buf_putc(out, ' ')) ||
                !tok_buf_append(out, in.bytes.data + in.off[i], in.len[i])) {
                st = nomem(err);
                goto out;
            }
    }
out:
    tok_strlist_free(&in);
    tok_strlist_free(&res);
    return st;
}

oct_status oct_tokenizer_decode(const oct_tokenizer *t, const int32_t *ids, int64_t n,
                                bool skip_special_tokens, char **text_out, size_t *len_out,
                                oct_error *err)
{
    if (!t || !text_out || n < 0 || (!ids && n))
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "decode: bad argument");
    *text_out = NULL;
    tok_buf b = {0};
    oct_status st = decode_to(t, ids, (size_t)n, skip_special_tokens, &b, err);
    if (st) {
        tok_buf_free(&b);
        return st;
    }
    *text_out = b.data;
    if (len_out)
        *len_out = b.len;
    return OCT_OK;
}

void oct_tokenizer_text_free(char *text)
{
    oct_free(text);
}

/* -------------------------------------------------------- stream decoding */

/* Decodes a window ids[prefix..] twice, with and without the ids not yet
 * emitted, and emits the difference once it does not end in U+FFFD (the
 * decoders' stand-in for an incomplete character).  Decoding the window from
 * the previous emission point keeps decoders that treat the first token
 * specially (Metaspace, Strip) consistent. */
struct oct_detokenizer {
    const oct_tokenizer *tok;
    bool skip_special;
    tok_ids ids;
    size_t prefix, read; /* offsets into ids */
    tok_buf prev, cur, out;
};

oct_status oct_detokenizer_new(const oct_tokenizer *tok, bool skip_special_tokens,
                               oct_detokenizer **out, oct_error *err)
{
    if (!tok || !out)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "detokenizer: NULL argument");
    oct_detokenizer *d = oct_calloc(1, sizeof *d);
    if (!d)
        return nomem(err);
    d->tok = tok;
    d->skip_special = skip_special_tokens;
    *out = d;
    return OCT_OK;
}

void oct_detokenizer_free(oct_detokenizer *d)
{
    if (!d)
        return;
    tok_ids_free(&d->ids);
    tok_buf_free(&d->prev);
    tok_buf_free(&d->cur);
    tok_buf_free(&d->out);
    oct_free(d);
}

static bool ends_with_fffd(const tok_buf *b)
{
    return b->len >= 3 && memcmp(b->data + b->len - 3, "\xEF\xBF\xBD", 3) == 0;
}

static oct_status emit_window(oct_detokenizer *d, bool force, const char **text, size_t *len,
                              oct_error *err)
{
    oct_status st;
    d->out.len = 0;
    if (!tok_buf_append(&d->out, "", 0))
        return nomem(err);
    if ((st = decode_to(d->tok, d->ids.v + d->prefix, d->read - d->prefix, d->skip_special,
                        &d->prev, err)) ||
        (st = decode_to(d->tok, d->ids.v + d->prefix, d->ids.n - d->prefix, d->skip_special,
                        &d->cur, err)))
        return st;
    if (d->cur.len > d->prev.len && (force || !ends_with_fffd(&d->cur))) {
        size_t common = d->prev.len;
        if (memcmp(d->cur.data, d->prev.data, common) != 0)
            common = 0; /* a decoder rewrote earlier text: should not happen */
        if (!tok_buf_append(&d->out, d->cur.data + common, d->cur.len - common))
            return nomem(err);
        d->prefix = d->read;
        d->read = d->ids.n;
        /* drop ids that no later window will look at */
        if (d->prefix > 0) {
            memmove(d->ids.v, d->ids.v + d->prefix, (d->ids.n - d->prefix) * sizeof *d->ids.v);
            d->ids.n -= d->prefix;
            d->read -= d->prefix;
            d->prefix = 0;
        }
    }
    *text = d->out.data;
    if (len)
        *len = d->out.len;
    return OCT_OK;
}

oct_status oct_detokenizer_push(oct_detokenizer *d, int32_t id, const char **text, size_t *len,
                                oct_error *err)
{
    if (!d || !text)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "detokenizer: NULL argument");
    if (!tok_ids_push(&d->ids, id))
        return nomem(err);
    return emit_window(d, false, text, len, err);
}

oct_status oct_detokenizer_flush(oct_detokenizer *d, const char **text, size_t *len, oct_error *err)
{
    if (!d || !text)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "detokenizer: NULL argument");
    return emit_window(d, true, text, len, err);
}

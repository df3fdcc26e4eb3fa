/* bpe.c — the BPE model of tokenizer.json: vocab, merges (either "a b"
 * strings or [a, b] pairs), unk_token / fuse_unk, byte_fallback (<0xNN>
 * tokens), ignore_merges, continuing_subword_prefix, end_of_word_suffix.
 *
 * Merging follows `tokenizers` step for step: a min-heap of candidate pairs
 * ordered by (rank, position); a popped entry is applied only while its
 * position still holds a pair whose merge yields the same new id.  That rule
 * (not "lowest rank first" in the abstract) is what defines the output when
 * two different pairs merge into the same token. */
#include <string.h>

#include "tokenizer/tok_internal.h"

typedef struct bpe_sym {
    int32_t id;
    int32_t prev, next; /* indices, -1 none */
    uint32_t len;       /* bytes of the piece it covers; 0 = merged away */
} bpe_sym;

typedef struct bpe_cand {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
} bpe_cand;

void tok_bpe_free(tok_bpe *bpe)
{
    tok_strmap_free(&bpe->vocab);
    tok_mergemap_free(&bpe->merges);
    oct_free(bpe->unk_token);
    oct_free(bpe->cont_prefix);
    oct_free(bpe->eow_suffix);
    memset(bpe, 0, sizeof *bpe);
}

static oct_status opt_str(const json_t *m, const char *key, char **out, oct_error *err)
{
    const char *s;
    size_t n;
    oct_status st = tok_json_str(m, key, false, &s, &n, "model", err);
    if (st || !s)
        return st;
    *out = oct_strndup(s, n);
    if (!*out)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    return OCT_OK;
}

static oct_status vocab_id(const tok_bpe *bpe, const char *s, size_t n, size_t merge_idx,
                           int32_t *id, oct_error *err)
{
    if (!tok_strmap_get(&bpe->vocab, s, n, id))
        return oct_error_set(err, OCT_ERR_FORMAT, -1,
                             "model.merges[%zu]: token '%.*s' is not in model.vocab", merge_idx,
                             (int)(n > 100 ? 100 : n), s);
    return OCT_OK;
}

oct_status tok_bpe_parse(const json_t *m, tok_bpe *bpe, oct_error *err)
{
    static const char *const keys[] = {"type",
                                       "dropout",
                                       "unk_token",
                                       "continuing_subword_prefix",
                                       "end_of_word_suffix",
                                       "fuse_unk",
                                       "byte_fallback",
                                       "ignore_merges",
                                       "vocab",
                                       "merges",
                                       NULL};
    memset(bpe, 0, sizeof *bpe);
    bpe->unk_id = -1;
    for (int i = 0; i < 256; i++)
        bpe->byte_ids[i] = -1;
    if (!json_is_object(m))
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "model: expected an object");
    const char *type;
    oct_status st = tok_json_str(m, "type", false, &type, NULL, "model", err);
    if (st)
        return st;
    if (type && strcmp(type, "BPE") != 0)
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "model.type: unsupported model '%s' (only BPE)", type);
    if ((st = tok_json_known_keys(m, keys, "model", err)))
        return st;
    const json_t *dropout = json_object_get(m, "dropout");
    if (dropout && !json_is_null(dropout) &&
        !(json_is_number(dropout) && json_number_value(dropout) == 0.0))
        return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                             "model.dropout: BPE dropout is not supported (encoding would be "
                             "random)");
    if ((st = tok_json_bool(m, "fuse_unk", false, &bpe->fuse_unk, "model", err)) ||
        (st = tok_json_bool(m, "byte_fallback", false, &bpe->byte_fallback, "model", err)) ||
        (st = tok_json_bool(m, "ignore_merges", false, &bpe->ignore_merges, "model", err)) ||
        (st = opt_str(m, "unk_token", &bpe->unk_token, err)) ||
        (st = opt_str(m, "continuing_subword_prefix", &bpe->cont_prefix, err)) ||
        (st = opt_str(m, "end_of_word_suffix", &bpe->eow_suffix, err)))
        return st;

    const json_t *vocab = json_object_get(m, "vocab");
    if (!json_is_object(vocab))
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "model.vocab: expected an object");
    const char *key;
    const json_t *val;
    json_object_foreach(tok_json_mut(vocab), key, val)
    {
        json_int_t id = json_is_integer(val) ? json_integer_value(val) : -1;
        if (id < 0 || id >= INT32_MAX)
            return oct_error_set(err, OCT_ERR_FORMAT, -1,
                                 "model.vocab['%.100s']: expected a non-negative integer id", key);
        /* jansson's object keys are NUL-terminated; tokens with an embedded
         * NUL are looked up by their prefix, which no real vocab has. */
        size_t klen = strlen(key);
        if (!tok_strmap_put(&bpe->vocab, key, klen, (int32_t)id))
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        if (klen == 6 && key[0] == '<' && key[1] == '0' && key[2] == 'x' && key[5] == '>') {
            unsigned v = 0;
            bool ok = true;
            for (int i = 3; i < 5; i++) {
                char c = key[i];
                v <<= 4;
                if (c >= '0' && c <= '9')
                    v |= (unsigned)(c - '0');
                else if (c >= 'A' && c <= 'F')
                    v |= (unsigned)(c - 'A' + 10);
                else
                    ok = false;
            }
            if (ok)
                bpe->byte_ids[v] = (int32_t)id;
        }
    }
    if (bpe->unk_token &&
        !tok_strmap_get(&bpe->vocab, bpe->unk_token, strlen(bpe->unk_token), &bpe->unk_id))
        bpe->unk_id = -1; /* HF only fails when the unknown token is needed */

    const json_t *merges = json_object_get(m, "merges");
    if (!merges || json_is_null(merges))
        return OCT_OK;
    if (!json_is_array(merges))
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "model.merges: expected an array");
    size_t prefix_len = bpe->cont_prefix ? strlen(bpe->cont_prefix) : 0;
    tok_buf joined = {0};
    for (size_t i = 0; i < json_array_size(merges); i++) {
        const json_t *e = json_array_get(merges, i);
        const char *a, *b;
        size_t la, lb;
        if (json_is_string(e)) {
            const char *s = json_string_value(e);
            size_t n = json_string_length(e);
            const char *sp = memchr(s, ' ', n);
            if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s))) {
                tok_buf_free(&joined);
                return oct_error_set(err, OCT_ERR_FORMAT, -1,
                                     "model.merges[%zu]: expected \"a b\" (two tokens and one "
                                     "space)",
                                     i);
            }
            a = s;
            la = (size_t)(sp - s);
            b = sp + 1;
            lb = n - la - 1;
        } else if (json_is_array(e) && json_array_size(e) == 2 &&
                   json_is_string(json_array_get(e, 0)) && json_is_string(json_array_get(e, 1))) {
            a = json_string_value(json_array_get(e, 0));
            la = json_string_length(json_array_get(e, 0));
            b = json_string_value(json_array_get(e, 1));
            lb = json_string_length(json_array_get(e, 1));
        } else {
            tok_buf_free(&joined);
            return oct_error_set(err, OCT_ERR_FORMAT, -1,
                                 "model.merges[%zu]: expected \"a b\" or [\"a\", \"b\"]", i);
        }
        int32_t ia, ib, inew;
        if ((st = vocab_id(bpe, a, la, i, &ia, err)) || (st = vocab_id(bpe, b, lb, i, &ib, err))) {
            tok_buf_free(&joined);
            return st;
        }
        if (lb < prefix_len) {
            tok_buf_free(&joined);
            return oct_error_set(err, OCT_ERR_FORMAT, -1,
                                 "model.merges[%zu]: second token shorter than "
                                 "continuing_subword_prefix",
                                 i);
        }
        joined.len = 0;
        if (!tok_buf_append(&joined, a, la) ||
            !tok_buf_append(&joined, b + prefix_len, lb - prefix_len)) {
            tok_buf_free(&joined);
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        }
        if ((st = vocab_id(bpe, joined.data, joined.len, i, &inew, err))) {
            tok_buf_free(&joined);
            return st;
        }
        if (i > INT32_MAX || !tok_mergemap_put(&bpe->merges, ia, ib, (int32_t)i, inew)) {
            tok_buf_free(&joined);
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        }
    }
    tok_buf_free(&joined);
    return OCT_OK;
}

/* ------------------------------------------------------------------ encode */

static bool cand_less(const bpe_cand *x, const bpe_cand *y)
{
    return x->rank < y->rank || (x->rank == y->rank && x->pos < y->pos);
}

static void heap_push(bpe_cand *h, size_t *n, bpe_cand c)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static bpe_cand heap_pop(bpe_cand *h, size_t *n)
{
    bpe_cand top = h[0];
    bpe_cand last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= *n)
            break;
        size_t c = l;
        if (l + 1 < *n && cand_less(&h[l + 1], &h[l]))
            c = l + 1;
        if (!cand_less(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n)
        h[i] = last;
    return top;
}

static bool sym_add(tok_work *w, size_t *n, int32_t id, uint32_t len)
{
    if (*n == w->bpe_syms_cap) {
        size_t cap = w->bpe_syms_cap ? w->bpe_syms_cap * 2 : 64;
        bpe_sym *p = oct_realloc(w->bpe_syms, cap * sizeof *p);
        if (!p)
            return false;
        w->bpe_syms = p;
        w->bpe_syms_cap = cap;
    }
    bpe_sym *s = w->bpe_syms;
    if (*n > 0)
        s[*n - 1].next = (int32_t)*n;
    s[*n] = (bpe_sym){id, (int32_t)*n - 1, -1, len};
    (*n)++;
    return true;
}

oct_status tok_bpe_encode(const tok_bpe *bpe, const char *s, size_t n, tok_work *w, tok_ids *out,
                          oct_error *err)
{
    if (n == 0)
        return OCT_OK;
    if (n > INT32_MAX / 2)
        return oct_error_set(err, OCT_ERR_LIMIT, -1, "piece of %zu bytes is too long", n);
    int32_t id;
    if (bpe->ignore_merges && tok_strmap_get(&bpe->vocab, s, n, &id)) {
        if (!tok_ids_push(out, id))
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        return OCT_OK;
    }
    size_t n_syms = 0;
    bool affix = bpe->cont_prefix || bpe->eow_suffix;
    int32_t unk_pending = -1; /* byte length of a pending unk, -1 none */
    for (size_t i = 0; i < n;) {
        size_t cl = tok_utf8_len((unsigned char)s[i]);
        if (cl > n - i)
            cl = n - i;
        const char *key = s + i;
        size_t key_len = cl;
        if (affix) {
            tok_buf *b = &w->scratch;
            b->len = 0;
            bool ok = true;
            if (i > 0 && bpe->cont_prefix)
                ok = tok_buf_append(b, bpe->cont_prefix, strlen(bpe->cont_prefix));
            ok = ok && tok_buf_append(b, s + i, cl);
            if (i + cl == n && bpe->eow_suffix)
                ok = ok && tok_buf_append(b, bpe->eow_suffix, strlen(bpe->eow_suffix));
            if (!ok)
                return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
            key = b->data;
            key_len = b->len;
        }
        if (tok_strmap_get(&bpe->vocab, key, key_len, &id)) {
            if (unk_pending >= 0) {
                if (!sym_add(w, &n_syms, bpe->unk_id, (uint32_t)unk_pending))
                    goto nomem;
                unk_pending = -1;
            }
            if (!sym_add(w, &n_syms, id, (uint32_t)cl))
                goto nomem;
        } else {
            bool done = false;
            if (bpe->byte_fallback) {
                bool all = true;
                for (size_t k = 0; k < key_len; k++)
                    if (bpe->byte_ids[(unsigned char)key[k]] < 0)
                        all = false;
                if (all) {
                    /* copy: key may point into w->scratch, which sym_add leaves alone */
                    for (size_t k = 0; k < key_len; k++)
                        if (!sym_add(w, &n_syms, bpe->byte_ids[(unsigned char)key[k]], 1))
                            goto nomem;
                    done = true;
                }
            }
            if (!done && bpe->unk_token) {
                if (bpe->unk_id < 0)
                    return oct_error_set(err, OCT_ERR_FORMAT, -1,
                                         "model.unk_token '%s' is not in model.vocab",
                                         bpe->unk_token);
                if (unk_pending >= 0 && bpe->fuse_unk) {
                    unk_pending += (int32_t)cl;
                } else {
                    if (unk_pending >= 0 &&
                        !sym_add(w, &n_syms, bpe->unk_id, (uint32_t)unk_pending))
                        goto nomem;
                    unk_pending = (int32_t)cl;
                }
            }
        }
        i += cl;
    }
    if (unk_pending >= 0 && !sym_add(w, &n_syms, bpe->unk_id, (uint32_t)unk_pending))
        goto nomem;

    bpe_sym *sym = w->bpe_syms;
    if (n_syms > 1 && bpe->merges.count) {
        /* each merge adds at most 2 candidates and removes one symbol */
        size_t need = 3 * n_syms;
        if (need > w->bpe_heap_cap) {
            bpe_cand *h = oct_realloc(w->bpe_heap, need * sizeof *h);
            if (!h)
                goto nomem;
            w->bpe_heap = h;
            w->bpe_heap_cap = need;
        }
        bpe_cand *heap = w->bpe_heap;
        size_t hn = 0;
        for (size_t i = 0; i + 1 < n_syms; i++) {
            const tok_merge_entry *me = tok_mergemap_get(&bpe->merges, sym[i].id, sym[i + 1].id);
            if (me)
                heap_push(heap, &hn, (bpe_cand){me->rank, (int32_t)i, me->new_id});
        }
        while (hn > 0) {
            bpe_cand top = heap_pop(heap, &hn);
            bpe_sym *cur = &sym[top.pos];
            if (cur->len == 0 || cur->next < 0)
                continue;
            int32_t next_pos = cur->next;
            bpe_sym right = sym[next_pos];
            const tok_merge_entry *me = tok_mergemap_get(&bpe->merges, cur->id, right.id);
            if (!me || me->new_id != top.new_id)
                continue;
            cur->id = top.new_id;
            cur->len += right.len;
            cur->next = right.next;
            sym[next_pos].len = 0;
            if (right.next >= 0)
                sym[right.next].prev = top.pos;
            if (hn + 2 > w->bpe_heap_cap)
                continue; /* cannot happen: see the bound above */
            if (cur->prev >= 0) {
                me = tok_mergemap_get(&bpe->merges, sym[cur->prev].id, cur->id);
                if (me)
                    heap_push(heap, &hn, (bpe_cand){me->rank, cur->prev, me->new_id});
            }
            if (cur->next >= 0) {
                me = tok_mergemap_get(&bpe->merges, cur->id, sym[cur->next].id);
                if (me)
                    heap_push(heap, &hn, (bpe_cand){me->rank, top.pos, me->new_id});
            }
        }
    }
    for (size_t i = 0; i < n_syms; i++)
        if (sym[i].len != 0 && !tok_ids_push(out, sym[i].id))
            goto nomem;
    return OCT_OK;
nomem:
    return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
}

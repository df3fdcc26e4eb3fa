/* tok_util.c — byte buffers, UTF-8 helpers, hash maps and the PCRE2 wrapper
 * the tokenizer is built on. */
#include <string.h>

#include "io/json.h"
#include "tokenizer/tok_internal.h"

/* ------------------------------------------------------------ byte buffers */

bool tok_buf_reserve(tok_buf *b, size_t extra)
{
    size_t need;
    if (!oct_size_add(b->len, extra, &need) || !oct_size_add(need, 1, &need))
        return false;
    if (need <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) {
        if (cap > SIZE_MAX / 2)
            return false;
        cap *= 2;
    }
    char *p = oct_realloc(b->data, cap);
    if (!p)
        return false;
    b->data = p;
    b->cap = cap;
    return true;
}

bool tok_buf_append(tok_buf *b, const char *s, size_t n)
{
    if (!tok_buf_reserve(b, n))
        return false;
    if (n)
        memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
    return true;
}

bool tok_buf_putc(tok_buf *b, char c)
{
    return tok_buf_append(b, &c, 1);
}

bool tok_buf_put_cp(tok_buf *b, uint32_t cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return tok_buf_append(b, u, n);
}

void tok_buf_free(tok_buf *b)
{
    oct_free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

bool tok_ids_push(tok_ids *a, int32_t id)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        size_t bytes;
        if (!oct_size_mul(cap, sizeof *a->v, &bytes))
            return false;
        int32_t *p = oct_realloc(a->v, bytes);
        if (!p)
            return false;
        a->v = p;
        a->cap = cap;
    }
    a->v[a->n++] = id;
    return true;
}

void tok_ids_free(tok_ids *a)
{
    oct_free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}

/* ------------------------------------------------------------------ UTF-8 */

size_t tok_utf8_len(unsigned char c)
{
    if (c < 0x80)
        return 1;
    if (c >= 0xF0)
        return 4;
    if (c >= 0xE0)
        return 3;
    if (c >= 0xC0)
        return 2;
    return 1;
}

size_t tok_utf8_next(const char *s, size_t n, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t l = tok_utf8_len(u[0]);
    if (l > n)
        l = 1;
    switch (l) {
    case 1: *cp = u[0]; break;
    case 2: *cp = ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F); break;
    case 3:
        *cp = ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
        break;
    default:
        *cp = ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
              ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
        break;
    }
    return l;
}

/* Length of the valid prefix of a UTF-8 sequence starting at s[0] (Unicode
 * Table 3-7), and whether it is complete. */
static size_t utf8_valid_prefix(const unsigned char *s, size_t n, bool *complete)
{
    unsigned char c = s[0];
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    *complete = false;
    if (c < 0x80) {
        *complete = true;
        return 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
        need = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0)
            lo = 0xA0;
        if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0)
            lo = 0x90;
        if (c == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    size_t i = 1;
    if (i >= n || s[i] < lo || s[i] > hi)
        return 1;
    for (i = 2; i < need; i++)
        if (i >= n || s[i] < 0x80 || s[i] > 0xBF)
            return i;
    *complete = true;
    return need;
}

size_t tok_utf8_validate(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        bool complete;
        size_t l = utf8_valid_prefix(u + i, n - i, &complete);
        if (!complete)
            return i;
        i += l;
    }
    return n;
}

bool tok_utf8_lossy(tok_buf *out, const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (run < n && s[run] < 0x80)
            run++;
        if (run > i && !tok_buf_append(out, (const char *)s + i, run - i))
            return false;
        i = run;
        if (i >= n)
            break;
        bool complete;
        size_t l = utf8_valid_prefix(s + i, n - i, &complete);
        if (complete) {
            if (!tok_buf_append(out, (const char *)s + i, l))
                return false;
        } else {
            if (!tok_buf_append(out, "\xEF\xBF\xBD", 3))
                return false;
            if (l == 0)
                l = 1;
        }
        i += l;
    }
    return true;
}

bool tok_is_whitespace(uint32_t c)
{
    if (c <= 0x20)
        return c == 0x20 || (c >= 0x09 && c <= 0x0D);
    if (c < 0x85)
        return false;
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* ------------------------------------------------------------ string maps */

static bool strmap_grow(tok_strmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    tok_strmap_entry *slots = oct_calloc(cap, sizeof *slots);
    if (!slots)
        return false;
    for (size_t i = 0; i < m->cap; i++) {
        tok_strmap_entry *e = &m->slots[i];
        if (!e->key)
            continue;
        size_t j = (size_t)e->hash & (cap - 1);
        while (slots[j].key)
            j = (j + 1) & (cap - 1);
        slots[j] = *e;
    }
    oct_free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return true;
}

bool tok_strmap_put(tok_strmap *m, const char *key, size_t n, int32_t value)
{
    if (n > UINT32_MAX)
        return false;
    if ((m->count + 1) * 2 > m->cap && !strmap_grow(m))
        return false;
    uint64_t h = oct_hash_bytes(key, n);
    size_t j = (size_t)h & (m->cap - 1);
    while (m->slots[j].key) {
        tok_strmap_entry *e = &m->slots[j];
        if (e->hash == h && e->key_len == n && memcmp(e->key, key, n) == 0) {
            e->value = value;
            return true;
        }
        j = (j + 1) & (m->cap - 1);
    }
    char *k = oct_malloc(n + 1);
    if (!k)
        return false;
    memcpy(k, key, n);
    k[n] = 0;
    m->slots[j].hash = h;
    m->slots[j].key = k;
    m->slots[j].key_len = (uint32_t)n;
    m->slots[j].value = value;
    m->count++;
    return true;
}

bool tok_strmap_get(const tok_strmap *m, const char *key, size_t n, int32_t *value)
{
    if (!m->cap)
        return false;
    uint64_t h = oct_hash_bytes(key, n);
    size_t j = (size_t)h & (m->cap - 1);
    while (m->slots[j].key) {
        const tok_strmap_entry *e = &m->slots[j];
        if (e->hash == h && e->key_len == n && memcmp(e->key, key, n) == 0) {
            *value = e->value;
            return true;
        }
        j = (j + 1) & (m->cap - 1);
    }
    return false;
}

void tok_strmap_free(tok_strmap *m)
{
    for (size_t i = 0; i < m->cap; i++)
        oct_free(m->slots[i].key);
    oct_free(m->slots);
    m->slots = NULL;
    m->cap = m->count = 0;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static bool mergemap_grow(tok_mergemap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    tok_merge_entry *slots = oct_calloc(cap, sizeof *slots);
    if (!slots)
        return false;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].key)
            continue;
        size_t j = (size_t)mix64(m->slots[i].key) & (cap - 1);
        while (slots[j].key)
            j = (j + 1) & (cap - 1);
        slots[j] = m->slots[i];
    }
    oct_free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return true;
}

bool tok_mergemap_put(tok_mergemap *m, int32_t a, int32_t b, int32_t rank, int32_t new_id)
{
    if ((m->count + 1) * 2 > m->cap && !mergemap_grow(m))
        return false;
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    size_t j = (size_t)mix64(key) & (m->cap - 1);
    while (m->slots[j].key && m->slots[j].key != key)
        j = (j + 1) & (m->cap - 1);
    if (!m->slots[j].key)
        m->count++;
    m->slots[j].key = key;
    m->slots[j].rank = rank;
    m->slots[j].new_id = new_id;
    return true;
}

const tok_merge_entry *tok_mergemap_get(const tok_mergemap *m, int32_t a, int32_t b)
{
    if (!m->cap)
        return NULL;
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    size_t j = (size_t)mix64(key) & (m->cap - 1);
    while (m->slots[j].key) {
        if (m->slots[j].key == key)
            return &m->slots[j];
        j = (j + 1) & (m->cap - 1);
    }
    return NULL;
}

void tok_mergemap_free(tok_mergemap *m)
{
    oct_free(m->slots);
    m->slots = NULL;
    m->cap = m->count = 0;
}

/* ----------------------------------------------------------------- regex */

static bool ranges_push(tok_ranges *r, size_t a, size_t b)
{
    if (r->n * 2 + 2 > r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        size_t bytes;
        if (!oct_size_mul(cap, sizeof *r->v, &bytes))
            return false;
        size_t *p = oct_realloc(r->v, bytes);
        if (!p)
            return false;
        r->v = p;
        r->cap = cap;
    }
    r->v[2 * r->n] = a;
    r->v[2 * r->n + 1] = b;
    r->n++;
    return true;
}

oct_status tok_regex_find_all(const pcre2_code *re, pcre2_match_data *md, const char *subject,
                              size_t n, tok_ranges *out, oct_error *err)
{
    out->n = 0;
    size_t pos = 0;
    uint32_t opts = PCRE2_NO_UTF_CHECK;
    while (pos <= n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)subject, n, pos, opts, md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
            /* Very long runs can exhaust the JIT stack: redo with the
             * interpreter, whose frames live on the heap. */
            opts |= PCRE2_NO_JIT;
            continue;
        }
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return oct_error_set(err, OCT_ERR_INTERNAL, (int64_t)pos, "regex match failed: %s",
                                 (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t a = ov[0], b = ov[1];
        if (b > a) {
            if (!ranges_push(out, a, b))
                return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
            pos = b;
        } else {
            /* empty match: step over one character */
            if (a >= n)
                break;
            pos = a + tok_utf8_len((unsigned char)subject[a]);
        }
    }
    return OCT_OK;
}

void tok_ranges_free(tok_ranges *r)
{
    oct_free(r->v);
    r->v = NULL;
    r->n = r->cap = 0;
}

/* --------------------------------------------------------------- segments */

bool tok_segs_push(tok_segs *s, size_t off, size_t len, int32_t id, bool origin0)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        size_t bytes;
        if (!oct_size_mul(cap, sizeof *s->v, &bytes))
            return false;
        tok_seg *p = oct_realloc(s->v, bytes);
        if (!p)
            return false;
        s->v = p;
        s->cap = cap;
    }
    s->v[s->n++] = (tok_seg){off, len, id, origin0};
    return true;
}

void tok_segs_free(tok_segs *s)
{
    oct_free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

void tok_work_free(tok_work *w)
{
    tok_buf_free(&w->text);
    tok_segs_free(&w->segs);
    tok_segs_free(&w->alt);
    tok_buf_free(&w->scratch);
    tok_ranges_free(&w->ranges);
    if (w->md)
        pcre2_match_data_free(w->md);
    oct_free(w->bpe_syms);
    oct_free(w->bpe_heap);
    memset(w, 0, sizeof *w);
}

/* ------------------------------------------------------------ JSON helpers */

oct_status tok_json_bool(const json_t *obj, const char *key, bool dflt, bool *out, const char *path,
                         oct_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return OCT_OK;
    }
    if (!json_is_boolean(v))
        return io_json_type_error(obj, key, path, "a boolean", err);
    *out = json_is_true(v);
    return OCT_OK;
}

oct_status tok_json_str(const json_t *obj, const char *key, bool required, const char **out,
                        size_t *len, const char *path, oct_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = NULL;
        if (len)
            *len = 0;
        if (required)
            return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.%s: missing", path, key);
        return OCT_OK;
    }
    if (!json_is_string(v))
        return io_json_type_error(obj, key, path, "a string", err);
    *out = json_string_value(v);
    if (len)
        *len = json_string_length(v);
    return OCT_OK;
}

oct_status tok_json_known_keys(const json_t *obj, const char *const *keys, const char *path,
                               oct_error *err)
{
    const char *k;
    const json_t *v;
    json_object_foreach(tok_json_mut(obj), k, v)
    {
        bool ok = false;
        for (size_t i = 0; keys[i]; i++)
            if (strcmp(keys[i], k) == 0)
                ok = true;
        if (!ok)
            return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1, "%s: unsupported option '%s'", path,
                                 k);
    }
    return OCT_OK;
}

oct_status tok_json_sequence(const json_t *j, const char *key, const char *path,
                             tok_json_parse_fn parse, size_t slot_size, void **children,
                             size_t *n_parsed, oct_error *err)
{
    const char *const keys[] = {"type", key, NULL};
    const json_t *arr = json_object_get(j, key);
    *children = NULL;
    OCT_TRY(tok_json_known_keys(j, keys, path, err));
    if (!json_is_array(arr))
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.%s: expected an array", path, key);
    char *slots = oct_calloc(json_array_size(arr) + 1, slot_size);
    if (!slots)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    *children = slots;
    for (size_t i = 0; i < json_array_size(arr); i++) {
        char sub[256];
        snprintf(sub, sizeof sub, "%s.%s[%zu]", path, key, i);
        OCT_TRY(parse(json_array_get(arr, i), slots + i * slot_size, sub, err));
        (*n_parsed)++;
    }
    return OCT_OK;
}

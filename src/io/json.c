/* json.c — the Hugging Face JSON reader (rule and API in json.h).
 *
 * Two steps.  A pre-pass scans the text once outside strings: it rewrites the
 * tokens strict JSON lacks (NaN, Infinity, -Infinity, integers beyond int64)
 * into forms jansson parses, and records the line of every object key in
 * document order.  jansson then parses the (possibly rewritten) text, and a
 * walk of the tree in the same order pairs each small object with the lines
 * of its keys, so a getter can say where a bad value sits.  The pairs live in
 * a small registry of open documents, looked up by object pointer. */
#include "io/json.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

#define MAX_OPEN_DOCS 16
#define MAX_SCAN_DEPTH 4096

typedef struct {
    const json_t *obj;
    uint32_t first; /* index into doc.lines of the object's first key */
} obj_lines;

typedef struct {
    const json_t *root;
    char *label;
    uint32_t *lines; /* [n_lines] lines of the keys of the objects below */
    size_t n_lines;
    obj_lines *objs; /* [n_objs] sorted by obj */
    size_t n_objs;
} json_doc;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static json_doc *g_docs[MAX_OPEN_DOCS];

/* ---- growing buffers ----------------------------------------------------- */

typedef struct {
    char *p;
    size_t n, cap;
} text_buf;

static bool buf_put(text_buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *q = oct_realloc(b->p, cap);
        if (!q)
            return false;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return true;
}

typedef struct {
    uint32_t *v;
    size_t n, cap;
} u32_vec;

static bool vec_push(u32_vec *v, uint32_t x)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 256;
        uint32_t *q = oct_realloc(v->v, cap * sizeof *q);
        if (!q)
            return false;
        v->v = q;
        v->cap = cap;
    }
    v->v[v->n++] = x;
    return true;
}

/* ---- pre-pass -------------------------------------------------------------- */

static bool is_token_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '+' || c == '.';
}

/* An integer literal (-?digits) that int64 cannot hold. */
static bool beyond_int64(const char *t, size_t n)
{
    bool neg = t[0] == '-';
    const char *d = t + neg;
    size_t nd = n - neg;
    if (nd == 0)
        return false;
    for (size_t i = 0; i < nd; i++)
        if (d[i] < '0' || d[i] > '9')
            return false;
    while (nd > 1 && d[0] == '0')
        d++, nd--;
    if (nd != 19)
        return nd > 19;
    return memcmp(d, neg ? "9223372036854775808" : "9223372036854775807", 19) > 0;
}

/* Whether a token is one strict JSON lacks: NaN, Infinity, -Infinity or an
 * integer beyond int64.  Such a token becomes the string "\u0000TOKEN". */
static bool needs_rewrite(const char *t, size_t n)
{
    return (n == 3 && memcmp(t, "NaN", 3) == 0) || (n == 8 && memcmp(t, "Infinity", 8) == 0) ||
           (n == 9 && memcmp(t, "-Infinity", 9) == 0) || beyond_int64(t, n);
}

typedef struct {
    text_buf out;  /* rewritten text; empty while nothing needed rewriting */
    size_t copied; /* bytes of the input already in `out` */
    u32_vec key_lines;
} scan_state;

static bool emit_rewrite(scan_state *s, const char *text, size_t at, size_t n)
{
    bool ok = buf_put(&s->out, text + s->copied, at - s->copied) &&
              buf_put(&s->out, "\"\\u0000", 7) && buf_put(&s->out, text + at, n) &&
              buf_put(&s->out, "\"", 1);
    s->copied = at + n;
    return ok;
}

/* Scans once; false only on out-of-memory.  Malformed text is left for
 * jansson to report. */
static bool pre_pass(const char *text, size_t len, scan_state *s)
{
    unsigned char is_obj[MAX_SCAN_DEPTH];
    int depth = 0;
    bool expect_key = false;
    uint32_t line = 1;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (c == '\n') {
            line++;
        } else if (c == '"') {
            if (depth > 0 && depth <= MAX_SCAN_DEPTH && is_obj[depth - 1] && expect_key) {
                if (!vec_push(&s->key_lines, line))
                    return false;
                expect_key = false;
            }
            for (i++; i < len && text[i] != '"'; i++) {
                if (text[i] == '\\' && i + 1 < len)
                    i++;
                else if (text[i] == '\n')
                    line++;
            }
        } else if (c == '{' || c == '[') {
            if (depth < MAX_SCAN_DEPTH)
                is_obj[depth] = c == '{';
            depth++;
            expect_key = c == '{';
        } else if (c == '}' || c == ']') {
            depth -= depth > 0;
            expect_key = false;
        } else if (c == ',') {
            expect_key = depth > 0 && depth <= MAX_SCAN_DEPTH && is_obj[depth - 1];
        } else if (is_token_char(c)) {
            size_t n = 1;
            while (i + n < len && is_token_char(text[i + n]))
                n++;
            if (needs_rewrite(text + i, n) && !emit_rewrite(s, text, i, n))
                return false;
            i += n - 1;
        }
    }
    if (s->out.p && !buf_put(&s->out, text + s->copied, len - s->copied))
        return false;
    return true;
}

/* ---- pairing objects with key lines -------------------------------------- */

typedef struct {
    const u32_vec *keys;
    size_t next; /* next unread entry of keys */
    u32_vec lines;
    obj_lines *objs;
    size_t n_objs, cap_objs;
    bool nomem;
} pair_walk;

static void walk(pair_walk *w, const json_t *v)
{
    if (w->nomem)
        return;
    if (json_is_array(v)) {
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e) walk(w, e);
        return;
    }
    if (!json_is_object(v))
        return;
    size_t n = json_object_size(v);
    bool keep = n <= IO_JSON_MAX_LINED_KEYS;
    size_t first = w->lines.n;
    if (keep) { /* the object's slots, before its children add theirs */
        if (w->n_objs == w->cap_objs) {
            size_t cap = w->cap_objs ? w->cap_objs * 2 : 64;
            obj_lines *q = oct_realloc(w->objs, cap * sizeof *q);
            if (!q) {
                w->nomem = true;
                return;
            }
            w->objs = q;
            w->cap_objs = cap;
        }
        w->objs[w->n_objs++] = (obj_lines){v, (uint32_t)first};
        for (size_t i = 0; i < n; i++)
            if (!vec_push(&w->lines, 0)) {
                w->nomem = true;
                return;
            }
    }
    const char *key;
    json_t *val;
    size_t idx = 0;
    json_object_foreach((json_t *)(uintptr_t)v, key, val)
    {
        uint32_t line = w->next < w->keys->n ? w->keys->v[w->next] : 0;
        w->next++;
        if (keep)
            w->lines.v[first + idx++] = line;
        walk(w, val);
    }
}

static int cmp_obj(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const obj_lines *)a)->obj;
    uintptr_t y = (uintptr_t)((const obj_lines *)b)->obj;
    return x < y ? -1 : x > y;
}

static void doc_free(json_doc *d)
{
    if (!d)
        return;
    oct_free(d->label);
    oct_free(d->lines);
    oct_free(d->objs);
    oct_free(d);
}

/* Registers the key lines of `root`; false on NOMEM.  With all slots taken
 * the document simply has no lines. */
static bool doc_register(const json_t *root, const char *label, const u32_vec *keys)
{
    json_doc *d = oct_calloc(1, sizeof *d);
    if (!d)
        return false;
    pair_walk w = {.keys = keys};
    walk(&w, root);
    d->root = root;
    d->label = oct_strndup(label, strlen(label));
    d->lines = w.lines.v;
    d->n_lines = w.lines.n;
    d->objs = w.objs;
    d->n_objs = w.n_objs;
    if (w.nomem || !d->label) {
        doc_free(d);
        return false;
    }
    if (d->n_objs > 1)
        qsort(d->objs, d->n_objs, sizeof *d->objs, cmp_obj);
    pthread_mutex_lock(&g_lock);
    size_t i = 0;
    while (i < MAX_OPEN_DOCS && g_docs[i])
        i++;
    if (i < MAX_OPEN_DOCS) {
        g_docs[i] = d;
        d = NULL;
    }
    pthread_mutex_unlock(&g_lock);
    doc_free(d);
    return true;
}

/* ---- API ----------------------------------------------------------------- */

oct_status io_json_open(const char *text, size_t len, const char *label, json_t **out,
                        oct_error *err)
{
    *out = NULL;
    scan_state s = {0};
    if (!pre_pass(text, len, &s)) {
        oct_free(s.out.p);
        oct_free(s.key_lines.v);
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "%s: out of memory", label);
    }
    const char *src = s.out.p ? s.out.p : text;
    size_t n = s.out.p ? s.out.n : len;
    json_error_t jerr;
    *out = json_loadb(src, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    oct_free(s.out.p);
    if (!*out) {
        oct_free(s.key_lines.v);
        return oct_error_set(err, OCT_ERR_FORMAT, (int64_t)jerr.position,
                             "%s: invalid JSON: line %d column %d: %s", label, jerr.line,
                             jerr.column, jerr.text);
    }
    bool ok = doc_register(*out, label, &s.key_lines);
    oct_free(s.key_lines.v);
    if (!ok) {
        json_decref(*out);
        *out = NULL;
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "%s: out of memory", label);
    }
    return OCT_OK;
}

oct_status io_json_open_file(const char *path, size_t max_size, json_t **out, oct_error *err)
{
    char *text = NULL;
    size_t len = 0;
    *out = NULL;
    oct_status st = io_read_text(path, max_size, &text, &len, err);
    if (st == OCT_OK)
        st = io_json_open(text, len, path, out, err);
    oct_free(text);
    return st;
}

void io_json_close(json_t *root)
{
    if (!root)
        return;
    json_doc *d = NULL;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < MAX_OPEN_DOCS; i++)
        if (g_docs[i] && g_docs[i]->root == root) {
            d = g_docs[i];
            g_docs[i] = NULL;
            break;
        }
    pthread_mutex_unlock(&g_lock);
    doc_free(d);
    json_decref(root);
}

bool io_json_where(const json_t *obj, const char *key, const char **label, int *line)
{
    if (!json_is_object(obj) || json_object_size(obj) > IO_JSON_MAX_LINED_KEYS)
        return false;
    size_t idx = 0;
    bool found = false;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)(uintptr_t)obj, k, v)
    {
        if (strcmp(k, key) == 0) {
            found = true;
            break;
        }
        idx++;
    }
    if (!found)
        return false;
    bool ok = false;
    obj_lines probe = {obj, 0};
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < MAX_OPEN_DOCS && !ok; i++) {
        const json_doc *d = g_docs[i];
        if (!d)
            continue;
        const obj_lines *hit =
            d->n_objs ? bsearch(&probe, d->objs, d->n_objs, sizeof probe, cmp_obj) : NULL;
        if (hit && hit->first + idx < d->n_lines && d->lines[hit->first + idx] > 0) {
            *label = d->label; /* lives while the document is open */
            *line = (int)d->lines[hit->first + idx];
            ok = true;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return ok;
}

oct_status io_json_type_error(const json_t *obj, const char *key, const char *where,
                              const char *what, oct_error *err)
{
    const char *label = NULL;
    int line = 0;
    if (!io_json_where(obj, key, &label, &line))
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.%s: expected %s", where, key, what);
    size_t ll = strlen(label);
    if (strncmp(where, label, ll) == 0) /* where already names the file */
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.%s: line %d: expected %s", where, key,
                             line, what);
    return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s: line %d: %s.%s: expected %s", label, line,
                         where, key, what);
}

/* The token of a "\u0000TOKEN" string (json.h), else NULL. */
static const char *marker_token(const json_t *v)
{
    if (!json_is_string(v) || json_string_length(v) < 2 || json_string_value(v)[0] != '\0')
        return NULL;
    return json_string_value(v) + 1;
}

bool io_json_number_of(const json_t *v, double *out)
{
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return true;
    }
    const char *t = marker_token(v);
    if (!t)
        return false;
    char *end;
    *out = strtod(t, &end); /* NaN, Infinity, -Infinity and digits */
    return *end == '\0' && end != t;
}

bool io_json_is_big_int(const json_t *v)
{
    const char *t = marker_token(v);
    return t && beyond_int64(t, strlen(t));
}

char *io_json_dump(const json_t *root, size_t flags)
{
    char *js = json_dumps(root, flags);
    if (!js)
        return NULL;
    text_buf b = {0};
    const char *p = js, *m;
    bool ok = true;
    while (ok && (m = strstr(p, "\"\\u0000")) != NULL) {
        const char *e = strchr(m + 7, '"');
        if (!e)
            break;
        ok = buf_put(&b, p, (size_t)(m - p)) && buf_put(&b, m + 7, (size_t)(e - m - 7));
        p = e + 1;
    }
    ok = ok && (b.p == NULL || buf_put(&b, p, strlen(p)));
    if (!ok) {
        oct_free(b.p);
        free(js);
        return NULL;
    }
    if (!b.p) {
        size_t n = strlen(js);
        b.p = oct_malloc(n + 1);
        if (b.p)
            memcpy(b.p, js, n + 1);
    }
    free(js);
    return b.p;
}

/* Looks up key; NULL for absent or JSON null; required+absent fills err. */
static const json_t *get(const json_t *obj, const char *key, const char *where, bool required,
                         oct_status *st, oct_error *err)
{
    *st = OCT_OK;
    const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    if (v && json_is_null(v))
        v = NULL;
    if (!v && required)
        *st = oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.%s: required key is missing", where, key);
    return v;
}

oct_status io_json_int(const json_t *obj, const char *key, const char *where, bool required,
                       int64_t *out, oct_error *err)
{
    oct_status st;
    const json_t *v = get(obj, key, where, required, &st, err);
    if (!v)
        return st;
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return OCT_OK;
    }
    /* 4096.0 is an integer in Python's eyes; accept exact whole reals. */
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d >= -9.2e18 && d <= 9.2e18 && d == (double)(int64_t)d) {
            *out = (int64_t)d;
            return OCT_OK;
        }
    }
    if (io_json_is_big_int(v))
        return io_json_type_error(obj, key, where, "an integer that fits in 64 bits", err);
    return io_json_type_error(obj, key, where, "an integer", err);
}

oct_status io_json_limit(const json_t *obj, const char *key, const char *where, bool required,
                         int64_t *out, oct_error *err)
{
    oct_status st;
    const json_t *v = get(obj, key, where, required, &st, err);
    if (!v)
        return st;
    double d;
    if ((json_is_real(v) || io_json_is_big_int(v)) && io_json_number_of(v, &d) &&
        d > 9007199254740992.0) { /* 2^53 */
        *out = INT64_MAX;
        return OCT_OK;
    }
    if (json_is_integer(v) && json_integer_value(v) > ((json_int_t)1 << 53)) {
        *out = INT64_MAX;
        return OCT_OK;
    }
    return io_json_int(obj, key, where, required, out, err);
}

oct_status io_json_num(const json_t *obj, const char *key, const char *where, bool required,
                       double *out, oct_error *err)
{
    oct_status st;
    const json_t *v = get(obj, key, where, required, &st, err);
    if (!v)
        return st;
    if (!io_json_number_of(v, out))
        return io_json_type_error(obj, key, where, "a number", err);
    return OCT_OK;
}

oct_status io_json_bool(const json_t *obj, const char *key, const char *where, bool required,
                        bool *out, oct_error *err)
{
    oct_status st;
    const json_t *v = get(obj, key, where, required, &st, err);
    if (!v)
        return st;
    if (!json_is_boolean(v))
        return io_json_type_error(obj, key, where, "true or false", err);
    *out = json_is_true(v);
    return OCT_OK;
}

oct_status io_json_str(const json_t *obj, const char *key, const char *where, bool required,
                       const char **out, oct_error *err)
{
    oct_status st;
    *out = NULL;
    const json_t *v = get(obj, key, where, required, &st, err);
    if (!v)
        return st;
    if (!json_is_string(v) || (json_string_length(v) > 0 && json_string_value(v)[0] == '\0'))
        return io_json_type_error(obj, key, where, "a string", err);
    *out = json_string_value(v);
    return OCT_OK;
}

oct_status io_json_block_shape(const json_t *obj, const char *key, const char *where, bool required,
                               bool *found, int64_t *rows, int64_t *cols, oct_error *err)
{
    oct_status st;
    *found = false;
    const json_t *v = get(obj, key, where, required, &st, err);
    if (!v)
        return st;
    const json_t *r = json_array_get(v, 0), *c = json_array_get(v, 1);
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(r) ||
        !json_is_integer(c) || json_integer_value(r) <= 0 || json_integer_value(c) <= 0 ||
        json_integer_value(r) > 65536 || json_integer_value(c) > 65536)
        return oct_error_set(err, OCT_ERR_FORMAT, -1,
                             "%s.%s: expected [rows, cols], two integers in 1..65536", where, key);
    *found = true;
    *rows = (int64_t)json_integer_value(r);
    *cols = (int64_t)json_integer_value(c);
    return OCT_OK;
}

oct_status io_json_str_array(const json_t *obj, const char *key, const char *where,
                             const char ***out, int *n, oct_error *err)
{
    *out = NULL;
    *n = 0;
    oct_status st;
    const json_t *v = get(obj, key, where, false, &st, err);
    if (!v)
        return st;
    if (json_is_string(v)) { /* a lone string is a one-entry list */
        *out = oct_malloc(sizeof(char *));
        if (!*out)
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        (*out)[0] = json_string_value(v);
        *n = 1;
        return OCT_OK;
    }
    if (!json_is_array(v))
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.%s: expected a list of strings", where,
                             key);
    size_t cnt = json_array_size(v);
    if (cnt > 1000000)
        return oct_error_set(err, OCT_ERR_LIMIT, -1, "%s.%s: too many entries", where, key);
    *out = oct_calloc(cnt ? cnt : 1, sizeof(char *));
    if (!*out)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    for (size_t i = 0; i < cnt; i++) {
        const json_t *e = json_array_get(v, i);
        if (!json_is_string(e)) {
            oct_free(*out);
            *out = NULL;
            return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.%s[%zu]: expected a string", where,
                                 key, i);
        }
        (*out)[i] = json_string_value(e);
    }
    *n = (int)cnt;
    return OCT_OK;
}

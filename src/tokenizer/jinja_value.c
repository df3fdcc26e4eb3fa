/* jinja_value.c — the arena and the values of the Jinja subset, with
 * Python's semantics for str(), repr(), truthiness, equality, and json.dumps
 * (as transformers' `tojson` filter calls it: ensure_ascii=False). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja.h"

/* ------------------------------------------------------------------ arena */

struct jarena_chunk {
    jarena_chunk *next;
    size_t used, cap;
    max_align_t data[];
};

void *jarena_alloc(jarena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (a->failed || n > a->limit || a->used_total > a->limit - n) {
        a->failed = true;
        return NULL;
    }
    jarena_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        c = oct_malloc(sizeof *c + cap);
        if (!c) {
            a->failed = true;
            return NULL;
        }
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    a->used_total += n;
    memset(p, 0, n);
    return p;
}

void jarena_free(jarena *a)
{
    jarena_chunk *c = a->head;
    while (c) {
        jarena_chunk *n = c->next;
        oct_free(c);
        c = n;
    }
    a->head = NULL;
    a->used_total = 0;
}

jarena_mark jarena_get_mark(const jarena *a)
{
    jarena_mark m = {a->head, a->head ? a->head->used : 0, a->used_total};
    return m;
}

void jarena_release(jarena *a, jarena_mark m)
{
    while (a->head != m.chunk) {
        jarena_chunk *c = a->head;
        a->head = c->next;
        oct_free(c);
    }
    if (a->head)
        a->head->used = m.used;
    a->used_total = m.used_total;
}

bool jarena_since(const jarena *a, jarena_mark m, const void *p)
{
    const char *q = p;
    for (const jarena_chunk *c = a->head; c; c = c->next) {
        const char *lo = (const char *)c->data, *hi = lo + c->used;
        if (q >= lo && q < hi)
            return c != m.chunk || q >= lo + m.used;
        if (c == m.chunk)
            return false;
    }
    return false;
}

/* ----------------------------------------------------------------- values */

jv jv_str(jarena *a, const char *s, size_t n)
{
    jstr *js = jarena_alloc(a, sizeof *js);
    char *d = js ? jarena_alloc(a, n + 1) : NULL;
    if (!d)
        return jv_undef();
    if (n)
        memcpy(d, s, n);
    d[n] = 0;
    js->data = d;
    js->len = n;
    jv v = {JV_STR, {.s = js}};
    return v;
}

jv jv_str_buf(jarena *a, const tok_buf *b)
{
    return jv_str(a, b->data ? b->data : "", b->len);
}

jv jv_list_new(jarena *a)
{
    jlist *l = jarena_alloc(a, sizeof *l);
    if (!l)
        return jv_undef();
    jv v = {JV_LIST, {.l = l}};
    return v;
}

jv jv_dict_new(jarena *a)
{
    jdict *d = jarena_alloc(a, sizeof *d);
    if (!d)
        return jv_undef();
    jv v = {JV_DICT, {.d = d}};
    return v;
}

bool jv_list_push(jarena *a, jlist *l, jv v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        jv *p = jarena_alloc(a, cap * sizeof *p);
        if (!p)
            return false;
        if (l->n)
            memcpy(p, l->v, l->n * sizeof *p);
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = v;
    return true;
}

jv *jv_dict_get(const jdict *d, const char *key, size_t n)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->keys[i]->len == n && memcmp(d->keys[i]->data, key, n) == 0)
            return &d->vals[i];
    return NULL;
}

bool jv_dict_set(jarena *a, jdict *d, const char *key, size_t n, jv v)
{
    jv *old = jv_dict_get(d, key, n);
    if (old) {
        *old = v;
        return true;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        jstr **k = jarena_alloc(a, cap * sizeof *k);
        jv *vals = k ? jarena_alloc(a, cap * sizeof *vals) : NULL;
        if (!vals)
            return false;
        if (d->n) {
            memcpy(k, d->keys, d->n * sizeof *k);
            memcpy(vals, d->vals, d->n * sizeof *vals);
        }
        d->keys = k;
        d->vals = vals;
        d->cap = cap;
    }
    jv ks = jv_str(a, key, n);
    if (ks.t != JV_STR)
        return false;
    d->keys[d->n] = ks.u.s;
    d->vals[d->n] = v;
    d->n++;
    return true;
}

jv jv_from_json(jarena *a, const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        jv d = jv_dict_new(a);
        if (d.t != JV_DICT)
            return d;
        const char *k;
        json_t *v;
        json_object_foreach(tok_json_mut(j), k, v)
        {
            jv x = jv_from_json(a, v);
            if (a->failed || !jv_dict_set(a, d.u.d, k, strlen(k), x))
                return jv_undef();
        }
        return d;
    }
    case JSON_ARRAY: {
        jv l = jv_list_new(a);
        if (l.t != JV_LIST)
            return l;
        for (size_t i = 0; i < json_array_size(j); i++) {
            jv x = jv_from_json(a, json_array_get(j, i));
            if (a->failed || !jv_list_push(a, l.u.l, x))
                return jv_undef();
        }
        return l;
    }
    case JSON_STRING: return jv_str(a, json_string_value(j), json_string_length(j));
    case JSON_INTEGER: return jv_int((int64_t)json_integer_value(j));
    case JSON_REAL: return jv_float(json_real_value(j));
    case JSON_TRUE: return jv_bool(true);
    case JSON_FALSE: return jv_bool(false);
    case JSON_NULL: return jv_none();
    }
    return jv_undef();
}

bool jv_truthy(const jv *v)
{
    switch (v->t) {
    case JV_UNDEF:
    case JV_NONE: return false;
    case JV_BOOL: return v->u.b;
    case JV_INT: return v->u.i != 0;
    case JV_FLOAT: return v->u.f != 0.0;
    case JV_STR: return v->u.s->len != 0;
    case JV_LIST: return v->u.l->n != 0;
    case JV_DICT: return v->u.d->is_namespace || v->u.d->n != 0;
    case JV_FUNC: return true;
    }
    return false;
}

/* Python repr(float): the shortest digits that read back to the same double. */
static bool put_float(double f, tok_buf *out)
{
    char buf[64];
    if (isnan(f))
        return tok_buf_append(out, "nan", 3);
    if (isinf(f))
        return f > 0 ? tok_buf_append(out, "inf", 3) : tok_buf_append(out, "-inf", 4);
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, f);
        if (strtod(buf, NULL) == f)
            break;
    }
    /* buf: d.ddde[+-]XX with prec significant digits */
    char digits[32];
    size_t nd = 0;
    const char *p = buf;
    bool neg = false;
    if (*p == '-') {
        neg = true;
        p++;
    }
    for (; *p && *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = 0;
    tok_buf tmp = {0};
    bool ok = true;
    if (neg)
        ok = tok_buf_putc(&tmp, '-');
    if (exp < -4 || exp >= 16) {
        ok = ok && tok_buf_putc(&tmp, digits[0]);
        if (nd > 1)
            ok = ok && tok_buf_putc(&tmp, '.') && tok_buf_append(&tmp, digits + 1, nd - 1);
        snprintf(buf, sizeof buf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        ok = ok && tok_buf_append(&tmp, buf, strlen(buf));
    } else if (exp < 0) {
        ok = ok && tok_buf_append(&tmp, "0.", 2);
        for (int i = 0; i < -exp - 1; i++)
            ok = ok && tok_buf_putc(&tmp, '0');
        ok = ok && tok_buf_append(&tmp, digits, nd);
    } else {
        for (int i = 0; i <= exp; i++)
            ok = ok && tok_buf_putc(&tmp, (size_t)i < nd ? digits[i] : '0');
        ok = ok && tok_buf_putc(&tmp, '.');
        if ((size_t)exp + 1 < nd)
            ok = ok && tok_buf_append(&tmp, digits + exp + 1, nd - (size_t)exp - 1);
        else
            ok = ok && tok_buf_putc(&tmp, '0');
    }
    ok = ok && tok_buf_append(out, tmp.data, tmp.len);
    tok_buf_free(&tmp);
    return ok;
}

static bool put_int(int64_t i, tok_buf *out)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%lld", (long long)i);
    return tok_buf_append(out, buf, (size_t)n);
}

static bool repr_str(const jstr *s, tok_buf *out)
{
    bool has_sq = memchr(s->data, '\'', s->len) != NULL;
    bool has_dq = memchr(s->data, '"', s->len) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    if (!tok_buf_putc(out, q))
        return false;
    for (size_t i = 0; i < s->len; i++) {
        unsigned char c = (unsigned char)s->data[i];
        bool ok;
        if (c == '\\')
            ok = tok_buf_append(out, "\\\\", 2);
        else if (c == (unsigned char)q)
            ok = tok_buf_putc(out, '\\') && tok_buf_putc(out, q);
        else if (c == '\n')
            ok = tok_buf_append(out, "\\n", 2);
        else if (c == '\r')
            ok = tok_buf_append(out, "\\r", 2);
        else if (c == '\t')
            ok = tok_buf_append(out, "\\t", 2);
        else if (c < 0x20 || c == 0x7F) {
            char b[8];
            snprintf(b, sizeof b, "\\x%02x", c);
            ok = tok_buf_append(out, b, 4);
        } else
            ok = tok_buf_putc(out, (char)c);
        if (!ok)
            return false;
    }
    return tok_buf_putc(out, q);
}

static bool repr_rec(const jv *v, tok_buf *out, int depth)
{
    if ((v->t == JV_LIST || v->t == JV_DICT) &&
        (depth >= JINJA_MAX_VALUE_DEPTH || out->len > JINJA_MAX_TEXT))
        return false;
    switch (v->t) {
    case JV_STR: return repr_str(v->u.s, out);
    case JV_LIST: {
        const jlist *l = v->u.l;
        if (!tok_buf_putc(out, l->is_tuple ? '(' : '['))
            return false;
        for (size_t i = 0; i < l->n; i++)
            if ((i && !tok_buf_append(out, ", ", 2)) || !repr_rec(&l->v[i], out, depth + 1))
                return false;
        if (l->is_tuple && l->n == 1 && !tok_buf_putc(out, ','))
            return false;
        return tok_buf_putc(out, l->is_tuple ? ')' : ']');
    }
    case JV_DICT: {
        const jdict *d = v->u.d;
        if (d->is_namespace)
            return tok_buf_append(out, "<Namespace>", 11);
        if (!tok_buf_putc(out, '{'))
            return false;
        for (size_t i = 0; i < d->n; i++)
            if ((i && !tok_buf_append(out, ", ", 2)) || !repr_str(d->keys[i], out) ||
                !tok_buf_append(out, ": ", 2) || !repr_rec(&d->vals[i], out, depth + 1))
                return false;
        return tok_buf_putc(out, '}');
    }
    default: return jv_to_str(v, out);
    }
}

bool jv_repr(const jv *v, tok_buf *out)
{
    return repr_rec(v, out, 0);
}

bool jv_to_str(const jv *v, tok_buf *out)
{
    switch (v->t) {
    case JV_UNDEF: return tok_buf_append(out, "", 0);
    case JV_NONE: return tok_buf_append(out, "None", 4);
    case JV_BOOL: return v->u.b ? tok_buf_append(out, "True", 4) : tok_buf_append(out, "False", 5);
    case JV_INT: return put_int(v->u.i, out);
    case JV_FLOAT: return put_float(v->u.f, out);
    case JV_STR: return tok_buf_append(out, v->u.s->data, v->u.s->len);
    case JV_LIST:
    case JV_DICT: return jv_repr(v, out);
    case JV_FUNC: return tok_buf_append(out, "<function>", 10);
    }
    return false;
}

/* \uXXXX (lowercase hex, as Python's json), a surrogate pair above U+FFFF. */
static bool json_u_escape(uint32_t cp, tok_buf *out)
{
    char b[16];
    int n = cp > 0xFFFF ? snprintf(b, sizeof b, "\\u%04x\\u%04x", 0xD800 + ((cp - 0x10000) >> 10),
                                   0xDC00 + ((cp - 0x10000) & 0x3FF))
                        : snprintf(b, sizeof b, "\\u%04x", cp);
    return tok_buf_append(out, b, (size_t)n);
}

static bool json_char(const jstr *s, size_t *i, bool ensure_ascii, tok_buf *out)
{
    unsigned char c = (unsigned char)s->data[*i];
    const char *esc = c == '"'    ? "\\\""
                      : c == '\\' ? "\\\\"
                      : c == '\n' ? "\\n"
                      : c == '\r' ? "\\r"
                      : c == '\t' ? "\\t"
                      : c == '\b' ? "\\b"
                      : c == '\f' ? "\\f"
                                  : NULL;
    if (esc) {
        (*i)++;
        return tok_buf_append(out, esc, 2);
    }
    if (c < 0x20 || (c >= 0x7F && ensure_ascii)) {
        uint32_t cp = c;
        size_t n = c < 0x20 ? 1 : tok_utf8_next(s->data + *i, s->len - *i, &cp);
        *i += n ? n : 1;
        return json_u_escape(cp, out);
    }
    (*i)++;
    return tok_buf_putc(out, (char)c);
}

static bool json_str(const jstr *s, bool ensure_ascii, tok_buf *out)
{
    if (!tok_buf_putc(out, '"'))
        return false;
    for (size_t i = 0; i < s->len;)
        if (!json_char(s, &i, ensure_ascii, out))
            return false;
    return tok_buf_putc(out, '"');
}

static bool newline_indent(const jv_json_fmt *f, int depth, tok_buf *out)
{
    if (!f->indent)
        return true;
    if (!tok_buf_putc(out, '\n'))
        return false;
    for (int i = 0; i < depth; i++)
        if (!tok_buf_append(out, f->indent, f->indent_len))
            return false;
    return true;
}

static int cmp_keys(const void *x, const void *y)
{
    const jstr *a = *(const jstr *const *)x, *b = *(const jstr *const *)y;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->data, b->data, n);
    return c ? c : (a->len < b->len ? -1 : a->len > b->len);
}

static bool to_json(const jv *v, const jv_json_fmt *f, int depth, tok_buf *out);

static bool list_to_json(const jlist *l, const jv_json_fmt *f, int depth, tok_buf *out)
{
    if (l->n == 0)
        return tok_buf_append(out, "[]", 2);
    bool ok = tok_buf_putc(out, '[');
    for (size_t i = 0; i < l->n && ok; i++) {
        if (i)
            ok = tok_buf_append(out, f->item_sep, f->item_sep_len);
        ok = ok && newline_indent(f, depth + 1, out) && to_json(&l->v[i], f, depth + 1, out);
    }
    return ok && newline_indent(f, depth, out) && tok_buf_putc(out, ']');
}

/* The order dict keys are written in: as stored, or sorted (sort_keys). */
static size_t *key_order(const jdict *d, bool sort_keys)
{
    size_t *order = oct_malloc(d->n * sizeof *order);
    if (!order)
        return NULL;
    for (size_t i = 0; i < d->n; i++)
        order[i] = i;
    /* selection sort by key: dicts here are small */
    for (size_t i = 0; sort_keys && i < d->n; i++)
        for (size_t k = i + 1; k < d->n; k++)
            if (cmp_keys(&d->keys[order[k]], &d->keys[order[i]]) < 0) {
                size_t t = order[i];
                order[i] = order[k];
                order[k] = t;
            }
    return order;
}

static bool dict_to_json(const jdict *d, const jv_json_fmt *f, int depth, tok_buf *out)
{
    if (d->n == 0)
        return tok_buf_append(out, "{}", 2);
    size_t *order = key_order(d, f->sort_keys);
    bool ok = order && tok_buf_putc(out, '{');
    for (size_t k = 0; k < d->n && ok; k++) {
        size_t i = order[k];
        if (k)
            ok = tok_buf_append(out, f->item_sep, f->item_sep_len);
        ok = ok && newline_indent(f, depth + 1, out) &&
             json_str(d->keys[i], f->ensure_ascii, out) &&
             tok_buf_append(out, f->key_sep, f->key_sep_len) &&
             to_json(&d->vals[i], f, depth + 1, out);
    }
    oct_free(order);
    return ok && newline_indent(f, depth, out) && tok_buf_putc(out, '}');
}

static bool to_json(const jv *v, const jv_json_fmt *f, int depth, tok_buf *out)
{
    if ((v->t == JV_LIST || v->t == JV_DICT) &&
        (depth >= JINJA_MAX_VALUE_DEPTH || out->len > JINJA_MAX_TEXT))
        return false;
    switch (v->t) {
    case JV_NONE: return tok_buf_append(out, "null", 4);
    case JV_BOOL: return v->u.b ? tok_buf_append(out, "true", 4) : tok_buf_append(out, "false", 5);
    case JV_INT: return put_int(v->u.i, out);
    case JV_FLOAT:
        if (isnan(v->u.f))
            return tok_buf_append(out, "NaN", 3);
        if (isinf(v->u.f))
            return v->u.f > 0 ? tok_buf_append(out, "Infinity", 8)
                              : tok_buf_append(out, "-Infinity", 9);
        return put_float(v->u.f, out);
    case JV_STR: return json_str(v->u.s, f->ensure_ascii, out);
    case JV_LIST: return list_to_json(v->u.l, f, depth, out);
    case JV_DICT: return dict_to_json(v->u.d, f, depth, out);
    default: return false;
    }
}

bool jv_to_json(const jv *v, const jv_json_fmt *fmt, tok_buf *out)
{
    return to_json(v, fmt, 0, out);
}

static bool is_num(const jv *v)
{
    return v->t == JV_INT || v->t == JV_FLOAT || v->t == JV_BOOL;
}

static double num(const jv *v)
{
    return v->t == JV_FLOAT ? v->u.f : v->t == JV_INT ? (double)v->u.i : (v->u.b ? 1.0 : 0.0);
}

/* 1 equal, 0 not, -1 too deep or too large a walk (*budget counts nodes). */
static int equal_rec(const jv *a, const jv *b, int depth, size_t *budget)
{
    if (is_num(a) && is_num(b)) {
        if (a->t != JV_FLOAT && b->t != JV_FLOAT) {
            int64_t x = a->t == JV_INT ? a->u.i : a->u.b;
            int64_t y = b->t == JV_INT ? b->u.i : b->u.b;
            return x == y;
        }
        return num(a) == num(b);
    }
    if (a->t != b->t)
        return 0;
    if ((a->t == JV_LIST || a->t == JV_DICT) && (depth >= JINJA_MAX_VALUE_DEPTH || !(*budget)--))
        return -1;
    switch (a->t) {
    case JV_UNDEF:
    case JV_NONE: return 1;
    case JV_STR:
        return a->u.s->len == b->u.s->len && memcmp(a->u.s->data, b->u.s->data, a->u.s->len) == 0;
    case JV_LIST:
        if (a->u.l == b->u.l)
            return 1;
        if (a->u.l->n != b->u.l->n)
            return 0;
        for (size_t i = 0; i < a->u.l->n; i++) {
            int r = equal_rec(&a->u.l->v[i], &b->u.l->v[i], depth + 1, budget);
            if (r != 1)
                return r;
        }
        return 1;
    case JV_DICT:
        if (a->u.d == b->u.d)
            return 1;
        if (a->u.d->n != b->u.d->n)
            return 0;
        for (size_t i = 0; i < a->u.d->n; i++) {
            const jv *o = jv_dict_get(b->u.d, a->u.d->keys[i]->data, a->u.d->keys[i]->len);
            int r = o ? equal_rec(&a->u.d->vals[i], o, depth + 1, budget) : 0;
            if (r != 1)
                return r;
        }
        return 1;
    case JV_FUNC: return a->u.fn == b->u.fn;
    default: return 0;
    }
}

bool jv_equal(const jv *a, const jv *b)
{
    size_t budget = (size_t)1 << 24; /* list/dict nodes one comparison may visit */
    return equal_rec(a, b, 0, &budget) == 1;
}

static bool deeper_than(const jv *v, int depth, size_t *budget)
{
    if (v->t != JV_LIST && v->t != JV_DICT)
        return false;
    if (depth >= JINJA_MAX_VALUE_DEPTH)
        return true;
    if (!(*budget)--)
        return false;
    size_t n = v->t == JV_LIST ? v->u.l->n : v->u.d->n;
    for (size_t i = 0; i < n; i++)
        if (deeper_than(v->t == JV_LIST ? &v->u.l->v[i] : &v->u.d->vals[i], depth + 1, budget))
            return true;
    return false;
}

bool jv_too_deep(const jv *v)
{
    size_t budget = (size_t)1 << 24;
    return deeper_than(v, 0, &budget);
}

const char *jv_type_name(jv_type t)
{
    static const char *const names[] = {"undefined", "NoneType", "bool", "int",     "float",
                                        "str",       "list",     "dict", "function"};
    return (unsigned)t < OCT_ARRAY_LEN(names) ? names[t] : "?";
}

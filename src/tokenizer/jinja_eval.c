/* jinja_eval.c — renders a parsed template: scopes (a for loop has its own,
 * as in Jinja, which is why templates use namespace()), loop variables,
 * Python operator semantics, and the filters, tests, string/dict methods
 * and global functions chat templates use.  Anything else is an error
 * naming the template line. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tokenizer/jinja.h"

enum { FN_RAISE = 1, FN_NAMESPACE, FN_RANGE, FN_STRFTIME, FN_DICT };

typedef struct scope {
    jdict *vars;
    struct scope *parent;
} scope;

typedef struct ev {
    jarena *a;
    tok_buf *out;
    oct_error *err;
    bool failed;
    int depth;
    scope *top;
    jdict *globals;
    int loop_ctl; /* 1 break, 2 continue */
    size_t steps;
} ev;

#define MAX_DEPTH 400
#define MAX_STEPS 50000000u
#define MAX_OUTPUT ((size_t)64 << 20)

static jv fail(ev *e, const jnode *n, const char *fmt, ...) OCT_PRINTF(3, 4);

static jv fail(ev *e, const jnode *n, const char *fmt, ...)
{
    if (!e->failed) {
        char m[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m, sizeof m, fmt, ap);
        va_end(ap);
        oct_error_set(e->err, OCT_ERR_FORMAT, -1, "chat template line %d: %s", n ? n->line : 0, m);
        e->failed = true;
    }
    return jv_undef();
}

static jv nomem(ev *e)
{
    if (!e->failed) {
        oct_error_set(e->err, OCT_ERR_NOMEM, -1,
                      "chat template: out of memory (or the render exceeded its memory limit)");
        e->failed = true;
    }
    return jv_undef();
}

static jv str_of(ev *e, const char *s, size_t n)
{
    jv v = jv_str(e->a, s, n);
    if (v.t != JV_STR)
        return nomem(e);
    return v;
}

static jv buf_str(ev *e, tok_buf *b)
{
    jv v = str_of(e, b->data ? b->data : "", b->len);
    tok_buf_free(b);
    return v;
}

/* Python str() of any value as a new string value. */
static jv to_str(ev *e, const jv *v)
{
    if (v->t == JV_STR)
        return *v;
    tok_buf b = {0};
    if (!jv_to_str(v, &b)) {
        tok_buf_free(&b);
        return nomem(e);
    }
    return buf_str(e, &b);
}

/* ------------------------------------------------------------ code points */

typedef struct cps {
    uint32_t *v;
    size_t n;
} cps;

static bool decode_cps(ev *e, const jstr *s, cps *out)
{
    out->v = jarena_alloc(e->a, (s->len + 1) * sizeof *out->v);
    if (!out->v) {
        nomem(e);
        return false;
    }
    out->n = 0;
    for (size_t i = 0; i < s->len;) {
        uint32_t cp;
        i += tok_utf8_next(s->data + i, s->len - i, &cp);
        out->v[out->n++] = cp;
    }
    return true;
}

static jv encode_cps(ev *e, const uint32_t *v, size_t n)
{
    tok_buf b = {0};
    for (size_t i = 0; i < n; i++)
        if (!tok_buf_put_cp(&b, v[i])) {
            tok_buf_free(&b);
            return nomem(e);
        }
    return buf_str(e, &b);
}

static size_t cp_len(const jstr *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->len; i++)
        if (((unsigned char)s->data[i] & 0xC0) != 0x80)
            n++;
    return n;
}

static bool py_isspace(uint32_t c)
{
    return tok_is_whitespace(c) || (c >= 0x1C && c <= 0x1F);
}

/* --------------------------------------------------------------- scoping */

static jv *lookup(ev *e, const char *name)
{
    size_t n = strlen(name);
    for (scope *s = e->top; s; s = s->parent) {
        jv *v = jv_dict_get(s->vars, name, n);
        if (v)
            return v;
    }
    return jv_dict_get(e->globals, name, n);
}

static bool assign(ev *e, const char *name, jv v)
{
    if (!jv_dict_set(e->a, e->top->vars, name, strlen(name), v)) {
        nomem(e);
        return false;
    }
    return true;
}

/* -------------------------------------------------------------- helpers */

static bool is_num(const jv *v)
{
    return v->t == JV_INT || v->t == JV_FLOAT || v->t == JV_BOOL;
}

static double num(const jv *v)
{
    return v->t == JV_FLOAT ? v->u.f : v->t == JV_INT ? (double)v->u.i : (v->u.b ? 1.0 : 0.0);
}

static int64_t ival(const jv *v)
{
    return v->t == JV_INT ? v->u.i : v->t == JV_BOOL ? v->u.b : (int64_t)v->u.f;
}

/* Iterable -> list (dict: keys, string: characters); NULL when not iterable. */
static jlist *as_list(ev *e, const jnode *n, const jv *v)
{
    jv l = jv_list_new(e->a);
    if (l.t != JV_LIST) {
        nomem(e);
        return NULL;
    }
    switch (v->t) {
    case JV_LIST: return v->u.l;
    case JV_UNDEF: return l.u.l;
    case JV_DICT:
        for (size_t i = 0; i < v->u.d->n; i++) {
            jv k = {JV_STR, {.s = v->u.d->keys[i]}};
            if (!jv_list_push(e->a, l.u.l, k)) {
                nomem(e);
                return NULL;
            }
        }
        return l.u.l;
    case JV_STR: {
        const jstr *s = v->u.s;
        for (size_t i = 0; i < s->len;) {
            size_t cl = tok_utf8_len((unsigned char)s->data[i]);
            if (cl > s->len - i)
                cl = s->len - i;
            jv c = str_of(e, s->data + i, cl);
            if (e->failed || !jv_list_push(e->a, l.u.l, c)) {
                nomem(e);
                return NULL;
            }
            i += cl;
        }
        return l.u.l;
    }
    default: fail(e, n, "'%s' object is not iterable", jv_type_name(v->t)); return NULL;
    }
}

static int compare_vals(ev *e, const jnode *n, const jv *a, const jv *b, bool *ok)
{
    *ok = true;
    if (is_num(a) && is_num(b)) {
        double x = num(a), y = num(b);
        return x < y ? -1 : x > y;
    }
    if (a->t == JV_STR && b->t == JV_STR) {
        size_t m = a->u.s->len < b->u.s->len ? a->u.s->len : b->u.s->len;
        int c = memcmp(a->u.s->data, b->u.s->data, m);
        if (c)
            return c < 0 ? -1 : 1;
        return a->u.s->len < b->u.s->len ? -1 : a->u.s->len > b->u.s->len;
    }
    *ok = false;
    fail(e, n, "'<' not supported between instances of '%s' and '%s'", jv_type_name(a->t),
         jv_type_name(b->t));
    return 0;
}

static bool contains(ev *e, const jnode *n, const jv *hay, const jv *needle, bool *res)
{
    switch (hay->t) {
    case JV_STR:
        if (needle->t != JV_STR) {
            fail(e, n, "'in <string>' requires string as left operand, not %s",
                 jv_type_name(needle->t));
            return false;
        }
        *res = needle->u.s->len == 0 ||
               memmem(hay->u.s->data, hay->u.s->len, needle->u.s->data, needle->u.s->len) != NULL;
        return true;
    case JV_LIST:
        *res = false;
        for (size_t i = 0; i < hay->u.l->n && !*res; i++)
            *res = jv_equal(&hay->u.l->v[i], needle);
        return true;
    case JV_DICT:
        *res = needle->t == JV_STR &&
               jv_dict_get(hay->u.d, needle->u.s->data, needle->u.s->len) != NULL;
        return true;
    case JV_UNDEF: fail(e, n, "argument of type 'Undefined' is not iterable"); return false;
    default:
        fail(e, n, "argument of type '%s' is not iterable", jv_type_name(hay->t));
        return false;
    }
}

/* obj.name / obj[name] as Jinja's getattr/getitem on data. */
static jv get_attr(ev *e, const jnode *n, const jv *obj, const char *name, size_t len)
{
    if (obj->t == JV_DICT) {
        jv *v = jv_dict_get(obj->u.d, name, len);
        return v ? *v : jv_undef();
    }
    if (obj->t == JV_UNDEF)
        return fail(e, n, "'%.*s' is undefined (attribute of an undefined value)", (int)len, name);
    return jv_undef();
}

static jv get_item(ev *e, const jnode *n, const jv *obj, const jv *key)
{
    if (obj->t == JV_DICT) {
        if (key->t != JV_STR)
            return jv_undef();
        return get_attr(e, n, obj, key->u.s->data, key->u.s->len);
    }
    if (obj->t == JV_UNDEF)
        return fail(e, n, "subscript of an undefined value");
    if ((obj->t == JV_LIST || obj->t == JV_STR) && (key->t == JV_INT || key->t == JV_BOOL)) {
        int64_t i = ival(key);
        if (obj->t == JV_LIST) {
            int64_t len = (int64_t)obj->u.l->n;
            if (i < 0)
                i += len;
            return i >= 0 && i < len ? obj->u.l->v[i] : jv_undef();
        }
        cps c;
        if (!decode_cps(e, obj->u.s, &c))
            return jv_undef();
        int64_t len = (int64_t)c.n;
        if (i < 0)
            i += len;
        return i >= 0 && i < len ? encode_cps(e, &c.v[i], 1) : jv_undef();
    }
    return jv_undef();
}

/* Python slice semantics on lists and strings (by code point). */
static jv slice(ev *e, const jnode *n, const jv *obj, const jv *lo, const jv *hi, const jv *st)
{
    int64_t step = st && st->t != JV_NONE && st->t != JV_UNDEF ? ival(st) : 1;
    if (step == 0)
        return fail(e, n, "slice step cannot be zero");
    cps c = {0};
    int64_t len;
    if (obj->t == JV_LIST)
        len = (int64_t)obj->u.l->n;
    else if (obj->t == JV_STR) {
        if (!decode_cps(e, obj->u.s, &c))
            return jv_undef();
        len = (int64_t)c.n;
    } else {
        return fail(e, n, "'%s' object is not subscriptable", jv_type_name(obj->t));
    }
    int64_t a, b;
    bool has_lo = lo && lo->t != JV_NONE && lo->t != JV_UNDEF;
    bool has_hi = hi && hi->t != JV_NONE && hi->t != JV_UNDEF;
    if (step > 0) {
        a = has_lo ? ival(lo) : 0;
        b = has_hi ? ival(hi) : len;
        if (a < 0)
            a = a + len < 0 ? 0 : a + len;
        if (b < 0)
            b = b + len < 0 ? 0 : b + len;
        if (a > len)
            a = len;
        if (b > len)
            b = len;
    } else {
        a = has_lo ? ival(lo) : len - 1;
        b = has_hi ? ival(hi) : -len - 1;
        if (a < 0)
            a = a + len < -1 ? -1 : a + len;
        if (b < 0)
            b = b + len < -1 ? -1 : b + len;
        if (a >= len)
            a = len - 1;
        if (b >= len)
            b = len - 1;
    }
    if (obj->t == JV_LIST) {
        jv out = jv_list_new(e->a);
        if (out.t != JV_LIST)
            return nomem(e);
        for (int64_t i = a; step > 0 ? i < b : i > b; i += step)
            if (!jv_list_push(e->a, out.u.l, obj->u.l->v[i]))
                return nomem(e);
        return out;
    }
    uint32_t *buf = jarena_alloc(e->a, ((size_t)len + 1) * sizeof *buf);
    if (!buf)
        return nomem(e);
    size_t k = 0;
    for (int64_t i = a; step > 0 ? i < b : i > b; i += step)
        buf[k++] = c.v[i];
    return encode_cps(e, buf, k);
}

/* ---------------------------------------------------------- string tools */

/* strip/lstrip/rstrip: chars NULL -> whitespace */
static jv strip(ev *e, const jstr *s, const jv *chars, bool left, bool right)
{
    cps c, set = {0};
    if (!decode_cps(e, s, &c))
        return jv_undef();
    bool use_set = chars && chars->t == JV_STR;
    if (use_set && !decode_cps(e, chars->u.s, &set))
        return jv_undef();
    size_t a = 0, b = c.n;
    for (; left && a < b; a++) {
        bool hit = false;
        if (use_set) {
            for (size_t k = 0; k < set.n; k++)
                hit = hit || set.v[k] == c.v[a];
        } else {
            hit = py_isspace(c.v[a]);
        }
        if (!hit)
            break;
    }
    for (; right && b > a; b--) {
        bool hit = false;
        if (use_set) {
            for (size_t k = 0; k < set.n; k++)
                hit = hit || set.v[k] == c.v[b - 1];
        } else {
            hit = py_isspace(c.v[b - 1]);
        }
        if (!hit)
            break;
    }
    return encode_cps(e, c.v + a, b - a);
}

static jv split(ev *e, const jnode *n, const jstr *s, const jv *sep, int64_t maxsplit)
{
    jv out = jv_list_new(e->a);
    if (out.t != JV_LIST)
        return nomem(e);
    if (!sep || sep->t == JV_NONE || sep->t == JV_UNDEF) {
        /* runs of whitespace, no empty strings */
        cps c;
        if (!decode_cps(e, s, &c))
            return jv_undef();
        size_t i = 0;
        int64_t done = 0;
        while (i < c.n) {
            while (i < c.n && py_isspace(c.v[i]))
                i++;
            if (i >= c.n)
                break;
            size_t j = i;
            if (maxsplit >= 0 && done >= maxsplit) {
                size_t end = c.n;
                while (end > i && py_isspace(c.v[end - 1]))
                    end--;
                j = end;
            } else {
                while (j < c.n && !py_isspace(c.v[j]))
                    j++;
            }
            if (!jv_list_push(e->a, out.u.l, encode_cps(e, c.v + i, j - i)))
                return nomem(e);
            done++;
            i = j;
        }
        return out;
    }
    if (sep->t != JV_STR)
        return fail(e, n, "split(): separator must be a string");
    const jstr *p = sep->u.s;
    if (p->len == 0)
        return fail(e, n, "split(): empty separator");
    size_t i = 0;
    int64_t done = 0;
    for (;;) {
        const char *hit = (maxsplit < 0 || done < maxsplit)
                              ? memmem(s->data + i, s->len - i, p->data, p->len)
                              : NULL;
        size_t end = hit ? (size_t)(hit - s->data) : s->len;
        if (!jv_list_push(e->a, out.u.l, str_of(e, s->data + i, end - i)))
            return nomem(e);
        if (!hit)
            break;
        i = end + p->len;
        done++;
    }
    return out;
}

static jv replace(ev *e, const jnode *n, const jstr *s, const jv *old, const jv *with,
                  int64_t count)
{
    if (old->t != JV_STR || with->t != JV_STR)
        return fail(e, n, "replace(): arguments must be strings");
    tok_buf b = {0};
    size_t i = 0;
    int64_t done = 0;
    const jstr *o = old->u.s, *w = with->u.s;
    bool ok = true;
    if (o->len == 0) { /* Python inserts between every character */
        for (size_t k = 0; k <= s->len && ok; k++) {
            if ((count < 0 || done < count) &&
                (k == s->len || ((unsigned char)s->data[k] & 0xC0) != 0x80)) {
                ok = tok_buf_append(&b, w->data, w->len);
                done++;
            }
            if (k < s->len)
                ok = ok && tok_buf_putc(&b, s->data[k]);
        }
    } else {
        for (;;) {
            const char *hit = (count < 0 || done < count)
                                  ? memmem(s->data + i, s->len - i, o->data, o->len)
                                  : NULL;
            size_t end = hit ? (size_t)(hit - s->data) : s->len;
            ok = ok && tok_buf_append(&b, s->data + i, end - i);
            if (!hit)
                break;
            ok = ok && tok_buf_append(&b, w->data, w->len);
            i = end + o->len;
            done++;
        }
    }
    if (!ok) {
        tok_buf_free(&b);
        return nomem(e);
    }
    return buf_str(e, &b);
}

static jv change_case(ev *e, const jstr *s, int mode /* 0 lower 1 upper 2 capitalize 3 title */)
{
    if (mode == 0) {
        tok_buf b = {0};
        if (!tok_unicode_lowercase(s->data, s->len, &b)) {
            tok_buf_free(&b);
            return nomem(e);
        }
        return buf_str(e, &b);
    }
    jv r = str_of(e, s->data, s->len);
    if (r.t != JV_STR)
        return r;
    char *d = r.u.s->data;
    bool word_start = true;
    for (size_t i = 0; i < r.u.s->len; i++) {
        char c = d[i];
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        bool up = mode == 1 || (mode == 2 && i == 0) || (mode == 3 && word_start);
        if (alpha)
            d[i] = up ? (char)(c & ~0x20) : (mode >= 2 ? (char)(c | 0x20) : c);
        word_start = !alpha && !((unsigned char)c >= 0x80);
    }
    return r;
}

static bool starts_ends(const jstr *s, const jv *x, bool end)
{
    if (x->t == JV_LIST) {
        for (size_t i = 0; i < x->u.l->n; i++)
            if (starts_ends(s, &x->u.l->v[i], end))
                return true;
        return false;
    }
    if (x->t != JV_STR || x->u.s->len > s->len)
        return false;
    const char *at = end ? s->data + s->len - x->u.s->len : s->data;
    return memcmp(at, x->u.s->data, x->u.s->len) == 0;
}

/* --------------------------------------------------------------- forward */

static jv eval(ev *e, const jnode *n);
static void exec_body(ev *e, const jnodes *body);

typedef struct args {
    jv pos[8];
    size_t n_pos;
    const char *kw_name[8];
    jv kw[8];
    size_t n_kw;
} args;

/* Evaluates call arguments; `skip` leading kids are not arguments. */
static bool eval_args(ev *e, const jnode *n, size_t skip, args *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = skip; i < n->kids.n; i++) {
        if (out->n_pos == OCT_ARRAY_LEN(out->pos)) {
            fail(e, n, "too many arguments");
            return false;
        }
        out->pos[out->n_pos++] = eval(e, n->kids.v[i]);
    }
    for (size_t i = 0; i < n->kwargs.n; i++) {
        if (out->n_kw == OCT_ARRAY_LEN(out->kw)) {
            fail(e, n, "too many keyword arguments");
            return false;
        }
        out->kw_name[out->n_kw] = n->kwargs.v[i]->name;
        out->kw[out->n_kw++] = eval(e, n->kwargs.v[i]->kids.v[0]);
    }
    return !e->failed;
}

/* Keyword argument `name`, else NULL. */
static const jv *kwarg(const args *a, const char *name)
{
    for (size_t k = 0; name && k < a->n_kw; k++)
        if (strcmp(a->kw_name[k], name) == 0)
            return &a->kw[k];
    return NULL;
}

/* Positional argument i, else keyword `name`, else NULL. */
static const jv *arg(const args *a, size_t i, const char *name)
{
    if (i < a->n_pos)
        return &a->pos[i];
    for (size_t k = 0; name && k < a->n_kw; k++)
        if (strcmp(a->kw_name[k], name) == 0)
            return &a->kw[k];
    return NULL;
}

/* ------------------------------------------------------------------ tests */

static bool run_test(ev *e, const jnode *n, const char *name, const jv *v, const args *a, bool *res)
{
    const jv *x = arg(a, 0, NULL);
    if (!strcmp(name, "defined"))
        *res = v->t != JV_UNDEF;
    else if (!strcmp(name, "undefined"))
        *res = v->t == JV_UNDEF;
    else if (!strcmp(name, "none"))
        *res = v->t == JV_NONE;
    else if (!strcmp(name, "boolean"))
        *res = v->t == JV_BOOL;
    else if (!strcmp(name, "true"))
        *res = v->t == JV_BOOL && v->u.b;
    else if (!strcmp(name, "false"))
        *res = v->t == JV_BOOL && !v->u.b;
    else if (!strcmp(name, "integer"))
        *res = v->t == JV_INT;
    else if (!strcmp(name, "float"))
        *res = v->t == JV_FLOAT;
    else if (!strcmp(name, "number"))
        *res = is_num(v);
    else if (!strcmp(name, "string"))
        *res = v->t == JV_STR;
    else if (!strcmp(name, "mapping"))
        *res = v->t == JV_DICT;
    else if (!strcmp(name, "iterable"))
        *res = v->t == JV_LIST || v->t == JV_DICT || v->t == JV_STR || v->t == JV_UNDEF;
    else if (!strcmp(name, "sequence"))
        *res = v->t == JV_LIST || v->t == JV_DICT || v->t == JV_STR;
    else if (!strcmp(name, "callable"))
        *res = v->t == JV_FUNC;
    else if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        bool up = name[0] == 'u', any = false;
        *res = v->t == JV_STR;
        for (size_t i = 0; *res && i < v->u.s->len; i++) {
            char c = v->u.s->data[i];
            if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
                any = true;
                if ((c >= 'a' && c <= 'z') == up)
                    *res = false;
            }
        }
        *res = *res && any;
    } else if (!strcmp(name, "odd") || !strcmp(name, "even")) {
        if (v->t != JV_INT)
            return fail(e, n, "test '%s' needs an integer", name), false;
        *res = (v->u.i % 2 != 0) == (name[0] == 'o');
    } else if (!strcmp(name, "divisibleby")) {
        if (!x || !is_num(x) || ival(x) == 0 || v->t != JV_INT)
            return fail(e, n, "bad divisibleby test"), false;
        *res = v->u.i % ival(x) == 0;
    } else if (!strcmp(name, "equalto") || !strcmp(name, "eq") || !strcmp(name, "==") ||
               !strcmp(name, "sameas")) {
        if (!x)
            return fail(e, n, "test '%s' needs an argument", name), false;
        *res = jv_equal(v, x) && (strcmp(name, "sameas") || v->t == x->t);
    } else if (!strcmp(name, "ne") || !strcmp(name, "!=")) {
        if (!x)
            return fail(e, n, "test '%s' needs an argument", name), false;
        *res = !jv_equal(v, x);
    } else if (!strcmp(name, "lt") || !strcmp(name, "gt") || !strcmp(name, "le") ||
               !strcmp(name, "ge")) {
        bool ok;
        if (!x)
            return fail(e, n, "test '%s' needs an argument", name), false;
        int c = compare_vals(e, n, v, x, &ok);
        if (!ok)
            return false;
        *res =
            name[0] == 'l' ? (name[1] == 't' ? c < 0 : c <= 0) : (name[1] == 't' ? c > 0 : c >= 0);
    } else if (!strcmp(name, "in")) {
        if (!x)
            return fail(e, n, "test 'in' needs an argument"), false;
        return contains(e, n, x, v, res);
    } else {
        fail(e, n, "unsupported test '%s'", name);
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------- filters */

static jv apply_filter(ev *e, const jnode *n, const char *name, const jv *v, const args *a);

static jv filter_select(ev *e, const jnode *n, const char *name, const jv *v, const args *a)
{
    bool by_attr = strstr(name, "attr") != NULL;
    bool reject = name[0] == 'r';
    jlist *l = as_list(e, n, v);
    jv out = jv_list_new(e->a);
    if (!l || out.t != JV_LIST)
        return e->failed ? jv_undef() : nomem(e);
    const jv *attr = by_attr ? arg(a, 0, NULL) : NULL;
    if (by_attr && (!attr || attr->t != JV_STR))
        return fail(e, n, "%s needs an attribute name", name);
    size_t first_test = by_attr ? 1 : 0;
    const jv *test = arg(a, first_test, NULL);
    if (test && test->t != JV_STR)
        return fail(e, n, "%s: the test must be a name", name);
    args targs = {0};
    for (size_t k = first_test + 1; k < a->n_pos && targs.n_pos < 8; k++)
        targs.pos[targs.n_pos++] = a->pos[k];
    for (size_t i = 0; i < l->n; i++) {
        jv item = l->v[i];
        jv subject = by_attr ? get_attr(e, n, &item, attr->u.s->data, attr->u.s->len) : item;
        if (e->failed)
            return jv_undef();
        bool keep;
        if (test) {
            if (!run_test(e, n, test->u.s->data, &subject, &targs, &keep))
                return jv_undef();
        } else {
            keep = jv_truthy(&subject);
        }
        if (keep != reject && !jv_list_push(e->a, out.u.l, item))
            return nomem(e);
    }
    return out;
}

static jv filter_tojson(ev *e, const jnode *n, const jv *v, const args *a)
{
    const jv *ind = arg(a, 0, "indent");
    const jv *sk = arg(a, 3, "sort_keys");
    int indent = ind && ind->t == JV_INT ? (int)ind->u.i : -1;
    if (indent > 64)
        indent = 64;
    tok_buf b = {0};
    if (!jv_to_json(v, indent, sk && jv_truthy(sk), &b)) {
        tok_buf_free(&b);
        if (v->t == JV_UNDEF || v->t == JV_FUNC)
            return fail(e, n, "tojson: Object of type %s is not JSON serializable",
                        jv_type_name(v->t));
        return nomem(e);
    }
    return buf_str(e, &b);
}

static jv apply_filter(ev *e, const jnode *n, const char *name, const jv *v, const args *a)
{
    if (!strcmp(name, "trim")) {
        jv s = to_str(e, v);
        return s.t == JV_STR ? strip(e, s.u.s, arg(a, 0, "chars"), true, true) : s;
    }
    if (!strcmp(name, "length") || !strcmp(name, "count")) {
        if (v->t == JV_STR)
            return jv_int((int64_t)cp_len(v->u.s));
        if (v->t == JV_LIST)
            return jv_int((int64_t)v->u.l->n);
        if (v->t == JV_DICT)
            return jv_int((int64_t)v->u.d->n);
        if (v->t == JV_UNDEF)
            return jv_int(0);
        return fail(e, n, "object of type '%s' has no len()", jv_type_name(v->t));
    }
    if (!strcmp(name, "tojson"))
        return filter_tojson(e, n, v, a);
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "capitalize") ||
        !strcmp(name, "title")) {
        jv s = to_str(e, v);
        int mode = name[0] == 'l' ? 0 : name[0] == 'u' ? 1 : name[0] == 'c' ? 2 : 3;
        return s.t == JV_STR ? change_case(e, s.u.s, mode) : s;
    }
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        const jv *dflt = arg(a, 0, "default_value");
        const jv *boolean = arg(a, 1, "boolean");
        bool use = v->t == JV_UNDEF || (boolean && jv_truthy(boolean) && !jv_truthy(v));
        if (use)
            return dflt ? *dflt : str_of(e, "", 0);
        return *v;
    }
    if (!strcmp(name, "first") || !strcmp(name, "last")) {
        jlist *l = as_list(e, n, v);
        if (!l)
            return jv_undef();
        if (!l->n)
            return jv_undef();
        return name[0] == 'f' ? l->v[0] : l->v[l->n - 1];
    }
    if (!strcmp(name, "join")) {
        jlist *l = as_list(e, n, v);
        const jv *sep = arg(a, 0, "d");
        const jv *attr = arg(a, 1, "attribute");
        if (!l)
            return jv_undef();
        tok_buf b = {0};
        bool ok = tok_buf_append(&b, "", 0);
        for (size_t i = 0; i < l->n && ok; i++) {
            if (i && sep && sep->t == JV_STR)
                ok = tok_buf_append(&b, sep->u.s->data, sep->u.s->len);
            jv item = l->v[i];
            if (attr && attr->t == JV_STR)
                item = get_attr(e, n, &item, attr->u.s->data, attr->u.s->len);
            ok = ok && jv_to_str(&item, &b);
        }
        if (!ok) {
            tok_buf_free(&b);
            return nomem(e);
        }
        return buf_str(e, &b);
    }
    if (!strcmp(name, "list")) {
        jlist *l = as_list(e, n, v);
        if (!l)
            return jv_undef();
        jv out = jv_list_new(e->a);
        for (size_t i = 0; out.t == JV_LIST && i < l->n; i++)
            if (!jv_list_push(e->a, out.u.l, l->v[i]))
                return nomem(e);
        return out.t == JV_LIST ? out : nomem(e);
    }
    if (!strcmp(name, "string"))
        return to_str(e, v);
    if (!strcmp(name, "safe") || !strcmp(name, "e") || !strcmp(name, "escape")) {
        if (name[0] == 's')
            return *v;
        jv s = to_str(e, v);
        if (s.t != JV_STR)
            return s;
        tok_buf b = {0};
        bool ok = tok_buf_append(&b, "", 0);
        for (size_t i = 0; i < s.u.s->len && ok; i++) {
            char c = s.u.s->data[i];
            const char *r = c == '&'    ? "&amp;"
                            : c == '<'  ? "&lt;"
                            : c == '>'  ? "&gt;"
                            : c == '"'  ? "&#34;"
                            : c == '\'' ? "&#39;"
                                        : NULL;
            ok = r ? tok_buf_append(&b, r, strlen(r)) : tok_buf_putc(&b, c);
        }
        if (!ok) {
            tok_buf_free(&b);
            return nomem(e);
        }
        return buf_str(e, &b);
    }
    if (!strcmp(name, "int")) {
        if (v->t == JV_STR) {
            char *end;
            long long x = strtoll(v->u.s->data, &end, 10);
            return jv_int(end != v->u.s->data ? (int64_t)x : 0);
        }
        return is_num(v) ? jv_int(ival(v)) : jv_int(0);
    }
    if (!strcmp(name, "float")) {
        if (v->t == JV_STR)
            return jv_float(strtod(v->u.s->data, NULL));
        return is_num(v) ? jv_float(num(v)) : jv_float(0.0);
    }
    if (!strcmp(name, "abs")) {
        if (v->t == JV_INT)
            return jv_int(v->u.i < 0 ? -v->u.i : v->u.i);
        if (v->t == JV_FLOAT)
            return jv_float(fabs(v->u.f));
        return fail(e, n, "abs of a non-number");
    }
    if (!strcmp(name, "round")) {
        const jv *prec = arg(a, 0, "precision");
        double p = prec && is_num(prec) ? num(prec) : 0.0;
        double s = pow(10.0, p);
        return jv_float(round(num(v) * s) / s);
    }
    if (!strcmp(name, "replace")) {
        jv s = to_str(e, v);
        const jv *o = arg(a, 0, "old"), *w = arg(a, 1, "new"), *c = arg(a, 2, "count");
        if (!o || !w)
            return fail(e, n, "replace needs two arguments");
        return s.t == JV_STR ? replace(e, n, s.u.s, o, w, c && is_num(c) ? ival(c) : -1) : s;
    }
    if (!strcmp(name, "items")) {
        if (v->t == JV_UNDEF)
            return jv_list_new(e->a);
        if (v->t != JV_DICT)
            return fail(e, n, "items filter needs a mapping");
        jv out = jv_list_new(e->a);
        for (size_t i = 0; out.t == JV_LIST && i < v->u.d->n; i++) {
            jv pair = jv_list_new(e->a);
            jv k = {JV_STR, {.s = v->u.d->keys[i]}};
            if (pair.t != JV_LIST || !jv_list_push(e->a, pair.u.l, k) ||
                !jv_list_push(e->a, pair.u.l, v->u.d->vals[i]) ||
                !jv_list_push(e->a, out.u.l, pair))
                return nomem(e);
        }
        return out.t == JV_LIST ? out : nomem(e);
    }
    if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr") || !strcmp(name, "select") ||
        !strcmp(name, "reject"))
        return filter_select(e, n, name, v, a);
    if (!strcmp(name, "map")) {
        jlist *l = as_list(e, n, v);
        const jv *attr = kwarg(a, "attribute");
        const jv *fname = arg(a, 0, NULL);
        if (!l)
            return jv_undef();
        jv out = jv_list_new(e->a);
        if (out.t != JV_LIST)
            return nomem(e);
        args fargs = {0};
        for (size_t k = 1; k < a->n_pos && fargs.n_pos < 8; k++)
            fargs.pos[fargs.n_pos++] = a->pos[k];
        for (size_t i = 0; i < l->n; i++) {
            jv r;
            if (attr && attr->t == JV_STR) {
                r = get_attr(e, n, &l->v[i], attr->u.s->data, attr->u.s->len);
                const jv *d = kwarg(a, "default");
                if (r.t == JV_UNDEF && d)
                    r = *d;
            } else if (fname && fname->t == JV_STR) {
                r = apply_filter(e, n, fname->u.s->data, &l->v[i], &fargs);
            } else {
                return fail(e, n, "map needs a filter name or attribute=");
            }
            if (e->failed || !jv_list_push(e->a, out.u.l, r))
                return e->failed ? jv_undef() : nomem(e);
        }
        return out;
    }
    if (!strcmp(name, "reverse")) {
        if (v->t == JV_STR) {
            jv none = jv_none(), m1 = jv_int(-1);
            return slice(e, n, v, &none, &none, &m1);
        }
        jlist *l = as_list(e, n, v);
        if (!l)
            return jv_undef();
        jv out = jv_list_new(e->a);
        for (size_t i = l->n; out.t == JV_LIST && i-- > 0;)
            if (!jv_list_push(e->a, out.u.l, l->v[i]))
                return nomem(e);
        return out.t == JV_LIST ? out : nomem(e);
    }
    if (!strcmp(name, "unique")) {
        jlist *l = as_list(e, n, v);
        if (!l)
            return jv_undef();
        jv out = jv_list_new(e->a);
        for (size_t i = 0; out.t == JV_LIST && i < l->n; i++) {
            bool seen = false;
            for (size_t k = 0; k < out.u.l->n && !seen; k++)
                seen = jv_equal(&out.u.l->v[k], &l->v[i]);
            if (!seen && !jv_list_push(e->a, out.u.l, l->v[i]))
                return nomem(e);
        }
        return out.t == JV_LIST ? out : nomem(e);
    }
    if (!strcmp(name, "indent")) {
        jv s = to_str(e, v);
        const jv *w = arg(a, 0, "width"), *first = arg(a, 1, "first"), *blank = arg(a, 2, "blank");
        if (s.t != JV_STR)
            return s;
        tok_buf pad = {0}, b = {0};
        bool ok = tok_buf_append(&pad, "", 0) && tok_buf_append(&b, "", 0);
        if (w && w->t == JV_STR)
            ok = ok && tok_buf_append(&pad, w->u.s->data, w->u.s->len);
        else
            for (int64_t k = 0; k < (w && is_num(w) ? ival(w) : 4) && k < 256 && ok; k++)
                ok = tok_buf_putc(&pad, ' ');
        const char *p = s.u.s->data, *end = p + s.u.s->len;
        bool first_line = true;
        while (ok && p <= end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            const char *le = nl ? nl : end;
            bool empty = le == p;
            if ((!first_line || (first && jv_truthy(first))) &&
                (!empty || (blank && jv_truthy(blank))))
                ok = tok_buf_append(&b, pad.data, pad.len);
            ok = ok && tok_buf_append(&b, p, (size_t)(le - p));
            if (!nl)
                break;
            ok = ok && tok_buf_putc(&b, '\n');
            p = nl + 1;
            first_line = false;
        }
        tok_buf_free(&pad);
        if (!ok) {
            tok_buf_free(&b);
            return nomem(e);
        }
        return buf_str(e, &b);
    }
    return fail(e, n, "unsupported filter '%s'", name);
}

/* ---------------------------------------------------------------- methods */

static jv call_method(ev *e, const jnode *n, const jv *obj, const char *name, const args *a)
{
    if (obj->t == JV_STR) {
        const jstr *s = obj->u.s;
        const jv *x = arg(a, 0, NULL);
        if (!strcmp(name, "strip"))
            return strip(e, s, x, true, true);
        if (!strcmp(name, "lstrip"))
            return strip(e, s, x, true, false);
        if (!strcmp(name, "rstrip"))
            return strip(e, s, x, false, true);
        if (!strcmp(name, "split")) {
            const jv *m = arg(a, 1, "maxsplit");
            return split(e, n, s, arg(a, 0, "sep"), m && is_num(m) ? ival(m) : -1);
        }
        if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
            if (!x)
                return fail(e, n, "%s() takes an argument", name);
            return jv_bool(starts_ends(s, x, name[0] == 'e'));
        }
        if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "capitalize") ||
            !strcmp(name, "title"))
            return change_case(e, s,
                               name[0] == 'l'   ? 0
                               : name[0] == 'u' ? 1
                               : name[0] == 'c' ? 2
                                                : 3);
        if (!strcmp(name, "replace")) {
            const jv *c = arg(a, 2, NULL);
            if (!x || !arg(a, 1, NULL))
                return fail(e, n, "replace() takes two arguments");
            return replace(e, n, s, x, arg(a, 1, NULL), c && is_num(c) ? ival(c) : -1);
        }
        if (!strcmp(name, "find") || !strcmp(name, "count")) {
            if (!x || x->t != JV_STR)
                return fail(e, n, "%s() needs a string", name);
            if (name[0] == 'f') {
                const char *hit =
                    x->u.s->len ? memmem(s->data, s->len, x->u.s->data, x->u.s->len) : s->data;
                if (!hit)
                    return jv_int(-1);
                jstr pre = {(size_t)(hit - s->data), s->data};
                return jv_int((int64_t)cp_len(&pre));
            }
            int64_t c = 0;
            if (x->u.s->len == 0)
                return jv_int((int64_t)cp_len(s) + 1);
            for (const char *p = s->data;
                 (p = memmem(p, s->len - (size_t)(p - s->data), x->u.s->data, x->u.s->len));
                 p += x->u.s->len)
                c++;
            return jv_int(c);
        }
        if (!strcmp(name, "join")) {
            jlist *l = x ? as_list(e, n, x) : NULL;
            if (!l)
                return e->failed ? jv_undef() : fail(e, n, "join() takes an iterable");
            tok_buf b = {0};
            bool ok = tok_buf_append(&b, "", 0);
            for (size_t i = 0; i < l->n && ok; i++)
                ok = (!i || tok_buf_append(&b, s->data, s->len)) && jv_to_str(&l->v[i], &b);
            if (!ok) {
                tok_buf_free(&b);
                return nomem(e);
            }
            return buf_str(e, &b);
        }
        if (!strcmp(name, "isdigit") || !strcmp(name, "isspace") || !strcmp(name, "isalpha")) {
            bool r = s->len > 0;
            for (size_t i = 0; i < s->len && r; i++) {
                char c = s->data[i];
                r = name[2] == 'd'   ? (c >= '0' && c <= '9')
                    : name[2] == 's' ? (c == ' ' || (c >= '\t' && c <= '\r'))
                                     : ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
            }
            return jv_bool(r);
        }
    } else if (obj->t == JV_DICT) {
        const jdict *d = obj->u.d;
        if (!strcmp(name, "items")) {
            args none = {0};
            return apply_filter(e, n, "items", obj, &none);
        }
        if (!strcmp(name, "keys") || !strcmp(name, "values")) {
            jv out = jv_list_new(e->a);
            for (size_t i = 0; out.t == JV_LIST && i < d->n; i++) {
                jv k = {JV_STR, {.s = d->keys[i]}};
                if (!jv_list_push(e->a, out.u.l, name[0] == 'k' ? k : d->vals[i]))
                    return nomem(e);
            }
            return out.t == JV_LIST ? out : nomem(e);
        }
        if (!strcmp(name, "get")) {
            const jv *k = arg(a, 0, NULL), *dflt = arg(a, 1, NULL);
            if (!k)
                return fail(e, n, "get() takes a key");
            jv *v = k->t == JV_STR ? jv_dict_get(d, k->u.s->data, k->u.s->len) : NULL;
            return v ? *v : dflt ? *dflt : jv_none();
        }
    } else if (obj->t == JV_UNDEF) {
        return fail(e, n, "'%s' called on an undefined value", name);
    }
    return fail(e, n, "unsupported method '%s' on %s", name, jv_type_name(obj->t));
}

/* --------------------------------------------------------------- globals */

static jv call_global(ev *e, const jnode *n, const jv *fn, const args *a)
{
    switch (fn->t == JV_FUNC ? fn->u.fn : 0) {
    case FN_RAISE: {
        jv msg = a->n_pos ? to_str(e, &a->pos[0]) : str_of(e, "", 0);
        if (e->failed)
            return jv_undef();
        if (!e->failed) {
            oct_error_set(e->err, OCT_ERR_FORMAT, -1, "chat template line %d: raise_exception: %s",
                          n->line, msg.u.s->data);
            e->failed = true;
        }
        return jv_undef();
    }
    case FN_NAMESPACE:
    case FN_DICT: {
        jv d = jv_dict_new(e->a);
        if (d.t != JV_DICT)
            return nomem(e);
        d.u.d->is_namespace = fn->u.fn == FN_NAMESPACE;
        if (a->n_pos && a->pos[0].t == JV_DICT)
            for (size_t i = 0; i < a->pos[0].u.d->n; i++)
                if (!jv_dict_set(e->a, d.u.d, a->pos[0].u.d->keys[i]->data,
                                 a->pos[0].u.d->keys[i]->len, a->pos[0].u.d->vals[i]))
                    return nomem(e);
        for (size_t i = 0; i < a->n_kw; i++)
            if (!jv_dict_set(e->a, d.u.d, a->kw_name[i], strlen(a->kw_name[i]), a->kw[i]))
                return nomem(e);
        return d;
    }
    case FN_RANGE: {
        int64_t start = 0, stop, step = 1;
        for (size_t i = 0; i < a->n_pos; i++)
            if (!is_num(&a->pos[i]))
                return fail(e, n, "range() needs integers");
        if (a->n_pos == 1)
            stop = ival(&a->pos[0]);
        else if (a->n_pos >= 2) {
            start = ival(&a->pos[0]);
            stop = ival(&a->pos[1]);
            if (a->n_pos >= 3)
                step = ival(&a->pos[2]);
        } else
            return fail(e, n, "range() needs arguments");
        if (step == 0)
            return fail(e, n, "range() step must not be zero");
        jv out = jv_list_new(e->a);
        if (out.t != JV_LIST)
            return nomem(e);
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            if (out.u.l->n >= 1000000)
                return fail(e, n, "range() too long");
            if (!jv_list_push(e->a, out.u.l, jv_int(i)))
                return nomem(e);
        }
        return out;
    }
    case FN_STRFTIME: {
        const jv *f = arg(a, 0, NULL);
        if (!f || f->t != JV_STR)
            return fail(e, n, "strftime_now() takes a format string");
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char buf[256];
        /* the format comes from the template, as with Python's strftime */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        size_t len = strftime(buf, sizeof buf, f->u.s->data, &tm);
#pragma GCC diagnostic pop
        return str_of(e, buf, len);
    }
    default: return fail(e, n, "'%s' is not a function", n->name);
    }
}

/* ------------------------------------------------------------ expressions */

static jv binop(ev *e, const jnode *n, const char *op, jv x, jv y)
{
    if (!strcmp(op, "~")) {
        tok_buf b = {0};
        if (!jv_to_str(&x, &b) || !jv_to_str(&y, &b)) {
            tok_buf_free(&b);
            return nomem(e);
        }
        return buf_str(e, &b);
    }
    if (!strcmp(op, "==") || !strcmp(op, "!="))
        return jv_bool(jv_equal(&x, &y) == (op[0] == '='));
    if (!strcmp(op, "in") || !strcmp(op, "ni")) {
        bool r;
        if (!contains(e, n, &y, &x, &r))
            return jv_undef();
        return jv_bool(r == (op[0] == 'i'));
    }
    if (op[0] == '<' || op[0] == '>') {
        bool ok;
        int c = compare_vals(e, n, &x, &y, &ok);
        if (!ok)
            return jv_undef();
        bool r = op[0] == '<' ? (op[1] ? c <= 0 : c < 0) : (op[1] ? c >= 0 : c > 0);
        return jv_bool(r);
    }
    if (x.t == JV_UNDEF || y.t == JV_UNDEF)
        return fail(e, n, "unsupported operand: undefined value in '%s'", op);
    if (!strcmp(op, "+")) {
        if (x.t == JV_STR && y.t == JV_STR) {
            tok_buf b = {0};
            if (!tok_buf_append(&b, x.u.s->data, x.u.s->len) ||
                !tok_buf_append(&b, y.u.s->data, y.u.s->len)) {
                tok_buf_free(&b);
                return nomem(e);
            }
            return buf_str(e, &b);
        }
        if (x.t == JV_LIST && y.t == JV_LIST) {
            jv out = jv_list_new(e->a);
            for (size_t i = 0; out.t == JV_LIST && i < x.u.l->n + y.u.l->n; i++)
                if (!jv_list_push(e->a, out.u.l,
                                  i < x.u.l->n ? x.u.l->v[i] : y.u.l->v[i - x.u.l->n]))
                    return nomem(e);
            return out.t == JV_LIST ? out : nomem(e);
        }
    }
    if (!strcmp(op, "*") &&
        ((x.t == JV_STR && y.t == JV_INT) || (x.t == JV_INT && y.t == JV_STR))) {
        const jv *s = x.t == JV_STR ? &x : &y;
        int64_t k = x.t == JV_INT ? x.u.i : y.u.i;
        if (k > 0 && s->u.s->len * (size_t)k > ((size_t)16 << 20))
            return fail(e, n, "string repetition too large");
        tok_buf b = {0};
        bool ok = tok_buf_append(&b, "", 0);
        for (int64_t i = 0; i < k && ok; i++)
            ok = tok_buf_append(&b, s->u.s->data, s->u.s->len);
        if (!ok) {
            tok_buf_free(&b);
            return nomem(e);
        }
        return buf_str(e, &b);
    }
    if (!is_num(&x) || !is_num(&y))
        return fail(e, n, "unsupported operand type(s) for %s: '%s' and '%s'", op,
                    jv_type_name(x.t), jv_type_name(y.t));
    bool ints = x.t != JV_FLOAT && y.t != JV_FLOAT;
    int64_t a = ival(&x), b = ival(&y);
    double fa = num(&x), fb = num(&y);
    switch (op[0]) {
    case '+': return ints ? jv_int((int64_t)((uint64_t)a + (uint64_t)b)) : jv_float(fa + fb);
    case '-': return ints ? jv_int((int64_t)((uint64_t)a - (uint64_t)b)) : jv_float(fa - fb);
    case '*':
        if (op[1] == '*')
            return ints && b >= 0 ? jv_int((int64_t)pow((double)a, (double)b))
                                  : jv_float(pow(fa, fb));
        return ints ? jv_int((int64_t)((uint64_t)a * (uint64_t)b)) : jv_float(fa * fb);
    case '/':
        if (fb == 0.0)
            return fail(e, n, "division by zero");
        if (op[1] == '/') {
            if (ints) {
                if (a == INT64_MIN && b == -1)
                    return fail(e, n, "integer overflow");
                int64_t q = a / b;
                if ((a % b != 0) && ((a < 0) != (b < 0)))
                    q--;
                return jv_int(q);
            }
            return jv_float(floor(fa / fb));
        }
        return jv_float(fa / fb);
    case '%':
        if (fb == 0.0)
            return fail(e, n, "modulo by zero");
        if (ints) {
            if (b == -1)
                return jv_int(0);
            int64_t r = a % b;
            if (r != 0 && ((r < 0) != (b < 0)))
                r += b;
            return jv_int(r);
        } else {
            double r = fmod(fa, fb);
            if (r != 0.0 && ((r < 0) != (fb < 0)))
                r += fb;
            return jv_float(r);
        }
    }
    return fail(e, n, "unsupported operator '%s'", op);
}

static jv eval(ev *e, const jnode *n)
{
    if (e->failed)
        return jv_undef();
    if (++e->steps > MAX_STEPS)
        return fail(e, n, "template takes too many steps");
    if (++e->depth > MAX_DEPTH) {
        e->depth--;
        return fail(e, n, "template nested too deeply");
    }
    jv r = jv_undef();
    args a;
    switch (n->kind) {
    case JN_LIT: r = n->lit; break;
    case JN_NAME: {
        jv *v = lookup(e, n->name);
        r = v ? *v : jv_undef();
        break;
    }
    case JN_ATTR: {
        jv obj = eval(e, n->kids.v[0]);
        if (!e->failed)
            r = get_attr(e, n, &obj, n->name, strlen(n->name));
        break;
    }
    case JN_ITEM: {
        jv obj = eval(e, n->kids.v[0]);
        jv key = eval(e, n->kids.v[1]);
        if (!e->failed)
            r = get_item(e, n, &obj, &key);
        break;
    }
    case JN_SLICE: {
        jv obj = eval(e, n->kids.v[0]);
        jv parts[3];
        for (int k = 0; k < 3; k++)
            parts[k] = n->kids.v[1 + k] ? eval(e, n->kids.v[1 + k]) : jv_none();
        if (!e->failed)
            r = slice(e, n, &obj, &parts[0], &parts[1], &parts[2]);
        break;
    }
    case JN_CALL: {
        jv *fn = lookup(e, n->name);
        if (!fn) {
            r = fail(e, n, "'%s' is undefined", n->name);
            break;
        }
        jv f = *fn;
        if (eval_args(e, n, 0, &a))
            r = call_global(e, n, &f, &a);
        break;
    }
    case JN_METHOD: {
        jv obj = eval(e, n->kids.v[0]);
        if (eval_args(e, n, 1, &a))
            r = call_method(e, n, &obj, n->name, &a);
        break;
    }
    case JN_FILTER: {
        jv v = eval(e, n->kids.v[0]);
        if (eval_args(e, n, 1, &a))
            r = apply_filter(e, n, n->name, &v, &a);
        break;
    }
    case JN_TEST: {
        jv v = eval(e, n->kids.v[0]);
        bool res;
        if (eval_args(e, n, 1, &a) && run_test(e, n, n->name, &v, &a, &res))
            r = jv_bool(res != n->negate);
        break;
    }
    case JN_UNARY: {
        jv v = eval(e, n->kids.v[0]);
        if (e->failed)
            break;
        if (!is_num(&v)) {
            r = fail(e, n, "bad operand type for unary %c: '%s'", n->op[0], jv_type_name(v.t));
            break;
        }
        if (n->op[0] == '+')
            r = v.t == JV_BOOL ? jv_int(v.u.b) : v;
        else
            r = v.t == JV_FLOAT ? jv_float(-v.u.f) : jv_int((int64_t)(0 - (uint64_t)ival(&v)));
        break;
    }
    case JN_BINARY: {
        jv x = eval(e, n->kids.v[0]);
        jv y = eval(e, n->kids.v[1]);
        if (!e->failed)
            r = binop(e, n, n->op, x, y);
        break;
    }
    case JN_AND: {
        jv x = eval(e, n->kids.v[0]);
        r = jv_truthy(&x) ? eval(e, n->kids.v[1]) : x;
        break;
    }
    case JN_OR: {
        jv x = eval(e, n->kids.v[0]);
        r = jv_truthy(&x) ? x : eval(e, n->kids.v[1]);
        break;
    }
    case JN_NOT: {
        jv x = eval(e, n->kids.v[0]);
        r = jv_bool(!jv_truthy(&x));
        break;
    }
    case JN_COND: {
        jv c = eval(e, n->kids.v[0]);
        if (jv_truthy(&c))
            r = eval(e, n->kids.v[1]);
        else
            r = n->kids.v[2] ? eval(e, n->kids.v[2]) : jv_undef();
        break;
    }
    case JN_LIST: {
        r = jv_list_new(e->a);
        if (r.t != JV_LIST) {
            r = nomem(e);
            break;
        }
        for (size_t i = 0; i < n->kids.n && !e->failed; i++)
            if (!jv_list_push(e->a, r.u.l, eval(e, n->kids.v[i])))
                r = nomem(e);
        break;
    }
    case JN_DICT: {
        jv d = jv_dict_new(e->a);
        if (d.t != JV_DICT) {
            r = nomem(e);
            break;
        }
        for (size_t i = 0; i + 1 < n->kids.n && !e->failed; i += 2) {
            jv k = eval(e, n->kids.v[i]);
            jv v = eval(e, n->kids.v[i + 1]);
            if (e->failed)
                break;
            if (k.t != JV_STR) {
                fail(e, n, "only string keys are supported in dict literals");
                break;
            }
            if (!jv_dict_set(e->a, d.u.d, k.u.s->data, k.u.s->len, v))
                nomem(e);
        }
        r = d;
        break;
    }
    default: r = fail(e, n, "statement used as an expression");
    }
    e->depth--;
    return e->failed ? jv_undef() : r;
}

/* ------------------------------------------------------------- statements */

static void emit(ev *e, const jv *v)
{
    if (!jv_to_str(v, e->out))
        nomem(e);
    else if (e->out->len > MAX_OUTPUT)
        fail(e, NULL, "rendered text exceeds %zu bytes", MAX_OUTPUT);
}

static void exec_for(ev *e, const jnode *n)
{
    jv it = eval(e, n->kids.v[0]);
    if (e->failed)
        return;
    if (it.t == JV_NONE) {
        fail(e, n, "'NoneType' object is not iterable");
        return;
    }
    jlist *items = as_list(e, n, &it);
    if (!items)
        return;
    scope s = {NULL, e->top};
    jv vars = jv_dict_new(e->a);
    if (vars.t != JV_DICT) {
        nomem(e);
        return;
    }
    s.vars = vars.u.d;
    e->top = &s;
    const jnode *filter = n->kids.n > 1 ? n->kids.v[1] : NULL;
    /* bind the loop target(s) of one item */
#define BIND(item)                                                                                 \
    do {                                                                                           \
        if (n->name2) {                                                                            \
            jv pair_ = (item);                                                                     \
            if (pair_.t != JV_LIST || pair_.u.l->n != 2) {                                         \
                fail(e, n, "cannot unpack into two loop variables");                               \
                goto out;                                                                          \
            }                                                                                      \
            if (!assign(e, n->name, pair_.u.l->v[0]) || !assign(e, n->name2, pair_.u.l->v[1]))     \
                goto out;                                                                          \
        } else if (!assign(e, n->name, (item))) {                                                  \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)
    jlist *kept = items;
    if (filter) {
        jv l = jv_list_new(e->a);
        if (l.t != JV_LIST) {
            nomem(e);
            goto out;
        }
        for (size_t i = 0; i < items->n; i++) {
            BIND(items->v[i]);
            jv c = eval(e, filter);
            if (e->failed)
                goto out;
            if (jv_truthy(&c) && !jv_list_push(e->a, l.u.l, items->v[i])) {
                nomem(e);
                goto out;
            }
        }
        kept = l.u.l;
    }
    for (size_t i = 0; i < kept->n && !e->failed; i++) {
        BIND(kept->v[i]);
        jv loop = jv_dict_new(e->a);
        if (loop.t != JV_DICT) {
            nomem(e);
            goto out;
        }
        int64_t len = (int64_t)kept->n, idx = (int64_t)i;
        jdict *d = loop.u.d;
        if (!jv_dict_set(e->a, d, "index", 5, jv_int(idx + 1)) ||
            !jv_dict_set(e->a, d, "index0", 6, jv_int(idx)) ||
            !jv_dict_set(e->a, d, "revindex", 8, jv_int(len - idx)) ||
            !jv_dict_set(e->a, d, "revindex0", 9, jv_int(len - idx - 1)) ||
            !jv_dict_set(e->a, d, "first", 5, jv_bool(i == 0)) ||
            !jv_dict_set(e->a, d, "last", 4, jv_bool(i + 1 == kept->n)) ||
            !jv_dict_set(e->a, d, "length", 6, jv_int(len)) ||
            !jv_dict_set(e->a, d, "previtem", 8, i > 0 ? kept->v[i - 1] : jv_undef()) ||
            !jv_dict_set(e->a, d, "nextitem", 8, i + 1 < kept->n ? kept->v[i + 1] : jv_undef()) ||
            !assign(e, "loop", loop)) {
            nomem(e);
            goto out;
        }
        exec_body(e, &n->body);
        if (e->loop_ctl == 1) {
            e->loop_ctl = 0;
            break;
        }
        e->loop_ctl = 0;
    }
    if (kept->n == 0 && !e->failed)
        exec_body(e, &n->else_body);
#undef BIND
out:
    e->top = s.parent;
}

static void exec_stmt(ev *e, const jnode *n)
{
    if (++e->steps > MAX_STEPS) {
        fail(e, n, "template takes too many steps");
        return;
    }
    switch (n->kind) {
    case JN_TEXT:
        if (!tok_buf_append(e->out, n->name, (size_t)n->lit.u.i))
            nomem(e);
        break;
    case JN_OUTPUT: {
        jv v = eval(e, n->kids.v[0]);
        if (!e->failed)
            emit(e, &v);
        break;
    }
    case JN_IF:
        for (size_t i = 0; i < n->kids.n; i++) {
            jv c = eval(e, n->kids.v[i]);
            if (e->failed)
                return;
            if (jv_truthy(&c)) {
                exec_body(e, &n->blocks[i]);
                return;
            }
        }
        exec_body(e, &n->else_body);
        break;
    case JN_FOR:
        if (++e->depth > MAX_DEPTH) {
            fail(e, n, "template nested too deeply");
            return;
        }
        exec_for(e, n);
        e->depth--;
        break;
    case JN_SET: {
        jv v;
        if (n->negate) { /* block set: capture the body's output */
            tok_buf *saved = e->out;
            tok_buf cap = {0};
            e->out = &cap;
            exec_body(e, &n->body);
            e->out = saved;
            v = buf_str(e, &cap);
        } else {
            v = eval(e, n->kids.v[0]);
        }
        if (e->failed)
            return;
        if (n->attr) {
            jv *obj = lookup(e, n->name);
            if (!obj || obj->t != JV_DICT || !obj->u.d->is_namespace) {
                fail(e, n, "cannot assign attribute on non-namespace object '%s'", n->name);
                return;
            }
            if (!jv_dict_set(e->a, obj->u.d, n->attr, strlen(n->attr), v))
                nomem(e);
        } else {
            assign(e, n->name, v);
        }
        break;
    }
    case JN_BREAK:
    case JN_CONTINUE: e->loop_ctl = n->kind == JN_BREAK ? 1 : 2; break;
    case JN_BODY: exec_body(e, &n->body); break;
    default: fail(e, n, "expression used as a statement");
    }
}

static void exec_body(ev *e, const jnodes *body)
{
    for (size_t i = 0; i < body->n && !e->failed && !e->loop_ctl; i++)
        exec_stmt(e, body->v[i]);
}

oct_status jinja_eval(const jnodes *prog, jarena *a, jdict *ctx, tok_buf *out, oct_error *err)
{
    ev e = {0};
    e.a = a;
    e.out = out;
    e.err = err;
    jv g = jv_dict_new(a);
    jv root = jv_dict_new(a);
    if (g.t != JV_DICT || root.t != JV_DICT)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    static const struct {
        const char *name;
        int fn;
    } fns[] = {{"raise_exception", FN_RAISE},
               {"namespace", FN_NAMESPACE},
               {"range", FN_RANGE},
               {"strftime_now", FN_STRFTIME},
               {"dict", FN_DICT}};
    for (size_t i = 0; i < OCT_ARRAY_LEN(fns); i++) {
        jv f = {JV_FUNC, {.fn = fns[i].fn}};
        if (!jv_dict_set(a, g.u.d, fns[i].name, strlen(fns[i].name), f))
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    }
    /* context variables shadow the builtins */
    for (size_t i = 0; i < ctx->n; i++)
        if (!jv_dict_set(a, g.u.d, ctx->keys[i]->data, ctx->keys[i]->len, ctx->vals[i]))
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    e.globals = g.u.d;
    scope top = {root.u.d, NULL};
    e.top = &top;
    if (!tok_buf_append(out, "", 0))
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    exec_body(&e, prog);
    if (e.failed)
        return err && err->status ? err->status : OCT_ERR_FORMAT;
    return OCT_OK;
}

oct_status jinja_render(const char *src, size_t len, const json_t *ctx, tok_buf *out,
                        oct_error *err)
{
    if (len > ((size_t)1 << 20))
        return oct_error_set(err, OCT_ERR_LIMIT, -1, "chat template larger than 1 MiB");
    jarena a = {0};
    a.limit = (size_t)512 << 20;
    jtoks toks = {0};
    jnodes prog = {0};
    oct_status st = jinja_lex(src, len, &a, &toks, err);
    if (!st)
        st = jinja_parse(&toks, &a, &prog, err);
    if (!st) {
        jv c = jv_from_json(&a, ctx);
        if (c.t != JV_DICT)
            st = a.failed ? oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory")
                          : oct_error_set(err, OCT_ERR_INVALID_ARG, -1,
                                          "chat template context must be an object");
        else
            st = jinja_eval(&prog, &a, c.u.d, out, err);
    }
    jarena_free(&a);
    return st;
}

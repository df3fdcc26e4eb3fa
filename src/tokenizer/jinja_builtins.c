/* jinja_builtins.c — what templates call: the tests (`is defined`, ...),
 * filters (`|tojson`, `|selectattr`, ...), string / dict / list methods and
 * global functions (range, namespace, raise_exception, strftime_now, dict)
 * of the Jinja2 subset chat templates use, with Python's semantics. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tokenizer/jinja_eval.h"

/* ---------------------------------------------------------- code points */

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

/* ------------------------------------------------------------ arguments */

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

/* ---------------------------------------------------------- string tools */

/* strip/lstrip/rstrip: chars NULL -> whitespace */
static jv strip(ev *e, const jstr *s, const jv *chars, bool left, bool right)
{
    cps c, set = {0};
    if (!jev_decode_cps(e, s, &c))
        return jv_undef();
    bool use_set = chars && chars->t == JV_STR;
    if (use_set && !jev_decode_cps(e, chars->u.s, &set))
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
    return jev_encode_cps(e, c.v + a, b - a);
}

static jv split(ev *e, const jnode *n, const jstr *s, const jv *sep, int64_t maxsplit)
{
    jv out = jv_list_new(e->a);
    if (out.t != JV_LIST)
        return jev_nomem(e);
    if (!sep || sep->t == JV_NONE || sep->t == JV_UNDEF) {
        /* runs of whitespace, no empty strings */
        cps c;
        if (!jev_decode_cps(e, s, &c))
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
            if (!jv_list_push(e->a, out.u.l, jev_encode_cps(e, c.v + i, j - i)))
                return jev_nomem(e);
            done++;
            i = j;
        }
        return out;
    }
    if (sep->t != JV_STR)
        return jev_fail(e, n, "split(): separator must be a string");
    const jstr *p = sep->u.s;
    if (p->len == 0)
        return jev_fail(e, n, "split(): empty separator");
    size_t i = 0;
    int64_t done = 0;
    for (;;) {
        const char *hit = (maxsplit < 0 || done < maxsplit)
                              ? memmem(s->data + i, s->len - i, p->data, p->len)
                              : NULL;
        size_t end = hit ? (size_t)(hit - s->data) : s->len;
        if (!jv_list_push(e->a, out.u.l, jev_str_of(e, s->data + i, end - i)))
            return jev_nomem(e);
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
        return jev_fail(e, n, "replace(): arguments must be strings");
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
        return jev_nomem(e);
    }
    return jev_buf_str(e, &b);
}

static jv change_case(ev *e, const jstr *s, int mode /* 0 lower 1 upper 2 capitalize 3 title */)
{
    if (mode == 0) {
        tok_buf b = {0};
        if (!tok_unicode_lowercase(s->data, s->len, &b)) {
            tok_buf_free(&b);
            return jev_nomem(e);
        }
        return jev_buf_str(e, &b);
    }
    jv r = jev_str_of(e, s->data, s->len);
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

/* ------------------------------------------------------------------ tests */

bool jev_run_test(ev *e, const jnode *n, const char *name, const jv *v, const args *a, bool *res)
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
        *res = jev_is_num(v);
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
            return jev_fail(e, n, "test '%s' needs an integer", name), false;
        *res = (v->u.i % 2 != 0) == (name[0] == 'o');
    } else if (!strcmp(name, "divisibleby")) {
        if (!x || !jev_is_num(x) || jev_ival(x) == 0 || v->t != JV_INT)
            return jev_fail(e, n, "bad divisibleby test"), false;
        *res = v->u.i % jev_ival(x) == 0;
    } else if (!strcmp(name, "equalto") || !strcmp(name, "eq") || !strcmp(name, "==") ||
               !strcmp(name, "sameas")) {
        if (!x)
            return jev_fail(e, n, "test '%s' needs an argument", name), false;
        *res = jv_equal(v, x) && (strcmp(name, "sameas") || v->t == x->t);
    } else if (!strcmp(name, "ne") || !strcmp(name, "!=")) {
        if (!x)
            return jev_fail(e, n, "test '%s' needs an argument", name), false;
        *res = !jv_equal(v, x);
    } else if (!strcmp(name, "lt") || !strcmp(name, "gt") || !strcmp(name, "le") ||
               !strcmp(name, "ge")) {
        bool ok;
        if (!x)
            return jev_fail(e, n, "test '%s' needs an argument", name), false;
        int c = jev_compare_vals(e, n, v, x, &ok);
        if (!ok)
            return false;
        *res =
            name[0] == 'l' ? (name[1] == 't' ? c < 0 : c <= 0) : (name[1] == 't' ? c > 0 : c >= 0);
    } else if (!strcmp(name, "in")) {
        if (!x)
            return jev_fail(e, n, "test 'in' needs an argument"), false;
        return jev_contains(e, n, x, v, res);
    } else {
        jev_fail(e, n, "unsupported test '%s'", name);
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------- filters */

/* One filter application, `v | name(a)` at node n: what every filter gets. */
typedef struct fcall {
    ev *e;
    const jnode *n;
    const char *name; /* as written: "d" for default, "e" for escape, ... */
    const jv *v;
    const args *a;
} fcall;

static jv filter_select(const fcall *c)
{
    ev *e = c->e;
    const jnode *n = c->n;
    const char *name = c->name;
    const args *a = c->a;
    bool by_attr = strstr(name, "attr") != NULL;
    bool reject = name[0] == 'r';
    jlist *l = jev_as_list(e, n, c->v);
    jv out = jv_list_new(e->a);
    if (!l || out.t != JV_LIST)
        return e->failed ? jv_undef() : jev_nomem(e);
    const jv *attr = by_attr ? arg(a, 0, NULL) : NULL;
    if (by_attr && (!attr || attr->t != JV_STR))
        return jev_fail(e, n, "%s needs an attribute name", name);
    size_t first_test = by_attr ? 1 : 0;
    const jv *test = arg(a, first_test, NULL);
    if (test && test->t != JV_STR)
        return jev_fail(e, n, "%s: the test must be a name", name);
    args targs = {0};
    for (size_t k = first_test + 1; k < a->n_pos && targs.n_pos < 8; k++)
        targs.pos[targs.n_pos++] = a->pos[k];
    for (size_t i = 0; i < l->n; i++) {
        jv item = l->v[i];
        jv subject = by_attr ? jev_get_attr(e, n, &item, attr->u.s->data, attr->u.s->len) : item;
        if (e->failed)
            return jv_undef();
        bool keep;
        if (test) {
            if (!jev_run_test(e, n, test->u.s->data, &subject, &targs, &keep))
                return jv_undef();
        } else {
            keep = jv_truthy(&subject);
        }
        if (keep != reject && !jv_list_push(e->a, out.u.l, item))
            return jev_nomem(e);
    }
    return out;
}

/* tojson's indent: an int (that many spaces; negative = none of them) or a
 * string; writes the spaces to buf. */
static bool tojson_indent(const jv *ind, jv_json_fmt *f, char *spaces, size_t cap)
{
    if (!ind || ind->t == JV_NONE || ind->t == JV_UNDEF)
        return true;
    if (ind->t == JV_STR) {
        f->indent = ind->u.s->data;
        f->indent_len = ind->u.s->len;
        return true;
    }
    if (ind->t != JV_INT && ind->t != JV_BOOL)
        return false;
    int64_t n = ind->t == JV_BOOL ? ind->u.b : ind->u.i;
    f->indent_len = n < 0 ? 0 : n > (int64_t)cap ? cap : (size_t)n;
    memset(spaces, ' ', f->indent_len);
    f->indent = spaces;
    return true;
}

/* tojson's separators: a pair of strings (item, key). */
static bool tojson_separators(const jv *sep, jv_json_fmt *f)
{
    if (!sep || sep->t == JV_NONE || sep->t == JV_UNDEF)
        return true;
    if (sep->t != JV_LIST || sep->u.l->n != 2 || sep->u.l->v[0].t != JV_STR ||
        sep->u.l->v[1].t != JV_STR)
        return false;
    f->item_sep = sep->u.l->v[0].u.s->data;
    f->item_sep_len = sep->u.l->v[0].u.s->len;
    f->key_sep = sep->u.l->v[1].u.s->data;
    f->key_sep_len = sep->u.l->v[1].u.s->len;
    return true;
}

/* transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None,
 * separators=None, sort_keys=False) with those four arguments. */
static jv filter_tojson(const fcall *c)
{
    ev *e = c->e;
    const jnode *n = c->n;
    const jv *v = c->v;
    const args *a = c->a;
    char spaces[64];
    jv_json_fmt f = {.ensure_ascii = false};
    const jv *ea = arg(a, 1, "ensure_ascii"), *sk = arg(a, 3, "sort_keys");
    if (!tojson_indent(arg(a, 0, "indent"), &f, spaces, sizeof spaces))
        return jev_fail(e, n, "tojson: indent must be an integer or a string");
    f.item_sep = f.indent ? "," : ", ";
    f.item_sep_len = strlen(f.item_sep);
    f.key_sep = ": ";
    f.key_sep_len = 2;
    if (!tojson_separators(arg(a, 2, "separators"), &f))
        return jev_fail(e, n, "tojson: separators must be a pair of strings");
    f.ensure_ascii = ea && jv_truthy(ea);
    f.sort_keys = sk && jv_truthy(sk);
    tok_buf b = {0};
    if (!jv_to_json(v, &f, &b)) {
        tok_buf_free(&b);
        if (v->t == JV_UNDEF || v->t == JV_FUNC)
            return jev_fail(e, n, "tojson: Object of type %s is not JSON serializable",
                            jv_type_name(v->t));
        return jev_value_fail(e, n, v);
    }
    return jev_buf_str(e, &b);
}

static jv filter_trim(const fcall *c)
{
    jv s = jev_to_str(c->e, c->v);
    return s.t == JV_STR ? strip(c->e, s.u.s, arg(c->a, 0, "chars"), true, true) : s;
}

/* length, count */
static jv filter_length(const fcall *c)
{
    const jv *v = c->v;
    if (v->t == JV_STR)
        return jv_int((int64_t)cp_len(v->u.s));
    if (v->t == JV_LIST)
        return jv_int((int64_t)v->u.l->n);
    if (v->t == JV_DICT)
        return jv_int((int64_t)v->u.d->n);
    if (v->t == JV_UNDEF)
        return jv_int(0);
    return jev_fail(c->e, c->n, "object of type '%s' has no len()", jv_type_name(v->t));
}

/* upper, lower, capitalize, title */
static jv filter_case(const fcall *c)
{
    const char *name = c->name;
    jv s = jev_to_str(c->e, c->v);
    int mode = name[0] == 'l' ? 0 : name[0] == 'u' ? 1 : name[0] == 'c' ? 2 : 3;
    return s.t == JV_STR ? change_case(c->e, s.u.s, mode) : s;
}

/* default, d */
static jv filter_default(const fcall *c)
{
    const jv *dflt = arg(c->a, 0, "default_value");
    const jv *boolean = arg(c->a, 1, "boolean");
    bool use = c->v->t == JV_UNDEF || (boolean && jv_truthy(boolean) && !jv_truthy(c->v));
    if (use)
        return dflt ? *dflt : jev_str_of(c->e, "", 0);
    return *c->v;
}

/* first, last */
static jv filter_first_last(const fcall *c)
{
    jlist *l = jev_as_list(c->e, c->n, c->v);
    if (!l)
        return jv_undef();
    if (!l->n)
        return jv_undef();
    return c->name[0] == 'f' ? l->v[0] : l->v[l->n - 1];
}

static jv filter_join(const fcall *c)
{
    ev *e = c->e;
    jlist *l = jev_as_list(e, c->n, c->v);
    const jv *sep = arg(c->a, 0, "d");
    const jv *attr = arg(c->a, 1, "attribute");
    if (!l)
        return jv_undef();
    tok_buf b = {0};
    bool ok = tok_buf_append(&b, "", 0);
    for (size_t i = 0; i < l->n && ok; i++) {
        if (i && sep && sep->t == JV_STR)
            ok = tok_buf_append(&b, sep->u.s->data, sep->u.s->len);
        jv item = l->v[i];
        if (attr && attr->t == JV_STR)
            item = jev_get_attr(e, c->n, &item, attr->u.s->data, attr->u.s->len);
        ok = ok && jv_to_str(&item, &b);
    }
    if (!ok) {
        tok_buf_free(&b);
        return jev_value_fail(e, c->n, c->v);
    }
    return jev_buf_str(e, &b);
}

static jv filter_list(const fcall *c)
{
    jlist *l = jev_as_list(c->e, c->n, c->v);
    if (!l)
        return jv_undef();
    jv out = jv_list_new(c->e->a);
    for (size_t i = 0; out.t == JV_LIST && i < l->n; i++)
        if (!jv_list_push(c->e->a, out.u.l, l->v[i]))
            return jev_nomem(c->e);
    return out.t == JV_LIST ? out : jev_nomem(c->e);
}

static jv filter_string(const fcall *c)
{
    return jev_to_str(c->e, c->v);
}

/* safe (the value as it is), e, escape (HTML) */
static jv filter_escape(const fcall *c)
{
    if (c->name[0] == 's')
        return *c->v;
    jv s = jev_to_str(c->e, c->v);
    if (s.t != JV_STR)
        return s;
    tok_buf b = {0};
    bool ok = tok_buf_append(&b, "", 0);
    for (size_t i = 0; i < s.u.s->len && ok; i++) {
        char ch = s.u.s->data[i];
        const char *r = ch == '&'    ? "&amp;"
                        : ch == '<'  ? "&lt;"
                        : ch == '>'  ? "&gt;"
                        : ch == '"'  ? "&#34;"
                        : ch == '\'' ? "&#39;"
                                     : NULL;
        ok = r ? tok_buf_append(&b, r, strlen(r)) : tok_buf_putc(&b, ch);
    }
    if (!ok) {
        tok_buf_free(&b);
        return jev_nomem(c->e);
    }
    return jev_buf_str(c->e, &b);
}

static jv filter_int(const fcall *c)
{
    const jv *v = c->v;
    if (v->t == JV_STR) {
        char *end;
        long long x = strtoll(v->u.s->data, &end, 10);
        return jv_int(end != v->u.s->data ? (int64_t)x : 0);
    }
    return jev_is_num(v) ? jv_int(jev_ival(v)) : jv_int(0);
}

static jv filter_float(const fcall *c)
{
    const jv *v = c->v;
    if (v->t == JV_STR)
        return jv_float(strtod(v->u.s->data, NULL));
    return jev_is_num(v) ? jv_float(jev_num(v)) : jv_float(0.0);
}

static jv filter_abs(const fcall *c)
{
    const jv *v = c->v;
    if (v->t == JV_INT)
        return jv_int(v->u.i < 0 ? -v->u.i : v->u.i);
    if (v->t == JV_FLOAT)
        return jv_float(fabs(v->u.f));
    return jev_fail(c->e, c->n, "abs of a non-number");
}

static jv filter_round(const fcall *c)
{
    const jv *prec = arg(c->a, 0, "precision");
    double p = prec && jev_is_num(prec) ? jev_num(prec) : 0.0;
    double s = pow(10.0, p);
    return jv_float(round(jev_num(c->v) * s) / s);
}

static jv filter_replace(const fcall *c)
{
    const args *a = c->a;
    jv s = jev_to_str(c->e, c->v);
    const jv *o = arg(a, 0, "old"), *w = arg(a, 1, "new"), *cnt = arg(a, 2, "count");
    if (!o || !w)
        return jev_fail(c->e, c->n, "replace needs two arguments");
    return s.t == JV_STR
               ? replace(c->e, c->n, s.u.s, o, w, cnt && jev_is_num(cnt) ? jev_ival(cnt) : -1)
               : s;
}

static jv filter_items(const fcall *c)
{
    ev *e = c->e;
    const jv *v = c->v;
    if (v->t == JV_UNDEF)
        return jv_list_new(e->a);
    if (v->t != JV_DICT)
        return jev_fail(e, c->n, "items filter needs a mapping");
    jv out = jv_list_new(e->a);
    for (size_t i = 0; out.t == JV_LIST && i < v->u.d->n; i++) {
        jv pair = jv_list_new(e->a);
        jv k = {JV_STR, {.s = v->u.d->keys[i]}};
        if (pair.t == JV_LIST)
            pair.u.l->is_tuple = true;
        if (pair.t != JV_LIST || !jv_list_push(e->a, pair.u.l, k) ||
            !jv_list_push(e->a, pair.u.l, v->u.d->vals[i]) || !jv_list_push(e->a, out.u.l, pair))
            return jev_nomem(e);
    }
    return out.t == JV_LIST ? out : jev_nomem(e);
}

static jv filter_map(const fcall *c)
{
    ev *e = c->e;
    const jnode *n = c->n;
    const args *a = c->a;
    jlist *l = jev_as_list(e, n, c->v);
    const jv *attr = kwarg(a, "attribute");
    const jv *fname = arg(a, 0, NULL);
    if (!l)
        return jv_undef();
    jv out = jv_list_new(e->a);
    if (out.t != JV_LIST)
        return jev_nomem(e);
    args fargs = {0};
    for (size_t k = 1; k < a->n_pos && fargs.n_pos < 8; k++)
        fargs.pos[fargs.n_pos++] = a->pos[k];
    for (size_t i = 0; i < l->n; i++) {
        jv r;
        if (attr && attr->t == JV_STR) {
            r = jev_get_attr(e, n, &l->v[i], attr->u.s->data, attr->u.s->len);
            const jv *d = kwarg(a, "default");
            if (r.t == JV_UNDEF && d)
                r = *d;
        } else if (fname && fname->t == JV_STR) {
            r = jev_apply_filter(e, n, fname->u.s->data, &l->v[i], &fargs);
        } else {
            return jev_fail(e, n, "map needs a filter name or attribute=");
        }
        if (e->failed || !jv_list_push(e->a, out.u.l, r))
            return e->failed ? jv_undef() : jev_nomem(e);
    }
    return out;
}

static jv filter_reverse(const fcall *c)
{
    ev *e = c->e;
    if (c->v->t == JV_STR) {
        jv none = jv_none(), m1 = jv_int(-1);
        return jev_slice(e, c->n, c->v, &none, &none, &m1);
    }
    jlist *l = jev_as_list(e, c->n, c->v);
    if (!l)
        return jv_undef();
    jv out = jv_list_new(e->a);
    for (size_t i = l->n; out.t == JV_LIST && i-- > 0;)
        if (!jv_list_push(e->a, out.u.l, l->v[i]))
            return jev_nomem(e);
    return out.t == JV_LIST ? out : jev_nomem(e);
}

static jv filter_unique(const fcall *c)
{
    ev *e = c->e;
    jlist *l = jev_as_list(e, c->n, c->v);
    if (!l)
        return jv_undef();
    jv out = jv_list_new(e->a);
    for (size_t i = 0; out.t == JV_LIST && i < l->n; i++) {
        bool seen = false;
        for (size_t k = 0; k < out.u.l->n && !seen; k++)
            seen = jv_equal(&out.u.l->v[k], &l->v[i]);
        if (!seen && !jv_list_push(e->a, out.u.l, l->v[i]))
            return jev_nomem(e);
    }
    return out.t == JV_LIST ? out : jev_nomem(e);
}

static jv filter_indent(const fcall *c)
{
    const args *a = c->a;
    jv s = jev_to_str(c->e, c->v);
    const jv *w = arg(a, 0, "width"), *first = arg(a, 1, "first"), *blank = arg(a, 2, "blank");
    if (s.t != JV_STR)
        return s;
    tok_buf pad = {0}, b = {0};
    bool ok = tok_buf_append(&pad, "", 0) && tok_buf_append(&b, "", 0);
    if (w && w->t == JV_STR)
        ok = ok && tok_buf_append(&pad, w->u.s->data, w->u.s->len);
    else
        for (int64_t k = 0; k < (w && jev_is_num(w) ? jev_ival(w) : 4) && k < 256 && ok; k++)
            ok = tok_buf_putc(&pad, ' ');
    const char *p = s.u.s->data, *end = p + s.u.s->len;
    bool first_line = true;
    while (ok && p <= end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        bool empty = le == p;
        if ((!first_line || (first && jv_truthy(first))) && (!empty || (blank && jv_truthy(blank))))
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
        return jev_nomem(c->e);
    }
    return jev_buf_str(c->e, &b);
}

static const struct {
    const char *name;
    jv (*fn)(const fcall *c);
} k_filters[] = {
    {"trim", filter_trim},         {"length", filter_length},     {"count", filter_length},
    {"tojson", filter_tojson},     {"upper", filter_case},        {"lower", filter_case},
    {"capitalize", filter_case},   {"title", filter_case},        {"default", filter_default},
    {"d", filter_default},         {"first", filter_first_last},  {"last", filter_first_last},
    {"join", filter_join},         {"list", filter_list},         {"string", filter_string},
    {"safe", filter_escape},       {"e", filter_escape},          {"escape", filter_escape},
    {"int", filter_int},           {"float", filter_float},       {"abs", filter_abs},
    {"round", filter_round},       {"replace", filter_replace},   {"items", filter_items},
    {"selectattr", filter_select}, {"rejectattr", filter_select}, {"select", filter_select},
    {"reject", filter_select},     {"map", filter_map},           {"reverse", filter_reverse},
    {"unique", filter_unique},     {"indent", filter_indent},
};

jv jev_apply_filter(ev *e, const jnode *n, const char *name, const jv *v, const args *a)
{
    const fcall c = {e, n, name, v, a};
    for (size_t i = 0; i < OCT_ARRAY_LEN(k_filters); i++)
        if (!strcmp(name, k_filters[i].name))
            return k_filters[i].fn(&c);
    return jev_fail(e, n, "unsupported filter '%s'", name);
}

/* ---------------------------------------------------------------- methods */

static jv no_method(ev *e, const jnode *n, const char *name, jv_type t)
{
    return jev_fail(e, n, "unsupported method '%s' on %s", name, jv_type_name(t));
}

/* s.name(a): the str methods chat templates call, as Python has them. */
static jv str_method(ev *e, const jnode *n, const jstr *s, const char *name, const args *a)
{
    const jv *x = arg(a, 0, NULL);
    if (!strcmp(name, "strip"))
        return strip(e, s, x, true, true);
    if (!strcmp(name, "lstrip"))
        return strip(e, s, x, true, false);
    if (!strcmp(name, "rstrip"))
        return strip(e, s, x, false, true);
    if (!strcmp(name, "split")) {
        const jv *m = arg(a, 1, "maxsplit");
        return split(e, n, s, arg(a, 0, "sep"), m && jev_is_num(m) ? jev_ival(m) : -1);
    }
    if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
        if (!x)
            return jev_fail(e, n, "%s() takes an argument", name);
        return jv_bool(starts_ends(s, x, name[0] == 'e'));
    }
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "capitalize") ||
        !strcmp(name, "title"))
        return change_case(e, s, name[0] == 'l' ? 0 : name[0] == 'u' ? 1 : name[0] == 'c' ? 2 : 3);
    if (!strcmp(name, "replace")) {
        const jv *c = arg(a, 2, NULL);
        if (!x || !arg(a, 1, NULL))
            return jev_fail(e, n, "replace() takes two arguments");
        return replace(e, n, s, x, arg(a, 1, NULL), c && jev_is_num(c) ? jev_ival(c) : -1);
    }
    if (!strcmp(name, "find") || !strcmp(name, "count")) {
        if (!x || x->t != JV_STR)
            return jev_fail(e, n, "%s() needs a string", name);
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
        jlist *l = x ? jev_as_list(e, n, x) : NULL;
        if (!l)
            return e->failed ? jv_undef() : jev_fail(e, n, "join() takes an iterable");
        tok_buf b = {0};
        bool ok = tok_buf_append(&b, "", 0);
        for (size_t i = 0; i < l->n && ok; i++)
            ok = (!i || tok_buf_append(&b, s->data, s->len)) && jv_to_str(&l->v[i], &b);
        if (!ok) {
            tok_buf_free(&b);
            return jev_value_fail(e, n, x);
        }
        return jev_buf_str(e, &b);
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
    return no_method(e, n, name, JV_STR);
}

/* d.name(a): items, keys, values, get. */
static jv dict_method(ev *e, const jnode *n, const jv *obj, const char *name, const args *a)
{
    const jdict *d = obj->u.d;
    if (!strcmp(name, "items")) {
        args none = {0};
        return jev_apply_filter(e, n, "items", obj, &none);
    }
    if (!strcmp(name, "keys") || !strcmp(name, "values")) {
        jv out = jv_list_new(e->a);
        for (size_t i = 0; out.t == JV_LIST && i < d->n; i++) {
            jv k = {JV_STR, {.s = d->keys[i]}};
            if (!jv_list_push(e->a, out.u.l, name[0] == 'k' ? k : d->vals[i]))
                return jev_nomem(e);
        }
        return out.t == JV_LIST ? out : jev_nomem(e);
    }
    if (!strcmp(name, "get")) {
        const jv *k = arg(a, 0, NULL), *dflt = arg(a, 1, NULL);
        if (!k)
            return jev_fail(e, n, "get() takes a key");
        jv *v = k->t == JV_STR ? jv_dict_get(d, k->u.s->data, k->u.s->len) : NULL;
        return v ? *v : dflt ? *dflt : jv_none();
    }
    return no_method(e, n, name, JV_DICT);
}

jv jev_call_method(ev *e, const jnode *n, const jv *obj, const char *name, const args *a)
{
    if (obj->t == JV_STR)
        return str_method(e, n, obj->u.s, name, a);
    if (obj->t == JV_DICT)
        return dict_method(e, n, obj, name, a);
    if (obj->t == JV_UNDEF)
        return jev_fail(e, n, "'%s' called on an undefined value", name);
    return no_method(e, n, name, obj->t);
}

/* --------------------------------------------------------------- globals */

/* len(range(start, stop, step)) as Python computes it (step != 0). */
static uint64_t range_len(int64_t start, int64_t stop, int64_t step)
{
    if (step > 0 ? stop <= start : stop >= start)
        return 0;
    uint64_t span = step > 0 ? (uint64_t)stop - (uint64_t)start : (uint64_t)start - (uint64_t)stop;
    uint64_t ustep = step > 0 ? (uint64_t)step : (uint64_t)(-(step + 1)) + 1;
    return span / ustep + (span % ustep != 0);
}

jv jev_call_global(ev *e, const jnode *n, const jv *fn, const args *a)
{
    switch (fn->t == JV_FUNC ? fn->u.fn : 0) {
    case FN_RAISE: {
        jv msg = a->n_pos ? jev_to_str(e, &a->pos[0]) : jev_str_of(e, "", 0);
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
            return jev_nomem(e);
        d.u.d->is_namespace = fn->u.fn == FN_NAMESPACE;
        if (a->n_pos && a->pos[0].t == JV_DICT)
            for (size_t i = 0; i < a->pos[0].u.d->n; i++)
                if (!jv_dict_set(e->a, d.u.d, a->pos[0].u.d->keys[i]->data,
                                 a->pos[0].u.d->keys[i]->len, a->pos[0].u.d->vals[i]))
                    return jev_nomem(e);
        for (size_t i = 0; i < a->n_kw; i++)
            if (!jv_dict_set(e->a, d.u.d, a->kw_name[i], strlen(a->kw_name[i]), a->kw[i]))
                return jev_nomem(e);
        return d;
    }
    case FN_RANGE: {
        int64_t start = 0, stop, step = 1;
        for (size_t i = 0; i < a->n_pos; i++)
            if (!jev_is_num(&a->pos[i]))
                return jev_fail(e, n, "range() needs integers");
        if (a->n_pos == 1)
            stop = jev_ival(&a->pos[0]);
        else if (a->n_pos >= 2) {
            start = jev_ival(&a->pos[0]);
            stop = jev_ival(&a->pos[1]);
            if (a->n_pos >= 3)
                step = jev_ival(&a->pos[2]);
        } else
            return jev_fail(e, n, "range() needs arguments");
        if (step == 0)
            return jev_fail(e, n, "range() step must not be zero");
        uint64_t count = range_len(start, stop, step);
        if (count > 1000000)
            return jev_fail(e, n, "range() too long");
        jv out = jv_list_new(e->a);
        jv *v = count ? jarena_alloc(e->a, (size_t)count * sizeof *v) : NULL;
        if (out.t != JV_LIST || (count && !v))
            return jev_nomem(e);
        out.u.l->v = v;
        out.u.l->n = out.u.l->cap = (size_t)count;
        for (uint64_t k = 0; k < count; k++)
            v[k] = jv_int((int64_t)((uint64_t)start + k * (uint64_t)step));
        return out;
    }
    case FN_STRFTIME: {
        const jv *f = arg(a, 0, NULL);
        if (!f || f->t != JV_STR)
            return jev_fail(e, n, "strftime_now() takes a format string");
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        char buf[256];
        /* the format comes from the template, as with Python's strftime */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        size_t len = strftime(buf, sizeof buf, f->u.s->data, &tm);
#pragma GCC diagnostic pop
        return jev_str_of(e, buf, len);
    }
    default: return jev_fail(e, n, "'%s' is not a function", n->name);
    }
}

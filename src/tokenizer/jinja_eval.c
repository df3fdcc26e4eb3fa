/* jinja_eval.c — renders a parsed template: scopes (a for loop has its own,
 * as in Jinja, which is why templates use namespace()), loop variables and
 * Python operator semantics.  The filters, tests, methods and global
 * functions are in jinja_builtins.c.  Anything else is an error naming the
 * template line. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tokenizer/jinja_eval.h"

jv jev_fail(ev *e, const jnode *n, const char *fmt, ...)
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

jv jev_nomem(ev *e)
{
    if (!e->failed) {
        oct_error_set(e->err, OCT_ERR_NOMEM, -1,
                      "chat template: out of memory (or the render exceeded its memory limit)");
        e->failed = true;
    }
    return jv_undef();
}

jv jev_str_of(ev *e, const char *s, size_t n)
{
    jv v = jv_str(e->a, s, n);
    if (v.t != JV_STR)
        return jev_nomem(e);
    return v;
}

jv jev_buf_str(ev *e, tok_buf *b)
{
    jv v = jev_str_of(e, b->data ? b->data : "", b->len);
    tok_buf_free(b);
    return v;
}

/* Python str() of any value as a new string value. */
jv jev_to_str(ev *e, const jv *v)
{
    if (v->t == JV_STR)
        return *v;
    tok_buf b = {0};
    if (!jv_to_str(v, &b)) {
        tok_buf_free(&b);
        return jev_value_fail(e, NULL, v);
    }
    return jev_buf_str(e, &b);
}

/* A value's str() or tojson failed: too deeply nested, or out of memory. */
jv jev_value_fail(ev *e, const jnode *n, const jv *v)
{
    if (jv_too_deep(v))
        return jev_fail(e, n, "value nested deeper than %d lists/dicts", JINJA_MAX_VALUE_DEPTH);
    return jev_nomem(e);
}

/* ------------------------------------------------------------ code points */

bool jev_decode_cps(ev *e, const jstr *s, cps *out)
{
    out->v = jarena_alloc(e->a, (s->len + 1) * sizeof *out->v);
    if (!out->v) {
        jev_nomem(e);
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

jv jev_encode_cps(ev *e, const uint32_t *v, size_t n)
{
    tok_buf b = {0};
    for (size_t i = 0; i < n; i++)
        if (!tok_buf_put_cp(&b, v[i])) {
            tok_buf_free(&b);
            return jev_nomem(e);
        }
    return jev_buf_str(e, &b);
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

static bool made_since(const ev *e, jarena_mark m, const jv *v)
{
    const void *p = v->t == JV_STR    ? (const void *)v->u.s
                    : v->t == JV_LIST ? (const void *)v->u.l
                    : v->t == JV_DICT ? (const void *)v->u.d
                                      : NULL;
    return p && jarena_since(e->a, m, p);
}

/* d[key] = v.  A loop iteration whose memory the store makes reachable from
 * older memory keeps its memory: the key is new (d grows) or v is newer than
 * the iteration, and d itself is older. */
static bool store(ev *e, jdict *d, const char *key, size_t n, jv v)
{
    bool is_new = !jv_dict_get(d, key, n);
    for (iter_frame *f = e->iters; f; f = f->outer)
        if (!f->kept && (is_new || made_since(e, f->mark, &v)) && !jarena_since(e->a, f->mark, d))
            f->kept = true;
    if (!jv_dict_set(e->a, d, key, n, v)) {
        jev_nomem(e);
        return false;
    }
    return true;
}

static bool assign(ev *e, const char *name, jv v)
{
    return store(e, e->top->vars, name, strlen(name), v);
}

/* Counts one unit of work against JINJA_MAX_STEPS. */
static bool step(ev *e, const jnode *n)
{
    if (++e->steps <= JINJA_MAX_STEPS)
        return true;
    jev_fail(e, n, "the render takes more than %u steps", JINJA_MAX_STEPS);
    return false;
}

/* One level deeper in the evaluator's recursion; leave() undoes it. */
static bool enter(ev *e, const jnode *n)
{
    if (++e->depth <= JINJA_MAX_EVAL_DEPTH)
        return true;
    e->depth--;
    jev_fail(e, n, "evaluation nested deeper than %d", JINJA_MAX_EVAL_DEPTH);
    return false;
}

static void leave(ev *e)
{
    e->depth--;
}

/* -------------------------------------------------------------- helpers */

bool jev_is_num(const jv *v)
{
    return v->t == JV_INT || v->t == JV_FLOAT || v->t == JV_BOOL;
}

double jev_num(const jv *v)
{
    return v->t == JV_FLOAT ? v->u.f : v->t == JV_INT ? (double)v->u.i : (v->u.b ? 1.0 : 0.0);
}

int64_t jev_ival(const jv *v)
{
    return v->t == JV_INT ? v->u.i : v->t == JV_BOOL ? v->u.b : (int64_t)v->u.f;
}

/* Iterable -> list (dict: keys, string: characters); NULL when not iterable. */
jlist *jev_as_list(ev *e, const jnode *n, const jv *v)
{
    jv l = jv_list_new(e->a);
    if (l.t != JV_LIST) {
        jev_nomem(e);
        return NULL;
    }
    switch (v->t) {
    case JV_LIST: return v->u.l;
    case JV_UNDEF: return l.u.l;
    case JV_DICT:
        for (size_t i = 0; i < v->u.d->n; i++) {
            jv k = {JV_STR, {.s = v->u.d->keys[i]}};
            if (!jv_list_push(e->a, l.u.l, k)) {
                jev_nomem(e);
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
            jv c = jev_str_of(e, s->data + i, cl);
            if (e->failed || !jv_list_push(e->a, l.u.l, c)) {
                jev_nomem(e);
                return NULL;
            }
            i += cl;
        }
        return l.u.l;
    }
    default: jev_fail(e, n, "'%s' object is not iterable", jv_type_name(v->t)); return NULL;
    }
}

int jev_compare_vals(ev *e, const jnode *n, const jv *a, const jv *b, bool *ok)
{
    *ok = true;
    if (jev_is_num(a) && jev_is_num(b)) {
        double x = jev_num(a), y = jev_num(b);
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
    jev_fail(e, n, "'<' not supported between instances of '%s' and '%s'", jv_type_name(a->t),
             jv_type_name(b->t));
    return 0;
}

bool jev_contains(ev *e, const jnode *n, const jv *hay, const jv *needle, bool *res)
{
    switch (hay->t) {
    case JV_STR:
        if (needle->t != JV_STR) {
            jev_fail(e, n, "'in <string>' requires string as left operand, not %s",
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
    case JV_UNDEF: jev_fail(e, n, "argument of type 'Undefined' is not iterable"); return false;
    default:
        jev_fail(e, n, "argument of type '%s' is not iterable", jv_type_name(hay->t));
        return false;
    }
}

/* obj.name / obj[name] as Jinja's getattr/getitem on data. */
jv jev_get_attr(ev *e, const jnode *n, const jv *obj, const char *name, size_t len)
{
    if (obj->t == JV_DICT) {
        jv *v = jv_dict_get(obj->u.d, name, len);
        return v ? *v : jv_undef();
    }
    if (obj->t == JV_UNDEF)
        return jev_fail(e, n, "'%.*s' is undefined (attribute of an undefined value)", (int)len,
                        name);
    return jv_undef();
}

static jv get_item(ev *e, const jnode *n, const jv *obj, const jv *key)
{
    if (obj->t == JV_DICT) {
        if (key->t != JV_STR)
            return jv_undef();
        return jev_get_attr(e, n, obj, key->u.s->data, key->u.s->len);
    }
    if (obj->t == JV_UNDEF)
        return jev_fail(e, n, "subscript of an undefined value");
    if ((obj->t == JV_LIST || obj->t == JV_STR) && (key->t == JV_INT || key->t == JV_BOOL)) {
        int64_t i = jev_ival(key);
        if (obj->t == JV_LIST) {
            int64_t len = (int64_t)obj->u.l->n;
            if (i < 0)
                i += len;
            return i >= 0 && i < len ? obj->u.l->v[i] : jv_undef();
        }
        cps c;
        if (!jev_decode_cps(e, obj->u.s, &c))
            return jv_undef();
        int64_t len = (int64_t)c.n;
        if (i < 0)
            i += len;
        return i >= 0 && i < len ? jev_encode_cps(e, &c.v[i], 1) : jv_undef();
    }
    return jv_undef();
}

/* Python slice semantics on lists and strings (by code point). */
jv jev_slice(ev *e, const jnode *n, const jv *obj, const jv *lo, const jv *hi, const jv *st)
{
    int64_t step = st && st->t != JV_NONE && st->t != JV_UNDEF ? jev_ival(st) : 1;
    if (step == 0)
        return jev_fail(e, n, "slice step cannot be zero");
    cps c = {0};
    int64_t len;
    if (obj->t == JV_LIST)
        len = (int64_t)obj->u.l->n;
    else if (obj->t == JV_STR) {
        if (!jev_decode_cps(e, obj->u.s, &c))
            return jv_undef();
        len = (int64_t)c.n;
    } else {
        return jev_fail(e, n, "'%s' object is not subscriptable", jv_type_name(obj->t));
    }
    int64_t a, b;
    bool has_lo = lo && lo->t != JV_NONE && lo->t != JV_UNDEF;
    bool has_hi = hi && hi->t != JV_NONE && hi->t != JV_UNDEF;
    if (step > 0) {
        a = has_lo ? jev_ival(lo) : 0;
        b = has_hi ? jev_ival(hi) : len;
        if (a < 0)
            a = a + len < 0 ? 0 : a + len;
        if (b < 0)
            b = b + len < 0 ? 0 : b + len;
        if (a > len)
            a = len;
        if (b > len)
            b = len;
    } else {
        a = has_lo ? jev_ival(lo) : len - 1;
        b = has_hi ? jev_ival(hi) : -len - 1;
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
            return jev_nomem(e);
        for (int64_t i = a; step > 0 ? i < b : i > b; i += step)
            if (!jv_list_push(e->a, out.u.l, obj->u.l->v[i]))
                return jev_nomem(e);
        return out;
    }
    uint32_t *buf = jarena_alloc(e->a, ((size_t)len + 1) * sizeof *buf);
    if (!buf)
        return jev_nomem(e);
    size_t k = 0;
    for (int64_t i = a; step > 0 ? i < b : i > b; i += step)
        buf[k++] = c.v[i];
    return jev_encode_cps(e, buf, k);
}

/* --------------------------------------------------------------- forward */

static jv eval(ev *e, const jnode *n);
static void exec_body(ev *e, const jnodes *body);

/* Evaluates call arguments; `skip` leading kids are not arguments. */
static bool eval_args(ev *e, const jnode *n, size_t skip, args *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = skip; i < n->kids.n; i++) {
        if (out->n_pos == OCT_ARRAY_LEN(out->pos)) {
            jev_fail(e, n, "too many arguments");
            return false;
        }
        out->pos[out->n_pos++] = eval(e, n->kids.v[i]);
    }
    for (size_t i = 0; i < n->kwargs.n; i++) {
        if (out->n_kw == OCT_ARRAY_LEN(out->kw)) {
            jev_fail(e, n, "too many keyword arguments");
            return false;
        }
        out->kw_name[out->n_kw] = n->kwargs.v[i]->name;
        out->kw[out->n_kw++] = eval(e, n->kwargs.v[i]->kids.v[0]);
    }
    return !e->failed;
}

/* ------------------------------------------------------------ expressions */

static jv binop(ev *e, const jnode *n, const char *op, jv x, jv y)
{
    if (!strcmp(op, "~")) {
        tok_buf b = {0};
        if (!jv_to_str(&x, &b) || !jv_to_str(&y, &b)) {
            tok_buf_free(&b);
            return jev_value_fail(e, n, jv_too_deep(&x) ? &x : &y);
        }
        return jev_buf_str(e, &b);
    }
    if (!strcmp(op, "==") || !strcmp(op, "!="))
        return jv_bool(jv_equal(&x, &y) == (op[0] == '='));
    if (!strcmp(op, "in") || !strcmp(op, "ni")) {
        bool r;
        if (!jev_contains(e, n, &y, &x, &r))
            return jv_undef();
        return jv_bool(r == (op[0] == 'i'));
    }
    if (op[0] == '<' || op[0] == '>') {
        bool ok;
        int c = jev_compare_vals(e, n, &x, &y, &ok);
        if (!ok)
            return jv_undef();
        bool r = op[0] == '<' ? (op[1] ? c <= 0 : c < 0) : (op[1] ? c >= 0 : c > 0);
        return jv_bool(r);
    }
    if (x.t == JV_UNDEF || y.t == JV_UNDEF)
        return jev_fail(e, n, "unsupported operand: undefined value in '%s'", op);
    if (!strcmp(op, "+")) {
        if (x.t == JV_STR && y.t == JV_STR) {
            tok_buf b = {0};
            if (!tok_buf_append(&b, x.u.s->data, x.u.s->len) ||
                !tok_buf_append(&b, y.u.s->data, y.u.s->len)) {
                tok_buf_free(&b);
                return jev_nomem(e);
            }
            return jev_buf_str(e, &b);
        }
        if (x.t == JV_LIST && y.t == JV_LIST) {
            jv out = jv_list_new(e->a);
            for (size_t i = 0; out.t == JV_LIST && i < x.u.l->n + y.u.l->n; i++)
                if (!jv_list_push(e->a, out.u.l,
                                  i < x.u.l->n ? x.u.l->v[i] : y.u.l->v[i - x.u.l->n]))
                    return jev_nomem(e);
            return out.t == JV_LIST ? out : jev_nomem(e);
        }
    }
    if (!strcmp(op, "*") &&
        ((x.t == JV_STR && y.t == JV_INT) || (x.t == JV_INT && y.t == JV_STR))) {
        const jv *s = x.t == JV_STR ? &x : &y;
        int64_t k = x.t == JV_INT ? x.u.i : y.u.i;
        if (k > 0 && s->u.s->len * (size_t)k > ((size_t)16 << 20))
            return jev_fail(e, n, "string repetition too large");
        tok_buf b = {0};
        bool ok = tok_buf_append(&b, "", 0);
        for (int64_t i = 0; i < k && ok; i++)
            ok = tok_buf_append(&b, s->u.s->data, s->u.s->len);
        if (!ok) {
            tok_buf_free(&b);
            return jev_nomem(e);
        }
        return jev_buf_str(e, &b);
    }
    if (!jev_is_num(&x) || !jev_is_num(&y))
        return jev_fail(e, n, "unsupported operand type(s) for %s: '%s' and '%s'", op,
                        jv_type_name(x.t), jv_type_name(y.t));
    bool ints = x.t != JV_FLOAT && y.t != JV_FLOAT;
    int64_t a = jev_ival(&x), b = jev_ival(&y);
    double fa = jev_num(&x), fb = jev_num(&y);
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
            return jev_fail(e, n, "division by zero");
        if (op[1] == '/') {
            if (ints) {
                if (a == INT64_MIN && b == -1)
                    return jev_fail(e, n, "integer overflow");
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
            return jev_fail(e, n, "modulo by zero");
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
    return jev_fail(e, n, "unsupported operator '%s'", op);
}

static jv eval(ev *e, const jnode *n)
{
    if (e->failed || !step(e, n) || !enter(e, n))
        return jv_undef();
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
            r = jev_get_attr(e, n, &obj, n->name, strlen(n->name));
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
            r = jev_slice(e, n, &obj, &parts[0], &parts[1], &parts[2]);
        break;
    }
    case JN_CALL: {
        jv *fn = lookup(e, n->name);
        if (!fn) {
            r = jev_fail(e, n, "'%s' is undefined", n->name);
            break;
        }
        jv f = *fn;
        if (eval_args(e, n, 0, &a))
            r = jev_call_global(e, n, &f, &a);
        break;
    }
    case JN_METHOD: {
        jv obj = eval(e, n->kids.v[0]);
        if (eval_args(e, n, 1, &a))
            r = jev_call_method(e, n, &obj, n->name, &a);
        break;
    }
    case JN_FILTER: {
        jv v = eval(e, n->kids.v[0]);
        if (eval_args(e, n, 1, &a))
            r = jev_apply_filter(e, n, n->name, &v, &a);
        break;
    }
    case JN_TEST: {
        jv v = eval(e, n->kids.v[0]);
        bool res;
        if (eval_args(e, n, 1, &a) && jev_run_test(e, n, n->name, &v, &a, &res))
            r = jv_bool(res != n->negate);
        break;
    }
    case JN_UNARY: {
        jv v = eval(e, n->kids.v[0]);
        if (e->failed)
            break;
        if (!jev_is_num(&v)) {
            r = jev_fail(e, n, "bad operand type for unary %c: '%s'", n->op[0], jv_type_name(v.t));
            break;
        }
        if (n->op[0] == '+')
            r = v.t == JV_BOOL ? jv_int(v.u.b) : v;
        else
            r = v.t == JV_FLOAT ? jv_float(-v.u.f) : jv_int((int64_t)(0 - (uint64_t)jev_ival(&v)));
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
            r = jev_nomem(e);
            break;
        }
        r.u.l->is_tuple = n->op[0] == '(';
        for (size_t i = 0; i < n->kids.n && !e->failed; i++)
            if (!jv_list_push(e->a, r.u.l, eval(e, n->kids.v[i])))
                r = jev_nomem(e);
        break;
    }
    case JN_DICT: {
        jv d = jv_dict_new(e->a);
        if (d.t != JV_DICT) {
            r = jev_nomem(e);
            break;
        }
        for (size_t i = 0; i + 1 < n->kids.n && !e->failed; i += 2) {
            jv k = eval(e, n->kids.v[i]);
            jv v = eval(e, n->kids.v[i + 1]);
            if (e->failed)
                break;
            if (k.t != JV_STR) {
                jev_fail(e, n, "only string keys are supported in dict literals");
                break;
            }
            if (!jv_dict_set(e->a, d.u.d, k.u.s->data, k.u.s->len, v))
                jev_nomem(e);
        }
        r = d;
        break;
    }
    default: r = jev_fail(e, n, "statement used as an expression");
    }
    leave(e);
    return e->failed ? jv_undef() : r;
}

/* ------------------------------------------------------------- statements */

static void emit(ev *e, const jnode *n, const jv *v)
{
    if (!jv_to_str(v, e->out))
        jev_value_fail(e, n, v);
    else if (e->out->len > JINJA_MAX_TEXT)
        jev_fail(e, n, "rendered text exceeds %zu bytes", JINJA_MAX_TEXT);
}

/* Binds the loop target(s) to one item in the loop's scope.  The scope is
 * newer than the items and than any enclosing iteration, so no store can
 * make an iteration's memory reachable from older memory. */
static bool bind_item(ev *e, const jnode *n, jv item)
{
    jv v0 = item, v1 = jv_undef();
    if (n->name2) {
        if (item.t != JV_LIST || item.u.l->n != 2) {
            jev_fail(e, n, "cannot unpack into two loop variables");
            return false;
        }
        v0 = item.u.l->v[0];
        v1 = item.u.l->v[1];
    }
    jdict *d = e->top->vars;
    if (!jv_dict_set(e->a, d, n->name, strlen(n->name), v0) ||
        (n->name2 && !jv_dict_set(e->a, d, n->name2, strlen(n->name2), v1))) {
        jev_nomem(e);
        return false;
    }
    return true;
}

/* The items that pass the loop's `if` filter (a new list), or all of them. */
static jlist *filtered(ev *e, const jnode *n, jlist *items)
{
    const jnode *filter = n->kids.n > 1 ? n->kids.v[1] : NULL;
    if (!filter)
        return items;
    jv l = jv_list_new(e->a);
    jv *kept = items->n ? jarena_alloc(e->a, items->n * sizeof *kept) : NULL;
    if (l.t != JV_LIST || (items->n && !kept)) {
        jev_nomem(e);
        return NULL;
    }
    l.u.l->v = kept;
    l.u.l->cap = items->n;
    for (size_t i = 0; i < items->n; i++) {
        if (!step(e, n) || !bind_item(e, n, items->v[i]))
            return NULL;
        /* an expression stores nothing: what it allocates can go */
        jarena_mark m = jarena_get_mark(e->a);
        jv c = eval(e, filter);
        bool keep = jv_truthy(&c);
        jarena_release(e->a, m);
        if (e->failed)
            return NULL;
        if (keep && !jv_list_push(e->a, l.u.l, items->v[i])) {
            jev_nomem(e);
            return NULL;
        }
    }
    return l.u.l;
}

/* The `loop` variable's fields for item i of l.  The dict is the loop's own
 * (newer than the items, nothing else adds keys): the first item adds the
 * keys, later ones overwrite the values in place, allocating nothing. */
static bool set_loop_vars(ev *e, jdict *d, const jlist *l, size_t i)
{
    static const char *const keys[] = {"index", "index0", "revindex", "revindex0", "first",
                                       "last",  "length", "previtem", "nextitem"};
    int64_t len = (int64_t)l->n, idx = (int64_t)i;
    const jv vals[] = {jv_int(idx + 1),
                       jv_int(idx),
                       jv_int(len - idx),
                       jv_int(len - idx - 1),
                       jv_bool(i == 0),
                       jv_bool(i + 1 == l->n),
                       jv_int(len),
                       i > 0 ? l->v[i - 1] : jv_undef(),
                       i + 1 < l->n ? l->v[i + 1] : jv_undef()};
    for (size_t k = 0; k < OCT_ARRAY_LEN(keys); k++) {
        if (d->n == OCT_ARRAY_LEN(keys)) {
            d->vals[k] = vals[k];
        } else if (!jv_dict_set(e->a, d, keys[k], strlen(keys[k]), vals[k])) {
            jev_nomem(e);
            return false;
        }
    }
    return true;
}

/* Runs the body once in a scope of its own (as in Jinja, a set in the body
 * lasts until the iteration ends); gives back the iteration's memory when
 * it kept none. */
static void run_iteration(ev *e, const jnode *n)
{
    iter_frame f = {jarena_get_mark(e->a), false, e->iters};
    jv vars = jv_dict_new(e->a);
    if (vars.t != JV_DICT) {
        jev_nomem(e);
        return;
    }
    scope s = {vars.u.d, e->top};
    e->top = &s;
    e->iters = &f;
    exec_body(e, &n->body);
    e->iters = f.outer;
    e->top = s.parent;
    if (!f.kept && !e->failed)
        jarena_release(e->a, f.mark);
}

static void loop_items(ev *e, const jnode *n, jlist *kept, jdict *loop)
{
    for (size_t i = 0; i < kept->n && !e->failed; i++) {
        if (!step(e, n) || !bind_item(e, n, kept->v[i]) || !set_loop_vars(e, loop, kept, i))
            return;
        run_iteration(e, n);
        if (e->loop_ctl == 1) {
            e->loop_ctl = 0;
            break;
        }
        e->loop_ctl = 0;
    }
    if (kept->n == 0 && !e->failed)
        exec_body(e, &n->else_body);
}

static void exec_for(ev *e, const jnode *n)
{
    jv it = eval(e, n->kids.v[0]);
    if (e->failed)
        return;
    if (it.t == JV_NONE) {
        jev_fail(e, n, "'NoneType' object is not iterable");
        return;
    }
    jlist *items = jev_as_list(e, n, &it);
    if (!items)
        return;
    jv vars = jv_dict_new(e->a);
    jv loop = jv_dict_new(e->a);
    if (vars.t != JV_DICT || loop.t != JV_DICT) {
        jev_nomem(e);
        return;
    }
    scope s = {vars.u.d, e->top};
    e->top = &s;
    jlist *kept = filtered(e, n, items);
    if (kept && assign(e, "loop", loop))
        loop_items(e, n, kept, loop.u.d);
    e->top = s.parent;
}

static void exec_set(ev *e, const jnode *n)
{
    jv v;
    if (n->negate) { /* block set: capture the body's output */
        tok_buf *saved = e->out;
        tok_buf cap = {0};
        e->out = &cap;
        exec_body(e, &n->body);
        e->out = saved;
        v = jev_buf_str(e, &cap);
    } else {
        v = eval(e, n->kids.v[0]);
    }
    if (e->failed)
        return;
    if (!n->attr) {
        assign(e, n->name, v);
        return;
    }
    jv *obj = lookup(e, n->name);
    if (!obj || obj->t != JV_DICT || !obj->u.d->is_namespace)
        jev_fail(e, n, "cannot assign attribute on non-namespace object '%s'", n->name);
    else
        store(e, obj->u.d, n->attr, strlen(n->attr), v);
}

static void exec_if(ev *e, const jnode *n)
{
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
}

static void exec_stmt(ev *e, const jnode *n)
{
    if (!step(e, n) || !enter(e, n))
        return;
    switch (n->kind) {
    case JN_TEXT:
        if (!tok_buf_append(e->out, n->name, (size_t)n->lit.u.i))
            jev_nomem(e);
        break;
    case JN_OUTPUT: {
        jv v = eval(e, n->kids.v[0]);
        if (!e->failed)
            emit(e, n, &v);
        break;
    }
    case JN_IF: exec_if(e, n); break;
    case JN_FOR: exec_for(e, n); break;
    case JN_SET: exec_set(e, n); break;
    case JN_BREAK:
    case JN_CONTINUE: e->loop_ctl = n->kind == JN_BREAK ? 1 : 2; break;
    case JN_BODY: exec_body(e, &n->body); break;
    default: jev_fail(e, n, "expression used as a statement");
    }
    leave(e);
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

/* The source as Jinja's lexer sees it: \r\n and \r become \n and one trailing
 * newline is dropped (keep_trailing_newline=False).  NULL when out of memory. */
static char *normalize_newlines(jarena *a, const char *src, size_t *len)
{
    char *s = jarena_alloc(a, *len + 1);
    size_t n = 0;
    for (size_t i = 0; s && i < *len; i++) {
        bool crlf = src[i] == '\r' && i + 1 < *len && src[i + 1] == '\n';
        s[n++] = src[i] == '\r' ? '\n' : src[i];
        i += crlf;
    }
    if (s && n && s[n - 1] == '\n')
        n--;
    *len = n;
    return s;
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
    src = normalize_newlines(&a, src, &len);
    oct_status st = src ? jinja_lex(src, len, &a, &toks, err)
                        : oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
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

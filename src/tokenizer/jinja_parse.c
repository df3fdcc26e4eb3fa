/* jinja_parse.c — recursive-descent parser for the Jinja subset: statements
 * if/elif/else, for (one or two targets, optional `if` filter, else), set
 * (name, ns.attr, block form), break/continue, generation; expressions with
 * Jinja's precedence (or < and < not < comparisons/in < + - < ~ < * / // %
 * < ** < unary < filters/tests < postfix). */
#include <string.h>

#include "tokenizer/jinja.h"

typedef struct parser {
    const jtoks *t;
    size_t i;
    jarena *a;
    oct_error *err;
    bool failed;
    int expr_depth;  /* nested sub-expressions, JINJA_MAX_EXPR_DEPTH at most */
    int block_depth; /* nested block statements, JINJA_MAX_BLOCK_DEPTH at most */
} parser;

static const jtok *cur(parser *p)
{
    return &p->t->v[p->i];
}

static const jtok *peek(parser *p, size_t k)
{
    size_t j = p->i + k;
    return j < p->t->n ? &p->t->v[j] : &p->t->v[p->t->n - 1];
}

static void advance(parser *p)
{
    if (p->i + 1 < p->t->n)
        p->i++;
}

static void *fail(parser *p, const char *fmt, const char *arg)
{
    if (!p->failed) {
        /* fmt holds at most one "%s" (replaced by arg) and "%%" escapes */
        char m[256];
        size_t k = 0;
        for (const char *f = fmt; *f && k + 1 < sizeof m; f++) {
            if (f[0] == '%' && f[1] == 's') {
                for (const char *a = arg ? arg : ""; *a && k + 1 < sizeof m; a++)
                    m[k++] = *a;
                f++;
            } else if (f[0] == '%' && f[1] == '%') {
                m[k++] = '%';
                f++;
            } else {
                m[k++] = *f;
            }
        }
        m[k] = 0;
        const jtok *t = cur(p);
        oct_error_set(p->err, OCT_ERR_FORMAT, -1, "chat template line %d: %s", t->line, m);
        p->failed = true;
    }
    return NULL;
}

static void *nomem(parser *p)
{
    if (!p->failed) {
        oct_error_set(p->err, OCT_ERR_NOMEM, -1, "out of memory (chat template)");
        p->failed = true;
    }
    return NULL;
}

static bool is_op(parser *p, const char *op)
{
    const jtok *t = cur(p);
    return t->t == JT_OP && strcmp(t->str, op) == 0;
}

static bool is_name(parser *p, const char *name)
{
    const jtok *t = cur(p);
    return t->t == JT_NAME && strcmp(t->str, name) == 0;
}

static bool expect_op(parser *p, const char *op)
{
    if (!is_op(p, op)) {
        fail(p, "expected '%s'", op);
        return false;
    }
    advance(p);
    return true;
}

static bool expect_end(parser *p)
{
    if (cur(p)->t != JT_BLOCK_END) {
        const jtok *t = cur(p);
        fail(p, "expected end of tag '%%}', got '%s'", t->str ? t->str : "?");
        return false;
    }
    advance(p);
    return true;
}

static jnode *node(parser *p, jnode_kind k)
{
    jnode *n = jarena_alloc(p->a, sizeof *n);
    if (!n)
        return nomem(p);
    n->kind = k;
    n->line = cur(p)->line;
    return n;
}

static bool add(parser *p, jnodes *l, jnode *n)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jnode **v = jarena_alloc(p->a, cap * sizeof *v);
        if (!v) {
            nomem(p);
            return false;
        }
        if (l->n)
            memcpy(v, l->v, l->n * sizeof *v);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = n;
    return true;
}

/* One level deeper in an expression; leave_expr() undoes it. */
static bool enter_expr(parser *p)
{
    if (++p->expr_depth <= JINJA_MAX_EXPR_DEPTH)
        return true;
    char m[64];
    snprintf(m, sizeof m, "%d", JINJA_MAX_EXPR_DEPTH);
    fail(p, "expression nested deeper than %s", m);
    return false;
}

static jnode *leave_expr(parser *p, jnode *n)
{
    p->expr_depth--;
    return n;
}

static jnode *expr(parser *p);
static jnode *cond_expr(parser *p);
static jnode *or_expr(parser *p);
static jnode *unary(parser *p, bool with_filter);

/* Call arguments after '(' up to ')': positional into kids, key=value into kwargs. */
static bool call_args(parser *p, jnode *n)
{
    if (!expect_op(p, "("))
        return false;
    while (!is_op(p, ")")) {
        if (cur(p)->t == JT_NAME && peek(p, 1)->t == JT_OP && strcmp(peek(p, 1)->str, "=") == 0) {
            jnode *kw = node(p, JN_BODY);
            if (!kw)
                return false;
            kw->name = cur(p)->str;
            advance(p);
            advance(p);
            jnode *v = expr(p);
            if (!v || !add(p, &kw->kids, v) || !add(p, &n->kwargs, kw))
                return false;
        } else {
            jnode *v = expr(p);
            if (!v || !add(p, &n->kids, v))
                return false;
        }
        if (!is_op(p, ","))
            break;
        advance(p);
    }
    return expect_op(p, ")");
}

static jnode *primary(parser *p)
{
    const jtok *t = cur(p);
    jnode *n;
    if (t->t == JT_NAME) {
        n = node(p, JN_LIT);
        if (!n)
            return NULL;
        if (!strcmp(t->str, "true") || !strcmp(t->str, "True"))
            n->lit = jv_bool(true);
        else if (!strcmp(t->str, "false") || !strcmp(t->str, "False"))
            n->lit = jv_bool(false);
        else if (!strcmp(t->str, "none") || !strcmp(t->str, "None"))
            n->lit = jv_none();
        else {
            n->kind = JN_NAME;
            n->name = t->str;
        }
        advance(p);
        return n;
    }
    if (t->t == JT_STRING) {
        /* adjacent string literals concatenate */
        tok_buf b = {0};
        while (cur(p)->t == JT_STRING) {
            if (!tok_buf_append(&b, cur(p)->str, cur(p)->len)) {
                tok_buf_free(&b);
                return nomem(p);
            }
            advance(p);
        }
        n = node(p, JN_LIT);
        if (n)
            n->lit = jv_str_buf(p->a, &b);
        tok_buf_free(&b);
        if (n && n->lit.t != JV_STR)
            return nomem(p);
        return n;
    }
    if (t->t == JT_INT || t->t == JT_FLOAT) {
        n = node(p, JN_LIT);
        if (n)
            n->lit = t->t == JT_INT ? jv_int(t->i) : jv_float(t->f);
        advance(p);
        return n;
    }
    if (is_op(p, "(")) {
        advance(p);
        jnode *e = expr(p);
        if (!e)
            return NULL;
        if (is_op(p, ",")) { /* a tuple: a list that prints as a tuple */
            n = node(p, JN_LIST);
            if (!n || !add(p, &n->kids, e))
                return NULL;
            memcpy(n->op, "()", 3);
            while (is_op(p, ",")) {
                advance(p);
                if (is_op(p, ")"))
                    break;
                jnode *x = expr(p);
                if (!x || !add(p, &n->kids, x))
                    return NULL;
            }
            e = n;
        }
        return expect_op(p, ")") ? e : NULL;
    }
    if (is_op(p, "[")) {
        advance(p);
        n = node(p, JN_LIST);
        if (!n)
            return NULL;
        while (!is_op(p, "]")) {
            jnode *x = expr(p);
            if (!x || !add(p, &n->kids, x))
                return NULL;
            if (!is_op(p, ","))
                break;
            advance(p);
        }
        return expect_op(p, "]") ? n : NULL;
    }
    if (is_op(p, "{")) {
        advance(p);
        n = node(p, JN_DICT);
        if (!n)
            return NULL;
        while (!is_op(p, "}")) {
            jnode *k = expr(p);
            if (!k || !expect_op(p, ":"))
                return NULL;
            jnode *v = expr(p);
            if (!v || !add(p, &n->kids, k) || !add(p, &n->kids, v))
                return NULL;
            if (!is_op(p, ","))
                break;
            advance(p);
        }
        return expect_op(p, "}") ? n : NULL;
    }
    return fail(p, "unexpected '%s' in expression",
                t->str           ? t->str
                : t->t == JT_EOF ? "end of template"
                                 : "end of tag");
}

static jnode *postfix(parser *p, jnode *n)
{
    while (n) {
        if (is_op(p, ".")) {
            advance(p);
            if (cur(p)->t != JT_NAME && cur(p)->t != JT_INT)
                return fail(p, "expected a name after '.'", NULL);
            jnode *m;
            if (cur(p)->t == JT_INT) { /* x.0 == x[0] */
                jnode *idx = node(p, JN_LIT);
                m = node(p, JN_ITEM);
                if (!idx || !m)
                    return NULL;
                idx->lit = jv_int(cur(p)->i);
                advance(p);
                if (!add(p, &m->kids, n) || !add(p, &m->kids, idx))
                    return NULL;
                n = m;
                continue;
            }
            const char *name = cur(p)->str;
            advance(p);
            m = node(p, is_op(p, "(") ? JN_METHOD : JN_ATTR);
            if (!m)
                return NULL;
            m->name = name;
            if (!add(p, &m->kids, n))
                return NULL;
            if (m->kind == JN_METHOD && !call_args(p, m))
                return NULL;
            n = m;
        } else if (is_op(p, "[")) {
            advance(p);
            jnode *parts[3] = {NULL, NULL, NULL};
            int n_parts = 1;
            bool slice = false;
            for (;;) {
                if (!is_op(p, ":") && !is_op(p, "]")) {
                    parts[n_parts - 1] = expr(p);
                    if (!parts[n_parts - 1])
                        return NULL;
                }
                if (is_op(p, ":") && n_parts < 3) {
                    slice = true;
                    n_parts++;
                    advance(p);
                    continue;
                }
                break;
            }
            if (!expect_op(p, "]"))
                return NULL;
            jnode *m = node(p, slice ? JN_SLICE : JN_ITEM);
            if (!m || !add(p, &m->kids, n))
                return NULL;
            if (!slice && !parts[0])
                return fail(p, "empty subscript", NULL);
            for (int k = 0; k < (slice ? 3 : 1); k++) {
                /* NULL kids stand for omitted slice bounds */
                if (!add(p, &m->kids, parts[k]))
                    return NULL;
            }
            n = m;
        } else if (is_op(p, "(")) {
            if (n->kind != JN_NAME)
                return fail(p, "only named functions can be called", NULL);
            n->kind = JN_CALL;
            if (!call_args(p, n))
                return NULL;
        } else {
            break;
        }
    }
    return n;
}

static bool starts_test_arg(parser *p)
{
    const jtok *t = cur(p);
    if (t->t == JT_STRING || t->t == JT_INT || t->t == JT_FLOAT)
        return true;
    if (t->t == JT_NAME)
        return strcmp(t->str, "else") && strcmp(t->str, "or") && strcmp(t->str, "and") &&
               strcmp(t->str, "if") && strcmp(t->str, "in") && strcmp(t->str, "is") &&
               strcmp(t->str, "not");
    return is_op(p, "[") || is_op(p, "{");
}

static jnode *filters(parser *p, jnode *n)
{
    while (n) {
        if (is_op(p, "|")) {
            advance(p);
            if (cur(p)->t != JT_NAME)
                return fail(p, "expected a filter name after '|'", NULL);
            jnode *f = node(p, JN_FILTER);
            if (!f)
                return NULL;
            f->name = cur(p)->str;
            advance(p);
            if (!add(p, &f->kids, n))
                return NULL;
            if (is_op(p, "(") && !call_args(p, f))
                return NULL;
            n = f;
        } else if (is_name(p, "is")) {
            advance(p);
            jnode *t = node(p, JN_TEST);
            if (!t)
                return NULL;
            if (is_name(p, "not")) {
                t->negate = true;
                advance(p);
            }
            if (cur(p)->t != JT_NAME)
                return fail(p, "expected a test name after 'is'", NULL);
            t->name = cur(p)->str;
            advance(p);
            if (!add(p, &t->kids, n))
                return NULL;
            if (is_op(p, "(")) {
                if (!call_args(p, t))
                    return NULL;
            } else if (starts_test_arg(p)) {
                jnode *arg = postfix(p, primary(p));
                if (!arg || !add(p, &t->kids, arg))
                    return NULL;
            }
            n = t;
        } else {
            break;
        }
    }
    return n;
}

static jnode *unary(parser *p, bool with_filter)
{
    jnode *n;
    if (is_op(p, "-") || is_op(p, "+")) {
        n = node(p, JN_UNARY);
        if (!n || !enter_expr(p))
            return NULL;
        n->op[0] = cur(p)->str[0];
        advance(p);
        jnode *x = leave_expr(p, unary(p, false));
        if (!x || !add(p, &n->kids, x))
            return NULL;
    } else {
        n = postfix(p, primary(p));
    }
    return with_filter ? filters(p, n) : n;
}

static jnode *binary(parser *p, jnode *l, const char *op, jnode *(*next)(parser *))
{
    jnode *n = node(p, JN_BINARY);
    if (!n || !l)
        return NULL;
    snprintf(n->op, sizeof n->op, "%s", op);
    jnode *r = next(p);
    if (!r || !add(p, &n->kids, l) || !add(p, &n->kids, r))
        return NULL;
    return n;
}

static jnode *pow_expr(parser *p)
{
    jnode *n = unary(p, true);
    while (n && is_op(p, "**")) {
        advance(p);
        if (!enter_expr(p))
            return NULL;
        n = leave_expr(p, binary(p, n, "**", pow_expr));
    }
    return n;
}

static jnode *math2(parser *p)
{
    jnode *n = pow_expr(p);
    while (n && (is_op(p, "*") || is_op(p, "/") || is_op(p, "//") || is_op(p, "%"))) {
        char op[3];
        snprintf(op, sizeof op, "%s", cur(p)->str);
        advance(p);
        n = binary(p, n, op, pow_expr);
    }
    return n;
}

static jnode *concat(parser *p)
{
    jnode *n = math2(p);
    while (n && is_op(p, "~")) {
        advance(p);
        n = binary(p, n, "~", math2);
    }
    return n;
}

static jnode *math1(parser *p)
{
    jnode *n = concat(p);
    while (n && (is_op(p, "+") || is_op(p, "-"))) {
        char op[3];
        snprintf(op, sizeof op, "%s", cur(p)->str);
        advance(p);
        n = binary(p, n, op, concat);
    }
    return n;
}

static jnode *compare(parser *p)
{
    jnode *n = math1(p);
    while (n) {
        const char *op = NULL;
        if (is_op(p, "==") || is_op(p, "!=") || is_op(p, "<") || is_op(p, ">") || is_op(p, "<=") ||
            is_op(p, ">="))
            op = cur(p)->str;
        else if (is_name(p, "in"))
            op = "in";
        else if (is_name(p, "not") && peek(p, 1)->t == JT_NAME &&
                 strcmp(peek(p, 1)->str, "in") == 0) {
            advance(p);
            op = "ni"; /* not in */
        }
        if (!op)
            break;
        char o[3];
        snprintf(o, sizeof o, "%s", op);
        advance(p);
        n = binary(p, n, o, math1);
    }
    return n;
}

static jnode *not_expr(parser *p)
{
    if (is_name(p, "not")) {
        if (!enter_expr(p))
            return NULL;
        advance(p);
        jnode *n = node(p, JN_NOT);
        jnode *x = leave_expr(p, not_expr(p));
        if (!n || !x || !add(p, &n->kids, x))
            return NULL;
        return n;
    }
    return compare(p);
}

static jnode *and_expr(parser *p)
{
    jnode *n = not_expr(p);
    while (n && is_name(p, "and")) {
        advance(p);
        jnode *a = node(p, JN_AND);
        jnode *r = not_expr(p);
        if (!a || !r || !add(p, &a->kids, n) || !add(p, &a->kids, r))
            return NULL;
        n = a;
    }
    return n;
}

static jnode *or_expr(parser *p)
{
    jnode *n = and_expr(p);
    while (n && is_name(p, "or")) {
        advance(p);
        jnode *o = node(p, JN_OR);
        jnode *r = and_expr(p);
        if (!o || !r || !add(p, &o->kids, n) || !add(p, &o->kids, r))
            return NULL;
        n = o;
    }
    return n;
}

static jnode *expr(parser *p)
{
    if (!enter_expr(p))
        return NULL;
    return leave_expr(p, cond_expr(p));
}

/* or_expr [if or_expr [else expr]]... */
static jnode *cond_expr(parser *p)
{
    jnode *n = or_expr(p);
    while (n && is_name(p, "if")) {
        advance(p);
        jnode *c = node(p, JN_COND);
        jnode *cond = or_expr(p);
        if (!c || !cond || !add(p, &c->kids, cond) || !add(p, &c->kids, n))
            return NULL;
        jnode *other = NULL;
        if (is_name(p, "else")) {
            advance(p);
            other = expr(p);
            if (!other)
                return NULL;
        }
        if (!add(p, &c->kids, other))
            return NULL;
        n = c;
    }
    return n;
}

/* ------------------------------------------------------------- statements */

static bool body(parser *p, jnodes *out, const char *const *stops);
static bool body_items(parser *p, jnodes *out, const char *const *stops);

static bool at_tag(parser *p, const char *const *names)
{
    if (cur(p)->t != JT_BLOCK_BEGIN || peek(p, 1)->t != JT_NAME)
        return false;
    for (size_t i = 0; names[i]; i++)
        if (strcmp(peek(p, 1)->str, names[i]) == 0)
            return true;
    return false;
}

static bool end_tag(parser *p, const char *name)
{
    const char *const names[] = {name, NULL};
    if (!at_tag(p, names)) {
        fail(p, "expected {%% %s %%}", name);
        return false;
    }
    advance(p);
    advance(p);
    return expect_end(p);
}

static jnode *stmt_if(parser *p)
{
    static const char *const stops[] = {"elif", "else", "endif", NULL};
    jnode *n = node(p, JN_IF);
    if (!n)
        return NULL;
    size_t cap = 0;
    for (;;) {
        jnode *cond = expr(p);
        if (!cond || !expect_end(p) || !add(p, &n->kids, cond))
            return NULL;
        if (n->n_blocks == cap) {
            cap = cap ? cap * 2 : 4;
            jnodes *b = jarena_alloc(p->a, cap * sizeof *b);
            if (!b)
                return nomem(p);
            if (n->n_blocks)
                memcpy(b, n->blocks, n->n_blocks * sizeof *b);
            n->blocks = b;
        }
        jnodes *blk = &n->blocks[n->n_blocks++];
        if (!body(p, blk, stops))
            return NULL;
        if (!at_tag(p, stops))
            return fail(p, "missing {%% endif %%}", NULL);
        const char *which = peek(p, 1)->str;
        advance(p);
        advance(p);
        if (strcmp(which, "elif") == 0)
            continue;
        if (strcmp(which, "else") == 0) {
            static const char *const end[] = {"endif", NULL};
            if (!expect_end(p) || !body(p, &n->else_body, end) || !end_tag(p, "endif"))
                return NULL;
            return n;
        }
        return expect_end(p) ? n : NULL;
    }
}

static jnode *stmt_for(parser *p)
{
    static const char *const stops[] = {"else", "endfor", NULL};
    jnode *n = node(p, JN_FOR);
    if (!n)
        return NULL;
    bool paren = is_op(p, "(");
    if (paren)
        advance(p);
    if (cur(p)->t != JT_NAME)
        return fail(p, "expected a loop variable", NULL);
    n->name = cur(p)->str;
    advance(p);
    if (is_op(p, ",")) {
        advance(p);
        if (cur(p)->t != JT_NAME)
            return fail(p, "expected a second loop variable", NULL);
        n->name2 = cur(p)->str;
        advance(p);
        if (is_op(p, ","))
            return fail(p, "more than two loop variables are not supported", NULL);
    }
    if (paren && !expect_op(p, ")"))
        return NULL;
    if (!is_name(p, "in"))
        return fail(p, "expected 'in' in for loop", NULL);
    advance(p);
    jnode *iter = or_expr(p);
    iter = iter ? filters(p, iter) : NULL;
    if (!iter || !add(p, &n->kids, iter))
        return NULL;
    jnode *filter = NULL;
    if (is_name(p, "if")) {
        advance(p);
        filter = or_expr(p);
        if (!filter)
            return NULL;
    }
    if (!add(p, &n->kids, filter))
        return NULL;
    if (is_name(p, "recursive"))
        return fail(p, "recursive loops are not supported", NULL);
    if (!expect_end(p) || !body(p, &n->body, stops))
        return NULL;
    if (at_tag(p, (const char *const[]){"else", NULL})) {
        static const char *const end[] = {"endfor", NULL};
        advance(p);
        advance(p);
        if (!expect_end(p) || !body(p, &n->else_body, end))
            return NULL;
    }
    return end_tag(p, "endfor") ? n : NULL;
}

static jnode *stmt_set(parser *p)
{
    jnode *n = node(p, JN_SET);
    if (!n)
        return NULL;
    if (cur(p)->t != JT_NAME)
        return fail(p, "expected a variable name after 'set'", NULL);
    n->name = cur(p)->str;
    advance(p);
    if (is_op(p, ".")) {
        advance(p);
        if (cur(p)->t != JT_NAME)
            return fail(p, "expected an attribute name", NULL);
        n->attr = cur(p)->str;
        advance(p);
    }
    if (is_op(p, ","))
        return fail(p, "tuple assignment in 'set' is not supported", NULL);
    if (cur(p)->t == JT_BLOCK_END && !n->attr) { /* {% set x %}...{% endset %} */
        static const char *const end[] = {"endset", NULL};
        advance(p);
        if (!body(p, &n->body, end) || !end_tag(p, "endset"))
            return NULL;
        n->kind = JN_SET;
        n->negate = true; /* marks the block form */
        return n;
    }
    if (!expect_op(p, "="))
        return NULL;
    jnode *v = expr(p);
    if (!v || !add(p, &n->kids, v))
        return NULL;
    return expect_end(p) ? n : NULL;
}

/* The body of a block statement: one level deeper. */
static bool body(parser *p, jnodes *out, const char *const *stops)
{
    if (++p->block_depth > JINJA_MAX_BLOCK_DEPTH) {
        char m[64];
        snprintf(m, sizeof m, "%d", JINJA_MAX_BLOCK_DEPTH);
        fail(p, "blocks nested deeper than %s", m);
        return false;
    }
    bool ok = body_items(p, out, stops);
    p->block_depth--;
    return ok;
}

static bool body_items(parser *p, jnodes *out, const char *const *stops)
{
    while (!p->failed) {
        const jtok *t = cur(p);
        if (t->t == JT_EOF) {
            if (stops) {
                size_t k = 0;
                while (stops[k + 1])
                    k++; /* the closing tag is listed last */
                fail(p, "unexpected end of template (missing {%% %s %%})", stops[k]);
            }
            return !p->failed;
        }
        if (t->t == JT_TEXT) {
            jnode *n = node(p, JN_TEXT);
            if (!n)
                return false;
            n->name = t->str;
            n->lit = jv_int((int64_t)t->len);
            advance(p);
            if (!add(p, out, n))
                return false;
            continue;
        }
        if (t->t == JT_VAR_BEGIN) {
            advance(p);
            jnode *n = node(p, JN_OUTPUT);
            jnode *e = expr(p);
            if (!n || !e || !add(p, &n->kids, e))
                return false;
            if (cur(p)->t != JT_VAR_END) {
                fail(p, "expected '}}', got '%s'", cur(p)->str ? cur(p)->str : "?");
                return false;
            }
            advance(p);
            if (!add(p, out, n))
                return false;
            continue;
        }
        if (t->t != JT_BLOCK_BEGIN) {
            fail(p, "unexpected token", NULL);
            return false;
        }
        if (stops && at_tag(p, stops))
            return true;
        const jtok *name = peek(p, 1);
        if (name->t != JT_NAME) {
            advance(p);
            fail(p, "expected a tag name", NULL);
            return false;
        }
        advance(p);
        advance(p);
        jnode *n = NULL;
        const char *s = name->str;
        if (!strcmp(s, "if")) {
            n = stmt_if(p);
        } else if (!strcmp(s, "for")) {
            n = stmt_for(p);
        } else if (!strcmp(s, "set")) {
            n = stmt_set(p);
        } else if (!strcmp(s, "break") || !strcmp(s, "continue")) {
            n = node(p, s[0] == 'b' ? JN_BREAK : JN_CONTINUE);
            if (n && !expect_end(p))
                return false;
        } else if (!strcmp(s, "generation")) {
            static const char *const end[] = {"endgeneration", NULL};
            n = node(p, JN_BODY);
            if (!n || !expect_end(p) || !body(p, &n->body, end) || !end_tag(p, "endgeneration"))
                return false;
        } else {
            p->i--;
            fail(p, "unsupported tag '%s'", s);
            return false;
        }
        if (!n || !add(p, out, n))
            return false;
    }
    return false;
}

oct_status jinja_parse(const jtoks *toks, jarena *a, jnodes *out, oct_error *err)
{
    parser p = {toks, 0, a, err, false, 0, 0};
    memset(out, 0, sizeof *out);
    if (!body_items(&p, out, NULL) || p.failed) {
        if (!p.failed)
            oct_error_set(err, OCT_ERR_FORMAT, -1, "chat template: parse error");
        return err && err->status != OCT_OK ? err->status : OCT_ERR_FORMAT;
    }
    return OCT_OK;
}

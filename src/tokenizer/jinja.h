/* jinja.h — the Jinja2 subset chat templates use (internal).
 *
 * Pipeline: jinja_lex (source -> tokens, applying trim_blocks, lstrip_blocks
 * and the "-" whitespace controls, as transformers configures Jinja) ->
 * jinja_parse (tokens -> statement/expression tree) -> jinja_eval (tree +
 * context -> text).  Values live in an arena freed after rendering, so
 * nothing in a render owns memory individually. */
#ifndef OCTET_TOK_JINJA_H
#define OCTET_TOK_JINJA_H

#include <jansson.h>

#include "tokenizer/tok_internal.h"

/* ----------------------------------------------------------------- limits */

/* A template is client data for the server's chat endpoint: these bound the
 * stack and the time one render can take.  Jinja2 itself (as transformers
 * runs it) stops well below the depths: Python rejects more than 100 nested
 * ifs or 20 nested fors, and ~90 nested parentheses exhaust its recursion
 * limit. */
#define JINJA_MAX_BLOCK_DEPTH 256  /* nested if/for/set/generation blocks (parser) */
#define JINJA_MAX_EXPR_DEPTH 256   /* nested (), [], {}, arguments, unary, not and ** chains */
#define JINJA_MAX_EVAL_DEPTH 1024  /* evaluator recursion: expression tree + blocks */
#define JINJA_MAX_VALUE_DEPTH 1000 /* list/dict nesting that str/tojson/== walk */
/* statements + expression nodes + loop iterations (the fuzzing build, `make
 * fuzz`, lowers it: under ASan 5e7 steps take 10-30 s, past libFuzzer's timeout) */
#ifndef JINJA_MAX_STEPS
#define JINJA_MAX_STEPS 50000000u
#endif
#define JINJA_MAX_TEXT ((size_t)64 << 20) /* rendered text, and one value's str()/tojson */

/* ------------------------------------------------------------------ arena */

typedef struct jarena_chunk jarena_chunk;
typedef struct jarena {
    jarena_chunk *head;
    size_t used_total, limit;
    bool failed;
} jarena;

void *jarena_alloc(jarena *a, size_t n); /* zeroed; NULL when over the limit */
void jarena_free(jarena *a);

/* A point in the arena's allocation history: jarena_release gives back
 * everything allocated after it (the caller guarantees nothing still points
 * there); jarena_since tells whether `p` was allocated after it. */
typedef struct jarena_mark {
    jarena_chunk *chunk;
    size_t used, used_total;
} jarena_mark;

jarena_mark jarena_get_mark(const jarena *a);
void jarena_release(jarena *a, jarena_mark m);
bool jarena_since(const jarena *a, jarena_mark m, const void *p);

/* ----------------------------------------------------------------- values */

typedef enum {
    JV_UNDEF,
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST,
    JV_DICT, /* also namespace() objects and `loop` */
    JV_FUNC, /* a global function (raise_exception, namespace, range, ...) */
} jv_type;

typedef struct jstr {
    size_t len;
    char *data; /* NUL-terminated */
} jstr;

struct jlist;
struct jdict;

typedef struct jv {
    jv_type t;
    union {
        bool b;
        int64_t i;
        double f;
        jstr *s;
        struct jlist *l;
        struct jdict *d;
        int fn;
    } u;
} jv;

typedef struct jlist {
    jv *v;
    size_t n, cap;
    bool is_tuple; /* a tuple literal or an items() pair: only its repr differs */
} jlist;

typedef struct jdict {
    jstr **keys;
    jv *vals;
    size_t n, cap;
    bool is_namespace;
} jdict;

static inline jv jv_undef(void)
{
    jv v = {JV_UNDEF, {.i = 0}};
    return v;
}
static inline jv jv_none(void)
{
    jv v = {JV_NONE, {.i = 0}};
    return v;
}
static inline jv jv_bool(bool b)
{
    jv v = {JV_BOOL, {.b = b}};
    return v;
}
static inline jv jv_int(int64_t i)
{
    jv v = {JV_INT, {.i = i}};
    return v;
}
static inline jv jv_float(double f)
{
    jv v = {JV_FLOAT, {.f = f}};
    return v;
}

jv jv_str(jarena *a, const char *s, size_t n); /* copies; t == JV_UNDEF on failure */
jv jv_str_buf(jarena *a, const tok_buf *b);
jv jv_list_new(jarena *a);
jv jv_dict_new(jarena *a);
bool jv_list_push(jarena *a, jlist *l, jv v);
bool jv_dict_set(jarena *a, jdict *d, const char *key, size_t n, jv v);
/* Returns a pointer to the value or NULL. */
jv *jv_dict_get(const jdict *d, const char *key, size_t n);

/* JSON <-> values. */
jv jv_from_json(jarena *a, const json_t *j);
/* How Python's json.dumps(x, indent=, separators=, sort_keys=, ensure_ascii=)
 * writes: indent NULL = all on one line, else the text one level adds. */
typedef struct jv_json_fmt {
    const char *indent, *item_sep, *key_sep;
    size_t indent_len, item_sep_len, key_sep_len;
    bool sort_keys, ensure_ascii;
} jv_json_fmt;
/* False for values JSON cannot hold, nested deeper than JINJA_MAX_VALUE_DEPTH
 * (and out of memory). */
bool jv_to_json(const jv *v, const jv_json_fmt *fmt, tok_buf *out);

bool jv_truthy(const jv *v);
/* Python str(): the text {{ v }} prints. */
bool jv_to_str(const jv *v, tok_buf *out);
/* Python repr() (strings quoted), for lists/dicts inside str(). */
bool jv_repr(const jv *v, tok_buf *out);
/* Python ==; false for values nested deeper than JINJA_MAX_VALUE_DEPTH. */
bool jv_equal(const jv *a, const jv *b);
/* Whether lists/dicts nest deeper than JINJA_MAX_VALUE_DEPTH in v (namespace
 * attributes count): tells that limit from out of memory when str() fails. */
bool jv_too_deep(const jv *v);
const char *jv_type_name(jv_type t);

/* ----------------------------------------------------------------- lexer */

typedef enum {
    JT_TEXT,
    JT_VAR_BEGIN,
    JT_VAR_END,
    JT_BLOCK_BEGIN,
    JT_BLOCK_END,
    JT_NAME,
    JT_STRING,
    JT_INT,
    JT_FLOAT,
    JT_OP, /* text in str: one of ( ) [ ] { } . , : | ~ + - * / // % ** = == != < > <= >= */
    JT_EOF,
} jtok_type;

typedef struct jtok {
    jtok_type t;
    int line;
    char *str; /* TEXT, NAME, STRING (unescaped), OP; arena-owned */
    size_t len;
    int64_t i;
    double f;
} jtok;

typedef struct jtoks {
    jtok *v;
    size_t n, cap;
} jtoks;

oct_status jinja_lex(const char *src, size_t n, jarena *a, jtoks *out, oct_error *err);

/* ----------------------------------------------------------------- parser */

typedef enum {
    /* statements */
    JN_TEXT,   /* name = text */
    JN_OUTPUT, /* kids[0] = expr */
    JN_IF,     /* kids = conds, bodies in blocks[i]; else in else_body */
    JN_FOR,    /* targets names[0..1], kids[0] iter, kids[1] filter (may be NULL) */
    JN_SET,    /* name (and attr) = kids[0]; or body (block set) */
    JN_BREAK,
    JN_CONTINUE,
    JN_BODY, /* plain list of statements (generation blocks) */
    /* expressions */
    JN_LIT,
    JN_NAME,
    JN_ATTR,   /* kids[0].name */
    JN_ITEM,   /* kids[0][kids[1]] */
    JN_SLICE,  /* kids[0][kids[1]:kids[2]:kids[3]], NULL = omitted */
    JN_CALL,   /* name(args): global function */
    JN_METHOD, /* kids[0].name(args) */
    JN_FILTER, /* kids[0] | name(args) */
    JN_TEST,   /* kids[0] is [not] name(args) */
    JN_UNARY,  /* op kids[0] */
    JN_BINARY, /* kids[0] op kids[1] */
    JN_AND,
    JN_OR,
    JN_NOT,
    JN_COND, /* kids[1] if kids[0] else kids[2] (kids[2] may be NULL) */
    JN_LIST, /* kids; op "()" for a tuple */
    JN_DICT, /* kids: key, value, key, value... */
} jnode_kind;

typedef struct jnode jnode;
typedef struct jnodes {
    jnode **v;
    size_t n, cap;
} jnodes;

struct jnode {
    jnode_kind kind;
    int line;
    const char *name;  /* NAME, ATTR, CALL/METHOD/FILTER/TEST name, SET target */
    const char *attr;  /* SET ns.attr */
    const char *name2; /* FOR second target */
    char op[3];
    bool negate; /* TEST: is not */
    jv lit;
    jnodes kids;   /* operands / call args */
    jnodes kwargs; /* keyword args: each node's `name` is the keyword, kids[0] the value */
    jnodes body;   /* FOR body, SET block body, BODY */
    jnodes else_body;
    jnodes *blocks; /* IF: one body per condition */
    size_t n_blocks;
};

oct_status jinja_parse(const jtoks *toks, jarena *a, jnodes *out, oct_error *err);

/* ------------------------------------------------------------- evaluation */

/* Renders the parsed template with the variables of `ctx` (a dict). */
oct_status jinja_eval(const jnodes *prog, jarena *a, jdict *ctx, tok_buf *out, oct_error *err);

/* Parse + render in one go (ctx: JSON object of variables). */
oct_status jinja_render(const char *src, size_t len, const json_t *ctx, tok_buf *out,
                        oct_error *err);

#endif

/* jinja_eval.h — the evaluator's internals shared by jinja_eval.c (scopes,
 * expressions, statements) and jinja_builtins.c (the filters, tests, string /
 * dict / list methods and global functions chat templates call). */
#ifndef OCTET_JINJA_EVAL_H
#define OCTET_JINJA_EVAL_H

#include "tokenizer/jinja.h"

enum { FN_RAISE = 1, FN_NAMESPACE, FN_RANGE, FN_STRFTIME, FN_DICT };

typedef struct scope {
    jdict *vars;
    struct scope *parent;
} scope;

/* One loop iteration in progress: its arena allocations are given back at
 * its end unless a store made them reachable from older memory (`kept`). */
typedef struct iter_frame {
    jarena_mark mark;
    bool kept;
    struct iter_frame *outer;
} iter_frame;

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
    iter_frame *iters; /* innermost loop iteration, NULL outside loops */
} ev;

typedef struct cps {
    uint32_t *v;
    size_t n;
} cps;

/* Evaluated call arguments. */
typedef struct args {
    jv pos[8];
    size_t n_pos;
    const char *kw_name[8];
    jv kw[8];
    size_t n_kw;
} args;

/* ---- jinja_eval.c: values, errors, lookups ---- */
/* Records "line N: ..." (once) and returns undefined; e->failed is set. */
jv jev_fail(ev *e, const jnode *n, const char *fmt, ...) OCT_PRINTF(3, 4);
jlist *jev_as_list(ev *e, const jnode *n, const jv *v);
jv jev_buf_str(ev *e, tok_buf *b);
int jev_compare_vals(ev *e, const jnode *n, const jv *a, const jv *b, bool *ok);
bool jev_contains(ev *e, const jnode *n, const jv *hay, const jv *needle, bool *res);
bool jev_decode_cps(ev *e, const jstr *s, cps *out);
jv jev_encode_cps(ev *e, const uint32_t *v, size_t n);
jv jev_get_attr(ev *e, const jnode *n, const jv *obj, const char *name, size_t len);
bool jev_is_num(const jv *v);
int64_t jev_ival(const jv *v);
jv jev_nomem(ev *e);
/* str()/tojson of v failed: names the nesting limit when v exceeds it, else
 * out of memory. */
jv jev_value_fail(ev *e, const jnode *n, const jv *v);
double jev_num(const jv *v);
jv jev_slice(ev *e, const jnode *n, const jv *obj, const jv *lo, const jv *hi, const jv *st);
jv jev_str_of(ev *e, const char *s, size_t n);
jv jev_to_str(ev *e, const jv *v);

/* ---- jinja_builtins.c ---- */
jv jev_apply_filter(ev *e, const jnode *n, const char *name, const jv *v, const args *a);
jv jev_call_global(ev *e, const jnode *n, const jv *fn, const args *a);
jv jev_call_method(ev *e, const jnode *n, const jv *obj, const char *name, const args *a);
bool jev_run_test(ev *e, const jnode *n, const char *name, const jv *v, const args *a, bool *res);

#endif

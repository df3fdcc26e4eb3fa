/* jinja_lex.c — splits a template into text and tag tokens.
 *
 * Whitespace handling is Jinja's with transformers' settings
 * (trim_blocks=True, lstrip_blocks=True): "{%-"/"{{-"/"{#-" strip all
 * whitespace before the tag, "-%}"/"-}}"/"-#}" all whitespace after it;
 * otherwise a block or comment tag removes the spaces and tabs before it when
 * only they stand between the line start and the tag ("{%+" opts out), and
 * the first newline after it. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja.h"

static bool push(jarena *a, jtoks *t, jtok tok)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        jtok *p = jarena_alloc(a, cap * sizeof *p);
        if (!p)
            return false;
        if (t->n)
            memcpy(p, t->v, t->n * sizeof *p);
        t->v = p;
        t->cap = cap;
    }
    t->v[t->n++] = tok;
    return true;
}

static char *dup(jarena *a, const char *s, size_t n)
{
    char *d = jarena_alloc(a, n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int line_of(const char *src, size_t pos)
{
    int line = 1;
    for (size_t i = 0; i < pos; i++)
        if (src[i] == '\n')
            line++;
    return line;
}

/* Line numbers of increasing positions, counted in one pass over the
 * source (a position before the last one restarts the count). */
typedef struct line_cursor {
    size_t pos;
    int line;
} line_cursor;

static int line_at(line_cursor *c, const char *src, size_t pos)
{
    if (pos < c->pos) {
        c->pos = 0;
        c->line = 1;
    }
    for (; c->pos < pos; c->pos++)
        if (src[c->pos] == '\n')
            c->line++;
    return c->line;
}

#define LEX_ERR(pos, ...)                                                                          \
    do {                                                                                           \
        char m_[300];                                                                              \
        snprintf(m_, sizeof m_, __VA_ARGS__);                                                      \
        return oct_error_set(err, OCT_ERR_FORMAT, (int64_t)(pos), "chat template line %d: %s",     \
                             line_of(src, pos), m_);                                               \
    } while (0)

static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* A name from src[i] (a letter or '_'); returns the position after it.
 * t->str is NULL when out of memory. */
static size_t lex_name(const char *src, size_t n, size_t i, jarena *a, jtok *t)
{
    size_t s = i;
    while (i < n && is_name_char(src[i]))
        i++;
    t->t = JT_NAME;
    t->str = dup(a, src + s, i - s);
    t->len = i - s;
    return i;
}

/* A number from src[*i] (a digit): an integer, or a float with a fraction or
 * an exponent; '_' digit separators are dropped. */
static oct_status lex_number(const char *src, size_t n, size_t *pos, jarena *a, jtok *t,
                             oct_error *err)
{
    size_t i = *pos, s = i;
    bool is_float = false;
    while (i < n && ((src[i] >= '0' && src[i] <= '9') || src[i] == '_'))
        i++;
    if (i + 1 < n && src[i] == '.' && src[i + 1] >= '0' && src[i + 1] <= '9') {
        is_float = true;
        i++;
        while (i < n && src[i] >= '0' && src[i] <= '9')
            i++;
    }
    if (i < n && (src[i] == 'e' || src[i] == 'E')) {
        size_t k = i + 1;
        if (k < n && (src[k] == '+' || src[k] == '-'))
            k++;
        if (k < n && src[k] >= '0' && src[k] <= '9') {
            is_float = true;
            i = k;
            while (i < n && src[i] >= '0' && src[i] <= '9')
                i++;
        }
    }
    *pos = i;
    char *num = dup(a, src + s, i - s);
    if (!num)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    size_t w = 0;
    for (size_t k = 0; num[k]; k++)
        if (num[k] != '_')
            num[w++] = num[k];
    num[w] = 0;
    if (is_float) {
        t->t = JT_FLOAT;
        t->f = strtod(num, NULL);
    } else {
        t->t = JT_INT;
        t->i = strtoll(num, NULL, 10);
    }
    return OCT_OK;
}

/* The code point of a \x (2 hex digits), \u (4) or \U (8) escape whose
 * digits start at src[*pos]. */
static oct_status lex_hex_escape(const char *src, size_t n, size_t *pos, char kind, uint32_t *cp,
                                 oct_error *err)
{
    size_t i = *pos, nd = kind == 'x' ? 2 : kind == 'u' ? 4 : 8;
    *cp = 0;
    if (i + nd > n)
        LEX_ERR(i, "bad \\%c escape in string", kind);
    for (size_t k = 0; k < nd; k++) {
        char h = src[i + k];
        int v = h >= '0' && h <= '9'   ? h - '0'
                : h >= 'a' && h <= 'f' ? h - 'a' + 10
                : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                       : -1;
        if (v < 0)
            LEX_ERR(i, "bad \\%c escape in string", kind);
        *cp = *cp * 16 + (uint32_t)v;
    }
    *pos = i += nd;
    if (*cp > 0x10FFFF || (*cp >= 0xD800 && *cp < 0xE000))
        LEX_ERR(i, "bad code point in string escape");
    return OCT_OK;
}

/* The escape at src[*pos] ('\\' with a character after it), appended to b;
 * *ok is false when out of memory. */
static oct_status lex_escape(const char *src, size_t n, size_t *pos, tok_buf *b, bool *ok,
                             oct_error *err)
{
    char e = src[*pos + 1];
    *pos += 2;
    switch (e) {
    case 'n': *ok = tok_buf_putc(b, '\n'); break;
    case 't': *ok = tok_buf_putc(b, '\t'); break;
    case 'r': *ok = tok_buf_putc(b, '\r'); break;
    case '0': *ok = tok_buf_putc(b, '\0'); break;
    case '\\':
    case '\'':
    case '"': *ok = tok_buf_putc(b, e); break;
    case '\n':
        *ok = true; /* line continuation */
        break;
    case 'x':
    case 'u':
    case 'U': {
        uint32_t cp;
        OCT_TRY(lex_hex_escape(src, n, pos, e, &cp, err));
        *ok = tok_buf_put_cp(b, cp);
        break;
    }
    default: *ok = tok_buf_putc(b, '\\') && tok_buf_putc(b, e);
    }
    return OCT_OK;
}

/* A string literal from src[*pos] (its quote) with Python's escapes; `tag`
 * is where the tag began (an unterminated literal is reported there). */
static oct_status lex_string(const char *src, size_t n, size_t *pos, size_t tag, jarena *a, jtok *t,
                             oct_error *err)
{
    char quote = src[*pos];
    tok_buf b = {0};
    size_t i = *pos + 1;
    bool closed = false;
    oct_status st = OCT_OK;
    while (i < n) {
        char ch = src[i];
        if (ch == quote) {
            closed = true;
            i++;
            break;
        }
        bool ok;
        if (ch == '\\' && i + 1 < n) {
            st = lex_escape(src, n, &i, &b, &ok, err);
        } else {
            ok = tok_buf_putc(&b, ch);
            i++;
        }
        if (st == OCT_OK && !ok)
            st = oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        if (st != OCT_OK) {
            tok_buf_free(&b);
            return st;
        }
    }
    if (!closed) {
        tok_buf_free(&b);
        LEX_ERR(tag, "unterminated string literal");
    }
    *pos = i;
    t->t = JT_STRING;
    t->str = dup(a, b.data ? b.data : "", b.len);
    t->len = b.len;
    tok_buf_free(&b);
    return OCT_OK;
}

/* An operator or bracket from src[*pos]; brackets are matched against the
 * closers of those still open (closers[0 .. *open)). */
static oct_status lex_op(const char *src, size_t n, size_t *pos, char *closers, size_t *open,
                         jarena *a, jtok *t, oct_error *err)
{
    static const char *const ops2[] = {"**", "//", "==", "!=", "<=", ">="};
    size_t i = *pos, len = 1;
    char c = src[i];
    for (size_t k = 0; k < OCT_ARRAY_LEN(ops2); k++)
        if (i + 1 < n && src[i] == ops2[k][0] && src[i + 1] == ops2[k][1])
            len = 2;
    if (len == 1 && !strchr("()[]{}.,:|~+-*/%=<>!", c))
        LEX_ERR(i, "unexpected character '%c' in expression", c);
    if (len == 1 && (c == '(' || c == '[' || c == '{')) {
        if (*open == JINJA_MAX_EXPR_DEPTH)
            LEX_ERR(i, "expression nested deeper than %d", JINJA_MAX_EXPR_DEPTH);
        closers[(*open)++] = c == '(' ? ')' : c == '[' ? ']' : '}';
    } else if (len == 1 && (c == ')' || c == ']' || c == '}')) {
        if (*open && closers[*open - 1] != c)
            LEX_ERR(i, "unexpected '%c', expected '%c'", c, closers[*open - 1]);
        *open -= *open > 0;
    }
    t->t = JT_OP;
    t->str = dup(a, src + i, len);
    t->len = len;
    *pos = i + len;
    return OCT_OK;
}

/* Lexes the expression inside a tag, from *pos up to the closing delimiter
 * `close` ("}}" or "%}"), pushing NAME/STRING/INT/FLOAT/OP tokens. */
static oct_status lex_expr(const char *src, size_t n, size_t *pos, const char *close, jarena *a,
                           jtoks *out, bool *strip_after, line_cursor *lc, oct_error *err)
{
    size_t i = *pos;
    /* the closers of unclosed ( [ {: as in Jinja, a tag cannot end inside them */
    char closers[JINJA_MAX_EXPR_DEPTH];
    size_t open = 0;
    for (;;) {
        while (i < n && is_ws(src[i]))
            i++;
        if (i >= n)
            LEX_ERR(*pos, "unclosed tag (expected '%s')", close);
        int line = line_at(lc, src, i);
        if (open == 0 && src[i] == '-' && i + 2 < n && src[i + 1] == close[0] &&
            src[i + 2] == close[1]) {
            *strip_after = true;
            *pos = i + 3;
            return OCT_OK;
        }
        if (open == 0 && i + 1 < n && src[i] == close[0] && src[i + 1] == close[1]) {
            *strip_after = false;
            *pos = i + 2;
            return OCT_OK;
        }
        char c = src[i];
        jtok t = {0};
        t.line = line;
        oct_status st = OCT_OK;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')
            i = lex_name(src, n, i, a, &t);
        else if (c >= '0' && c <= '9')
            st = lex_number(src, n, &i, a, &t, err);
        else if (c == '\'' || c == '"')
            st = lex_string(src, n, &i, *pos, a, &t, err);
        else
            st = lex_op(src, n, &i, closers, &open, a, &t, err);
        if (st != OCT_OK)
            return st;
        if ((t.t != JT_INT && t.t != JT_FLOAT && !t.str) || !push(a, out, t))
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    }
}

oct_status jinja_lex(const char *src, size_t n, jarena *a, jtoks *out, oct_error *err)
{
    size_t i = 0;
    bool strip_next = false; /* the previous tag ended with '-' */
    bool trim_next = false;  /* the previous tag was a block/comment (trim_blocks) */
    line_cursor lc = {0, 1};
    oct_status st;
    while (i <= n) {
        /* find the next tag opening */
        size_t p = i;
        while (p + 1 < n &&
               !(src[p] == '{' && (src[p + 1] == '{' || src[p + 1] == '%' || src[p + 1] == '#')))
            p++;
        if (p + 1 >= n)
            p = n;
        size_t ts = i, te = p;
        if (strip_next)
            while (ts < te && is_ws(src[ts]))
                ts++;
        else if (trim_next && ts < te && src[ts] == '\n')
            ts++;
        else if (trim_next && ts + 1 < te && src[ts] == '\r' && src[ts + 1] == '\n')
            ts += 2;
        if (p < n) {
            char kind = src[p + 1];
            char mod = p + 2 < n ? src[p + 2] : 0;
            if (mod == '-') {
                while (te > ts && is_ws(src[te - 1]))
                    te--;
            } else if (kind != '{' && mod != '+') {
                /* lstrip_blocks: spaces/tabs between the line start and the tag */
                size_t q = te;
                while (q > ts && (src[q - 1] == ' ' || src[q - 1] == '\t'))
                    q--;
                if (q == 0 || src[q - 1] == '\n')
                    te = q;
            }
        }
        if (te > ts) {
            jtok t = {JT_TEXT, line_at(&lc, src, ts), dup(a, src + ts, te - ts), te - ts, 0, 0.0};
            if (!t.str || !push(a, out, t))
                return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        }
        if (p >= n)
            break;
        char kind = src[p + 1];
        size_t q = p + 2;
        if (q < n && (src[q] == '-' || src[q] == '+'))
            q++;
        if (kind == '#') {
            /* comment: up to "#}" */
            size_t e = q;
            while (e + 1 < n && !(src[e] == '#' && src[e + 1] == '}'))
                e++;
            if (e + 1 >= n)
                LEX_ERR(p, "unclosed comment");
            strip_next = e > q && src[e - 1] == '-';
            trim_next = true;
            i = e + 2;
            continue;
        }
        bool block = kind == '%';
        /* {% raw %} is not supported: say so instead of mis-parsing it */
        jtok open = {block ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, line_at(&lc, src, p), NULL, 0, 0, 0.0};
        if (!push(a, out, open))
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        bool strip_after = false;
        if ((st = lex_expr(src, n, &q, block ? "%}" : "}}", a, out, &strip_after, &lc, err)))
            return st;
        jtok close = {block ? JT_BLOCK_END : JT_VAR_END, line_at(&lc, src, q - 1), NULL, 0, 0, 0.0};
        if (!push(a, out, close))
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        strip_next = strip_after;
        trim_next = block;
        i = q;
    }
    jtok eof = {JT_EOF, line_at(&lc, src, n), NULL, 0, 0, 0.0};
    if (!push(a, out, eof))
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    return OCT_OK;
}

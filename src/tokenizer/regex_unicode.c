/* regex_unicode.c — compiles tokenizer regexes (tok_regex_compile) with the
 * Unicode of Hugging Face's tokenizers.  The library matches pre-tokenizer regexes with Oniguruma
 * (Unicode 16.0); octet matches them with PCRE2, whose tables are older
 * (Unicode 14 in Debian 12).  Before compiling, every \p{X}, \P{X}, \p{^X}
 * and \pX whose X is a General_Category, and every \w \d \s \W \D \S, is
 * rewritten into the explicit code-point ranges of unicode_props.c: a
 * bracketed class outside a class, its ranges (or their complement) inside
 * one.  Script names (\p{Han}) and everything else pass through unchanged. */
#include <stdio.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode_props.h"

#define CP_MAX 0x10FFFFu

static bool put_range(tok_buf *b, uint32_t lo, uint32_t hi)
{
    char s[40];
    int n = lo == hi ? snprintf(s, sizeof s, "\\x{%X}", lo)
                     : snprintf(s, sizeof s, "\\x{%X}-\\x{%X}", lo, hi);
    return tok_buf_append(b, s, (size_t)n);
}

/* Ranges from lo to hi, leaving out the surrogates PCRE2's UTF mode rejects. */
static bool put_gap(tok_buf *b, uint32_t lo, uint32_t hi)
{
    if (lo > hi)
        return true;
    if (hi < 0xD800 || lo > 0xDFFF)
        return put_range(b, lo, hi);
    return (lo >= 0xD800 || put_range(b, lo, 0xD7FF)) && (hi <= 0xDFFF || put_range(b, 0xE000, hi));
}

static bool put_ranges(tok_buf *b, const tok_cp_set *s, bool negate)
{
    if (!negate) {
        for (size_t i = 0; i < s->n; i++)
            if (!put_range(b, s->ranges[i].lo, s->ranges[i].hi))
                return false;
        return true;
    }
    uint32_t next = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->ranges[i].lo > 0 && !put_gap(b, next, s->ranges[i].lo - 1))
            return false;
        next = s->ranges[i].hi + 1;
    }
    return next > CP_MAX || put_gap(b, next, CP_MAX);
}

static bool put_set(tok_buf *b, const tok_cp_set *s, bool negate, bool in_class)
{
    if (in_class)
        return put_ranges(b, s, negate);
    return tok_buf_append(b, negate ? "[^" : "[", negate ? 2 : 1) && put_ranges(b, s, false) &&
           tok_buf_putc(b, ']');
}

/* The property escape at pat[i] ('\\' then 'p' or 'P'): its set and length,
 * or NULL when X is not a General_Category (left to PCRE2). */
static const tok_cp_set *property_at(const char *pat, size_t len, size_t i, bool *negate,
                                     size_t *n_used)
{
    *negate = pat[i + 1] == 'P';
    char name[16];
    size_t k = 0, j = i + 2;
    if (j < len && pat[j] == '{') {
        for (j++; j < len && pat[j] != '}' && k + 1 < sizeof name; j++)
            if (pat[j] != ' ' && pat[j] != '_')
                name[k++] = pat[j];
        if (j >= len || pat[j] != '}')
            return NULL;
        j++;
    } else if (j < len) {
        name[k++] = pat[j++];
    }
    name[k] = '\0';
    const char *nm = name;
    if (nm[0] == '^') {
        *negate = !*negate;
        nm++;
    }
    if (nm[0] == '\\') /* keep "\\w" and friends out of reach of \p{..} */
        return NULL;
    *n_used = j - i;
    return tok_unicode_set(nm);
}

/* Copies the escape at pat[i] unchanged; returns its length. */
static size_t plain_escape(const char *pat, size_t len, size_t i)
{
    size_t j = i + 2;
    if (pat[i + 1] == 'x' && j < len && pat[j] == '{') {
        while (j < len && pat[j] != '}')
            j++;
        return j < len ? j + 1 - i : len - i;
    }
    if (pat[i + 1] == 'Q') { /* \Q...\E is literal text */
        const char *e = NULL;
        for (size_t q = j; q + 1 < len && !e; q++)
            if (pat[q] == '\\' && pat[q + 1] == 'E')
                e = pat + q;
        return e ? (size_t)(e - pat) + 2 - i : len - i;
    }
    return 2;
}

/* One escape at pat[i]: rewritten when it is a Unicode class. */
static bool put_escape(tok_buf *b, const char *pat, size_t len, size_t *i, bool in_class)
{
    char c = pat[*i + 1];
    const tok_cp_set *set = NULL;
    bool negate = false;
    size_t used = 2;
    if (c == 'p' || c == 'P') {
        set = property_at(pat, len, *i, &negate, &used);
    } else if (strchr("wdsWDS", c)) {
        char nm[3] = {'\\', (char)(c | 0x20), '\0'};
        set = tok_unicode_set(nm);
        negate = c < 'a';
    }
    if (set) {
        *i += used;
        return put_set(b, set, negate, in_class);
    }
    size_t n = plain_escape(pat, len, *i);
    bool ok = tok_buf_append(b, pat + *i, n);
    *i += n;
    return ok;
}

oct_status tok_regex_unicode(const char *pat, size_t len, tok_buf *out, oct_error *err)
{
    bool in_class = false, ok = true;
    size_t i = 0;
    while (ok && i < len) {
        char c = pat[i];
        if (c == '\\' && i + 1 < len) {
            ok = put_escape(out, pat, len, &i, in_class);
            continue;
        }
        size_t n = 1;
        if (!in_class && c == '[') {
            in_class = true;
            n += i + n < len && pat[i + n] == '^';
            n += i + n < len && pat[i + n] == ']'; /* a leading ] is literal */
        } else if (in_class && c == '[' && i + 1 < len && pat[i + 1] == ':') {
            const char *e = strstr(pat + i, ":]"); /* POSIX [:name:] */
            n = e && (size_t)(e - pat) < len ? (size_t)(e - pat) + 2 - i : 1;
        } else if (in_class && c == ']') {
            in_class = false;
        }
        ok = tok_buf_append(out, pat + i, n);
        i += n;
    }
    if (!ok || !tok_buf_append(out, "", 0))
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    return OCT_OK;
}

oct_status tok_regex_compile(const char *pattern, size_t len, bool literal, pcre2_code **out,
                             const char *what, oct_error *err)
{
    int ec = 0;
    PCRE2_SIZE eoff = 0;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP;
    tok_buf esc = {0};
    if (literal) {
        /* PCRE2_LITERAL cannot be combined with UCP: escape instead (every
         * ASCII punctuation character gets a backslash). */
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)pattern[i];
            bool meta = c < 0x80 && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                                      (c >= 'A' && c <= 'Z'));
            if (c == 0) {
                if (!tok_buf_append(&esc, "\\x{0}", 5))
                    goto nomem;
                continue;
            }
            if ((meta && !tok_buf_putc(&esc, '\\')) || !tok_buf_putc(&esc, (char)c))
                goto nomem;
        }
        if (!tok_buf_append(&esc, "", 0))
            goto nomem;
    } else {
        oct_status st = tok_regex_unicode(pattern, len, &esc, err);
        if (st != OCT_OK) {
            tok_buf_free(&esc);
            return st;
        }
    }
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)esc.data, esc.len, opts, &ec, &eoff, NULL);
    if (re)
        tok_buf_free(&esc);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        oct_error_set(err, OCT_ERR_UNSUPPORTED, -1, "%s: cannot compile regex '%.200s': %s", what,
                      pattern, (const char *)msg);
        tok_buf_free(&esc);
        return OCT_ERR_UNSUPPORTED;
    }
    /* The JIT is an optimization only; the interpreter is used when it fails. */
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    *out = re;
    return OCT_OK;
nomem:
    tok_buf_free(&esc);
    return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
}

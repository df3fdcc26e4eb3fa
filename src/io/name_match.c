/* name_match.c — ignore / target lists: exact names and "re:" patterns with
 * Python re.match semantics (PCRE2, anchored at the start, not a full match;
 * docs/MODEL.md §The plan, Ignore), and fnmatch-style patterns (Quark
 * layer_quant_config). */
#include <string.h>

#include <pcre2.h>

#include "io/io.h"

struct io_patterns {
    int n;
    char **text;          /* [n] the entries as given */
    pcre2_code **re;      /* [n] compiled "re:" entries, NULL for exact ones */
    pcre2_match_data *md; /* shared scratch: one matcher per thread */
};

void io_patterns_free(io_patterns *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->n; i++) {
        oct_free(p->text[i]);
        if (p->re[i])
            pcre2_code_free(p->re[i]);
    }
    if (p->md)
        pcre2_match_data_free(p->md);
    oct_free(p->text);
    oct_free(p->re);
    oct_free(p);
}

oct_status io_patterns_create(const char *const *patterns, int n, const char *field,
                              io_patterns **out, oct_error *err)
{
    *out = NULL;
    io_patterns *p = oct_calloc(1, sizeof *p);
    if (!p)
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    p->text = oct_calloc(n > 0 ? (size_t)n : 1, sizeof(char *));
    p->re = oct_calloc(n > 0 ? (size_t)n : 1, sizeof(pcre2_code *));
    p->md = pcre2_match_data_create(1, NULL);
    if (!p->text || !p->re || !p->md) {
        io_patterns_free(p);
        return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        p->text[i] = oct_strdup(patterns[i]);
        if (!p->text[i]) {
            io_patterns_free(p);
            return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
        }
        p->n = i + 1;
        if (strncmp(patterns[i], "re:", 3) == 0) {
            int ec;
            PCRE2_SIZE eoff;
            p->re[i] = pcre2_compile((PCRE2_SPTR)(patterns[i] + 3), PCRE2_ZERO_TERMINATED,
                                     PCRE2_ANCHORED | PCRE2_UTF, &ec, &eoff, NULL);
            if (!p->re[i]) {
                PCRE2_UCHAR msg[160];
                pcre2_get_error_message(ec, msg, sizeof msg);
                oct_status st =
                    oct_error_set(err, OCT_ERR_FORMAT, (int64_t)eoff,
                                  "%s[%d]: pattern '%s' does not compile: %s (at "
                                  "offset %zu)",
                                  field, i, patterns[i], (const char *)msg, (size_t)eoff);
                io_patterns_free(p);
                return st;
            }
        }
    }
    *out = p;
    return OCT_OK;
}

int io_patterns_match(const io_patterns *p, const char *name)
{
    if (!p)
        return -1;
    for (int i = 0; i < p->n; i++) {
        if (p->re[i]) {
            int rc =
                pcre2_match(p->re[i], (PCRE2_SPTR)name, PCRE2_ZERO_TERMINATED, 0, 0, p->md, NULL);
            if (rc >= 0)
                return i;
        } else if (strcmp(p->text[i], name) == 0) {
            return i;
        }
    }
    return -1;
}

int io_patterns_count(const io_patterns *p)
{
    return p ? p->n : 0;
}

const char *io_patterns_at(const io_patterns *p, int i)
{
    return p && i >= 0 && i < p->n ? p->text[i] : NULL;
}

oct_status oct_name_match_list(const char *const *patterns, int n, const char *name,
                               int *match_index, oct_error *err)
{
    if ((n > 0 && !patterns) || !name || !match_index)
        return oct_error_set(err, OCT_ERR_INVALID_ARG, -1, "oct_name_match_list: bad arguments");
    io_patterns *p;
    oct_status st = io_patterns_create(patterns, n, "patterns", &p, err);
    if (st != OCT_OK)
        return st;
    *match_index = io_patterns_match(p, name);
    io_patterns_free(p);
    return OCT_OK;
}

/* Python fnmatch on POSIX: '*' any run, '?' one char, '[seq]' / '[!seq]'. */
static bool fnm(const char *p, const char *s, int depth)
{
    if (depth > 64)
        return false; /* pathological patterns: refuse rather than recurse forever */
    while (*p) {
        if (*p == '*') {
            while (*p == '*')
                p++;
            if (!*p)
                return true;
            for (const char *t = s; *t; t++)
                if (fnm(p, t, depth + 1))
                    return true;
            return fnm(p, s + strlen(s), depth + 1);
        }
        if (!*s)
            return false;
        if (*p == '?') {
            p++;
            s++;
            continue;
        }
        if (*p == '[') {
            const char *q = p + 1;
            bool neg = false;
            if (*q == '!') {
                neg = true;
                q++;
            }
            const char *start = q;
            bool hit = false;
            while (*q && (*q != ']' || q == start)) {
                if (q[1] == '-' && q[2] && q[2] != ']') {
                    if (*s >= q[0] && *s <= q[2])
                        hit = true;
                    q += 3;
                } else {
                    if (*s == *q)
                        hit = true;
                    q++;
                }
            }
            if (*q != ']') { /* no closing bracket: '[' is literal */
                if (*s != '[')
                    return false;
                p++;
                s++;
                continue;
            }
            if (hit == neg)
                return false;
            p = q + 1;
            s++;
            continue;
        }
        if (*p != *s)
            return false;
        p++;
        s++;
    }
    return *s == 0;
}

bool io_fnmatch(const char *pattern, const char *name)
{
    return fnm(pattern, name, 0);
}

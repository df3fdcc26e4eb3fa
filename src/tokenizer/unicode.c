/* unicode.c — Unicode normalization (NFC, NFD, NFKC, NFKD) and full
 * lowercasing over the generated tables in unicode_tables.c.
 *
 * Algorithm (UAX #15): full decomposition (Hangul syllables algorithmically),
 * canonical ordering of combining marks by class, then canonical composition
 * for the C forms.  ASCII text, and for NFC text with nothing at or above
 * U+0300 (nothing there composes or decomposes), is returned unchanged. */
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode_tables.h"

#define HANGUL_S 0xAC00u
#define HANGUL_L 0x1100u
#define HANGUL_V 0x1161u
#define HANGUL_T 0x11A7u
#define HANGUL_NV 21u
#define HANGUL_NT 28u
#define HANGUL_N (HANGUL_NV * HANGUL_NT)
#define HANGUL_COUNT 11172u

static uint8_t ccc_of(uint32_t cp)
{
    if (cp < 0x300)
        return 0;
    size_t lo = 0, hi = tok_ccc_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < tok_ccc_ranges[mid].first)
            hi = mid;
        else if (cp > tok_ccc_ranges[mid].last)
            lo = mid + 1;
        else
            return tok_ccc_ranges[mid].ccc;
    }
    return 0;
}

/* Full decomposition of cp, or NULL.  Compat entries exist only where they
 * differ from the canonical one, so they are looked up first for K forms. */
static const tok_decomp *decomp_of(uint32_t cp, bool compat)
{
    size_t lo = 0, hi = tok_decomp_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tok_decomps[mid].cp < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    const tok_decomp *canon = NULL;
    for (size_t i = lo; i < tok_decomp_count && tok_decomps[i].cp == cp; i++) {
        if (tok_decomps[i].compat == 0)
            canon = &tok_decomps[i];
        else if (compat)
            return &tok_decomps[i];
    }
    return canon;
}

static uint32_t compose_pair(uint32_t a, uint32_t b)
{
    if (a >= HANGUL_L && a < HANGUL_L + 19 && b >= HANGUL_V && b < HANGUL_V + HANGUL_NV)
        return HANGUL_S + ((a - HANGUL_L) * HANGUL_NV + (b - HANGUL_V)) * HANGUL_NT;
    if (a >= HANGUL_S && a < HANGUL_S + HANGUL_COUNT && (a - HANGUL_S) % HANGUL_NT == 0 &&
        b > HANGUL_T && b < HANGUL_T + HANGUL_NT)
        return a + (b - HANGUL_T);
    size_t lo = 0, hi = tok_comp_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const tok_comp *c = &tok_comps[mid];
        if (c->first < a || (c->first == a && c->second < b))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < tok_comp_count && tok_comps[lo].first == a && tok_comps[lo].second == b)
        return tok_comps[lo].composite;
    return 0;
}

typedef struct cpbuf {
    uint32_t *v;
    size_t n, cap;
} cpbuf;

static bool cp_push(cpbuf *b, uint32_t cp)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        uint32_t *p = oct_realloc(b->v, cap * sizeof *p);
        if (!p)
            return false;
        b->v = p;
        b->cap = cap;
    }
    b->v[b->n++] = cp;
    return true;
}

bool tok_unicode_normalize(tok_nf_form form, const char *s, size_t n, tok_buf *out)
{
    bool compat = form == TOK_NF_KC || form == TOK_NF_KD;
    bool compose = form == TOK_NF_C || form == TOK_NF_KC;
    out->len = 0;
    /* fast path: nothing that normalization can touch */
    bool trivial = true;
    for (size_t i = 0; i < n && trivial; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80 && (form != TOK_NF_C || c >= 0xCC)) /* 0xCC 0x80 = U+0300 */
            trivial = false;
    }
    if (trivial)
        return tok_buf_append(out, s, n);

    cpbuf b = {0};
    bool ok = true;
    for (size_t i = 0; i < n && ok;) {
        uint32_t cp;
        i += tok_utf8_next(s + i, n - i, &cp);
        if (cp >= HANGUL_S && cp < HANGUL_S + HANGUL_COUNT) {
            uint32_t si = cp - HANGUL_S;
            ok = cp_push(&b, HANGUL_L + si / HANGUL_N) &&
                 cp_push(&b, HANGUL_V + (si % HANGUL_N) / HANGUL_NT);
            if (ok && si % HANGUL_NT)
                ok = cp_push(&b, HANGUL_T + si % HANGUL_NT);
            continue;
        }
        const tok_decomp *d = cp >= 0xA0 ? decomp_of(cp, compat) : NULL;
        if (d) {
            for (uint16_t k = 0; k < d->len && ok; k++)
                ok = cp_push(&b, tok_decomp_pool[d->off + k]);
        } else {
            ok = cp_push(&b, cp);
        }
    }
    /* canonical ordering: insertion sort inside each run of non-starters */
    for (size_t i = 1; i < b.n && ok; i++) {
        uint8_t c = ccc_of(b.v[i]);
        if (c == 0)
            continue;
        size_t j = i;
        uint32_t x = b.v[i];
        while (j > 0) {
            uint8_t pc = ccc_of(b.v[j - 1]);
            if (pc == 0 || pc <= c)
                break;
            b.v[j] = b.v[j - 1];
            j--;
        }
        b.v[j] = x;
    }
    if (compose && ok && b.n > 0) {
        size_t starter = 0;
        bool have_starter = ccc_of(b.v[0]) == 0;
        int last_ccc = have_starter ? 0 : 256;
        size_t w = 1;
        for (size_t i = 1; i < b.n; i++) {
            uint32_t cp = b.v[i];
            int c = ccc_of(cp);
            uint32_t comp = 0;
            /* blocked when an intervening char has ccc 0 or >= ours */
            if (have_starter && (last_ccc < c || (last_ccc == 0 && w == starter + 1)))
                comp = compose_pair(b.v[starter], cp);
            if (comp) {
                b.v[starter] = comp;
                continue;
            }
            if (c == 0) {
                starter = w;
                have_starter = true;
                last_ccc = 0;
            } else {
                last_ccc = c;
            }
            b.v[w++] = cp;
        }
        b.n = w;
    }
    for (size_t i = 0; i < b.n && ok; i++)
        ok = tok_buf_put_cp(out, b.v[i]);
    if (ok && !out->data)
        ok = tok_buf_append(out, "", 0);
    oct_free(b.v);
    return ok;
}

bool tok_unicode_lowercase(const char *s, size_t n, tok_buf *out)
{
    out->len = 0;
    if (!tok_buf_reserve(out, n))
        return false;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            if (!tok_buf_putc(out, (char)(c >= 'A' && c <= 'Z' ? c + 32 : c)))
                return false;
            i++;
            continue;
        }
        uint32_t cp;
        size_t l = tok_utf8_next(s + i, n - i, &cp);
        size_t lo = 0, hi = tok_lower_count;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (tok_lowers[mid].cp < cp)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < tok_lower_count && tok_lowers[lo].cp == cp) {
            for (uint16_t k = 0; k < tok_lowers[lo].len; k++)
                if (!tok_buf_put_cp(out, tok_lower_pool[tok_lowers[lo].off + k]))
                    return false;
        } else if (!tok_buf_append(out, s + i, l)) {
            return false;
        }
        i += l;
    }
    return tok_buf_append(out, "", 0);
}

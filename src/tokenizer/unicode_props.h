/* unicode_props.h — Unicode property sets for tokenizer regexes: every
 * General_Category (one- and two-letter names) and the classes \w, \d, \s, as
 * Hugging Face tokenizers' regex engine (Oniguruma, Unicode 16.0) has them.
 * Generated into unicode_props.c by tools/gen_unicode_props.mjs. */
#ifndef OCTET_TOKENIZER_UNICODE_PROPS_H
#define OCTET_TOKENIZER_UNICODE_PROPS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t lo, hi; /* inclusive */
} tok_cp_range;

typedef struct {
    const char *name;           /* "L", "Lu", ..., "\\w", "\\d", "\\s" */
    const tok_cp_range *ranges; /* [n] sorted, disjoint, not adjacent */
    size_t n;
} tok_cp_set;

/* The set of a category name ("L", "Nd") or class ("\\w"); NULL if none. */
const tok_cp_set *tok_unicode_set(const char *name);

#endif

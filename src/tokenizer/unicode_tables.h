/* unicode_tables.h — the generated Unicode data (unicode_tables.c, made by
 * tools/gen_unicode_tables.py): combining classes, decompositions, composition
 * pairs, lowercase mappings.  Every array is sorted by its first field. */
#ifndef OCTET_TOK_UNICODE_TABLES_H
#define OCTET_TOK_UNICODE_TABLES_H

#include <stddef.h>
#include <stdint.h>

typedef struct tok_ccc_range {
    uint32_t first, last;
    uint8_t ccc;
} tok_ccc_range;

typedef struct tok_decomp {
    uint32_t cp;
    uint8_t compat;    /* 0: canonical (NFD); 1: compatibility (NFKD, only where it differs) */
    uint16_t off, len; /* into tok_decomp_pool: the full decomposition */
} tok_decomp;

typedef struct tok_comp {
    uint32_t first, second, composite;
} tok_comp;

typedef struct tok_lower {
    uint32_t cp;
    uint16_t off, len; /* into tok_lower_pool */
} tok_lower;

extern const char tok_unicode_version[];
extern const tok_ccc_range tok_ccc_ranges[];
extern const size_t tok_ccc_count;
extern const uint32_t tok_decomp_pool[];
extern const tok_decomp tok_decomps[];
extern const size_t tok_decomp_count;
extern const tok_comp tok_comps[];
extern const size_t tok_comp_count;
extern const uint32_t tok_lower_pool[];
extern const tok_lower tok_lowers[];
extern const size_t tok_lower_count;

#endif

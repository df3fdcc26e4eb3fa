/* tok_internal.h — the tokenizer's internal types: byte buffers, hash maps,
 * the normalizer / pre-tokenizer / decoder / post-processor trees parsed from
 * tokenizer.json, the BPE model, and the work state of one encode call.
 *
 * Pipeline of oct_tokenizer_encode (mirrors Hugging Face `tokenizers`):
 *   text -> split on non-normalized added tokens -> normalize each remaining
 *   piece -> split on normalized added tokens -> pre-tokenize -> BPE per piece
 *   -> post-processor (when add_special_tokens).
 * A loaded tokenizer is immutable; every encode/decode call keeps its scratch
 * state in a tok_work of its own, so one tokenizer serves many threads. */
#ifndef OCTET_TOK_INTERNAL_H
#define OCTET_TOK_INTERNAL_H

#include <jansson.h>
#include <pcre2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/core.h"

/* ------------------------------------------------------------ byte buffers */

typedef struct tok_buf {
    char *data; /* always NUL-terminated when non-NULL */
    size_t len, cap;
} tok_buf;

bool tok_buf_reserve(tok_buf *b, size_t extra);
bool tok_buf_append(tok_buf *b, const char *s, size_t n);
bool tok_buf_putc(tok_buf *b, char c);
bool tok_buf_put_cp(tok_buf *b, uint32_t cp); /* UTF-8 encode */
void tok_buf_free(tok_buf *b);

typedef struct tok_ids {
    int32_t *v;
    size_t n, cap;
} tok_ids;
bool tok_ids_push(tok_ids *a, int32_t id);
void tok_ids_free(tok_ids *a);

/* ------------------------------------------------------------------ UTF-8 */

/* Decodes one code point of valid UTF-8 at s[0..n); returns its length (>= 1). */
size_t tok_utf8_next(const char *s, size_t n, uint32_t *cp);
/* Length of a valid UTF-8 sequence from its lead byte (1 for continuation bytes). */
size_t tok_utf8_len(unsigned char lead);
/* Strict validation (no surrogates, no overlongs); returns the offset of the
 * first invalid byte or n when valid. */
size_t tok_utf8_validate(const char *s, size_t n);
/* Rust's String::from_utf8_lossy: each maximal invalid subpart -> U+FFFD. */
bool tok_utf8_lossy(tok_buf *out, const unsigned char *s, size_t n);
/* Unicode White_Space (Rust char::is_whitespace). */
bool tok_is_whitespace(uint32_t cp);

/* ------------------------------------------------------------ string maps */

/* Open-addressing map of byte strings (owned copies) to int32 values. */
typedef struct tok_strmap_entry {
    uint64_t hash;
    char *key; /* NULL = empty slot */
    uint32_t key_len;
    int32_t value;
} tok_strmap_entry;

typedef struct tok_strmap {
    tok_strmap_entry *slots;
    size_t cap; /* power of two */
    size_t count;
} tok_strmap;

/* Inserts or overwrites; false on allocation failure. */
bool tok_strmap_put(tok_strmap *m, const char *key, size_t n, int32_t value);
/* Returns true and sets *value when found. */
bool tok_strmap_get(const tok_strmap *m, const char *key, size_t n, int32_t *value);
void tok_strmap_free(tok_strmap *m);

/* (a, b) id pair -> (rank, merged id) for BPE merges. */
typedef struct tok_merge_entry {
    uint64_t key; /* (a << 32 | b) + 1; 0 = empty */
    int32_t rank;
    int32_t new_id;
} tok_merge_entry;

typedef struct tok_mergemap {
    tok_merge_entry *slots;
    size_t cap, count;
} tok_mergemap;

bool tok_mergemap_put(tok_mergemap *m, int32_t a, int32_t b, int32_t rank, int32_t new_id);
const tok_merge_entry *tok_mergemap_get(const tok_mergemap *m, int32_t a, int32_t b);
void tok_mergemap_free(tok_mergemap *m);

/* ----------------------------------------------------------------- regex */

/* The regex with its Unicode classes (\p{..}, \w, \d, \s) rewritten into
 * the code-point ranges of Hugging Face tokenizers' Unicode (regex_unicode.c);
 * NUL-terminated in out. */
oct_status tok_regex_unicode(const char *pat, size_t len, tok_buf *out, oct_error *err);
/* Compiles `pattern` with PCRE2_UTF | PCRE2_UCP after tok_regex_unicode
 * (unless `literal`), so its classes mean what they mean to the Oniguruma
 * regexes of `tokenizers`, and JITs it when possible.  `what` names the JSON
 * field for the error message. */
oct_status tok_regex_compile(const char *pattern, size_t len, bool literal, pcre2_code **out,
                             const char *what, oct_error *err);

/* Match ranges of a regex over subject[0..n): pairs of (start, end) byte
 * offsets, non-empty, non-overlapping, left to right. */
typedef struct tok_ranges {
    size_t *v; /* 2 * n entries */
    size_t n, cap;
} tok_ranges;

oct_status tok_regex_find_all(const pcre2_code *re, pcre2_match_data *md, const char *subject,
                              size_t n, tok_ranges *out, oct_error *err);
void tok_ranges_free(tok_ranges *r);

/* --------------------------------------------------------------- segments */

/* A piece of text during encoding: bytes [off, off+len) of tok_work.text.
 * id >= 0 when the piece is already a token (an added token). */
typedef struct tok_seg {
    size_t off, len;
    int32_t id;
    bool origin0; /* the piece starts at byte 0 of the original text */
} tok_seg;

typedef struct tok_segs {
    tok_seg *v;
    size_t n, cap;
} tok_segs;

bool tok_segs_push(tok_segs *s, size_t off, size_t len, int32_t id, bool origin0);
void tok_segs_free(tok_segs *s);

struct oct_tokenizer;

/* Scratch state of one encode call. */
typedef struct tok_work {
    tok_buf text;       /* arena of piece bytes; grows, so keep offsets, not pointers */
    tok_segs segs, alt; /* current pieces, and the next stage's output */
    tok_buf scratch;    /* one normalizer / mapping output */
    tok_ranges ranges;
    pcre2_match_data *md;
    /* BPE scratch */
    void *bpe_syms;
    size_t bpe_syms_cap;
    void *bpe_heap;
    size_t bpe_heap_cap;
} tok_work;

void tok_work_free(tok_work *w);

/* ------------------------------------------------------------ normalizers */

typedef enum {
    TOK_NORM_SEQUENCE,
    TOK_NORM_NFC,
    TOK_NORM_NFD,
    TOK_NORM_NFKC,
    TOK_NORM_NFKD,
    TOK_NORM_LOWERCASE,
    TOK_NORM_STRIP,
    TOK_NORM_REPLACE,
    TOK_NORM_PREPEND,
} tok_norm_kind;

typedef struct tok_norm {
    tok_norm_kind kind;
    struct tok_norm **children; /* SEQUENCE */
    size_t n_children;
    bool strip_left, strip_right;
    pcre2_code *re; /* REPLACE */
    char *str;      /* REPLACE content / PREPEND text */
    size_t str_len;
} tok_norm;

oct_status tok_norm_parse(const json_t *j, tok_norm **out, const char *path, oct_error *err);
void tok_norm_free(tok_norm *n);
/* Normalizes s[0..n) into out (cleared first). */
oct_status tok_norm_apply(const tok_norm *n, const char *s, size_t len, tok_buf *out, tok_work *w,
                          oct_error *err);

/* Unicode normalization forms (unicode.c). */
typedef enum { TOK_NF_C, TOK_NF_D, TOK_NF_KC, TOK_NF_KD } tok_nf_form;
bool tok_unicode_normalize(tok_nf_form form, const char *s, size_t n, tok_buf *out);
bool tok_unicode_lowercase(const char *s, size_t n, tok_buf *out);

/* --------------------------------------------------------- pre-tokenizers */

typedef enum {
    TOK_SPLIT_REMOVED,
    TOK_SPLIT_ISOLATED,
    TOK_SPLIT_MERGED_PREV,
    TOK_SPLIT_MERGED_NEXT,
    TOK_SPLIT_CONTIGUOUS,
} tok_split_behavior;

typedef enum {
    TOK_PRE_SEQUENCE,
    TOK_PRE_BYTELEVEL,
    TOK_PRE_SPLIT, /* also Digits, Punctuation, Whitespace, WhitespaceSplit */
    TOK_PRE_METASPACE,
} tok_pre_kind;

typedef enum { TOK_PREPEND_ALWAYS, TOK_PREPEND_NEVER, TOK_PREPEND_FIRST } tok_prepend_scheme;

typedef struct tok_pre {
    tok_pre_kind kind;
    struct tok_pre **children;
    size_t n_children;
    /* BYTELEVEL */
    bool add_prefix_space, use_regex;
    /* SPLIT (and BYTELEVEL's regex) */
    pcre2_code *re;
    tok_split_behavior behavior;
    bool invert;
    /* METASPACE */
    uint32_t replacement;
    char rep_utf8[5];
    size_t rep_len;
    tok_prepend_scheme prepend;
    bool split;
} tok_pre;

oct_status tok_pre_parse(const json_t *j, tok_pre **out, const char *path, oct_error *err);
void tok_pre_free(tok_pre *p);
/* Splits every non-token piece of w->segs. */
oct_status tok_pre_apply(const tok_pre *p, tok_work *w, oct_error *err);

/* The GPT-2 byte <-> unicode table. */
typedef struct tok_bytemap {
    char utf8[256][3]; /* byte -> UTF-8 of its stand-in char (NUL padded) */
    uint8_t utf8_len[256];
    int16_t cp_to_byte[324]; /* stand-in code point (< 324) -> byte, -1 if none */
} tok_bytemap;
const tok_bytemap *tok_bytemap_get(void);

/* -------------------------------------------------------------- BPE model */

typedef struct tok_bpe {
    tok_strmap vocab;    /* token -> id */
    tok_mergemap merges; /* (a, b) -> rank, merged id */
    int32_t unk_id;      /* -1 if none */
    char *unk_token;
    char *cont_prefix; /* continuing_subword_prefix or NULL */
    char *eow_suffix;  /* end_of_word_suffix or NULL */
    bool fuse_unk, byte_fallback, ignore_merges;
    int32_t byte_ids[256]; /* <0xNN> ids, -1 when absent */
} tok_bpe;

/* Parses model (type BPE) into bpe; on failure bpe is left for tok_bpe_free. */
oct_status tok_bpe_parse(const json_t *model, tok_bpe *bpe, oct_error *err);
void tok_bpe_free(tok_bpe *bpe);
oct_status tok_bpe_encode(const tok_bpe *bpe, const char *s, size_t n, tok_work *w, tok_ids *out,
                          oct_error *err);

/* ----------------------------------------------------------- added tokens */

typedef struct tok_added {
    char *content;
    size_t len;
    int32_t id;
    bool single_word, lstrip, rstrip, normalized, special;
} tok_added;

/* A byte trie for leftmost-longest matching of added tokens. */
typedef struct tok_trie_node {
    int32_t first_child; /* index into nodes, -1 none */
    int32_t next_sibling;
    int32_t token; /* index into tok->added, -1 none */
    unsigned char byte;
} tok_trie_node;

typedef struct tok_trie {
    tok_trie_node *nodes; /* nodes[0] is the root */
    size_t n, cap;
    int32_t root_next[256]; /* child of the root per first byte, -1 none */
} tok_trie;

void tok_trie_free(tok_trie *t);
bool tok_trie_insert(tok_trie *t, const char *s, size_t n, int32_t token);

/* -------------------------------------------------------- post-processors */

typedef enum { TOK_POST_NONE, TOK_POST_TEMPLATE, TOK_POST_SEQUENCE, TOK_POST_NOOP } tok_post_kind;

typedef struct tok_post {
    tok_post_kind kind;
    struct tok_post **children;
    size_t n_children;
    /* TEMPLATE (single sequence): ids before and after $A */
    tok_ids before, after;
} tok_post;

oct_status tok_post_parse(const json_t *j, tok_post **out, const char *path, oct_error *err);
void tok_post_free(tok_post *p);
oct_status tok_post_apply(const tok_post *p, tok_ids *ids);

/* --------------------------------------------------------------- decoders */

typedef enum {
    TOK_DEC_SEQUENCE,
    TOK_DEC_BYTELEVEL,
    TOK_DEC_METASPACE,
    TOK_DEC_REPLACE,
    TOK_DEC_BYTEFALLBACK,
    TOK_DEC_FUSE,
    TOK_DEC_STRIP,
} tok_dec_kind;

typedef struct tok_dec {
    tok_dec_kind kind;
    struct tok_dec **children;
    size_t n_children;
    pcre2_code *re; /* REPLACE */
    char *str;      /* REPLACE content */
    size_t str_len;
    uint32_t ch; /* STRIP content / METASPACE replacement */
    int64_t start, stop;
    bool prepend; /* METASPACE: strip the first token's leading space */
} tok_dec;

oct_status tok_dec_parse(const json_t *j, tok_dec **out, const char *path, oct_error *err);
void tok_dec_free(tok_dec *d);

/* A list of token strings being decoded. */
typedef struct tok_strlist {
    tok_buf bytes;
    size_t *off, *len;
    size_t n, cap;
} tok_strlist;
bool tok_strlist_push(tok_strlist *l, const char *s, size_t n);
void tok_strlist_clear(tok_strlist *l);
void tok_strlist_free(tok_strlist *l);
/* Runs the decoder chain over `in` (consumed); result in *out. */
oct_status tok_dec_apply(const tok_dec *d, tok_strlist *in, tok_strlist *out, oct_error *err);

/* ------------------------------------------------------------ the object */

struct oct_tokenizer {
    tok_bpe bpe;
    tok_norm *normalizer;
    tok_pre *pre;
    tok_post *post;
    tok_dec *decoder;

    tok_added *added; /* [n_added] */
    size_t n_added;
    tok_strmap added_map; /* content -> index into added */
    tok_trie trie_raw;    /* normalized == false */
    tok_trie trie_norm;   /* normalized == true (contents normalized) */

    /* id -> token string (model vocab and added tokens) */
    char **id_str; /* [n_ids], NULL for holes */
    uint32_t *id_len;
    int32_t *id_added; /* [n_ids] index into added, -1 */
    int64_t n_ids;

    /* tokenizer_config.json */
    char *bos_token, *eos_token, *unk_token, *pad_token;
    int32_t bos_id, eos_id;
    bool add_bos, add_eos, has_add_bos, has_add_eos;
    char *chat_template; /* NULL when none */
};

/* Token string of an id (NULL when the id has none). */
const char *tok_id_str(const struct oct_tokenizer *t, int32_t id, size_t *len);

/* jansson's iteration macros take a non-const json_t *; reading through
 * them does not modify the value. */
static inline json_t *tok_json_mut(const json_t *j)
{
    json_t *m;
    memcpy(&m, &j, sizeof m);
    return m;
}

/* JSON helpers with path-naming errors. */
oct_status tok_json_bool(const json_t *obj, const char *key, bool dflt, bool *out, const char *path,
                         oct_error *err);
oct_status tok_json_str(const json_t *obj, const char *key, bool required, const char **out,
                        size_t *len, const char *path, oct_error *err);
/* Checks that every key of obj is in the NULL-terminated list; names the first
 * unknown one (an option we would otherwise silently ignore). */
oct_status tok_json_known_keys(const json_t *obj, const char *const *keys, const char *path,
                               oct_error *err);
/* Parses one element of a component list into `slot` (a pointer of the
 * caller's type: tok_norm **, tok_pre **, ...). */
typedef oct_status (*tok_json_parse_fn)(const json_t *elem, void *slot, const char *path,
                                        oct_error *err);
/* A "Sequence" component: {"type": "Sequence", key: [...]} and no other keys.
 * *children gets a zeroed array of n + 1 pointers of slot_size bytes, element
 * i parsed into slot i by `parse` (path "PATH.key[i]"); *n_parsed counts the
 * elements parsed, on failure too, so that the caller's free releases them.
 * *children is set (or NULL) whatever the result. */
oct_status tok_json_sequence(const json_t *j, const char *key, const char *path,
                             tok_json_parse_fn parse, size_t slot_size, void **children,
                             size_t *n_parsed, oct_error *err);

#endif

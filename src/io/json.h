/* json.h — the one reader of Hugging Face JSON files (config.json,
 * generation_config.json, tokenizer_config.json, tokenizer.json,
 * special_tokens_map.json, model.safetensors.index.json) and the typed
 * getters every reader of those files uses.  Used by src/io/, src/model/ and
 * src/tokenizer/.
 *
 * The rule: octet accepts whatever Python's json module writes.  A pre-pass
 * turns each token strict JSON lacks into the string "\u0000TOKEN" (a NUL,
 * then the token as written), which no file writes itself:
 *   - integers of any size: one beyond int64 (transformers' VERY_LARGE_INTEGER,
 *     int(1e30) = 1000000000000000019884624838656) is kept digit for digit;
 *     io_json_num reads it as the nearest double, io_json_limit as "no limit",
 *     io_json_int rejects it as too large;
 *   - the literals NaN, Infinity and -Infinity (json.dump writes them for
 *     float nan and inf): io_json_num reads them, other getters reject them;
 *   - nesting as deep as jansson allows (2048 levels; Python's own encoder
 *     stops near 1000).
 * io_json_dump writes the tokens back as they were, so a file octet rewrites
 * (export) keeps them.
 * Unknown keys are the caller's business (config readers ignore them).  A
 * value of the wrong type for a key octet uses is OCT_ERR_FORMAT naming the
 * file, the key path and its line: "config.json: line 7: rope_scaling.factor:
 * expected a number".
 *
 * Line numbers: while a document is open (io_json_open .. io_json_close), the
 * getters find the line of any key of an object with at most
 * IO_JSON_MAX_LINED_KEYS members.  Columns in syntax errors count the bytes of
 * the rewritten text: 8 further on per literal or big integer before them. */
#ifndef OCTET_IO_JSON_H
#define OCTET_IO_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"

#define IO_JSON_MAX_LINED_KEYS 512
#define OCT_JSON_MAX_FILE (64u * 1024u * 1024u) /* config.json, index.json */

/* Parses `text` (not necessarily NUL-terminated) under the rule above.  `label`
 * (usually the path) names the file in every error.  On success *out is the
 * root; release it with io_json_close. */
oct_status io_json_open(const char *text, size_t len, const char *label, json_t **out,
                        oct_error *err);
/* io_read_text + io_json_open. */
oct_status io_json_open_file(const char *path, size_t max_size, json_t **out, oct_error *err);
/* Releases a root from io_json_open (NULL is a no-op). */
void io_json_close(json_t *root);

/* The file label and line of `key` inside `obj` (an object of an open
 * document); false when unknown. */
bool io_json_where(const json_t *obj, const char *key, const char **label, int *line);

/* Typed getters.  Absent (or null) keys leave *out untouched and return OK
 * unless `required`; a value of the wrong type is OCT_ERR_FORMAT naming
 * "<where>.<key>" and, inside an open document, its file and line. */
oct_status io_json_int(const json_t *obj, const char *key, const char *where, bool required,
                       int64_t *out, oct_error *err);
oct_status io_json_num(const json_t *obj, const char *key, const char *where, bool required,
                       double *out, oct_error *err);
oct_status io_json_bool(const json_t *obj, const char *key, const char *where, bool required,
                        bool *out, oct_error *err);
/* *out borrows the JSON string (NULL when absent). */
oct_status io_json_str(const json_t *obj, const char *key, const char *where, bool required,
                       const char **out, oct_error *err);
/* A length limit as transformers reads one (model_max_length, ...): an
 * integer; a value above 2^53 (int(1e30) and the like) means "no limit" and
 * sets *out = INT64_MAX. */
oct_status io_json_limit(const json_t *obj, const char *key, const char *where, bool required,
                         int64_t *out, oct_error *err);
/* Array of strings (or absent/null -> n = 0).  *out is an oct_malloc'd array
 * of borrowed pointers. */
oct_status io_json_str_array(const json_t *obj, const char *key, const char *where,
                             const char ***out, int *n, oct_error *err);

/* A [rows, cols] block shape (weight_block_size, block_structure): two integers
 * in 1..65536, else OCT_ERR_FORMAT naming "<where>.<key>".  Absent (or null):
 * *found = false unless `required`. */
oct_status io_json_block_shape(const json_t *obj, const char *key, const char *where, bool required,
                               bool *found, int64_t *rows, int64_t *cols, oct_error *err);

/* The number a JSON value holds, NaN / +-Infinity / big integers included. */
bool io_json_number_of(const json_t *v, double *out);
/* An integer beyond int64, as the pre-pass keeps it. */
bool io_json_is_big_int(const json_t *v);
/* json_dumps with every "\u0000TOKEN" string written back as TOKEN; oct_free
 * the result (NULL on NOMEM). */
char *io_json_dump(const json_t *root, size_t flags);
/* A wrong-type error for `key` of `obj`: "[FILE: line N: ]WHERE.KEY: expected WHAT". */
oct_status io_json_type_error(const json_t *obj, const char *key, const char *where,
                              const char *what, oct_error *err);

#endif

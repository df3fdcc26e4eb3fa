/* io.h — internal helpers shared by the files of src/io/: dtype table, JSON
 * field access with errors that name the key, file helpers, name matching,
 * and the pieces the checkpoint builder and the format parsers exchange. */
#ifndef OCTET_IO_H
#define OCTET_IO_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "io/json.h"

/* Hard limits on what an untrusted file may make us allocate. */
#define OCT_ST_MAX_HEADER (100u * 1024u * 1024u) /* as the safetensors crate */

/* ---- files --------------------------------------------------------------- */
/* Reads a whole (small) file into a NUL-terminated buffer (oct_free it). */
oct_status io_read_text(const char *path, size_t max_size, char **out, size_t *len, oct_error *err);
/* "dir/name" into a fresh buffer (oct_free it); NULL on NOMEM. */
char *io_path_join(const char *dir, const char *name);
/* generation_config.json of `dir` (optional): its eos_token_id into
 * c->gen_eos_token_ids (a wrong type is an error naming file, key, line). */
oct_status io_generation_config_read(const char *dir, oct_model_config *c, oct_error *err);
bool io_file_exists(const char *path);
/* Writes `len` bytes to path atomically: path.tmp, fsync, rename. */
oct_status io_write_atomic(const char *path, const void *data, size_t len, oct_error *err);
/* Copies a file (atomically at the destination). */
oct_status io_copy_file(const char *src, const char *dst, oct_error *err);
/* Writes out_dir/config.json: src_dir's config.json with its
 * quantization_config (also one under text_config, or the old
 * compression_config) replaced by qc, whose reference this takes (NULL qc:
 * out of memory). */
oct_status io_write_config(const char *src_dir, const char *out_dir, json_t *qc, oct_error *err);
/* fsyncs a directory so renames inside it are durable. */
void io_fsync_dir(const char *dir);

/* ---- JSON: io/json.h ------------------------------------------------------ */
/* ---- names --------------------------------------------------------------- */
/* Compiled ignore / target list (exact names and "re:" patterns). */
typedef struct io_patterns io_patterns;
/* `field` names the list in compile errors ("quantization_config.ignore"). */
oct_status io_patterns_create(const char *const *patterns, int n, const char *field,
                              io_patterns **out, oct_error *err);
void io_patterns_free(io_patterns *p);
/* Index of the first entry matching `name`, -1 for none. */
int io_patterns_match(const io_patterns *p, const char *name);
int io_patterns_count(const io_patterns *p);
const char *io_patterns_at(const io_patterns *p, int i);
/* Whether `name` is one quantized checkpoints give scales and zero points:
 * it ends in _scale, _scale_inv, .scale, _zero_point or _scale_ub
 * (weight_scale, weight_scale_inv, input_scale, k_scale, input_zero_point,
 * ...).  Such a tensor that no layer uses is an error at open; export drops
 * the source's. */
bool io_is_scale_name(const char *name);
/* Shell-style fnmatch ('*', '?', '[...]'), as Python's fnmatch.fnmatch on
 * case-sensitive names. */
bool io_fnmatch(const char *pattern, const char *name);

/* ---- quantization_config -> one spec per linear -------------------------- */
typedef struct io_qspec {
    bool quantized;
    oct_wscale_kind wkind;
    int64_t bn, bk;         /* BLOCK */
    const char *scale_name; /* suffix of the weight scale: "weight_scale" / "weight_scale_inv" */
    bool channel_1d_ok;     /* CHANNEL scales may be [N] (Quark) as well as [N, 1] */
    oct_act_kind act;
    int64_t act_group;
    float act_ub;
    bool soft_ignore; /* fp8: a substring match of modules_to_not_convert; unquantized if
                       * the weight on disk is not FP8 (transformers semantics) */
    char rule[160];
} io_qspec;

typedef struct io_qconfig io_qconfig;
/* Parses the quantization_config object (NULL -> plain checkpoint). */
oct_status io_qconfig_parse(const json_t *qc, const char *label, io_qconfig **out, oct_error *err);
void io_qconfig_free(io_qconfig *q);
oct_ckpt_format io_qconfig_format(const io_qconfig *q);
/* The scheme for linear `name` (is_lm_head: vLLM's ParallelLMHead, which class
 * targets like "Linear" never match). */
oct_status io_qconfig_resolve(const io_qconfig *q, const char *name, bool is_lm_head, io_qspec *out,
                              oct_error *err);
/* The config declares quantized KV-cache scales. */
bool io_qconfig_kv_quantized(const io_qconfig *q);
/* KV source names "<x>.{k,v,q}_proj.output_scale" are meaningful (fp8, quark). */
bool io_qconfig_output_scale_kv(const io_qconfig *q);

/* Format parsers (qconfig_*.c); each fills the shared io_qconfig. */
struct io_qconfig_ops {
    oct_status (*resolve)(const io_qconfig *q, const char *name, bool is_lm_head, io_qspec *out,
                          oct_error *err);
    void (*free_priv)(void *priv);
};
struct io_qconfig {
    oct_ckpt_format format;
    bool kv_quantized;
    bool output_scale_kv;
    const struct io_qconfig_ops *ops;
    void *priv;
};
oct_status io_qconfig_ct_parse(const json_t *qc, const char *label, io_qconfig *q, oct_error *err);
oct_status io_qconfig_quark_parse(const json_t *qc, const char *label, io_qconfig *q,
                                  oct_error *err);
oct_status io_qconfig_fp8_parse(const json_t *qc, const char *label, io_qconfig *q, oct_error *err);
oct_status io_qconfig_fbgemm_parse(const json_t *qc, const char *label, io_qconfig *q,
                                   oct_error *err);

/* Fills *out with "unquantized", rule = why + arg (why and arg may point
 * into *out; inline: every format's parser uses it). */
static inline void io_qspec_none(io_qspec *out, const char *why, const char *arg)
{
    char rule[sizeof out->rule];
    snprintf(rule, sizeof rule, "%s%s", why, arg ? arg : "");
    memset(out, 0, sizeof *out);
    out->wkind = OCT_WSCALE_NONE;
    out->act = OCT_AKIND_NONE;
    memcpy(out->rule, rule, sizeof rule);
}

/* ---- KV-scale names (docs/FORMATS.md §KV-cache scales) ------------------- */
typedef enum {
    IO_KV_K = 0,
    IO_KV_V,
    IO_KV_Q,
    IO_KV_PROB,
    IO_KV_KV /* deprecated k+v */
} io_kv_kind;
/* If `name` is a KV-cache scale, writes the canonical attention module name
 * ("<prefix>.attn") to attn (cap bytes) and its kind; is_zero_point marks
 * "<x>.{k,v,q}_zero_point".  output_scale_kv enables the
 * "<x>.{k,v,q}_proj.output_scale" / "prob_output_scale" names. */
bool io_kv_remap(const char *name, bool output_scale_kv, char *attn, size_t cap, io_kv_kind *kind,
                 bool *is_zero_point);

#endif

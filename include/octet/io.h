/* octet/io.h — safetensors files, checkpoints, config.json, the per-linear description, export
 * (part of octet.h, the public API: docs/API.md). */
#ifndef OCTET_API_IO_H
#define OCTET_API_IO_H

#include "octet/quant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* safetensors files, checkpoint folders (config.json + quantization_config),
 * the canonical per-linear description of every FP8 layout, and FP8 export.
 * Layouts and rules: docs/FORMATS.md.  Objects here are immutable after
 * open and may be shared between threads; writers are single-threaded. */

/* safetensors dtypes, in the file format's spelling (oct_dtype_str). */
typedef enum {
    OCT_DT_F64 = 0,
    OCT_DT_F32,
    OCT_DT_F16,
    OCT_DT_BF16,
    OCT_DT_F8_E4M3, /* e4m3fn */
    OCT_DT_F8_E5M2,
    OCT_DT_F8_E8M0, /* e8m0fnu */
    OCT_DT_U8,
    OCT_DT_I8,
    OCT_DT_I16,
    OCT_DT_U16,
    OCT_DT_I32,
    OCT_DT_U32,
    OCT_DT_I64,
    OCT_DT_U64,
    OCT_DT_BOOL,
    OCT_DTYPE_COUNT
} oct_dtype;

/* "F32", "BF16", "F8_E4M3", ...; "?" for an invalid value (static strings). */
OCT_API const char *oct_dtype_str(oct_dtype dt);
/* Bytes per element (0 for an invalid value). */
OCT_API size_t oct_dtype_size(oct_dtype dt);
/* Parses the safetensors spelling; OCT_ERR_NOT_FOUND for an unknown name. */
OCT_API oct_status oct_dtype_parse(const char *s, oct_dtype *out);

#define OCT_MAX_DIMS 8

/* One tensor of a safetensors file.  `data` points into the read-only file
 * mapping (zero copy) and may be unaligned: read it with memcpy or the
 * oct_tensor_read_* helpers.  Valid while the owning object lives. */
typedef struct oct_tensor {
    const char *name;
    oct_dtype dtype;
    int n_dims;                 /* 0 for a scalar */
    int64_t dims[OCT_MAX_DIMS]; /* [n_dims] */
    int64_t numel;
    const void *data; /* [size_bytes] */
    size_t size_bytes;
    uint64_t file_offset; /* absolute byte offset of data in `file` */
    const char *file;     /* path (or label) of the file holding it */
} oct_tensor;

/* Converts elements [first, first + n) of a float tensor (F64/F32/F16/BF16,
 * F8_E4M3/F8_E5M2 decoded, F8_E8M0 as 2^(e-127)) to f32. */
OCT_API oct_status oct_tensor_read_f32(const oct_tensor *t, int64_t first, int64_t n, float *dst,
                                       oct_error *err);

/* ---- one safetensors file ---------------------------------------------- */
/* Accepted bytes: u64 little-endian N, N bytes of UTF-8 JSON object header
 * ({"name": {"dtype", "shape", "data_offsets": [b, e]}, "__metadata__":
 * {str: str}}), then the data section; offsets are relative to it, must tile
 * it exactly (sorted, no gap, no overlap, no trailing bytes) and e - b must
 * equal numel x dtype size.  Any violation: OCT_ERR_FORMAT naming the file,
 * the tensor and the byte offset (err->offset). */
typedef struct oct_safetensors oct_safetensors;

/* mmaps `path` read-only.  *out owns the mapping. */
OCT_API oct_status oct_safetensors_open(const char *path, oct_safetensors **out, oct_error *err);
/* Parses bytes in memory (borrowed: must outlive *out); `label` names them in
 * errors.  Same validation as open. */
OCT_API oct_status oct_safetensors_parse(const void *bytes, size_t size, const char *label,
                                         oct_safetensors **out, oct_error *err);
OCT_API void oct_safetensors_free(oct_safetensors *st);
/* Tensors sorted by data offset.  _at (NULL out of range) and _find return
 * tensors owned by st, valid while st lives; their data points into st's
 * mapping (or the borrowed bytes of _parse). */
OCT_API int64_t oct_safetensors_count(const oct_safetensors *st);
OCT_API const oct_tensor *oct_safetensors_at(const oct_safetensors *st, int64_t i);
/* NULL when absent; owned by st, valid while st lives. */
OCT_API const oct_tensor *oct_safetensors_find(const oct_safetensors *st, const char *name);
/* __metadata__ value of `key`, NULL when absent; owned by st, valid while st lives. */
OCT_API const char *oct_safetensors_metadata(const oct_safetensors *st, const char *key);
/* Total file size in bytes. */
OCT_API size_t oct_safetensors_file_size(const oct_safetensors *st);

/* ---- the tensors of a checkpoint folder -------------------------------- */
/* model.safetensors.index.json (weight_map) if present, else
 * model.safetensors, else every *.safetensors of the folder (a name in two
 * files is an error).  A tensor the index lists but its file lacks is an
 * error. */
typedef struct oct_tensor_set oct_tensor_set;
OCT_API oct_status oct_tensor_set_open(const char *dir, oct_tensor_set **out, oct_error *err);
OCT_API void oct_tensor_set_free(oct_tensor_set *ts);
/* Tensors sorted by name.  _at (NULL out of range) and _find (NULL when
 * absent) return tensors owned by ts, valid while ts lives. */
OCT_API int64_t oct_tensor_set_count(const oct_tensor_set *ts);
OCT_API const oct_tensor *oct_tensor_set_at(const oct_tensor_set *ts, int64_t i);
OCT_API const oct_tensor *oct_tensor_set_find(const oct_tensor_set *ts, const char *name);
OCT_API int oct_tensor_set_n_files(const oct_tensor_set *ts);
OCT_API uint64_t oct_tensor_set_bytes_on_disk(const oct_tensor_set *ts);

/* ---- streaming writer --------------------------------------------------- */
/* Declare every tensor (name, dtype, shape) first, then oct_st_writer_begin,
 * then append the bytes of each tensor in declaration order (in as many
 * chunks as you like), then oct_st_writer_finish.  Only the shard being
 * written is open; nothing but the header list is kept in memory.  Files are
 * written under temporary names (".<name>.tmp"), fsync'd and renamed only by
 * finish (the index last), so an interrupted export never leaves a file that
 * looks complete; oct_st_writer_free before finish deletes the temporaries.
 * With max_shard_bytes > 0 and more than one shard: files
 * "<prefix>-00001-of-0000N.safetensors" and "<prefix>.safetensors.index.json";
 * else "<prefix>.safetensors". */
typedef struct oct_st_writer oct_st_writer;
OCT_API oct_status oct_st_writer_create(const char *dir, const char *prefix, size_t max_shard_bytes,
                                        oct_st_writer **out, oct_error *err);
/* A __metadata__ entry (copied); before begin. */
OCT_API oct_status oct_st_writer_set_metadata(oct_st_writer *w, const char *key, const char *value,
                                              oct_error *err);
OCT_API oct_status oct_st_writer_declare(oct_st_writer *w, const char *name, oct_dtype dtype,
                                         int n_dims, const int64_t *dims, oct_error *err);
OCT_API oct_status oct_st_writer_begin(oct_st_writer *w, oct_error *err);
/* Appends bytes to tensor `name`, which must be the tensor currently being
 * filled (the first declared one not yet complete). */
OCT_API oct_status oct_st_writer_append(oct_st_writer *w, const char *name, const void *data,
                                        size_t size, oct_error *err);
OCT_API oct_status oct_st_writer_finish(oct_st_writer *w, oct_error *err);
OCT_API void oct_st_writer_free(oct_st_writer *w);

/* ---- config.json --------------------------------------------------------- */
typedef struct oct_model_config {
    char architecture[96]; /* architectures[0], e.g. "LlamaForCausalLM" */
    char model_type[64];   /* "llama" */
    char hidden_act[32];   /* "silu" */
    int64_t hidden_size;
    int64_t intermediate_size;
    int64_t n_layers;   /* num_hidden_layers */
    int64_t n_heads;    /* num_attention_heads */
    int64_t n_kv_heads; /* num_key_value_heads (default n_heads) */
    int64_t head_dim;   /* head_dim (default hidden_size / n_heads) */
    int64_t vocab_size;
    int64_t max_position_embeddings;
    double rms_norm_eps;
    double rope_theta;
    char rope_type[32]; /* "default", "llama3", "linear", "dynamic", "yarn", ... */
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int64_t rope_original_max_position_embeddings;
    bool tie_word_embeddings;
    bool attention_bias, mlp_bias;
    oct_dtype torch_dtype;                                       /* OCT_DT_BF16 when absent */
    int64_t n_experts, n_experts_per_tok, moe_intermediate_size; /* 0 for dense */
    /* Keys of some families; the architecture decides which apply (sliding
     * window: Mistral and Mixtral whenever set, others with use_sliding_window). */
    int64_t sliding_window;  /* 0 when absent or null; a given window is positive */
    bool use_sliding_window; /* Qwen2 / Qwen3 */
    /* Granite: positive and finite as floats; 1 when absent, except
     * attention_multiplier: 0 when absent (the model's 1 / sqrt(head_dim)). */
    double embedding_multiplier, residual_multiplier, attention_multiplier, logits_scaling;
    bool norm_topk_prob;                     /* Qwen3-MoE: renormalise the top-k weights */
    int64_t decoder_sparse_step;             /* Qwen3-MoE; 1 when absent */
    int64_t n_mlp_only_layers;               /* Qwen3-MoE: entries of mlp_only_layers */
    int64_t shared_expert_intermediate_size; /* Qwen3-MoE shared experts; 0 when absent */
    int64_t shared_intermediate_size;        /* GraniteMoeShared's; 0 when absent */
    int64_t bos_token_id;                    /* -1 absent */
    int64_t eos_token_ids[8];                /* config.json's eos_token_id (int or list) */
    int n_eos;
    int64_t gen_eos_token_ids[8]; /* generation_config.json's eos_token_id (checkpoint open) */
    int n_gen_eos;
    bool has_quantization_config;
    /* The context length vLLM derives (_get_and_verify_max_len): the smallest
     * of max_position_embeddings, n_positions, max_seq_len, seq_length,
     * model_max_length, max_sequence_length, max_seq_length, seq_len (2048
     * when none is set), times rope_scaling's factor unless its type is
     * llama3 / su / longrope (yarn: original_max_position_embeddings x
     * factor).  A sliding window never lowers it (vLLM applies one only with
     * --disable-sliding-window). */
    int64_t max_model_len;
    char max_model_len_key[40]; /* the key it came from ("default" for 2048) */
    int64_t model_max_length;   /* config.json's model_max_length (0: absent) */
} oct_model_config;

/* Parses config.json text (`label` names it in errors).  A missing required
 * size or a value of the wrong type is OCT_ERR_FORMAT naming the key; values
 * under "text_config" are used when present (multimodal wrappers). */
OCT_API oct_status oct_model_config_parse(const char *json, size_t len, const char *label,
                                          oct_model_config *out, oct_error *err);
OCT_API oct_status oct_model_config_load(const char *path, oct_model_config *out, oct_error *err);

/* The max_model_len to run with, as vLLM decides it: `requested` <= 0 takes
 * c->max_model_len; a larger request than that is OCT_ERR_INVALID_ARG (vLLM's
 * text) unless it is <= config.json's model_max_length or the environment has
 * OCTET_ALLOW_LONG_MAX_MODEL_LEN=1 (then a warning is logged). */
OCT_API oct_status oct_model_config_max_len(const oct_model_config *c, int64_t requested,
                                            int64_t *out, oct_error *err);

/* The end-of-sequence ids generation stops on: config.json's eos_token_id
 * together with generation_config.json's (vLLM adds the latter to the stop
 * ids), without duplicates.  Returns how many were written (at most cap). */
OCT_API int oct_model_config_eos_ids(const oct_model_config *c, int32_t *out, int cap);

/* ---- the canonical per-linear description ------------------------------- */
typedef enum {
    OCT_CKPT_BF16 = 0, /* no quantization_config (bf16 / fp16 / f32 weights) */
    OCT_CKPT_COMPRESSED_TENSORS,
    OCT_CKPT_QUARK,
    OCT_CKPT_FP8, /* quant_method "fp8": AutoFP8, FineGrainedFP8 block */
    OCT_CKPT_FBGEMM_FP8,
    OCT_CKPT_FORMAT_COUNT
} oct_ckpt_format;
/* "bf16", "compressed-tensors", "quark", "fp8", "fbgemm_fp8" (static strings). */
OCT_API const char *oct_ckpt_format_str(oct_ckpt_format f);

typedef enum {
    OCT_WSCALE_NONE = 0, /* unquantized weight */
    OCT_WSCALE_TENSOR,   /* one scale */
    OCT_WSCALE_CHANNEL,  /* one per output row */
    OCT_WSCALE_BLOCK,    /* [ceil(N/bn), ceil(K/bk)] */
    OCT_WSCALE_MX,       /* E8M0 [N, K/32] */
    OCT_WSCALE_KIND_COUNT
} oct_wscale_kind;
/* "none", "tensor", "channel", "block", "mx" (static strings). */
OCT_API const char *oct_wscale_kind_str(oct_wscale_kind k);

typedef enum {
    OCT_AKIND_NONE = 0,      /* weight-only (W8A16) or unquantized */
    OCT_AKIND_DYNAMIC_TOKEN, /* per-token scale computed at run time */
    OCT_AKIND_DYNAMIC_TENSOR,
    OCT_AKIND_DYNAMIC_GROUP, /* 1 x act_group along K (128; 32 with MX scales) */
    OCT_AKIND_STATIC,        /* the checkpoint's input_scale */
    OCT_AKIND_KIND_COUNT
} oct_act_kind;
/* "none", "dynamic_token", "dynamic_tensor", "dynamic_group", "static" (static strings). */
OCT_API const char *oct_act_kind_str(oct_act_kind k);

/* One unfused linear layer as the checkpoint stores it. */
typedef struct oct_ckpt_linear {
    const char *name;         /* "model.layers.0.self_attn.q_proj" */
    int64_t out_features;     /* N */
    int64_t in_features;      /* K */
    const oct_tensor *weight; /* [N, K] */
    /* For FP8 weights the element format: E4M3FN or E5M2 as stored, E4M3FNUZ
     * when the checkpoint was opened with to_fnuz (then the read functions
     * convert codes and double scales).  Meaningless for unquantized. */
    oct_fp8_format fp8_format;
    oct_wscale_kind scale_kind;
    int64_t block_n, block_k;       /* BLOCK: [bn, bk]; MX: [1, 32]; else 0 */
    const oct_tensor *weight_scale; /* NULL for NONE */
    int64_t scale_rows, scale_cols; /* logical grid: 1x1, Nx1, ceil(N/bn) x ceil(K/bk), N x K/32 */
    oct_act_kind activation;
    int64_t act_group;             /* DYNAMIC_GROUP: group size along K; else 0 */
    const oct_tensor *input_scale; /* STATIC: the checkpoint tensor; else NULL */
    float input_scale_value;       /* STATIC: its value (doubled for fnuz) */
    float act_scale_ub;            /* fbgemm activation_scale_ub; 0: none */
    const oct_tensor *bias;        /* [N] or NULL */
    const char *rule; /* what decided the scheme ("config_groups.group_0", "ignore: lm_head") */
} oct_ckpt_linear;

/* KV-cache scales of one attention layer after the remapping of docs/FORMATS.md §KV-cache scales.
 */
typedef struct oct_ckpt_kv {
    const char *attn;                            /* "model.layers.0.self_attn.attn" */
    int64_t layer;                               /* decoder layer index, -1 if the name has none */
    float k_scale, v_scale, q_scale, prob_scale; /* < 0: absent (doubled for fnuz) */
    const char *k_source, *v_source, *q_source, *prob_source; /* checkpoint names, or NULL */
} oct_ckpt_kv;

typedef struct oct_checkpoint_opts {
    bool to_fnuz; /* serve E4M3FN weights as E4M3FNUZ (AMD MI300): codes converted, scales x2 */
} oct_checkpoint_opts;

/* A checkpoint folder: config, tensors, format, and one oct_ckpt_linear per
 * unfused linear layer.  A scale that is missing, has the wrong shape or
 * dtype, or has no known meaning is an error naming the tensor; an
 * unsupported scheme names the quantization_config field and value. */
typedef struct oct_checkpoint oct_checkpoint;
OCT_API oct_status oct_checkpoint_open(const char *dir, const oct_checkpoint_opts *opts,
                                       oct_checkpoint **out, oct_error *err);
OCT_API void oct_checkpoint_free(oct_checkpoint *ck);
/* Every pointer the getters below return (strings, config, tensors, linears,
 * KV entries and the tensors these point to) is owned by ck and valid while ck
 * lives; oct_checkpoint_free invalidates them all. */

/* The folder it was opened from (owned by ck, valid while ck lives). */
OCT_API const char *oct_checkpoint_dir(const oct_checkpoint *ck);
OCT_API oct_ckpt_format oct_checkpoint_format(const oct_checkpoint *ck);
/* Short scheme summary: "bf16", "FP8 (static tensor)", "FP8_DYNAMIC", "FP8_BLOCK",
 * "FP8 weight-only", "MXFP8", "mixed", ...; owned by ck, valid while ck lives. */
OCT_API const char *oct_checkpoint_scheme(const oct_checkpoint *ck);
/* Its config.json (owned by ck, valid while ck lives). */
OCT_API const oct_model_config *oct_checkpoint_config(const oct_checkpoint *ck);
/* Its tensors (owned by ck, valid while ck lives: do not free). */
OCT_API const oct_tensor_set *oct_checkpoint_tensors(const oct_checkpoint *ck);
/* The quantization_config object as compact JSON text, or NULL; owned by ck,
 * valid while ck lives. */
OCT_API const char *oct_checkpoint_quant_config_json(const oct_checkpoint *ck);
/* Linears in tensor-name order: _linear (NULL out of range) and _find_linear
 * (NULL when absent) return entries owned by ck, valid while ck lives. */
OCT_API int64_t oct_checkpoint_n_linears(const oct_checkpoint *ck);
OCT_API const oct_ckpt_linear *oct_checkpoint_linear(const oct_checkpoint *ck, int64_t i);
OCT_API const oct_ckpt_linear *oct_checkpoint_find_linear(const oct_checkpoint *ck,
                                                          const char *name);
/* KV scales per attention layer (empty when the checkpoint has none); _kv
 * returns an entry owned by ck, valid while ck lives (NULL out of range). */
OCT_API int64_t oct_checkpoint_n_kv(const oct_checkpoint *ck);
OCT_API const oct_ckpt_kv *oct_checkpoint_kv(const oct_checkpoint *ck, int64_t i);
/* The checkpoint declares a quantized KV cache (kv_cache_scheme, kv_cache_group). */
OCT_API bool oct_checkpoint_kv_quantized(const oct_checkpoint *ck);

/* Rows [row0, row0 + n_rows) of a linear's weight as f32 (dequantized:
 * decode(code) x scale in f32): dst [n_rows, K]. */
OCT_API oct_status oct_ckpt_linear_read_f32(const oct_ckpt_linear *l, int64_t row0, int64_t n_rows,
                                            float *dst, oct_error *err);
/* FP8 codes of rows [row0, row0 + n_rows): dst [n_rows, K] (converted to
 * E4M3FNUZ when l->fp8_format says so). */
OCT_API oct_status oct_ckpt_linear_read_codes(const oct_ckpt_linear *l, int64_t row0,
                                              int64_t n_rows, uint8_t *dst, oct_error *err);
/* The weight scales as f32: dst [scale_rows * scale_cols] (MX: 2^(e-127);
 * doubled for E4M3FNUZ). */
OCT_API oct_status oct_ckpt_linear_read_scales(const oct_ckpt_linear *l, float *dst,
                                               oct_error *err);

/* ---- export (octet quantize) ------------------------------------------- */
typedef enum {
    OCT_EXPORT_FP8_DYNAMIC = 0, /* channel weights + dynamic per-token activations */
    OCT_EXPORT_FP8_BLOCK,       /* 128x128 weight blocks + dynamic 1x128 activations */
    OCT_EXPORT_MXFP8            /* 1x32 E8M0 weights + dynamic MX activations */
} oct_export_scheme;

typedef enum {
    OCT_EXPORT_COMPRESSED_TENSORS = 0,
    OCT_EXPORT_HF_FP8 /* quant_method "fp8" (transformers FineGrainedFP8 / vLLM Fp8Config) */
} oct_export_format;

typedef struct oct_export_opts {
    oct_export_scheme scheme;
    oct_export_format format;
    const char *const *ignore; /* extra exact names / "re:" patterns; lm_head always kept */
    int n_ignore;
    size_t max_shard_bytes; /* 0: 5 GB */
    /* Called after each tensor (and at the start with done = 0); may be NULL. */
    void (*progress)(uint64_t done_bytes, uint64_t total_bytes, const char *tensor, void *user);
    void *progress_user;
} oct_export_opts;

/* Writes a complete HF model folder to out_dir (created if needed): FP8
 * safetensors (streamed: one chunk of rows in memory at a time), config.json
 * with its quantization_config (written last), and the tokenizer and
 * generation files copied from the source folder. */
OCT_API oct_status oct_checkpoint_export(const oct_checkpoint *src, const char *out_dir,
                                         const oct_export_opts *opts, oct_error *err);

/* ---- convert (octet convert) ------------------------------------------- */
typedef enum {
    OCT_CONVERT_COMPRESSED_TENSORS = 0,
    OCT_CONVERT_FP8,  /* quant_method "fp8" */
    OCT_CONVERT_QUARK /* quant_method "quark" */
} oct_convert_format;

typedef struct oct_convert_opts {
    oct_convert_format format;
    size_t max_shard_bytes; /* 0: 5 GB */
    /* Called once per linear layer and per KV-cache scale with what the
     * conversion does to it (ok) or why the target cannot express it (!ok);
     * `what` and `action` are valid during the call only.  May be NULL. */
    void (*on_step)(const char *what, const char *action, bool ok, void *user);
    void *user;
} oct_convert_opts;

/* "compressed-tensors", "fp8", "quark" -> *out; OCT_ERR_INVALID_ARG otherwise. */
OCT_API oct_status oct_convert_format_parse(const char *s, oct_convert_format *out);

/* Re-expresses a pre-quantized FP8 checkpoint in another format without
 * re-quantizing (docs/FORMATS.md §Converting): every FP8 code and scale is
 * copied byte for byte under the target's names and shapes, config.json gets
 * a quantization_config in the target's schema, every other file of the
 * folder is copied.  A layer the target cannot express is an error naming it
 * (nothing is written then).  The result is reopened and checked to describe
 * every layer and KV scale exactly as the source does.  out_dir NULL: only
 * the checks and the on_step report, nothing written. */
OCT_API oct_status oct_checkpoint_convert(const oct_checkpoint *src, const char *out_dir,
                                          const oct_convert_opts *opts, oct_error *err);

/* Name matching of ignore / target lists (docs/MODEL.md §The plan, Ignore): "re:<pat>" is Python
 * re.match (PCRE2, anchored at the start, not a full match), anything else
 * exact equality.  Returns the index of the first entry that matches, -1 for
 * none; a pattern that does not compile is OCT_ERR_FORMAT naming it. */
OCT_API oct_status oct_name_match_list(const char *const *patterns, int n, const char *name,
                                       int *match_index, oct_error *err);

#ifdef __cplusplus
}
#endif
#endif

/* octet/model.h — loading a model and its plan (part of octet.h, the public API: docs/API.md). */
#ifndef OCTET_API_MODEL_H
#define OCTET_API_MODEL_H

#include "octet/io.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A decoder-only transformer loaded from a Hugging Face folder, with online
 * FP8 quantization (vLLM's --quantization / --quantization-config contract,
 * docs/MODEL.md §Online quantization config) or a pre-quantized checkpoint's own scheme.  See
 * docs/MODEL.md.
 *
 * Thread safety: a loaded oct_model is immutable and may be shared by any
 * number of threads and sessions. */

typedef struct oct_model oct_model;

typedef struct oct_model_opts {
    const char *quantization;        /* NULL, "none", "fp8", "fp8_per_tensor", "fp8_per_block",
                                        "mxfp8", "online" (everything from the config) */
    const char *quantization_config; /* JSON text (current or legacy schema) or NULL */
    const char *linear_backend;      /* NULL / "auto", or a kernel backend name */
    const char *moe_backend;         /* vLLM's --moe-backend: the MoE experts' kernels.
                                        NULL / "auto" (as linear_backend), "cuda" /
                                        "cuda_grouped" (the device's grouped GEMM), "cpu",
                                        "avx512", "avx2", "ref" */
    const char *device;              /* NULL / "auto", "cuda", "cpu" (vLLM's --device):
                                        where the whole forward pass runs (docs/MODEL.md
                                        §Devices); OCTET_DEVICE overrides auto */
    const char *dtype;               /* compute of unquantized layers: NULL / "auto" /
                                        "bfloat16" (bf16 activations into BF16 GEMMs) or
                                        "float32" (f32 weights and activations: the
                                        reference mode used to match transformers) */
    const char *kv_cache_dtype;      /* NULL / "auto" (f32), "float32", "bf16", "fp8",
                                        "fp8_e4m3", "fp8_e5m2" */
    bool calculate_kv_scales;        /* FP8 KV without checkpoint scales: compute them from
                                        the first prompt (amax(k)/200, amax(v)/100) */
    bool enforce_eager;              /* --device cuda: no CUDA graphs (vLLM's flag) */
    /* Progress while loading (may be NULL): done/total in weight bytes. */
    void (*progress)(uint64_t done, uint64_t total, const char *what, void *user);
    void *progress_user;
} oct_model_opts;

/* One entry of the load plan: an unfused linear layer. */
typedef struct oct_plan_layer {
    const char *name; /* checkpoint name "model.layers.0.self_attn.q_proj" */
    const char
        *unit;    /* the unit it runs in: its fused layer ("...self_attn.qkv_proj") or its name */
    int64_t n, k; /* weight [n, k] */
    const char *scheme;      /* "bf16", "fp8_per_tensor", "fp8_per_block", "mxfp8",
                                or the checkpoint's ("FP8_DYNAMIC (checkpoint)", ...) */
    const char *ignore_rule; /* the ignore entry that kept it unquantized, or NULL */
    const char *kernel;      /* kernel chosen for its unit */
    uint64_t bytes;          /* bytes of weights + scales once loaded */
} oct_plan_layer;

typedef struct oct_plan oct_plan;

/* Computes what loading would do, without loading weights. */
OCT_API oct_status oct_plan_create(const char *dir, const oct_model_opts *opts, oct_plan **out,
                                   oct_error *err);
OCT_API void oct_plan_free(oct_plan *p);
OCT_API int64_t oct_plan_n_layers(const oct_plan *p);
/* Entry i (NULL out of range) and the strings it points to: owned by p, valid
 * while p lives. */
OCT_API const oct_plan_layer *oct_plan_layer_at(const oct_plan *p, int64_t i);
/* Totals: weights as loaded (quantized linears + BF16 rest), the BF16 size of
 * everything, and the predicted peak resident memory of loading. */
OCT_API uint64_t oct_plan_model_bytes(const oct_plan *p);
OCT_API uint64_t oct_plan_bf16_bytes(const oct_plan *p);
OCT_API uint64_t oct_plan_peak_bytes(const oct_plan *p);
OCT_API int64_t oct_plan_n_quantized(const oct_plan *p);
/* Human-readable summary line ("online fp8_per_block: 56 of 56 linears ...");
 * owned by p, valid while p lives. */
OCT_API const char *oct_plan_summary(const oct_plan *p);
/* Whether the plan's linear layers shard over tp GPUs as `--tensor-parallel-size tp`
 * would (Megatron: q/k/v and gate/up by output rows, whole heads, KV heads replicated
 * when fewer than tp; o/down by input columns; weight scales with their blocks).  The
 * first layer that cannot is the error, named; *rank_bytes: the most linear-weight
 * bytes one rank holds (KV replication included). */
OCT_API oct_status oct_plan_tensor_parallel(const oct_plan *p, int tp, uint64_t *rank_bytes,
                                            oct_error *err);
/* The checkpoint the plan describes (format, scheme, config); owned by p, valid
 * while p lives (do not free it). */
OCT_API const oct_checkpoint *oct_plan_checkpoint(const oct_plan *p);

OCT_API oct_status oct_model_load(const char *dir, const oct_model_opts *opts, oct_model **out,
                                  oct_error *err);
OCT_API void oct_model_free(oct_model *m);
/* The model's config.json and the plan it was loaded with: owned by m, valid
 * while m lives (do not free them). */
OCT_API const oct_model_config *oct_model_get_config(const oct_model *m);
OCT_API const oct_plan *oct_model_get_plan(const oct_model *m);
OCT_API int64_t oct_model_vocab_size(const oct_model *m);
/* Measured peak resident memory (VmHWM) right after loading, in bytes. */
OCT_API uint64_t oct_model_load_peak_bytes(const oct_model *m);
OCT_API double oct_model_load_seconds(const oct_model *m);

#ifdef __cplusplus
}
#endif
#endif

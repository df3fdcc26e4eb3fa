/* model.h — internal structures of the model layer: architecture parameters,
 * the quantization plan, loaded weights.  The forward pass (forward.c) reads
 * these; engine/ drives it through oct_session_*. */
#ifndef OCTET_MODEL_H
#define OCTET_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "octet.h"

/* Mixture-of-experts family: which tensor names and routing rule. */
typedef enum {
    OCT_MOE_NONE = 0,
    OCT_MOE_MIXTRAL, /* block_sparse_moe.gate, experts.N.w1/w3/w2 */
    OCT_MOE_QWEN3,   /* mlp.gate, mlp.experts.N.{gate,up,down}_proj */
    OCT_MOE_GRANITE  /* block_sparse_moe.router.layer, stacked input_linear/output_linear */
} oct_moe_kind;

/* Architecture parameters the forward pass needs (from config.json). */
typedef struct oct_arch {
    char name[96]; /* "LlamaForCausalLM" */
    int64_t n_layers;
    int64_t hidden;              /* H */
    int64_t intermediate;        /* I */
    int64_t n_heads, n_kv_heads; /* Hq, Hkv */
    int64_t head_dim;            /* d */
    int64_t vocab;               /* V */
    int64_t max_pos;
    float rms_eps;
    bool qkv_bias; /* Qwen2 (and attention_bias) */
    bool o_bias, mlp_bias;
    bool qk_norm; /* Qwen3: RMSNorm of q and k per head */
    bool tie_embeddings;
    int64_t sliding_window; /* Mistral; 0: none */
    /* Granite multipliers (1 / 1 / d^-0.5 / 1 for the others) */
    float embedding_multiplier, residual_multiplier, attention_multiplier, logits_scaling;
    float *inv_freq;             /* [d/2] RoPE inverse frequencies (scaling applied) */
    float rope_attention_factor; /* yarn mscale (1 otherwise) */
    /* MoE (every decoder layer's MLP is a sparse MoE block when moe != NONE) */
    oct_moe_kind moe;
    int64_t n_experts, top_k; /* E, experts per token */
    int64_t moe_intermediate; /* I of one expert */
    bool norm_topk;           /* renormalise the top-k routing weights to sum 1 */
} oct_arch;

oct_status oct_arch_from_config(const char *dir, const oct_model_config *cfg, oct_arch *out,
                                oct_error *err);
void oct_arch_free(oct_arch *a);

/* Online quantization request after resolving flags and config (docs/MODEL.md §Online quantization
 * config). */
typedef enum {
    OCT_ONLINE_NONE = 0,
    OCT_ONLINE_PER_TENSOR,
    OCT_ONLINE_PER_BLOCK,
    OCT_ONLINE_MXFP8
} oct_online_scheme;

typedef struct oct_qspec {
    bool active;              /* an online quantization was asked for */
    oct_online_scheme linear; /* dense linear layers */
    oct_online_scheme moe;    /* expert layers */
    char **ignore;            /* [n_ignore] exact names or "re:" patterns */
    int n_ignore;
    char shorthand[32]; /* the --quantization value ("" if none) */
} oct_qspec;

oct_status oct_qspec_resolve(const char *quantization, const char *config_json, oct_qspec *out,
                             oct_error *err);
void oct_qspec_free(oct_qspec *q);
const char *oct_online_scheme_str(oct_online_scheme s);

/* A unit: linears fused into one GEMM (qkv_proj, gate_up_proj; each of its
 * linears is a part) or a single linear.  oct_plan_layer.unit names it. */
#define OCT_MAX_PARTS 3

/* What a unit is in its decoder layer. */
typedef enum {
    OCT_U_QKV = 0,
    OCT_U_O,
    OCT_U_GATE_UP,
    OCT_U_DOWN,
    OCT_U_ROUTER,      /* MoE router gate: never quantized online */
    OCT_U_EXP_GATE_UP, /* gate/up of expert `expert` */
    OCT_U_EXP_DOWN
} oct_unit_role;

typedef struct oct_plan_unit {
    char name[192]; /* "model.layers.0.self_attn.qkv_proj" */
    int n_parts;
    int64_t plan_index[OCT_MAX_PARTS]; /* into plan->layers */
    /* Per part, one source: an unfused 2-D checkpoint linear, or rows
     * [stack_row0, stack_row0 + part_n) of a 3-D expert tensor [E, R, k]
     * viewed as [E*R, k] (stacked / fused experts, unquantized). */
    const oct_ckpt_linear *src[OCT_MAX_PARTS];
    const oct_tensor *stack[OCT_MAX_PARTS];
    int64_t stack_row0[OCT_MAX_PARTS];
    int64_t part_n[OCT_MAX_PARTS];
    int64_t layer, expert; /* decoder layer; expert index or -1 */
    oct_unit_role role;
    /* Expert unit with online per-tensor weights: activations use one dynamic
     * per-tensor scale over the whole batch (vLLM's fused MoE), applied by
     * the forward pass through oct_linear_forward_q. */
    bool moe_tensor_act;
    int64_t n, k;             /* fused weight [n, k] */
    oct_linear_desc desc;     /* what the kernel gets */
    oct_online_scheme online; /* NONE: unquantized or checkpoint scheme */
    bool from_checkpoint_fp8; /* weights are the checkpoint's FP8 codes */
    const oct_linear_kernel *kernel;
    uint64_t bytes;
} oct_plan_unit;

struct oct_plan {
    oct_checkpoint *ckpt; /* owned */
    oct_arch arch;
    oct_qspec qspec;
    char *dtype;            /* "bfloat16" | "float32" */
    oct_plan_layer *layers; /* [n_layers] */
    char **layer_names;     /* owned strings behind layers[].name / group / scheme */
    int64_t n_layers;
    oct_plan_unit *units; /* [n_units] */
    int64_t n_units;
    uint64_t model_bytes, bf16_bytes, peak_bytes, largest_unit_bf16, largest_chunk;
    int64_t n_quantized;
    char summary[512];
};

/* One expert's MLP: units as the dense MLP's (kernels/backend.h). */
typedef oct_moe_expert oct_expert;

/* One loaded decoder layer. */
typedef struct oct_layer_weights {
    float *attn_norm;               /* [H] input_layernorm */
    float *mlp_norm;                /* [H] post_attention_layernorm */
    float *q_norm;                  /* [d] Qwen3 or NULL */
    float *k_norm;                  /* [d] Qwen3 or NULL */
    oct_linear *qkv[OCT_MAX_PARTS]; /* fused: qkv[0] only; unfused: q, k, v */
    int n_qkv;
    int64_t qkv_n[OCT_MAX_PARTS]; /* output width of each unit */
    oct_linear *o;
    oct_linear *gate_up[2]; /* fused: [0]; unfused: gate, up */
    int n_gate_up;
    int64_t gate_up_n[2];
    oct_linear *down;
    /* MoE layers (arch.moe != NONE): router [E, H] and one MLP per expert */
    oct_linear *router;
    oct_expert *experts;    /* [n_experts] */
    float k_scale, v_scale; /* FP8 KV cache scales (1 when none) */
} oct_layer_weights;

struct oct_model {
    oct_backend *be;           /* the device the forward pass runs on */
    oct_plan *plan;            /* owned; also owns the checkpoint (mmap) */
    oct_arch arch;             /* copy of plan->arch (inv_freq owned by plan) */
    const oct_tensor *embed;   /* [V, H] in the checkpoint (mmap, zero copy) */
    oct_linear *lm_head;       /* [V, H] never quantized */
    float *final_norm;         /* [H] */
    oct_layer_weights *layers; /* [n_layers] */
    oct_kv_dtype kv_dtype;
    bool kv_scales_from_ckpt;
    bool calculate_kv_scales;
    uint64_t load_peak_bytes;
    double load_seconds;
};

/* Scratch buffers for a batch of up to max_tokens tokens, in the model's
 * backend. */
typedef struct oct_fwd_ws oct_fwd_ws;
oct_status oct_fwd_ws_create(const oct_model *m, int64_t max_tokens, int64_t max_ctx,
                             oct_fwd_ws **out);
void oct_fwd_ws_free(oct_fwd_ws *ws);
/* The activation bytes of a workspace for max_tokens (the backend's own
 * scratch not counted). */
size_t oct_fwd_ws_bytes(const oct_model *m, int64_t max_tokens);

/* One forward pass over n tokens (see oct_session_forward). */
oct_status oct_forward(const oct_model *m, oct_kv_view *kv, oct_fwd_ws *ws, int64_t n,
                       const int32_t *tokens, const int32_t *seq, const int64_t *pos,
                       const bool *want_logits, float *logits, oct_error *err);
/* The same, with the rows wanted sampled on the device (req, ids, logprobs
 * [n_out]; logprobs may be NULL; id -1: that row's logits were not finite),
 * and their logits too unless logits is NULL: OCT_ERR_UNSUPPORTED on a
 * backend without device sampling (the CPU). */
oct_status oct_forward_sample(const oct_model *m, oct_kv_view *kv, oct_fwd_ws *ws, int64_t n,
                              const int32_t *tokens, const int32_t *seq, const int64_t *pos,
                              const bool *want_logits, const oct_sample_req *req, int32_t *ids,
                              float *logprobs, float *logits, oct_error *err);
/* Records the backend's decode graphs ahead of time: a pass of padding rows
 * for each graph size up to the one holding max_rows (within ws's size).
 * Returns the sizes captured (0 on a backend without graphs or with
 * --enforce-eager; -1 and err on failure), *last the largest, *bytes the
 * device memory ws's graphs take. */
int64_t oct_forward_capture(const oct_model *m, oct_kv_view *kv, oct_fwd_ws *ws, int64_t max_rows,
                            int64_t *last, size_t *bytes, oct_error *err);

oct_status oct_plan_build(const char *dir, const oct_model_opts *opts, oct_plan **out,
                          oct_error *err);

/* device.c: the backend for opts->device and DIR/config.json (CPU, or a
 * CUDA backend the caller frees with oct_backend_free) and the options the
 * plan and loading then run with (linear backend and KV dtype of the device). */
oct_status oct_model_device(const char *dir, const oct_model_opts *opts, oct_model_opts *eff,
                            oct_backend **be, oct_error *err);
/* Hands the model's constants (norm weights, RoPE frequencies, embedding
 * table) to its backend. */
oct_status oct_model_adopt_constants(oct_model *m, oct_error *err);
/* Asks the backend how it runs each MoE layer (an error names one it cannot)
 * and logs "Selected <kernel> for model.layers.N.<block>.experts ..." lines,
 * one per run of layers alike (device.c). */
oct_status oct_model_moe_kernels(const oct_model *m, oct_error *err);
/* GPU memory in use now, all of it (bytes; 0 on the CPU backend). */
uint64_t oct_model_device_used(const oct_model *m);

/* Peak resident set size of this process (bytes; 0 where unknown). */
uint64_t oct_rss_peak_bytes(void);

/* Rows of f32 the load reads unit g in (load.c): 128, or for online
 * quantization a 128-row band per thread, at most OCT_QUANT_CHUNK_BYTES and
 * no more bands than g has.  The plan's peak counts the largest chunk. */
#define OCT_QUANT_CHUNK_BYTES ((int64_t)32 << 20)
int64_t oct_load_chunk_rows(const oct_plan_unit *g);

#endif

/* stub.c — linked in CPU-only builds (make without CUDA=1): every CUDA entry
 * point reports OCT_ERR_UNSUPPORTED so callers can fall back or say why. */
#include "kernels/cuda/cuda_api.h"

oct_status oct_cuda_device_count(int *count)
{
    if (count)
        *count = 0;
    return OCT_ERR_UNSUPPORTED;
}

bool oct_cuda_available(void)
{
    return false;
}

oct_status oct_cuda_malloc(void **out, size_t bytes)
{
    (void)bytes;
    if (out)
        *out = NULL;
    return OCT_ERR_UNSUPPORTED;
}

void oct_cuda_free(void *p)
{
    (void)p;
}

oct_status oct_cuda_memcpy_h2d(void *dst, const void *src, size_t bytes)
{
    (void)dst, (void)src, (void)bytes;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_memzero(void *dst, size_t bytes)
{
    (void)dst, (void)bytes;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_memcpy_d2h(void *dst, const void *src, size_t bytes)
{
    (void)dst, (void)src, (void)bytes;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_quant_rows_bf16(const void *x, int64_t m, int64_t k, float ub, void *q,
                                    float *scale, void *stream)
{
    (void)x, (void)m, (void)k, (void)ub, (void)q, (void)scale, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_quant_groups_bf16(const void *x, int64_t m, int64_t k, void *q, float *scale,
                                      void *stream)
{
    (void)x, (void)m, (void)k, (void)q, (void)scale, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_gemv_w8a8(int64_t m, int64_t n, int64_t k, const uint8_t *a, const float *sa,
                              const uint8_t *w, const float *sw, oct_scale_kind kind, void *y,
                              void *stream)
{
    (void)m, (void)n, (void)k, (void)a, (void)sa, (void)w, (void)sw, (void)kind, (void)y;
    (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_ctx_create(oct_cuda_ctx **out)
{
    if (out)
        *out = NULL;
    return OCT_ERR_UNSUPPORTED;
}

void oct_cuda_ctx_free(oct_cuda_ctx *ctx)
{
    (void)ctx;
}

oct_status oct_cuda_ctx_reserve(oct_cuda_ctx *ctx, int64_t max_m, int64_t max_k)
{
    (void)ctx, (void)max_m, (void)max_k;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_ctx_set(oct_cuda_ctx *ctx, const char *key, int64_t value)
{
    (void)ctx, (void)key, (void)value;
    return OCT_ERR_UNSUPPORTED;
}

const char *oct_cuda_ctx_last_kernel(const oct_cuda_ctx *ctx)
{
    (void)ctx;
    return "";
}

oct_status oct_cuda_linear_fp8_dyn(oct_cuda_ctx *ctx, int64_t m, int64_t n, int64_t k,
                                   const void *x, const uint8_t *w, oct_scale_kind kind,
                                   const float *sw, float ub, void *y, int path, void *stream)
{
    (void)ctx, (void)m, (void)n, (void)k, (void)x, (void)w, (void)kind, (void)sw, (void)ub;
    (void)y, (void)path, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_gemm_fp8(oct_cuda_ctx *ctx, int64_t m, int64_t n, int64_t k, const uint8_t *a,
                             oct_scale_kind ka, const float *sa, const uint8_t *w,
                             oct_scale_kind kw, const float *sw, void *y, int path, void *stream)
{
    (void)ctx, (void)m, (void)n, (void)k, (void)a, (void)ka, (void)sa, (void)w, (void)kw;
    (void)sw, (void)y, (void)path, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_gemv_w8a16(int64_t m, int64_t n, int64_t k, const void *x, const uint8_t *w,
                               const float *sw, void *y, void *stream)
{
    (void)m, (void)n, (void)k, (void)x, (void)w, (void)sw, (void)y, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_quant_tensor_bf16(const void *x, int64_t n, void *q, float *scale, void *stream)
{
    (void)x, (void)n, (void)q, (void)scale, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_quant_static_bf16(const void *x, int64_t n, float scale, void *q, void *stream)
{
    (void)x, (void)n, (void)scale, (void)q, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_quant_mx_bf16(const void *x, int64_t m, int64_t k, void *q, uint8_t *e8,
                                  void *stream)
{
    (void)x, (void)m, (void)k, (void)q, (void)e8, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_rmsnorm_quant_rows_bf16(const void *x, const void *w, int64_t m, int64_t k,
                                            float eps, float ub, void *q, float *scale,
                                            void *stream)
{
    (void)x, (void)w, (void)m, (void)k, (void)eps, (void)ub, (void)q, (void)scale, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_silu_mul_quant_rows_bf16(const void *gu, int64_t m, int64_t k, float ub,
                                             void *q, float *scale, void *stream)
{
    (void)gu, (void)m, (void)k, (void)ub, (void)q, (void)scale, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

/* ---- forward-pass ops ---- */

const char *oct_cuda_ops_last_error(void)
{
    return "CUDA support not built (make CUDA=1)";
}

oct_status oct_cuda_embed(const int32_t *tok, int64_t n, const uint16_t *table, int64_t V,
                          int64_t H, float mult, float *x, void *stream)
{
    (void)tok, (void)n, (void)table, (void)V, (void)H, (void)mult, (void)x, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_rmsnorm(float *x, const uint16_t *add, float add_mult, const float *w,
                            const int32_t *rows, int64_t m, int64_t k, float eps,
                            const oct_cuda_act *out, void *stream)
{
    (void)x, (void)add, (void)add_mult, (void)w, (void)rows, (void)m, (void)k, (void)eps;
    (void)out, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_rope_qk(uint16_t *qkv, int64_t m, int64_t n_q, int64_t n_kv, int64_t d,
                            const int32_t *pos, const float *inv_freq, const float *q_norm,
                            const float *k_norm, float eps, void *stream)
{
    (void)qkv, (void)m, (void)n_q, (void)n_kv, (void)d, (void)pos, (void)inv_freq;
    (void)q_norm, (void)k_norm, (void)eps, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_rope_qk_store(uint16_t *qkv, int64_t m, int64_t n_q, int64_t n_kv, int64_t d,
                                  const int32_t *pos, const float *inv_freq, const float *q_norm,
                                  const float *k_norm, float eps, const int32_t *slot,
                                  int64_t block_size, int kv_dtype, void *k_cache, void *v_cache,
                                  float k_scale, float v_scale, void *stream)
{
    (void)qkv, (void)m, (void)n_q, (void)n_kv, (void)d, (void)pos, (void)inv_freq;
    (void)q_norm, (void)k_norm, (void)eps, (void)slot, (void)block_size, (void)kv_dtype;
    (void)k_cache, (void)v_cache, (void)k_scale, (void)v_scale, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_kv_store(const uint16_t *qkv, int64_t m, int64_t n_q, int64_t n_kv, int64_t d,
                             const int32_t *slot, int64_t block_size, int kv_dtype, void *k_cache,
                             void *v_cache, float k_scale, float v_scale, void *stream)
{
    (void)qkv, (void)m, (void)n_q, (void)n_kv, (void)d, (void)slot, (void)block_size;
    (void)kv_dtype, (void)k_cache, (void)v_cache, (void)k_scale, (void)v_scale, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

size_t oct_cuda_attention_workspace_bytes(int64_t m, int64_t n_q, int64_t d, int64_t max_ctx)
{
    (void)m, (void)n_q, (void)d, (void)max_ctx;
    return 0;
}

bool oct_cuda_attention_act_fits(int64_t n, int64_t qd, int64_t n_tiles)
{
    (void)n, (void)qd, (void)n_tiles;
    return false;
}

bool oct_cuda_attention_rope_fits(int64_t m, int64_t d, int64_t n_tiles, const void *qkv,
                                  const void *k_cache, const void *v_cache)
{
    (void)m, (void)d, (void)n_tiles, (void)qkv, (void)k_cache, (void)v_cache;
    return false;
}

oct_status oct_cuda_attention(const uint16_t *qkv, int64_t m, int64_t n_q, int64_t n_kv, int64_t d,
                              const int32_t *row_seq, const int32_t *row_pos,
                              const int32_t *block_tables, int64_t max_blocks, int64_t block_size,
                              int kv_dtype, const void *k_cache, const void *v_cache, float k_scale,
                              float v_scale, float scale, int64_t sliding_window, int64_t max_ctx,
                              const int32_t *tiles, int64_t n_tiles, const int32_t *drows,
                              int64_t n_drows, uint16_t *out, const oct_cuda_act *act,
                              const oct_cuda_rope *rope, void *ws, size_t ws_bytes, void *stream)
{
    (void)rope;
    (void)qkv, (void)m, (void)n_q, (void)n_kv, (void)d, (void)row_seq, (void)row_pos;
    (void)block_tables, (void)max_blocks, (void)block_size, (void)kv_dtype, (void)k_cache;
    (void)v_cache, (void)k_scale, (void)v_scale, (void)scale, (void)sliding_window;
    (void)max_ctx, (void)tiles, (void)n_tiles, (void)drows, (void)n_drows, (void)out, (void)act;
    (void)ws;
    (void)ws_bytes, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_silu_mul(const uint16_t *gu, int64_t m, int64_t I, const oct_cuda_act *out,
                             void *stream)
{
    (void)gu, (void)m, (void)I, (void)out, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_gemm_bf16(oct_cuda_ctx *ctx, int64_t m, int64_t n, int64_t k, const uint16_t *x,
                              const uint16_t *w, const float *bias, float out_mult, void *y,
                              bool y_f32, void *stream)
{
    (void)ctx, (void)m, (void)n, (void)k, (void)x, (void)w, (void)bias, (void)out_mult;
    (void)y, (void)y_f32, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

size_t oct_cuda_sample_workspace_bytes(int64_t n, int64_t V)
{
    (void)n, (void)V;
    return 0;
}

oct_status oct_cuda_sample(const float *logits, int64_t n, int64_t V,
                           const oct_cuda_sample_params *p, int32_t *ids, float *logprob, void *ws,
                           size_t ws_bytes, void *stream)
{
    (void)logits, (void)n, (void)V, (void)p, (void)ids, (void)logprob, (void)ws, (void)ws_bytes;
    (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_moe_route(const void *logits, bool f32, int64_t n, int64_t E, int64_t k,
                              bool norm, int32_t *sel, float *wts, int32_t *counts, void *stream)
{
    (void)logits, (void)f32, (void)n, (void)E, (void)k, (void)norm, (void)sel, (void)wts;
    (void)counts, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_moe_align(const int32_t *sel, int64_t R, int64_t k, int64_t E, int tile_rows,
                              int32_t *counts, int32_t *tiles, int32_t *n_tiles, int32_t *row_tok,
                              int32_t *pair_row, void *stream)
{
    (void)sel, (void)R, (void)k, (void)E, (void)tile_rows, (void)counts, (void)tiles;
    (void)n_tiles, (void)row_tok, (void)pair_row, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

int oct_cuda_moe_wgmma = 1;
int oct_cuda_attn_decode_tc = -1;
int oct_cuda_attn_decode_staged = -1;

oct_status oct_cuda_moe_gemm(const oct_cuda_moe_gemm_args *args, void *stream)
{
    (void)args, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_moe_combine(const uint16_t *eo, const int32_t *pair_row, const float *wts,
                                int64_t n, int64_t k, int64_t H, uint16_t *y, void *stream)
{
    (void)eo, (void)pair_row, (void)wts, (void)n, (void)k, (void)H, (void)y, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_moe_route_sort(const void *logits, bool f32, int64_t n, int64_t E, int64_t k,
                                   bool norm, int tile_rows, int32_t *sel, float *wts,
                                   int32_t *counts, int32_t *tiles, int32_t *n_tiles,
                                   int32_t *row_tok, int32_t *pair_row, const oct_cuda_moe_in *in,
                                   void *stream)
{
    (void)logits, (void)f32, (void)n, (void)E, (void)k, (void)norm, (void)tile_rows, (void)sel;
    (void)wts, (void)counts, (void)tiles, (void)n_tiles, (void)row_tok, (void)pair_row;
    (void)in, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_moe_router(const uint16_t *x, const uint16_t *w, int64_t n, int64_t E,
                               int64_t K, float *logits, void *stream)
{
    (void)x, (void)w, (void)n, (void)E, (void)K, (void)logits, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

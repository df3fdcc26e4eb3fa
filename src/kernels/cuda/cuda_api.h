/* cuda_api.h — the C-only face of the .cu files in src/kernels/cuda/.  Host C code includes
 * this, never CUDA headers.  Every function exists in both builds: the CUDA
 * build implements it in .cu files (extern "C"), the CPU-only build links
 * stub.c, which returns OCT_ERR_UNSUPPORTED. */
#ifndef OCTET_CUDA_API_H
#define OCTET_CUDA_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "octet.h"

/* Whether `name` is an item of the comma-separated `list` (environment knobs
 * that name ops: OCTET_CUDA_OPS_PDL, OCTET_CUDA_SKIP). */
static inline bool oct_cuda_listed(const char *list, const char *name)
{
    const size_t len = strlen(name);
    for (const char *p = list; len > 0 && (p = strstr(p, name)) != NULL; p += len)
        if ((p == list || p[-1] == ',') && (p[len] == ',' || p[len] == '\0'))
            return true;
    return false;
}

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices; OCT_ERR_UNSUPPORTED in a CPU-only build. */
oct_status oct_cuda_device_count(int *count);

/* True when built with CUDA and at least one device is present. */
bool oct_cuda_available(void);

/* Device memory for host-side C callers (the registry's CUDA kernel,
 * kernels/cuda/registry_kernel.c).  The copies are synchronous and ordered on
 * the legacy default stream, after the kernels enqueued there. */
oct_status oct_cuda_malloc(void **out, size_t bytes);
void oct_cuda_free(void *p);
oct_status oct_cuda_memcpy_h2d(void *dst, const void *src, size_t bytes);
oct_status oct_cuda_memcpy_d2h(void *dst, const void *src, size_t bytes);
oct_status oct_cuda_memzero(void *dst, size_t bytes);

/* ---- FP8 kernels (docs/KERNELS_CUDA.md) ----
 * Every pointer below is device memory; `stream` is a cudaStream_t (NULL: the
 * legacy default stream).  Calls are asynchronous: OCT_OK means the work was
 * enqueued.  Activations and outputs are bf16 (uint16 bit patterns) row-major;
 * FP8 operands are E4M3FN codes; the numerics are those of docs/NUMERICS.md. */

/* Per-token dynamic quantization: x [m,k] bf16 -> q [m,k] codes, scale [m]
 * (scale = max(min(amax,ub)/448, 1/(448*512)), codes = sat RNE(x / scale); ub <= 0:
 * no bound).  Bit-identical to oct_quant_rows on the widened input. */
oct_status oct_cuda_quant_rows_bf16(const void *x, int64_t m, int64_t k, float ub, void *q,
                                    float *scale, void *stream);

/* 1x128 groups: scale [m, ceil(k/128)]; k % 8 == 0 and x 16-byte aligned, else
 * OCT_ERR_UNSUPPORTED.  Bit-identical to oct_quant_groups. */
oct_status oct_cuda_quant_groups_bf16(const void *x, int64_t m, int64_t k, void *q, float *scale,
                                      void *stream);

/* Dynamic per-tensor: one scale for all n elements (a grid-wide amax, then the
 * codes), scale = one device float; bit-identical to oct_quant_tensor (codes =
 * sat RNE(x * (1/scale))). */
oct_status oct_cuda_quant_tensor_bf16(const void *x, int64_t n, void *q, float *scale,
                                      void *stream);

/* Static scale (a checkpoint's input_scale, host value): as oct_quant_static. */
oct_status oct_cuda_quant_static_bf16(const void *x, int64_t n, float scale, void *q, void *stream);

/* MX 1x32 (OCP recipe): E8M0 exponents e8 [m, k/32]; k % 32 == 0 (else
 * OCT_ERR_UNSUPPORTED).  Bit-identical to oct_quant_mx(E4M3FN, OCT_MX_OCP). */
oct_status oct_cuda_quant_mx_bf16(const void *x, int64_t m, int64_t k, void *q, uint8_t *e8,
                                  void *stream);

/* Fused producers of per-token FP8 activations (codes [m,k], scale [m], the
 * rule of oct_quant_rows applied to the f32 values, never rounded to bf16):
 *   RMSNorm:   y = w * (x * r), r = 1/sqrtf(mean(x^2) + eps), x [m,k], w [k] bf16
 *              (the sum of squares in double, as the CPU model's rmsnorm sums it)
 *   SiLU-mul:  y = g / (1 + expf(-g)) * u, gu [m, 2k] = gate | up halves (vLLM) */
oct_status oct_cuda_rmsnorm_quant_rows_bf16(const void *x, const void *w, int64_t m, int64_t k,
                                            float eps, float ub, void *q, float *scale,
                                            void *stream);
oct_status oct_cuda_silu_mul_quant_rows_bf16(const void *gu, int64_t m, int64_t k, float ub,
                                             void *q, float *scale, void *stream);

/* Small-M W8A8 streaming kernel, any m (weights re-read per 64 tokens):
 * y [m,n] bf16 = sa * (sw * sum_k a[m,k] w[n,k]) for kind OCT_SCALE_ROW (sa [m],
 * sw [n]); OCT_SCALE_BLOCK128: sa [m, k/128], sw [ceil(n/128), k/128], each K
 * block scaled inside the sum.  Needs k % 128 == 0 and 16-byte aligned a and w
 * (else OCT_ERR_UNSUPPORTED). */
oct_status oct_cuda_gemv_w8a8(int64_t m, int64_t n, int64_t k, const uint8_t *a, const float *sa,
                              const uint8_t *w, const float *sw, oct_scale_kind kind, void *y,
                              void *stream);

/* A context: cuBLASLt handle, workspace and activation scratch.  Not
 * thread-safe: one per thread / stream. */
typedef struct oct_cuda_ctx oct_cuda_ctx;

/* AUTO: by M and, beyond the streaming kernel's range, whichever of octet's
 * Hopper GEMM (its tile shapes) and cuBLASLt measured fastest on the first call
 * of each shape; GEMV, LT, WGMMA force one. */
enum {
    OCT_CUDA_PATH_AUTO = 0,
    OCT_CUDA_PATH_GEMV = 1,
    OCT_CUDA_PATH_LT = 2,
    OCT_CUDA_PATH_WGMMA = 3
};

oct_status oct_cuda_ctx_create(oct_cuda_ctx **out);
void oct_cuda_ctx_free(oct_cuda_ctx *ctx);
/* Allocates the activation scratch for calls up to m x k now (a call that needs
 * more grows it with cudaMalloc, which a CUDA graph capture forbids). */
oct_status oct_cuda_ctx_reserve(oct_cuda_ctx *ctx, int64_t max_m, int64_t max_k);
/* Tuning knobs: "gemv_max_m" (auto path: the streaming kernel up to this M, on an
 * sm_90 device as one candidate of a per-shape measured choice against octet's
 * Hopper GEMM and cuBLASLt, and the default while a stream is captured; also the
 * OCTET_CUDA_GEMV_MAX_M environment variable; "gemv_max_m_block" the same for
 * 1x128 / 128x128 block scales), "gemv_fused_max_m" /
 * "gemv_fused_max_mk" (per-token streaming path: quantization fused into one
 * persistent kernel up to this M and m*k; OCTET_CUDA_GEMV_FUSED_MAX_M),
 * "gemv_persist" (0: beyond that, the plain streaming kernel even where the
 * persistent one would split the tiles evenly),
 * "gemv_fused_any_grid" (1: fused even when blocks get one tile;
 * OCTET_CUDA_GEMV_FUSED_ANY_GRID), "gemv_evict_first"
 * (L2 evict_first policy for streamed weights), "gemv_tma", "gemv_max_ctas"
 * (testing), "lt_block_mn_major" (1: cuBLASLt wants VEC128 activation scales as
 * [k/128][m]), "wgmma" (0: the auto path never uses octet's Hopper GEMM; also
 * OCTET_CUDA_WGMMA=0), "wgmma_cfg" (> 0: wherever the auto path measures its
 * choice (per-token or block scales, from one token on sm_90), it runs tile shape wgmma_cfg - 1;
 * tests), "large_gemv" (1: the streaming kernel wherever the measured choice may
 * take it, up to 64 tokens; tests), "quant_bulk" (0: the activation quantizers
 * never use the sm_90 bulk-copy kernel; 2: always where it can run),
 * "quant_pdl" (0: the quantizers are plain launches, not programmatic dependent
 * ones; the last two are process-wide). */
oct_status oct_cuda_ctx_set(oct_cuda_ctx *ctx, const char *key, int64_t value);
/* Name of the kernel(s) the last call used, for logs ("quant_rows+gemv_w8a8_row"). */
const char *oct_cuda_ctx_last_kernel(const oct_cuda_ctx *ctx);

/* FP8 linear with dynamic activation quantization: x [m,k] bf16 -> y [m,n] bf16.
 * kind OCT_SCALE_ROW: per-token activations (bound ub), per-channel weights sw [n];
 * OCT_SCALE_BLOCK128: 1x128 activation groups, 128x128 weight blocks
 * sw [ceil(n/128), ceil(k/128)].  path: OCT_CUDA_PATH_*. */
oct_status oct_cuda_linear_fp8_dyn(oct_cuda_ctx *ctx, int64_t m, int64_t n, int64_t k,
                                   const void *x, const uint8_t *w, oct_scale_kind kind,
                                   const float *sw, float ub, void *y, int path, void *stream);

/* Pre-quantized FP8 GEMM y [m,n] bf16 = a [m,k] x w [n,k]^T, scales as
 * oct_scaled_mm_f32 for TENSOR x TENSOR, ROW x ROW, BLOCK128 x BLOCK128. */
oct_status oct_cuda_gemm_fp8(oct_cuda_ctx *ctx, int64_t m, int64_t n, int64_t k, const uint8_t *a,
                             oct_scale_kind ka, const float *sa, const uint8_t *w,
                             oct_scale_kind kw, const float *sw, void *y, int path, void *stream);

/* W8A16: x [m,k] bf16, FP8 weights w [n,k] with per-channel scales sw [n] decoded
 * exactly to bf16 in registers (for GPUs without FP8 tensor cores, sm_80+):
 * y [m,n] bf16 = sw * sum_k x w.  k % 128 == 0. */
oct_status oct_cuda_gemv_w8a16(int64_t m, int64_t n, int64_t k, const void *x, const uint8_t *w,
                               const float *sw, void *y, void *stream);

/* ---- forward-pass ops (docs/KERNELS_CUDA.md "Forward-pass ops") ----
 * The device side of a decoder forward pass (src/model/forward.c and the CPU
 * attention are the reference math).  Device pointers; activations are bf16 bit
 * patterns (RNE); the residual stream x is f32; the math is f32 (sums of squares
 * in double).  Every call is asynchronous on `stream` (a cudaStream_t, NULL: the
 * legacy default stream) and CUDA-graph capturable: no allocation, no
 * synchronization, no host copies; workspaces come from the caller.  A bad shape
 * or pointer is OCT_ERR_INVALID_ARG, a shape the kernels do not cover
 * OCT_ERR_UNSUPPORTED, a CUDA error OCT_ERR_INTERNAL; each failure leaves its
 * text in oct_cuda_ops_last_error().  Stream-ordered: nothing checks device
 * values (token ids, positions, slots) -- the host validates them; what a bad
 * one gives is written on each op. */

/* Text of the last failed forward-pass op call on this thread ("" if none). */
const char *oct_cuda_ops_last_error(void);

/* x [n,H] f32 = f32(table[tok[t]]) * mult (mult == 1: an exact copy); table
 * [V,H] bf16.  An id outside [0, V) writes a NaN row. */
oct_status oct_cuda_embed(const int32_t *tok, int64_t n, const uint16_t *table, int64_t V,
                          int64_t H, float mult, float *x, void *stream);

/* Where a producer (rmsnorm, silu-mul) writes its rows [m,k]. */
enum {
    OCT_CUDA_ACT_BF16 = 0,         /* y [m,k] bf16 */
    OCT_CUDA_ACT_FP8_ROW = 1,      /* q [m,k] E4M3FN, scale [m]: oct_quant_rows with bound ub */
    OCT_CUDA_ACT_FP8_GROUP128 = 2, /* q [m,k], scale [m, ceil(k/128)]: oct_quant_groups */
    OCT_CUDA_ACT_FP8_STATIC = 3,   /* q [m,k] = sat RNE(v * (1/static_scale)): oct_quant_static */
    /* q [m,k], scale [1]: one dynamic scale over all m rows, the codes of
     * oct_cuda_quant_tensor_bf16 on the bf16 rows (SiLU-mul only; sync set,
     * m <= OCT_CUDA_ACT_SPLIT_ROWS: every block meets at sync[0..]) */
    OCT_CUDA_ACT_FP8_TENSOR = 4
};
typedef struct oct_cuda_act {
    int kind;           /* OCT_CUDA_ACT_* */
    uint16_t *y;        /* BF16: [m,k] */
    uint8_t *q;         /* FP8 kinds: codes [m,k] */
    float *scale;       /* FP8_ROW: [m]; FP8_GROUP128: [m, ceil(k/128)]; FP8_TENSOR: [1] */
    float ub;           /* FP8_ROW: activation upper bound (<= 0: none) */
    float static_scale; /* FP8_STATIC: the checkpoint's input_scale (> 0, finite) */
    /* SiLU-mul of up to OCT_CUDA_ACT_SPLIT_ROWS rows: NULL, one block per row;
     * else OCT_CUDA_ACT_SYNC_WORDS zeroed words per row (left zero), and each
     * row is split over several blocks that meet there for its amax. */
    unsigned *sync;
} oct_cuda_act;
#define OCT_CUDA_ACT_SPLIT_ROWS 16
#define OCT_CUDA_ACT_SYNC_WORDS 4

/* Per output row i < m, source row r = rows ? rows[i] : i: if add, first
 * x[r] += f32(add[r]) * add_mult in place (the residual add; add [.,k] bf16),
 * then row i of out = w * (x[r] * rr), rr = 1/sqrtf((float)(sum x^2 / k) + eps),
 * the sum in double (forward.c's rmsnorm).  w [k] f32.  rows != NULL needs
 * add == NULL (two output rows may share a source row). */
oct_status oct_cuda_rmsnorm(float *x, const uint16_t *add, float add_mult, const float *w,
                            const int32_t *rows, int64_t m, int64_t k, float eps,
                            const oct_cuda_act *out, void *stream);

/* In place on qkv [m, (n_q + 2 n_kv) d] bf16 (row: q heads | k heads | v heads):
 * each q and k head optionally rmsnorm'd per head (q_norm / k_norm [d] f32, NULL:
 * none; Qwen3), then HF rotate_half RoPE at pos[t] (ang = (float)pos * inv_freq[i],
 * inv_freq [d/2], accurate cosf / sinf).  d even, d <= 512. */
oct_status oct_cuda_rope_qk(uint16_t *qkv, int64_t m, int64_t n_q, int64_t n_kv, int64_t d,
                            const int32_t *pos, const float *inv_freq, const float *q_norm,
                            const float *k_norm, float eps, void *stream);

/* The paged KV cache of one layer: K and V arrays [n_blocks][n_kv][block_size][d]
 * of bf16 or E4M3FN codes (value = decode(code) * k_scale / v_scale). */
enum { OCT_CUDA_KV_BF16 = 0, OCT_CUDA_KV_E4M3 = 1 };

/* oct_cuda_rope_qk, then oct_cuda_kv_store of the result, in one kernel (the
 * same values: the cache receives the bf16 k that rope_qk leaves in qkv). */
oct_status oct_cuda_rope_qk_store(uint16_t *qkv, int64_t m, int64_t n_q, int64_t n_kv, int64_t d,
                                  const int32_t *pos, const float *inv_freq, const float *q_norm,
                                  const float *k_norm, float eps, const int32_t *slot,
                                  int64_t block_size, int kv_dtype, void *k_cache, void *v_cache,
                                  float k_scale, float v_scale, void *stream);

/* Stores the k and v heads of each qkv row at slot[t] = block * block_size +
 * offset (slot < 0: the row is skipped, a padding row).  E4M3: sat RNE(x /
 * scale) with IEEE division (vLLM; the CPU kv_store); BF16: the bits. */
oct_status oct_cuda_kv_store(const uint16_t *qkv, int64_t m, int64_t n_q, int64_t n_kv, int64_t d,
                             const int32_t *slot, int64_t block_size, int kv_dtype, void *k_cache,
                             void *v_cache, float k_scale, float v_scale, void *stream);

/* rope (NULL: none): RoPE and the KV store inside the attention call, for a call
 * that oct_cuda_attention_rope_fits and whose every row is the only row of its
 * sequence: qkv holds q and k un-roped; each row's q and k heads are rotated
 * (with Qwen3's q/k norm) as oct_cuda_rope_qk rotates them, and its k and v go
 * into the cache at its position as oct_cuda_kv_store puts them (so a row's
 * block-table entry for that position must be set, as for the store); qkv is
 * not written; rows at or past max_ctx (NaN rows) store nothing.  The outputs
 * and the cache are byte-identical to oct_cuda_rope_qk_store (those rows'
 * slots -1) followed by the call without rope.  A call that does not fit:
 * OCT_ERR_UNSUPPORTED; E4M3 scales as oct_cuda_kv_store checks them. */
typedef struct oct_cuda_rope {
    const float *inv_freq;        /* [d/2], device */
    const float *q_norm, *k_norm; /* [d] or NULL, device */
    float eps;
} oct_cuda_rope;
/* Causal paged attention.  Row t is the query at position p = row_pos[t] of
 * sequence row_seq[t] (whose K/V for 0..p are in the cache, blocks
 * block_tables[seq * max_blocks + j / block_size]); query head h reads KV head
 * h / (n_q / n_kv); s_j = (q . k_j) * scale for j in [j0, p], j0 = p -
 * sliding_window + 1 when sliding_window > 0 and p >= sliding_window, else 0;
 * out [m, n_q d] bf16 = sum softmax(s)_j v_j (f32, max subtracted).  p must be
 * < max_ctx (the workspace's size); a row with p < 0 writes zeros, one with
 * p >= max_ctx NaNs.  n_q % n_kv == 0, d % 4 == 0, d <= 256.  ws: at least
 * oct_cuda_attention_workspace_bytes(m, n_q, d, max_ctx) bytes (16-byte aligned;
 * may be NULL when that is 0; independent of max_ctx), zeroed before its first
 * call (oct_cuda_memzero): it holds counters that every call leaves zero, so
 * calls that share it must run in stream order.
 *
 * Two kernels share the rows.  n_tiles == 0: flash decoding over all m rows
 * (tiles and drows unused; the CUDA-graph decode path).  n_tiles > 0: tiles and
 * drows are DEVICE copies of what oct_cuda_attention_plan produced for these
 * rows: a tensor-core kernel (FlashAttention-2 style, bf16 mma, P rounded to
 * bf16 for the PV product; no workspace) runs the query tiles, flash decoding
 * the n_drows rows of drows (partitioned for n_drows rows; ws as above still
 * covers it).  Where the tensor-core kernel does not apply (head_dim other than
 * 64 / 128, a qkv / cache / out pointer not 16-byte aligned, max_ctx or
 * block_size over 2^30), flash decoding runs all m rows.  A tile's rows at
 * p >= max_ctx write NaNs as well; tiles read no key at or past max_ctx.
 * OCTET_CUDA_ATTN=decode (read once) keeps every row on flash decoding;
 * OCTET_CUDA_ATTN_HEADS=1 gives each tensor-core block one query head (default:
 * two of a GQA group, sharing the K/V tiles, where the group is even);
 * OCTET_CUDA_ATTN_WARP_HEADS=1 gives each warp of such a bf16 block one of the
 * two heads (default: both, sharing each K/V fragment);
 * OCTET_CUDA_ATTN_PART_MIN=P makes each flash-decoding partition at least P
 * positions (default: one block step, 64).
 *
 * act (NULL, or kind OCT_CUDA_ACT_BF16: out as above): FP8_ROW or FP8_GROUP128
 * codes and scales of each row, as oct_quant_rows / oct_quant_groups would
 * make them from out, for a call that oct_cuda_attention_act_fits; out is then
 * not written (a scratch in ws holds the bf16 rows).  Any other kind, or a call
 * that does not fit: OCT_ERR_UNSUPPORTED. */
size_t oct_cuda_attention_workspace_bytes(int64_t m, int64_t n_q, int64_t d, int64_t max_ctx);
oct_status oct_cuda_attention(const uint16_t *qkv, int64_t m, int64_t n_q, int64_t n_kv, int64_t d,
                              const int32_t *row_seq, const int32_t *row_pos,
                              const int32_t *block_tables, int64_t max_blocks, int64_t block_size,
                              int kv_dtype, const void *k_cache, const void *v_cache, float k_scale,
                              float v_scale, float scale, int64_t sliding_window, int64_t max_ctx,
                              const int32_t *tiles, int64_t n_tiles, const int32_t *drows,
                              int64_t n_drows, uint16_t *out, const oct_cuda_act *act,
                              const oct_cuda_rope *rope, void *ws, size_t ws_bytes, void *stream);
/* Whether oct_cuda_attention may take rope for m rows (1 <= m <= 64, no tiles)
 * of head size d with these qkv and cache pointers: the tensor-core decode
 * kernel's register path runs them (head_dim 128, 16-byte aligned qkv and
 * caches, oct_cuda_attn_decode_tc and _staged not forcing other kernels). */
bool oct_cuda_attention_rope_fits(int64_t m, int64_t d, int64_t n_tiles, const void *qkv,
                                  const void *k_cache, const void *v_cache);
/* Whether a call of n rows of n_q d = qd elements with n_tiles tiles may write
 * an FP8 act: no tiles, 1 <= n <= 64, qd % 8 == 0 and qd <= 8192. */
bool oct_cuda_attention_act_fits(int64_t n, int64_t qd, int64_t n_tiles);

/* Query rows per tile of the tensor-core attention kernel, and the shortest run
 * of consecutive positions that becomes tiles. */
#define OCT_CUDA_ATTN_TILE 64
#define OCT_CUDA_ATTN_MIN_RUN 16

/* Splits a batch's rows for attention (host memory in and out; compiled in
 * every build).  Runs of at least OCT_CUDA_ATTN_MIN_RUN consecutive batch rows
 * that are consecutive positions of one sequence (row_seq equal, row_pos rising
 * by 1) become query tiles of up to OCT_CUDA_ATTN_TILE rows: tiles[2i] its first
 * row, tiles[2i+1] its row count.  Every other row is listed in drows
 * (ascending).  tiles has room for 2*m ints, drows for m.  Returns the number of
 * tiles; *n_drows the number of drows.  Rows with row_pos < 0 (padding) go to
 * drows.  Positions are not checked against max_ctx (the kernels handle those
 * rows).  m < 0, m > INT32_MAX or a NULL pointer (arrays may be NULL when m is
 * 0): -1, *n_drows 0 (when n_drows is not NULL). */
int64_t oct_cuda_attention_plan(const int32_t *row_seq, const int32_t *row_pos, int64_t m,
                                int32_t *tiles, int32_t *drows, int64_t *n_drows);

/* gu [m, 2I] bf16 = gate | up halves -> v = g / (1 + expf(-g)) * u, written per
 * out ([m, I]). */
oct_status oct_cuda_silu_mul(const uint16_t *gu, int64_t m, int64_t I, const oct_cuda_act *out,
                             void *stream);

/* BF16 GEMM through cuBLASLt (the context's handle and workspace): y [m,n] =
 * (x [m,k] w [n,k]^T + bias [n]) * out_mult, f32 accumulation, y bf16 (y_f32
 * false) or f32 (logits).  bias may be NULL; a bf16 y with a bias needs
 * out_mult == 1 (else OCT_ERR_UNSUPPORTED). */
oct_status oct_cuda_gemm_bf16(oct_cuda_ctx *ctx, int64_t m, int64_t n, int64_t k, const uint16_t *x,
                              const uint16_t *w, const float *bias, float out_mult, void *y,
                              bool y_f32, void *stream);

/* ---- the MoE block (ops_moe.cu, gemm_moe.cu) ----
 * Device pointers.  route: logits [n, E] (f32, else bf16) -> the top-k experts
 * sel [n, k] and their softmax weights wts [n, k] (over all E, or over the k
 * when norm), ties to the lower expert; counts [E] += the rows routed to each
 * (zero before the first call; align leaves them zero). */
#define OCT_CUDA_MOE_MAX_EXPERTS 1024
#define OCT_CUDA_MOE_MAX_TOPK 32
/* A decode step's router: logits [n, E] f32 = x [n, K] bf16 . w [E, K]^T bf16,
 * f32 sums, one block per expert holding its row in registers (requested
 * before the wait for the kernel before it: launched with programmatic
 * serialization).  n <= OCT_CUDA_MOE_ROUTER_MAX_TOKENS, K % 8 == 0 and
 * K <= OCT_CUDA_MOE_ROUTER_MAX_K, x and w 16-byte aligned (else
 * OCT_ERR_UNSUPPORTED: the caller's GEMM does it). */
#define OCT_CUDA_MOE_ROUTER_MAX_TOKENS 16
#define OCT_CUDA_MOE_ROUTER_MAX_K 8192
oct_status oct_cuda_moe_router(const uint16_t *x, const uint16_t *w, int64_t n, int64_t E,
                               int64_t K, float *logits, void *stream);
oct_status oct_cuda_moe_route(const void *logits, bool f32, int64_t n, int64_t E, int64_t k,
                              bool norm, int32_t *sel, float *wts, int32_t *counts, void *stream);
/* The R = n k (token, slot) pairs of sel in expert order: row_tok [R] the token
 * of each sorted row, pair_row [R] the sorted row of each pair, and the tile
 * list tiles [max][4] = (expert, first row, rows <= tile_rows, 0) with its
 * length in *n_tiles (device).  max: at most min(R, ceil(R / tile_rows) + E). */
oct_status oct_cuda_moe_align(const int32_t *sel, int64_t R, int64_t k, int64_t E, int tile_rows,
                              int32_t *counts, int32_t *tiles, int32_t *n_tiles, int32_t *row_tok,
                              int32_t *pair_row, void *stream);
/* The block's input quantized by the routing kernel itself: x [n, k] bf16 ->
 * codes q [n, k] and scales exactly as oct_cuda_quant_rows_bf16 (kind
 * OCT_CUDA_ACT_FP8_ROW, bound ub; scale [n]), oct_cuda_quant_groups_bf16
 * (FP8_GROUP128; [n, k/128]) or oct_cuda_quant_tensor_bf16 (FP8_TENSOR; [1]).
 * k % 128 == 0, x 16-byte and q 8-byte aligned, n k <= OCT_CUDA_MOE_FUSED_IN_MAX. */
typedef struct oct_cuda_moe_in {
    int kind;
    const uint16_t *x;
    int64_t k;
    float ub;
    uint8_t *q;
    float *scale;
} oct_cuda_moe_in;
#define OCT_CUDA_MOE_FUSED_IN_MAX 65536
/* route then align, as one kernel for up to OCT_CUDA_MOE_FUSED_ROUTE_MAX
 * tokens (counts untouched), as the two above beyond.  in (NULL: none): the
 * quantization above, in the same kernel (fused route only). */
#define OCT_CUDA_MOE_FUSED_ROUTE_MAX 256
oct_status oct_cuda_moe_route_sort(const void *logits, bool f32, int64_t n, int64_t E, int64_t k,
                                   bool norm, int tile_rows, int32_t *sel, float *wts,
                                   int32_t *counts, int32_t *tiles, int32_t *n_tiles,
                                   int32_t *row_tok, int32_t *pair_row, const oct_cuda_moe_in *in,
                                   void *stream);
/* The grouped expert GEMM over a tile list: y [sorted row r, n] (row stride
 * y_rs) = A [row(r), k] x W_e [n, k]^T of its tile's expert e, row(r) =
 * a_rows[r] or r (a_rows NULL).  FP8 (E4M3 codes; kind ROW: y = sa[row(r) *
 * sa_rs] * sw[c] * dot, sa_rs = 0 for one per-tensor scale; BLOCK128:
 * sa[row(r) * sa_rs + kb * sa_ks] x sw [ceil(n/128), k/128] per K block) or
 * BF16 (no scales).  w [E] / sw [E]: device arrays of the experts' device
 * pointers.  k * element bytes % 128 == 0 and a 16-byte aligned a, else
 * OCT_ERR_UNSUPPORTED. */
typedef struct oct_cuda_moe_gemm_args {
    const int32_t *tiles, *n_tiles; /* align's list and its length */
    int64_t max_tiles;              /* grid rows: align's bound */
    int tile_rows;                  /* align's tile_rows: 8, 16 (streaming), 32, 64 (tiled) */
    int64_t n, k;
    bool bf16;
    oct_scale_kind kind; /* FP8: ROW or BLOCK128 */
    const void *a;
    const int32_t *a_rows;
    int64_t a_rows_max; /* rows of a */
    const float *sa;
    int64_t sa_rs, sa_ks;
    const void *const *w;
    const float *const *sw;
    uint16_t *y;
    int64_t y_rs;
    /* Streaming tiles (8 or 16 rows): launched with programmatic serialization,
     * the tile list and the first weight chunks read before the wait for the
     * kernel before it.  Only where the list's writer finished before that
     * kernel started (an ordinary launch lies between them). */
    bool pdl;
} oct_cuda_moe_gemm_args;
oct_status oct_cuda_moe_gemm(const oct_cuda_moe_gemm_args *args, void *stream);
/* 0: FP8 tiles of 32 or 64 rows on the mma.sync kernel even on sm_90, where
 * they take wgmma (process-wide; tests). */
extern int oct_cuda_moe_wgmma;
/* 0: decode attention on the CUDA-core kernel even where the tensor-core one
 * fits (head size 128); 1: the tensor-core one; -1 (default): from
 * OCTET_CUDA_ATTN_TC (on unless "0").  Process-wide; tests and A/B runs. */
extern int oct_cuda_attn_decode_tc;
/* The tensor-core decode kernel's K/V reads: 1 staged through a shared-memory
 * ring (cp.async, several tiles in flight per warp), 0 into registers (one tile
 * ahead); -1 (default): from OCTET_CUDA_ATTN_STAGED, else staged for calls of
 * more than 64 rows.  Process-wide; tests and A/B runs. */
extern int oct_cuda_attn_decode_staged;
/* y [n, H] bf16 = sum_j wts[t, j] * eo[pair_row[t, j]] (f32 sums, slot order). */
oct_status oct_cuda_moe_combine(const uint16_t *eo, const int32_t *pair_row, const float *wts,
                                int64_t n, int64_t k, int64_t H, uint16_t *y, void *stream);

/* Per-row sampling parameters (device memory, one per row). */
typedef struct oct_cuda_sample_params {
    float temperature; /* 0: greedy */
    float top_p;       /* (0, 1]; 1: off */
    float min_p;       /* [0, 1]; 0: off */
    int32_t top_k;     /* <= 0: off */
    uint64_t seed;
    uint64_t step;   /* the RNG counter: (seed, step, stream) names one draw */
    uint64_t stream; /* e.g. a request's, or its row's */
} oct_cuda_sample_params;

/* ids [n] from logits [n,V] f32.  temperature 0: argmax, lowest id on ties.
 * Else probabilities expf((l - max) / T), then top-k, min-p (p >= min_p p_max)
 * and top-p (the smallest prefix, by descending probability and ascending id,
 * whose mass reaches top_p of what is left), in src/engine/sampler.c's order,
 * and one draw from a Philox4x32-10 stream keyed by (seed, step, stream) -- not the
 * CPU sampler's random stream.  logprob [n] (NULL: not written): the chosen
 * id's log-softmax at temperature 1.  A row with a NaN or +Inf logit gets id -1
 * (and a NaN logprob): the host sampler's non-finite error.  ws: workspace_bytes of it (0 today: ws
 * may be NULL). */
size_t oct_cuda_sample_workspace_bytes(int64_t n, int64_t V);
oct_status oct_cuda_sample(const float *logits, int64_t n, int64_t V,
                           const oct_cuda_sample_params *p, int32_t *ids, float *logprob, void *ws,
                           size_t ws_bytes, void *stream);

#ifdef __cplusplus
}
#endif
#endif

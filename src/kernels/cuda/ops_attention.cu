// ops_attention.cu — the paged KV cache store and causal attention over it.
// Cache layout as the CPU attention's kv_index: per layer
// [n_blocks][n_kv][block_size][d], one head's rows contiguous within a block.
//
// oct_cuda_attention checks its arguments and splits the rows: query tiles of
// oct_cuda_attention_plan go to the tensor-core kernel
// (ops_attention_prefill.cu), the other rows to flash decoding
// (ops_attention_decode.cu).

#include "kernels/cuda/cuda_impl.h"

namespace
{

__device__ __forceinline__ float bf16f(uint32_t h)
{
    return __uint_as_float(h << 16);
}

// A block per (row, K or V head): blockIdx.y < n_kv a K head, else a V head.
__global__ void __launch_bounds__(128)
    kv_store_kernel(const uint16_t *__restrict__ qkv, int64_t n_q, int64_t n_kv, int64_t d,
                    const int32_t *__restrict__ slot, int64_t bs, int fp8, void *__restrict__ kc,
                    void *__restrict__ vc, float k_scale, float v_scale)
{
    const int64_t t = blockIdx.x, hh = blockIdx.y;
    const int64_t sl = slot[t];
    if (sl < 0)
        return;
    const int which = hh >= n_kv;
    const int64_t h = hh - which * n_kv;
    const uint16_t *src = qkv + t * (n_q + 2 * n_kv) * d + (n_q + hh) * d;
    const int64_t base = ((sl / bs * n_kv + h) * bs + sl % bs) * d;
    void *dst = which ? vc : kc;
    const float sc = which ? v_scale : k_scale;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
        if (fp8) {
            const float q = __fdiv_rn(bf16f(src[i]), sc); // vLLM: x / scale
            static_cast<uint8_t *>(dst)[base + i] = (uint8_t)oct_e4m3x2_sat(q, 0.0f);
        } else {
            static_cast<uint16_t *>(dst)[base + i] = src[i];
        }
    }
}

} // namespace

oct_status oct_cuda_kv_store_check(int64_t m, const int32_t *slot, int64_t block_size, int kv_dtype,
                                   const void *k_cache, const void *v_cache, float k_scale,
                                   float v_scale)
{
    if (m < 0 || block_size <= 0 || m > INT32_MAX || (m > 0 && (!slot || !k_cache || !v_cache)))
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "kv_store: m %lld, block %lld", (long long)m,
                                 (long long)block_size);
    if (kv_dtype != OCT_CUDA_KV_BF16 && kv_dtype != OCT_CUDA_KV_E4M3)
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "kv_store: KV dtype %d", kv_dtype);
    if (kv_dtype == OCT_CUDA_KV_E4M3 &&
        (!(k_scale > 0.0f) || !(v_scale > 0.0f) || isinf(k_scale) || isinf(v_scale)))
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "kv_store: scales %g, %g", (double)k_scale,
                                 (double)v_scale);
    return OCT_OK;
}

extern "C" oct_status oct_cuda_kv_store(const uint16_t *qkv, int64_t m, int64_t n_q, int64_t n_kv,
                                        int64_t d, const int32_t *slot, int64_t block_size,
                                        int kv_dtype, void *k_cache, void *v_cache, float k_scale,
                                        float v_scale, void *stream)
{
    if (n_q <= 0 || n_kv <= 0 || d <= 0 || (m > 0 && !qkv))
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG,
                                 "kv_store: m %lld, n_q %lld, n_kv %lld, d %lld", (long long)m,
                                 (long long)n_q, (long long)n_kv, (long long)d);
    const oct_status st =
        oct_cuda_kv_store_check(m, slot, block_size, kv_dtype, k_cache, v_cache, k_scale, v_scale);
    if (st != OCT_OK)
        return st;
    if (m == 0)
        return OCT_OK;
    if (2 * n_kv > 65535)
        return oct_cuda_ops_fail(OCT_ERR_UNSUPPORTED, "kv_store: %lld KV heads", (long long)n_kv);
    kv_store_kernel<<<dim3((unsigned)m, (unsigned)(2 * n_kv)), 128, 0, oct_cuda_stream(stream)>>>(
        qkv, n_q, n_kv, d, slot, block_size, kv_dtype == OCT_CUDA_KV_E4M3, k_cache, v_cache,
        k_scale, v_scale);
    return oct_cuda_ops_launched("kv_store");
}

extern "C" size_t oct_cuda_attention_workspace_bytes(int64_t m, int64_t n_q, int64_t d,
                                                     int64_t max_ctx)
{
    if (m <= 0 || n_q <= 0 || d <= 0 || max_ctx <= 0)
        return 0;
    return oct_cuda_attention_decode_ws_bytes(m, n_q, d);
}

namespace
{

oct_status attn_check(int64_t m, int64_t n_q, int64_t n_kv, int64_t d, int64_t block_size,
                      int64_t max_blocks, int64_t max_ctx, int kv_dtype, bool ptrs_ok,
                      int64_t n_tiles, int64_t n_drows, bool lists_ok)
{
    if (m < 0 || n_q <= 0 || n_kv <= 0 || d <= 0 || block_size <= 0 || max_blocks <= 0 ||
        max_ctx <= 0 || m > INT32_MAX || (m > 0 && !ptrs_ok))
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG,
                                 "attention: m %lld, n_q %lld, n_kv %lld, d %lld, block %lld, "
                                 "max_blocks %lld, max_ctx %lld",
                                 (long long)m, (long long)n_q, (long long)n_kv, (long long)d,
                                 (long long)block_size, (long long)max_blocks, (long long)max_ctx);
    if (n_tiles < 0 || n_tiles > m || n_drows < 0 || n_drows > m || !lists_ok)
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG,
                                 "attention: %lld tiles, %lld decode rows of %lld rows",
                                 (long long)n_tiles, (long long)n_drows, (long long)m);
    if (n_q % n_kv != 0)
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG,
                                 "attention: %lld query heads over %lld KV heads", (long long)n_q,
                                 (long long)n_kv);
    if (kv_dtype != OCT_CUDA_KV_BF16 && kv_dtype != OCT_CUDA_KV_E4M3)
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "attention: KV dtype %d", kv_dtype);
    if (max_ctx > max_blocks * block_size)
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG,
                                 "attention: max_ctx %lld > %lld blocks of %lld",
                                 (long long)max_ctx, (long long)max_blocks, (long long)block_size);
    if (d % 4 != 0 || d > 256)
        return oct_cuda_ops_fail(OCT_ERR_UNSUPPORTED,
                                 "attention: head_dim %lld (d %% 4 == 0, <= 256)", (long long)d);
    return OCT_OK;
}

oct_status decode_launch(const oct_attn_args &a, int64_t n, cudaStream_t st)
{
    const cudaError_t e = oct_cuda_attention_decode_launch(&a, n, st);
    if (e != cudaSuccess)
        return oct_cuda_ops_fail(OCT_ERR_INTERNAL, "attention: %s", cudaGetErrorString(e));
    return OCT_OK;
}

int bs_log2(int64_t bs)
{
    if (bs <= 0 || (bs & (bs - 1)) != 0)
        return -1;
    int s = 0;
    while (((int64_t)1 << s) < bs)
        s++;
    return s;
}

oct_attn_args attn_args(const uint16_t *qkv, int64_t n_q, int64_t n_kv, int64_t d,
                        const int32_t *row_seq, const int32_t *row_pos, const int32_t *block_tables,
                        int64_t max_blocks, int64_t block_size, bool fp8, const void *k_cache,
                        const void *v_cache, float k_scale, float v_scale, float scale,
                        int64_t sliding_window, int64_t max_ctx, uint16_t *out)
{
    oct_attn_args a = {};
    a.qkv = qkv;
    a.n_q = n_q;
    a.n_kv = n_kv;
    a.d = d;
    a.row_seq = row_seq;
    a.row_pos = row_pos;
    a.bt = block_tables;
    a.max_blocks = max_blocks;
    a.bs = block_size;
    a.bs_shift = bs_log2(block_size);
    a.fp8 = fp8;
    a.kc = k_cache;
    a.vc = v_cache;
    a.k_scale = k_scale;
    a.v_scale = v_scale;
    a.scale = scale;
    a.window = sliding_window;
    a.max_ctx = max_ctx;
    a.out = out;
    return a;
}

} // namespace

extern "C" oct_status
oct_cuda_attention(const uint16_t *qkv, int64_t m, int64_t n_q, int64_t n_kv, int64_t d,
                   const int32_t *row_seq, const int32_t *row_pos, const int32_t *block_tables,
                   int64_t max_blocks, int64_t block_size, int kv_dtype, const void *k_cache,
                   const void *v_cache, float k_scale, float v_scale, float scale,
                   int64_t sliding_window, int64_t max_ctx, const int32_t *tiles, int64_t n_tiles,
                   const int32_t *drows, int64_t n_drows, uint16_t *out, const oct_cuda_act *act,
                   const oct_cuda_rope *rope, void *ws, size_t ws_bytes, void *stream)
{
    const bool ptrs_ok = qkv && row_seq && row_pos && block_tables && k_cache && v_cache && out;
    const bool lists_ok = n_tiles == 0 || (tiles && (n_drows == 0 || drows));
    oct_status s = attn_check(m, n_q, n_kv, d, block_size, max_blocks, max_ctx, kv_dtype, ptrs_ok,
                              n_tiles, n_drows, lists_ok);
    if (s != OCT_OK)
        return s;
    const bool fp8 = kv_dtype == OCT_CUDA_KV_E4M3;
    const uintptr_t al = fp8 ? 3u : 7u;
    if (((uintptr_t)qkv & 7u) || ((uintptr_t)k_cache & al) || ((uintptr_t)v_cache & al))
        return oct_cuda_ops_fail(OCT_ERR_UNSUPPORTED, "attention: misaligned qkv or cache");
    oct_attn_args a =
        attn_args(qkv, n_q, n_kv, d, row_seq, row_pos, block_tables, max_blocks, block_size, fp8,
                  k_cache, v_cache, k_scale, v_scale, scale, sliding_window, max_ctx, out);
    a.tiles = tiles;
    a.n_tiles = n_tiles;
    a.act.kind = OCT_CUDA_ACT_BF16;
    if (act && act->kind != OCT_CUDA_ACT_BF16) { // decode rows write the FP8 input of o_proj
        if ((act->kind != OCT_CUDA_ACT_FP8_ROW && act->kind != OCT_CUDA_ACT_FP8_GROUP128) ||
            !act->q || !act->scale || ((uintptr_t)act->q & 7u) ||
            !oct_cuda_attention_act_fits(m, n_q * d, n_tiles))
            return oct_cuda_ops_fail(OCT_ERR_UNSUPPORTED,
                                     "attention: FP8 output (kind %d) of %lld rows, %lld tiles",
                                     act->kind, (long long)m, (long long)n_tiles);
        a.act = *act;
    }
    if (rope) { // RoPE and the KV store inside the decode kernel
        // the store's checks (scales above all); row_pos stands for the slots,
        // which the kernel derives from each row's position and block table
        if ((s = oct_cuda_kv_store_check(m, row_pos, block_size, kv_dtype, k_cache, v_cache,
                                         k_scale, v_scale)) != OCT_OK)
            return s;
        if (!rope->inv_freq || !oct_cuda_attention_rope_fits(m, d, n_tiles, qkv, k_cache, v_cache))
            return oct_cuda_ops_fail(OCT_ERR_UNSUPPORTED,
                                     "attention: RoPE inside a call of %lld rows, %lld tiles, "
                                     "head_dim %lld",
                                     (long long)m, (long long)n_tiles, (long long)d);
        a.rope = true;
        a.rope_args = *rope;
    }
    cudaStream_t st = oct_cuda_stream(stream);
    if (m == 0 || n_tiles == 0 || !oct_cuda_attention_prefill_fits(&a)) {
        s = oct_cuda_attention_decode_setup(&a, nullptr, m, ws, ws_bytes);
        return s != OCT_OK ? s : decode_launch(a, m, st);
    }
    s = oct_cuda_attention_decode_setup(&a, drows, n_drows, ws, ws_bytes);
    if (s != OCT_OK)
        return s;
    const cudaError_t e = oct_cuda_attention_prefill_launch(&a, st);
    if (e != cudaSuccess)
        return oct_cuda_ops_fail(OCT_ERR_INTERNAL, "attention prefill: %s", cudaGetErrorString(e));
    return decode_launch(a, n_drows, st);
}

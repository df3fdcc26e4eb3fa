// linear.cu — the CUDA linear-layer entry points: a context (cuBLASLt handle,
// workspace, activation scratch), FP8 W8A8 with dynamic activation quantization
// (per-token or 1x128 groups) and pre-quantized FP8 GEMMs, each choosing between
// the small-M streaming kernel (gemv_fp8.cu) and cuBLASLt (gemm_lt.cu) by M.
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "kernels/cuda/cuda_impl.h"

// Measured on the H200 (docs/BENCHMARKS.md): per-token scales, the streaming
// kernel wins up to 16 tokens everywhere and cuBLASLt from 32 (second run: 21.1 vs
// 23.8 us on 4096->6144, 38.2 vs 45.1 on 14336->4096 at M = 32); block scales, the
// streaming kernel up to 32 on the narrower layers (cuBLASLt's block kernel loses
// there).
#define OCT_CUDA_GEMV_MAX_M_DEFAULT 16
#define OCT_CUDA_GEMV_MAX_M_BLOCK_DEFAULT 32
// The fused-quantization persistent kernel (gemv_fp8_fused.cu) up to this M and
// m * k: every block quantizes all of x itself (m*k divisions per block), which
// measured slower than the separate quantizer beyond ~8K elements, and only when
// blocks stream two or more tiles (gemv_fp8_fused.cu; H200, docs/BENCHMARKS.md:
// 4096->6144 M = 1-2 15.3-16.9 vs 18.0-18.4 us, 4096->28672 even, M >= 4 slower).
#define OCT_CUDA_GEMV_FUSED_MAX_M_DEFAULT 2
#define OCT_CUDA_GEMV_FUSED_MAX_MK_DEFAULT 8192
#define OCT_CUDA_LT_WS_BYTES ((size_t)32 << 20)

oct_status oct_cuda_grow(void **buf, size_t *have, size_t need)
{
    if (need <= *have)
        return OCT_OK;
    if (*buf)
        cudaFree(*buf);
    *buf = NULL;
    *have = 0;
    size_t want = need + need / 4; // some headroom so growing M one by one stays cheap
    if (cudaMalloc(buf, want) != cudaSuccess) {
        *buf = NULL;
        return OCT_ERR_NOMEM;
    }
    *have = want;
    return OCT_OK;
}

extern "C" oct_status oct_cuda_ctx_create(oct_cuda_ctx **out)
{
    if (!out)
        return OCT_ERR_INVALID_ARG;
    *out = NULL;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
        return OCT_ERR_UNSUPPORTED;
    oct_cuda_ctx *c = (oct_cuda_ctx *)calloc(1, sizeof *c);
    if (!c)
        return OCT_ERR_NOMEM;
    c->gemv_max_m = OCT_CUDA_GEMV_MAX_M_DEFAULT;
    c->lt_block_mn_major = 1; // measured: cuBLASLt 13.1 reads VEC128 scales as [k/128][m]
    c->gemv_max_m_block = OCT_CUDA_GEMV_MAX_M_BLOCK_DEFAULT;
    c->gemv_fused_max_m = OCT_CUDA_GEMV_FUSED_MAX_M_DEFAULT;
    c->gemv_fused_max_mk = OCT_CUDA_GEMV_FUSED_MAX_MK_DEFAULT;
    const char *env = getenv("OCTET_CUDA_GEMV_MAX_M");
    if (env && *env)
        c->gemv_max_m = atoll(env);
    env = getenv("OCTET_CUDA_GEMV_FUSED_MAX_M");
    if (env && *env)
        c->gemv_fused_max_m = atoll(env);
    cublasLtHandle_t h = NULL;
    const float one = 1.0f;
    if (cublasLtCreate(&h) != CUBLAS_STATUS_SUCCESS) {
        free(c);
        return OCT_ERR_UNSUPPORTED;
    }
    c->lt = h;
    if (cudaMalloc((void **)&c->one, sizeof(float)) != cudaSuccess ||
        cudaMemcpy(c->one, &one, sizeof one, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaMalloc(&c->lt_ws, OCT_CUDA_LT_WS_BYTES) != cudaSuccess) {
        oct_cuda_ctx_free(c);
        return OCT_ERR_NOMEM;
    }
    c->lt_ws_bytes = OCT_CUDA_LT_WS_BYTES;
    *out = c;
    return OCT_OK;
}

extern "C" void oct_cuda_ctx_free(oct_cuda_ctx *c)
{
    if (!c)
        return;
    oct_cuda_lt_free_plans(c);
    if (c->lt)
        cublasLtDestroy((cublasLtHandle_t)c->lt);
    cudaFree(c->lt_ws);
    cudaFree(c->q);
    cudaFree(c->s);
    cudaFree(c->one);
    cudaFree(c->d32);
    cudaFree(c->swpad);
    free(c);
}

extern "C" oct_status oct_cuda_ctx_reserve(oct_cuda_ctx *c, int64_t max_m, int64_t max_k)
{
    if (!c || max_m < 0 || max_k < 0)
        return OCT_ERR_INVALID_ARG;
    oct_status s = oct_cuda_grow((void **)&c->q, &c->q_bytes, (size_t)(max_m * max_k));
    if (s == OCT_OK)
        s = oct_cuda_grow((void **)&c->s, &c->s_bytes,
                          (size_t)(max_m * ((max_k + 127) / 128 + 1)) * sizeof(float));
    return s;
}

extern "C" oct_status oct_cuda_ctx_set(oct_cuda_ctx *c, const char *key, int64_t value)
{
    if (!c || !key)
        return OCT_ERR_INVALID_ARG;
    if (!strcmp(key, "gemv_max_m"))
        c->gemv_max_m = value;
    else if (!strcmp(key, "gemv_max_m_block"))
        c->gemv_max_m_block = value;
    else if (!strcmp(key, "gemv_fused_max_m"))
        c->gemv_fused_max_m = value;
    else if (!strcmp(key, "gemv_fused_max_mk"))
        c->gemv_fused_max_mk = value;
    else if (!strcmp(key, "gemv_fused_any_grid"))
        c->gemv_fused_any_grid = value != 0;
    else if (!strcmp(key, "gemv_tma"))
        oct_cuda_gemv_use_tma = value != 0;
    else if (!strcmp(key, "gemv_evict_first"))
        oct_cuda_gemv_evict_first = value != 0;
    else if (!strcmp(key, "gemv_max_ctas"))
        oct_cuda_gemv_max_ctas = value > 0 && value < INT32_MAX ? (int)value : 0;
    else if (!strcmp(key, "lt_block_mn_major"))
        c->lt_block_mn_major = (int)value;
    else
        return OCT_ERR_INVALID_ARG;
    return OCT_OK;
}

extern "C" const char *oct_cuda_ctx_last_kernel(const oct_cuda_ctx *c)
{
    return c ? c->last_kernel : "";
}

static bool use_gemv(const oct_cuda_ctx *c, int64_t m, int64_t n, int64_t k, int path,
                     oct_scale_kind kind)
{
    if (path == OCT_CUDA_PATH_GEMV)
        return true;
    if (path == OCT_CUDA_PATH_LT)
        return false;
    const int64_t max_m = kind == OCT_SCALE_BLOCK128 ? c->gemv_max_m_block : c->gemv_max_m;
    if (k % 128 != 0 || m > max_m)
        return false;
    return m <= 16 || n < 16384 || max_m > OCT_CUDA_GEMV_MAX_M_BLOCK_DEFAULT;
}

extern "C" oct_status oct_cuda_linear_fp8_dyn(oct_cuda_ctx *c, int64_t m, int64_t n, int64_t k,
                                              const void *x, const uint8_t *w, oct_scale_kind kind,
                                              const float *sw, float ub, void *y, int path,
                                              void *stream)
{
    if (!c || m < 0 || n <= 0 || k <= 0 || !w || !sw || (m > 0 && (!x || !y)))
        return OCT_ERR_INVALID_ARG;
    if (kind != OCT_SCALE_ROW && kind != OCT_SCALE_BLOCK128)
        return OCT_ERR_UNSUPPORTED;
    if (m == 0)
        return OCT_OK;
    cudaStream_t st = oct_cuda_stream(stream);
    const int64_t nkb = (k + 127) / 128;
    oct_status s = oct_cuda_ctx_reserve(c, m, k);
    if (s != OCT_OK)
        return s;
    uint16_t *yo = static_cast<uint16_t *>(y);
    const bool gemv = use_gemv(c, m, n, k, path, kind);
    if (kind == OCT_SCALE_ROW) {
        if (gemv && m <= c->gemv_fused_max_m && (m == 1 || m * k <= c->gemv_fused_max_mk) &&
            !oct_cuda_gemv_use_tma) {
            s = oct_cuda_gemv_w8a8_fused_launch(m, n, k, x, ub, w, sw, yo,
                                                c->gemv_fused_any_grid != 0, st);
            if (s != OCT_ERR_UNSUPPORTED) {
                snprintf(c->last_kernel, sizeof c->last_kernel, "gemv_w8a8_row_fusedquant");
                return s;
            }
        }
        s = oct_cuda_quant_rows_bf16(x, m, k, ub, c->q, c->s, stream);
        if (s != OCT_OK)
            return s;
        if (gemv) {
            snprintf(c->last_kernel, sizeof c->last_kernel, "quant_rows+gemv_w8a8_row");
            return oct_cuda_gemv_w8a8_launch(m, n, k, c->q, c->s, w, sw, OCT_SCALE_ROW, yo, true,
                                             st);
        }
        return oct_cuda_lt_gemm(c, m, n, k, c->q, OCT_SCALE_ROW, c->s, w, OCT_SCALE_ROW, sw, yo,
                                st);
    }
    const bool mn = !gemv && c->lt_block_mn_major;
    s = oct_cuda_quant_groups_strided(x, m, k, c->q, c->s, mn ? 1 : nkb, mn ? m : 1, st);
    if (s != OCT_OK)
        return s;
    if (gemv) {
        snprintf(c->last_kernel, sizeof c->last_kernel, "quant_groups+gemv_w8a8_block");
        return oct_cuda_gemv_w8a8_launch(m, n, k, c->q, c->s, w, sw, OCT_SCALE_BLOCK128, yo, true,
                                         st);
    }
    s = oct_cuda_lt_gemm(c, m, n, k, c->q, OCT_SCALE_BLOCK128, c->s, w, OCT_SCALE_BLOCK128, sw, yo,
                         st);
    if (s == OCT_ERR_UNSUPPORTED && path == OCT_CUDA_PATH_AUTO && k % 128 == 0) {
        // cuBLASLt has no block-scaled kernel here: the streaming kernel, 64 tokens
        // per weight pass (requantize in its scale layout if we used the other).
        if (mn) {
            s = oct_cuda_quant_groups_strided(x, m, k, c->q, c->s, nkb, 1, st);
            if (s != OCT_OK)
                return s;
        }
        snprintf(c->last_kernel, sizeof c->last_kernel, "quant_groups+gemv_w8a8_block(lt refused)");
        return oct_cuda_gemv_w8a8_launch(m, n, k, c->q, c->s, w, sw, OCT_SCALE_BLOCK128, yo, true,
                                         st);
    }
    return s;
}

namespace
{
__global__ void transpose_scales(const float *__restrict__ src, int64_t m, int64_t nkb,
                                 float *__restrict__ dst)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < m * nkb)
        dst[(i % nkb) * m + i / nkb] = src[i];
}
} // namespace

extern "C" oct_status oct_cuda_gemm_fp8(oct_cuda_ctx *c, int64_t m, int64_t n, int64_t k,
                                        const uint8_t *a, oct_scale_kind ka, const float *sa,
                                        const uint8_t *w, oct_scale_kind kw, const float *sw,
                                        void *y, int path, void *stream)
{
    if (!c || m < 0 || n <= 0 || k <= 0 || !w || !sw || (m > 0 && (!a || !sa || !y)))
        return OCT_ERR_INVALID_ARG;
    if (m == 0)
        return OCT_OK;
    cudaStream_t st = oct_cuda_stream(stream);
    uint16_t *yo = static_cast<uint16_t *>(y);
    if (ka == kw && ka != OCT_SCALE_TENSOR && ka != OCT_SCALE_MX32 &&
        use_gemv(c, m, n, k, path, ka)) {
        snprintf(c->last_kernel, sizeof c->last_kernel, "gemv_w8a8_%s",
                 ka == OCT_SCALE_ROW ? "row" : "block");
        return oct_cuda_gemv_w8a8_launch(m, n, k, a, sa, w, sw, ka, yo, false, st);
    }
    if (path == OCT_CUDA_PATH_GEMV)
        return OCT_ERR_UNSUPPORTED;
    if (ka == OCT_SCALE_BLOCK128 && kw == OCT_SCALE_BLOCK128 && c->lt_block_mn_major) {
        const int64_t nkb = (k + 127) / 128;
        oct_status s =
            oct_cuda_grow((void **)&c->s, &c->s_bytes, (size_t)(m * nkb) * sizeof(float));
        if (s != OCT_OK)
            return s;
        transpose_scales<<<(unsigned)((m * nkb + 255) / 256), 256, 0, st>>>(sa, m, nkb, c->s);
        if (cudaGetLastError() != cudaSuccess)
            return OCT_ERR_INTERNAL;
        sa = c->s;
    }
    return oct_cuda_lt_gemm(c, m, n, k, a, ka, sa, w, kw, sw, yo, st);
}

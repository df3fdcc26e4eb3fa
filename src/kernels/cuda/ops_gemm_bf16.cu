// ops_gemm_bf16.cu — BF16 GEMM through cuBLASLt for the forward pass (BF16
// checkpoints' linears, the lm_head): y [m,n] = (x [m,k] w [n,k]^T + bias) *
// out_mult, f32 accumulation.  The same "TN" mapping as gemm_lt.cu: cuBLAS A = w
// (k x n column-major, op T), B = x (k x m, op N), D = y (n x m, ld n).
//   bf16 y:  alpha = out_mult, a bias through the BIAS epilogue (f32 bias), which
//            adds it after alpha -- so a bias needs out_mult == 1;
//   f32 y:   alpha = out_mult without a bias; with one, alpha = 1 and
//            bias_mult_f32 then computes (acc + bias) * out_mult in forward.c's
//            order (bias in the linear, the logits scaling after it).
// The descriptors and the heuristic's choice are made on every call (host work
// only, so a stream capture records just the matmul).  A bf16 y of up to
// ctx->gemv_bf16_max_m rows (OCTET_CUDA_GEMV_BF16_MAX_M; 0: never) goes to the
// streaming kernel of gemv_bf16.cu instead, launched with programmatic
// serialization; the logits (f32 y) stay on cuBLASLt, whose kernel reads the
// 1 GB lm_head at the read roof.
#include <cublasLt.h>

#include "kernels/cuda/cuda_impl.h"

namespace
{

__global__ void bias_mult_f32(float *__restrict__ y, int64_t m, int64_t n,
                              const float *__restrict__ bias, float mult)
{
    const int64_t total = m * n;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v = __fadd_rn(y[i], bias[i % n]);
        if (mult != 1.0f)
            v = __fmul_rn(v, mult);
        y[i] = v;
    }
}

struct LtObjs {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    ~LtObjs()
    {
        if (pref)
            cublasLtMatmulPreferenceDestroy(pref);
        if (lc)
            cublasLtMatrixLayoutDestroy(lc);
        if (lb)
            cublasLtMatrixLayoutDestroy(lb);
        if (la)
            cublasLtMatrixLayoutDestroy(la);
        if (op)
            cublasLtMatmulDescDestroy(op);
    }
};

oct_status lt_fail(const char *what, cublasStatus_t s)
{
    return oct_cuda_ops_fail(OCT_ERR_INTERNAL, "gemm_bf16: %s: %s", what,
                             cublasLtGetStatusString(s));
}

// One cuBLASLt matmul: y (dt) = alpha * x w^T, plus ep_bias (f32, BIAS epilogue)
// when not NULL.  *no_algo: the heuristic found no kernel (nothing enqueued).
oct_status lt_matmul(oct_cuda_ctx *ctx, int64_t m, int64_t n, int64_t k, const uint16_t *x,
                     const uint16_t *w, const float *ep_bias, float alpha, void *y,
                     cudaDataType_t dt, cudaStream_t st, bool *no_algo)
{
    *no_algo = false;
    cublasLtHandle_t h = (cublasLtHandle_t)ctx->lt;
    LtObjs o;
    cublasStatus_t s = cublasLtMatmulDescCreate(&o.op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (s != CUBLAS_STATUS_SUCCESS)
        return lt_fail("descriptor", s);
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    s = cublasLtMatmulDescSetAttribute(o.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(o.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (s == CUBLAS_STATUS_SUCCESS && ep_bias) {
        const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        const cudaDataType_t bt = CUDA_R_32F;
        s = cublasLtMatmulDescSetAttribute(o.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatmulDescSetAttribute(o.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ep_bias,
                                               sizeof ep_bias);
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatmulDescSetAttribute(o.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt,
                                               sizeof bt);
        if (s != CUBLAS_STATUS_SUCCESS) { // an f32 bias this cuBLASLt refuses
            *no_algo = true;
            return OCT_ERR_UNSUPPORTED;
        }
    }
    if (s != CUBLAS_STATUS_SUCCESS)
        return lt_fail("attributes", s);
    s = cublasLtMatrixLayoutCreate(&o.la, CUDA_R_16BF, (uint64_t)k, (uint64_t)n, k);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&o.lb, CUDA_R_16BF, (uint64_t)k, (uint64_t)m, k);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&o.lc, dt, (uint64_t)n, (uint64_t)m, n);
    if (s != CUBLAS_STATUS_SUCCESS)
        return lt_fail("layouts", s);
    size_t wsb = ctx->lt_ws_bytes;
    s = cublasLtMatmulPreferenceCreate(&o.pref);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(o.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &wsb, sizeof wsb);
    cublasLtMatmulHeuristicResult_t res = {};
    int nres = 0;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulAlgoGetHeuristic(h, o.op, o.la, o.lb, o.lc, o.lc, o.pref, 1, &res, &nres);
    if ((s != CUBLAS_STATUS_SUCCESS || nres < 1) && ep_bias) {
        *no_algo = true;
        return OCT_ERR_UNSUPPORTED;
    }
    if (s != CUBLAS_STATUS_SUCCESS)
        return lt_fail("heuristic", s);
    if (nres < 1)
        return oct_cuda_ops_fail(OCT_ERR_UNSUPPORTED,
                                 "gemm_bf16: cuBLASLt has no kernel for %lld x %lld x %lld",
                                 (long long)m, (long long)n, (long long)k);
    const float beta = 0.0f;
    s = cublasLtMatmul(h, o.op, &alpha, w, o.la, x, o.lb, &beta, y, o.lc, y, o.lc, &res.algo,
                       ctx->lt_ws, res.workspaceSize, st);
    return s == CUBLAS_STATUS_SUCCESS ? OCT_OK : lt_fail("matmul", s);
}

// bf16 y = bf16(d + bias) from the f32 product d (the fallback of the BIAS epilogue).
__global__ void bias_to_bf16(const float *__restrict__ d, int64_t m, int64_t n,
                             const float *__restrict__ bias, uint16_t *__restrict__ y)
{
    const int64_t total = m * n;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = oct_f32_to_bf16_dev(__fadd_rn(d[i], bias[i % n]));
}

unsigned grid_of(int64_t count)
{
    const int64_t b = (count + 255) / 256;
    return (unsigned)(b > 4096 ? 4096 : b < 1 ? 1 : b);
}

} // namespace

extern "C" oct_status oct_cuda_gemm_bf16(oct_cuda_ctx *ctx, int64_t m, int64_t n, int64_t k,
                                         const uint16_t *x, const uint16_t *w, const float *bias,
                                         float out_mult, void *y, bool y_f32, void *stream)
{
    if (!ctx || !ctx->lt || m < 0 || n <= 0 || k <= 0 || m > INT32_MAX || n > INT32_MAX ||
        k > INT32_MAX || (m > 0 && (!x || !w || !y)))
        return oct_cuda_ops_fail(OCT_ERR_INVALID_ARG, "gemm_bf16: m %lld, n %lld, k %lld",
                                 (long long)m, (long long)n, (long long)k);
    const bool lt_bias = bias && !y_f32;
    if (lt_bias && out_mult != 1.0f)
        return oct_cuda_ops_fail(OCT_ERR_UNSUPPORTED,
                                 "gemm_bf16: a bias with out_mult %g needs an f32 output",
                                 (double)out_mult);
    if (m == 0)
        return OCT_OK;
    cudaStream_t st = oct_cuda_stream(stream);
    bool no_algo = false;
    oct_status r;
    if (y_f32) {
        r = lt_matmul(ctx, m, n, k, x, w, NULL, bias ? 1.0f : out_mult, y, CUDA_R_32F, st,
                      &no_algo);
        if (r != OCT_OK || !bias)
            return r;
        bias_mult_f32<<<grid_of(m * n), 256, 0, st>>>(static_cast<float *>(y), m, n, bias,
                                                      out_mult);
        return oct_cuda_ops_launched("gemm_bf16 bias");
    }
    if (m <= ctx->gemv_bf16_max_m && oct_cuda_gemv_bf16_fits(m, n, k, x, w)) {
        r = oct_cuda_gemv_bf16_launch(m, n, k, x, w, bias, out_mult, static_cast<uint16_t *>(y),
                                      true, st);
        return r == OCT_OK ? r : oct_cuda_ops_fail(r, "gemm_bf16: gemv_bf16 launch failed");
    }
    r = lt_matmul(ctx, m, n, k, x, w, lt_bias ? bias : NULL, out_mult, y, CUDA_R_16BF, st,
                  &no_algo);
    if (!no_algo)
        return r;
    // no f32-bias epilogue: the f32 product in the context's scratch (grown with
    // cudaMalloc when too small: not while a stream is captured), then the bias
    r = oct_cuda_grow(ctx, (void **)&ctx->d32, &ctx->d32_bytes, (size_t)(m * n) * sizeof(float));
    if (r != OCT_OK)
        return oct_cuda_ops_fail(r, "gemm_bf16: f32 scratch of %lld x %lld", (long long)m,
                                 (long long)n);
    r = lt_matmul(ctx, m, n, k, x, w, NULL, 1.0f, ctx->d32, CUDA_R_32F, st, &no_algo);
    if (r != OCT_OK)
        return r;
    bias_to_bf16<<<grid_of(m * n), 256, 0, st>>>(ctx->d32, m, n, bias, static_cast<uint16_t *>(y));
    return oct_cuda_ops_launched("gemm_bf16 bias");
}

// ops_copy.cu — small device helpers of the CUDA backend (backend_cuda.h):
// column copies for unfused parts, bias adds, the backend's stream, CUDA
// graph capture and replay, synchronization, the profiler range.
#include <cuda_bf16.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include "kernels/cuda/backend_cuda.h"
#include "kernels/cuda/cuda_impl.h"

namespace
{

__global__ void copy_cols(const uint16_t *src, int64_t width, int64_t n, uint16_t *dst,
                          int64_t dst_stride)
{
    const int64_t total = n * width;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = i / width, j = i % width;
        dst[t * dst_stride + j] = src[i];
    }
}

__device__ inline float bf16_to_f32(uint16_t b)
{
    return __uint_as_float((uint32_t)b << 16);
}

__device__ inline uint16_t f32_to_bf16(float f)
{
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}

__global__ void add_bias(uint16_t *y, const float *bias, int64_t m, int64_t n)
{
    const int64_t total = m * n;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = f32_to_bf16(bf16_to_f32(y[i]) + bias[i % n]);
}

int grid_for(int64_t total)
{
    int64_t g = (total + 255) / 256;
    return (int)(g < 4096 ? (g > 0 ? g : 1) : 4096);
}

} // namespace

extern "C" oct_status oct_cuda_copy_cols_bf16(const uint16_t *src, int64_t width, int64_t n,
                                              uint16_t *dst, int64_t dst_stride, void *stream)
{
    if (!src || !dst || width <= 0 || n < 0 || dst_stride < width)
        return OCT_ERR_INVALID_ARG;
    if (n == 0)
        return OCT_OK;
    copy_cols<<<grid_for(n * width), 256, 0, oct_cuda_stream(stream)>>>(src, width, n, dst,
                                                                        dst_stride);
    return cudaGetLastError() == cudaSuccess ? OCT_OK : OCT_ERR_INTERNAL;
}

extern "C" oct_status oct_cuda_add_bias_bf16(uint16_t *y, const float *bias, int64_t m, int64_t n,
                                             void *stream)
{
    if (!y || !bias || m < 0 || n <= 0)
        return OCT_ERR_INVALID_ARG;
    if (m == 0)
        return OCT_OK;
    add_bias<<<grid_for(m * n), 256, 0, oct_cuda_stream(stream)>>>(y, bias, m, n);
    return cudaGetLastError() == cudaSuccess ? OCT_OK : OCT_ERR_INTERNAL;
}

extern "C" oct_status oct_cuda_synchronize(void)
{
    const cudaError_t e = cudaDeviceSynchronize();
    return e == cudaSuccess ? OCT_OK
                            : oct_cuda_ops_fail(OCT_ERR_INTERNAL, "cudaDeviceSynchronize: %s",
                                                cudaGetErrorString(e));
}

extern "C" oct_status oct_cuda_mem_info(size_t *free_bytes, size_t *total_bytes)
{
    return cudaMemGetInfo(free_bytes, total_bytes) == cudaSuccess ? OCT_OK : OCT_ERR_INTERNAL;
}

extern "C" oct_status oct_cuda_stream_create(void **out)
{
    cudaStream_t s = nullptr;
    *out = nullptr;
    if (cudaStreamCreate(&s) != cudaSuccess)
        return OCT_ERR_INTERNAL;
    *out = s;
    return OCT_OK;
}

extern "C" void oct_cuda_stream_destroy(void *stream)
{
    if (stream)
        cudaStreamDestroy(oct_cuda_stream(stream));
}

extern "C" oct_status oct_cuda_graph_begin(void *stream)
{
    // thread-local mode: other threads' unrelated CUDA calls do not break the capture
    return cudaStreamBeginCapture(oct_cuda_stream(stream), cudaStreamCaptureModeThreadLocal) ==
                   cudaSuccess
               ? OCT_OK
               : OCT_ERR_INTERNAL;
}

extern "C" oct_status oct_cuda_graph_end(void *stream, void **exec)
{
    *exec = nullptr;
    cudaGraph_t g = nullptr;
    if (cudaStreamEndCapture(oct_cuda_stream(stream), &g) != cudaSuccess || !g) {
        cudaGetLastError();
        return OCT_ERR_INTERNAL;
    }
    cudaGraphExec_t e = nullptr;
    cudaError_t r = cudaGraphInstantiate(&e, g, 0);
    cudaGraphDestroy(g);
    if (r != cudaSuccess) {
        cudaGetLastError();
        return OCT_ERR_INTERNAL;
    }
    *exec = e;
    return OCT_OK;
}

extern "C" oct_status oct_cuda_graph_launch(void *exec, void *stream)
{
    return cudaGraphLaunch((cudaGraphExec_t)exec, oct_cuda_stream(stream)) == cudaSuccess
               ? OCT_OK
               : OCT_ERR_INTERNAL;
}

extern "C" oct_status oct_cuda_host_alloc(void **out, size_t bytes)
{
    *out = NULL;
    return cudaMallocHost(out, bytes ? bytes : 1) == cudaSuccess ? OCT_OK : OCT_ERR_NOMEM;
}

extern "C" void oct_cuda_host_free(void *p)
{
    if (p)
        cudaFreeHost(p);
}

extern "C" oct_status oct_cuda_upload_async(void *dst, const void *src, size_t bytes, void *stream)
{
    if (bytes == 0)
        return OCT_OK;
    const cudaError_t e =
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, oct_cuda_stream(stream));
    return e == cudaSuccess
               ? OCT_OK
               : oct_cuda_ops_fail(OCT_ERR_INTERNAL, "cudaMemcpyAsync to the device: %s",
                                   cudaGetErrorString(e));
}

extern "C" void oct_cuda_profiler(bool on)
{
    if (on)
        cudaProfilerStart();
    else
        cudaProfilerStop();
}

extern "C" void oct_cuda_graph_destroy(void *exec)
{
    if (exec)
        cudaGraphExecDestroy((cudaGraphExec_t)exec);
}

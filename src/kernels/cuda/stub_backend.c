/* stub_backend.c — linked in CPU-only builds: the CUDA entry points of
 * backend_cuda.h report OCT_ERR_UNSUPPORTED (ops_copy.cu implements them with
 * CUDA; the device linears live in registry_kernel.c, compiled in both). */
#include "kernels/cuda/backend_cuda.h"

oct_status oct_cuda_synchronize(void)
{
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_copy_cols_bf16(const uint16_t *src, int64_t width, int64_t n, uint16_t *dst,
                                   int64_t dst_stride, void *stream)
{
    (void)src, (void)width, (void)n, (void)dst, (void)dst_stride, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_add_bias_bf16(uint16_t *y, const float *bias, int64_t m, int64_t n,
                                  void *stream)
{
    (void)y, (void)bias, (void)m, (void)n, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_mem_info(size_t *free_bytes, size_t *total_bytes)
{
    *free_bytes = *total_bytes = 0;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_stream_create(void **out)
{
    *out = NULL;
    return OCT_ERR_UNSUPPORTED;
}

void oct_cuda_stream_destroy(void *stream)
{
    (void)stream;
}

oct_status oct_cuda_graph_begin(void *stream)
{
    (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_graph_end(void *stream, void **exec)
{
    (void)stream;
    *exec = NULL;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_graph_launch(void *exec, void *stream)
{
    (void)exec, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

oct_status oct_cuda_host_alloc(void **out, size_t bytes)
{
    (void)bytes;
    *out = NULL;
    return OCT_ERR_UNSUPPORTED;
}

void oct_cuda_host_free(void *p)
{
    (void)p;
}

oct_status oct_cuda_upload_async(void *dst, const void *src, size_t bytes, void *stream)
{
    (void)dst, (void)src, (void)bytes, (void)stream;
    return OCT_ERR_UNSUPPORTED;
}

void oct_cuda_profiler(bool on)
{
    (void)on;
}

void oct_cuda_graph_destroy(void *exec)
{
    (void)exec;
}

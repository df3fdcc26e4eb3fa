// device.cu — CUDA device discovery and the memory helpers host C code uses
// (compiled with make CUDA=1).
#include <cuda_runtime.h>

#include <atomic>
#include <mutex>

#include "kernels/cuda/cuda_impl.h"

extern "C" oct_status oct_cuda_device_count(int *count)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (count)
        *count = e == cudaSuccess ? n : 0;
    return e == cudaSuccess ? OCT_OK : OCT_ERR_UNSUPPORTED;
}

extern "C" bool oct_cuda_available(void)
{
    // asked once per process (the registry asks for every layer), thread-safely
    static std::once_flag once;
    static bool avail = false;
    std::call_once(once, [] {
        int n = 0;
        avail = oct_cuda_device_count(&n) == OCT_OK && n > 0;
    });
    return avail;
}

extern "C" oct_status oct_cuda_malloc(void **out, size_t bytes)
{
    if (!out)
        return OCT_ERR_INVALID_ARG;
    *out = NULL;
    if (bytes == 0)
        bytes = 1;
    return cudaMalloc(out, bytes) == cudaSuccess ? OCT_OK : OCT_ERR_NOMEM;
}

extern "C" void oct_cuda_free(void *p)
{
    if (p)
        cudaFree(p);
}

extern "C" oct_status oct_cuda_memcpy_h2d(void *dst, const void *src, size_t bytes)
{
    return cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice) == cudaSuccess ? OCT_OK
                                                                              : OCT_ERR_INTERNAL;
}

extern "C" oct_status oct_cuda_memzero(void *dst, size_t bytes)
{
    return cudaMemset(dst, 0, bytes) == cudaSuccess ? OCT_OK : OCT_ERR_INTERNAL;
}

extern "C" oct_status oct_cuda_memcpy_d2h(void *dst, const void *src, size_t bytes)
{
    return cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost) == cudaSuccess ? OCT_OK
                                                                              : OCT_ERR_INTERNAL;
}

bool oct_cuda_device_is_sm90(void)
{
    static std::atomic<int> cache[16]; // per device: 0 unknown, 1 yes, 2 no
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess)
        return false;
    const bool cached = dev >= 0 && dev < 16;
    if (cached) {
        const int v = cache[dev].load(std::memory_order_relaxed);
        if (v)
            return v == 1;
    }
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
        cudaGetLastError();
        return false; // not cached: asked again next time
    }
    const bool ok = major == 9 && minor == 0;
    if (cached)
        cache[dev].store(ok ? 1 : 2, std::memory_order_relaxed);
    return ok;
}

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

// A runtime call's status, its CUDA error text kept for the caller's message
// (oct_cuda_ops_last_error).
static oct_status cuda_status(cudaError_t e, oct_status st, const char *what)
{
    return e == cudaSuccess ? OCT_OK : oct_cuda_ops_fail(st, "%s: %s", what, cudaGetErrorString(e));
}

extern "C" oct_status oct_cuda_malloc(void **out, size_t bytes)
{
    if (!out)
        return OCT_ERR_INVALID_ARG;
    *out = NULL;
    if (bytes == 0)
        bytes = 1;
    return cuda_status(cudaMalloc(out, bytes), OCT_ERR_NOMEM, "cudaMalloc");
}

extern "C" void oct_cuda_free(void *p)
{
    if (p)
        cudaFree(p);
}

extern "C" oct_status oct_cuda_memcpy_h2d(void *dst, const void *src, size_t bytes)
{
    return cuda_status(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), OCT_ERR_INTERNAL,
                       "cudaMemcpy to the device");
}

extern "C" oct_status oct_cuda_memzero(void *dst, size_t bytes)
{
    return cuda_status(cudaMemset(dst, 0, bytes), OCT_ERR_INTERNAL, "cudaMemset");
}

extern "C" oct_status oct_cuda_memcpy_d2h(void *dst, const void *src, size_t bytes)
{
    return cuda_status(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), OCT_ERR_INTERNAL,
                       "cudaMemcpy from the device");
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

// device.cu — CUDA device discovery (compiled with make CUDA=1).
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_api.h"

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
    int n = 0;
    return oct_cuda_device_count(&n) == OCT_OK && n > 0;
}

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

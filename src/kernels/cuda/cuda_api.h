/* cuda_api.h — the C-only face of the .cu files in src/kernels/cuda/.  Host C code includes
 * this, never CUDA headers.  Every function exists in both builds: the CUDA
 * build implements it in .cu files (extern "C"), the CPU-only build links
 * stub.c, which returns OCT_ERR_UNSUPPORTED. */
#ifndef OCTET_CUDA_API_H
#define OCTET_CUDA_API_H

#include <stdbool.h>

#include "octet.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices; OCT_ERR_UNSUPPORTED in a CPU-only build. */
oct_status oct_cuda_device_count(int *count);

/* True when built with CUDA and at least one device is present. */
bool oct_cuda_available(void);

#ifdef __cplusplus
}
#endif
#endif

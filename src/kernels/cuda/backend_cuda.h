/* backend_cuda.h — what the CUDA backend (backend_cuda.c) needs beyond the
 * ops of cuda_api.h: device-pointer linear layers through the registry's CUDA
 * kernels (registry_kernel.c) and a few copy helpers (ops_copy.cu).  C only;
 * the CPU-only build links stub_backend.c. */
#ifndef OCTET_KERNELS_CUDA_BACKEND_CUDA_H
#define OCTET_KERNELS_CUDA_BACKEND_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/cuda/cuda_api.h"
#include "octet.h"
#ifndef __cplusplus
#include "core/core.h" /* oct_error_set */
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* y [m, n] bf16 = x [m, k] bf16 through a layer the registry's CUDA kernels
 * prepared (cuda_fp8: W8A8 / W8A16 with its activation scheme; cuda_bf16:
 * cuBLASLt), bias included.  Device pointers; ws: at least m * k + 64 bytes
 * (per-tensor activation codes and their scale). */
oct_status oct_cuda_linear_device(const oct_linear *l, oct_cuda_ctx *ctx, int64_t m, const void *x,
                                  void *y, void *ws, size_t ws_bytes, void *stream, oct_error *err);
/* The FP8 input a layer reads (*fmt: kind, ub, static scale; no buffers),
 * when a producer may write it in place of bf16 activations: a cuda_fp8 layer
 * with dynamic per-token, 1x128-group or static activations.  Else false. */
bool oct_cuda_linear_device_input(const oct_linear *l, oct_cuda_act *fmt);
/* y [m, n] bf16 through the layer from FP8 inputs in that format (in->q and,
 * for the dynamic kinds, in->scale filled), bias included. */
oct_status oct_cuda_linear_device_codes(const oct_linear *l, oct_cuda_ctx *ctx, int64_t m,
                                        const oct_cuda_act *in, void *y, void *stream,
                                        oct_error *err);
/* The same into f32 y [m, n], times out_mult (the lm_head's logits); a
 * cuda_bf16 layer only. */
oct_status oct_cuda_linear_device_f32(const oct_linear *l, oct_cuda_ctx *ctx, int64_t m,
                                      const void *x, float out_mult, float *y, void *stream,
                                      oct_error *err);

/* A device layer's weights, for kernels that read many layers in one launch
 * (the grouped expert GEMM). */
typedef struct oct_cuda_weights {
    bool bf16;           /* cuda_bf16: w bf16 [n,k], no scales */
    const void *w;       /* cuda_fp8: E4M3 codes [n,k] */
    const float *sw;     /* ROW [n] (per-tensor expanded) or BLOCK128 [ceil(n/128), k/128] */
    oct_scale_kind kind; /* ROW or BLOCK128 */
    bool bias;           /* the layer adds a bias */
} oct_cuda_weights;
/* Fills *out for a layer the registry's CUDA kernels prepared; false for any
 * other. */
bool oct_cuda_linear_device_weights(const oct_linear *l, oct_cuda_weights *out);

#ifndef __cplusplus
/* err = "CUDA <what> failed: <status>: <the op's recorded text>"; returns st. */
static inline oct_status oct_cuda_op_error(oct_error *err, oct_status st, const char *what)
{
    const char *why = oct_cuda_ops_last_error();
    return oct_error_set(err, st, -1, "CUDA %s failed: %s%s%s", what, oct_status_str(st),
                         why && *why ? ": " : "", why ? why : "");
}
/* In a function with an `oct_error *err`: returns that error when call fails. */
#define OCT_CUDA_CK(call, what)                                                                    \
    do {                                                                                           \
        oct_status st_ = (call);                                                                   \
        if (st_ != OCT_OK)                                                                         \
            return oct_cuda_op_error(err, st_, what);                                              \
    } while (0)
#endif

/* Waits for the device. */
oct_status oct_cuda_synchronize(void);
/* Free and total device memory in bytes. */
oct_status oct_cuda_mem_info(size_t *free_bytes, size_t *total_bytes);

/* A stream for the backend's work (blocking: ordered with the legacy default
 * stream, so the synchronous copies of cuda_api.h see its results). */
oct_status oct_cuda_stream_create(void **out);
void oct_cuda_stream_destroy(void *stream);
/* CUDA graphs: what is enqueued on `stream` between begin and end is recorded,
 * not run; end instantiates it (*exec); launch replays it on the stream. */
oct_status oct_cuda_graph_begin(void *stream);
oct_status oct_cuda_graph_end(void *stream, void **exec);
oct_status oct_cuda_graph_launch(void *exec, void *stream);
void oct_cuda_graph_destroy(void *exec);
/* Pinned host memory, and a copy from it to the device enqueued on `stream`
 * (asynchronous: the source must stay unchanged until the stream gets there). */
oct_status oct_cuda_host_alloc(void **out, size_t bytes);
void oct_cuda_host_free(void *p);
oct_status oct_cuda_upload_async(void *dst, const void *src, size_t bytes, void *stream);
/* Starts (on) or stops the profiler's capture range (ncu --profile-from-start off). */
void oct_cuda_profiler(bool on);
/* dst[t * dst_stride + j] = src[t * width + j] for t < n, j < width (bf16). */
oct_status oct_cuda_copy_cols_bf16(const uint16_t *src, int64_t width, int64_t n, uint16_t *dst,
                                   int64_t dst_stride, void *stream);
/* y [m, n] bf16 += bias [n] f32 (in f32, RNE back to bf16). */
oct_status oct_cuda_add_bias_bf16(uint16_t *y, const float *bias, int64_t m, int64_t n,
                                  void *stream);

#ifdef __cplusplus
}
#endif
#endif

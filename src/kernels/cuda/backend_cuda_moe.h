/* backend_cuda_moe.h — the CUDA backend's sparse MoE block (backend_cuda_moe.c):
 * the op behind oct_backend_ops.moe, with its scratch and the experts' device
 * pointer tables.  Host C. */
#ifndef OCTET_KERNELS_CUDA_BACKEND_CUDA_MOE_H
#define OCTET_KERNELS_CUDA_BACKEND_CUDA_MOE_H

#include "kernels/backend.h"
#include "kernels/cuda/cuda_api.h"

typedef struct oct_cuda_moe oct_cuda_moe;

/* Scratch for batches of up to d->max_tokens tokens (NULL *out for a dense
 * model). */
oct_status oct_cuda_moe_create(const oct_fwd_dims *d, oct_cuda_moe **out, oct_error *err);
void oct_cuda_moe_free(oct_cuda_moe *m);
/* y [n, H] bf16 = the MoE block b on h [n, H] bf16, enqueued on stream:
 * router logits, top-k routing, the expert-sorted tile list, the grouped
 * gate/up GEMM, SiLU-mul, the grouped down GEMM, the weighted combine.  No
 * host synchronisation: a CUDA graph may record it. */
oct_status oct_cuda_moe_forward(oct_cuda_moe *m, oct_cuda_ctx *ctx, void *stream,
                                const oct_moe_block *b, int64_t n, const void *h, void *y,
                                oct_error *err);
/* The expert kernel the block runs ("cuda_grouped_fp8" / "cuda_grouped_bf16")
 * and its scheme in words, or an error naming the first expert layer the
 * device cannot run this way. */
oct_status oct_cuda_moe_describe(const oct_moe_block *b, const char **kernel, char *scheme,
                                 size_t scheme_len, oct_error *err);
/* 0: a decode step's block without its fusions (the same bytes in more
 * kernels: tests, A/B runs); 1: with; -1 (default): OCTET_CUDA_MOE_FUSE=0 in
 * the environment turns them off (process-wide). */
extern int oct_cuda_moe_fuse;
/* 0: a decode step's down GEMM launched in the ordinary way; 1: with
 * programmatic serialization (its weights requested while SiLU-mul runs);
 * -1 (default): OCTET_CUDA_MOE_PDL=0 in the environment turns it off. */
extern int oct_cuda_moe_pdl;
/* 0: a decode step's BF16 router through the linear layer's GEMM; 1: its own
 * kernel (oct_cuda_moe_router); -1 (default): OCTET_CUDA_MOE_ROUTER=0 in the
 * environment turns it off (process-wide). */
extern int oct_cuda_moe_router_kernel;

#endif

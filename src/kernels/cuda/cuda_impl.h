/* cuda_impl.h — internals shared by the .cu files of src/kernels/cuda/ (C++/CUDA
 * only: host C code includes cuda_api.h instead).  Device helpers for the
 * numerics of docs/NUMERICS.md: every quantizer here must produce the same bytes
 * as src/quant/ and src/kernels/cpu/gemm_ref.c. */
#ifndef OCTET_CUDA_IMPL_H
#define OCTET_CUDA_IMPL_H

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <float.h>
#include <stdint.h>

#include <atomic>
#include <type_traits>

#include "kernels/cuda/cuda_api.h"

#define OCT_CUDA_QMAX 448.0f
/* 1 / (448 * 512): the floor of every dynamic E4M3FN scale. */
#define OCT_CUDA_SCALE_FLOOR (1.0f / (448.0f * 512.0f))

static inline cudaStream_t oct_cuda_stream(void *s)
{
    return (cudaStream_t)s;
}

/* Maps the last launch / call error to a status (launch errors are sticky-free
 * configuration errors here; an illegal address would poison the context). */
static inline oct_status oct_cuda_check(cudaError_t e)
{
    return e == cudaSuccess ? OCT_OK : OCT_ERR_INTERNAL;
}

/* |x| max that lets a NaN through: fmaxf would drop it, and NUMERICS.md wants a
 * NaN row to produce a NaN scale and NaN codes. */
__device__ __forceinline__ float oct_amax_nan(float a, float v)
{
    v = fabsf(v);
    return (v > a || v != v) ? v : a;
}

/* max(min(amax, ub)/448, floor) with IEEE division (nvcc's default -prec-div=true
 * makes '/' correctly rounded; __fdiv_rn says so explicitly).  A NaN amax stays
 * NaN (the comparison is false). */
__device__ __forceinline__ float oct_scale_from_amax(float a, float ub)
{
    if (ub > 0.0f && a > ub)
        a = ub;
    float s = __fdiv_rn(a, OCT_CUDA_QMAX);
    return s < OCT_CUDA_SCALE_FLOOR ? OCT_CUDA_SCALE_FLOOR : s;
}

/* Saturating round-to-nearest-even E4M3FN encode of two floats into two bytes
 * (lo = a).  The hardware cvt.rn.satfinite maps NaN to 0x7F; octet keeps the
 * NaN's sign (0xFF for a negative NaN), so fix that up. */
__device__ __forceinline__ uint16_t oct_e4m3x2_sat(float a, float b)
{
    __nv_fp8x2_storage_t r = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
    uint16_t v = (uint16_t)r;
    if (a != a)
        v = (uint16_t)((v & 0xFF00u) | (signbit(a) ? 0xFFu : 0x7Fu));
    if (b != b)
        v = (uint16_t)((v & 0x00FFu) | ((signbit(b) ? 0xFFu : 0x7Fu) << 8));
    return v;
}

__device__ __forceinline__ float oct_bf16_lo(uint32_t w)
{
    return __uint_as_float(w << 16);
}

__device__ __forceinline__ float oct_bf16_hi(uint32_t w)
{
    return __uint_as_float(w & 0xFFFF0000u);
}

/* f32 -> bf16 RNE (NaN stays NaN). */
__device__ __forceinline__ uint16_t oct_f32_to_bf16_dev(float x)
{
    __nv_bfloat16 h = __float2bfloat16_rn(x);
    return *reinterpret_cast<uint16_t *>(&h);
}

/* NaN-propagating |x| max over 8 bf16 (one uint4) and a.  On the bit patterns:
 * with the sign cleared, bf16 values order like unsigned integers and every NaN
 * pattern is above +Inf, so two 16-bit-lane integer maxima per word do it. */
__device__ __forceinline__ float oct_amax8_bf16(float a, uint4 v)
{
    const uint32_t k = 0x7FFF7FFFu;
    const uint32_t m = __vmaxu2(__vmaxu2(v.x & k, v.y & k), __vmaxu2(v.z & k, v.w & k)); // 16x2 max
    const uint32_t h = max(m & 0xFFFFu, m >> 16);
    return oct_amax_nan(a, __uint_as_float(h << 16));
}

__device__ __forceinline__ float oct_warp_amax(float a)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        a = oct_amax_nan(a, __shfl_xor_sync(0xffffffffu, a, o));
    return a;
}

/* The sum of a over the warp (every lane gets it). */
__device__ __forceinline__ float oct_warp_sum(float a)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        a += __shfl_xor_sync(0xffffffffu, a, o);
    return a;
}

/* The reciprocal that oct_div_scale needs: 1/s correctly rounded for a finite
 * scale, 0 (use IEEE division) for an infinite or NaN one.  Once per scale. */
__device__ __forceinline__ float oct_scale_recip(float s)
{
    return isfinite(s) ? __frcp_rn(s) : 0.0f;
}

/* x / s correctly rounded, as IEEE division gives it (the CPU reference's x / s),
 * for a positive scale s with r = oct_scale_recip(s), in about a third of
 * __fdiv_rn's cost (which spends a quarter-rate reciprocal on every element).
 * Markstein's correction: with r = RN(1/s) and q0 = RN(a r) within an ulp of
 * a / s, the residual a - q0 s is exact in one fma and RN(q0 + residual r) is
 * RN(a / s).  It holds for normal operands and quotients; with a subnormal a or
 * a quotient below 2^-108 it may be an ulp off, but every such quotient encodes
 * to a zero E4M3 code (the smallest code is 2^-9) either way.  a = |x| capped at
 * 1024 s, itself capped at FLT_MAX (a quotient >= 1024 saturates to 448 like the
 * true one, a / s can no longer overflow when an activation upper bound made s
 * small, and an Inf x meets no Inf cap when a huge bound made s >= 2^118); the
 * sign is x's, so -0 stays -0 and a NaN keeps its sign.  r == 0 (s infinite or
 * NaN): plain IEEE division. */
__device__ __forceinline__ float oct_div_scale(float x, float s, float r)
{
    if (r == 0.0f)
        return __fdiv_rn(x, s);
    const float lim = fminf(1024.0f * s, FLT_MAX);
    float a = fabsf(x);
    a = a > lim ? lim : a; // a NaN stays NaN
    const float q0 = __fmul_rn(a, r);
    const float q = __fmaf_rn(__fmaf_rn(-q0, s, a), r, q0);
    return copysignf(q, x);
}

/* 8 bf16 (one uint4) -> 8 E4M3FN codes (one uint2), x / s correctly rounded
 * (r = oct_scale_recip(s)).  A finite scale came from a row or group without
 * NaNs (a NaN amax gives a NaN scale), so its codes need no NaN fix-up, and the
 * cap of oct_div_scale is a plain min (no NaN to keep). */
__device__ __forceinline__ uint2 oct_quant8_bf16(uint4 v, float s, float r)
{
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    uint16_t c[4];
    if (r != 0.0f) {
        const float lim = fminf(1024.0f * s, FLT_MAX); // see oct_div_scale
        auto div = [&](float x) {
            const float a = fminf(fabsf(x), lim);
            const float q0 = __fmul_rn(a, r);
            return copysignf(__fmaf_rn(__fmaf_rn(-q0, s, a), r, q0), x);
        };
#pragma unroll
        for (int j = 0; j < 4; j++)
            c[j] = (uint16_t)__nv_cvt_float2_to_fp8x2(
                make_float2(div(oct_bf16_lo(w[j])), div(oct_bf16_hi(w[j]))), __NV_SATFINITE,
                __NV_E4M3);
    } else {
#pragma unroll
        for (int j = 0; j < 4; j++)
            c[j] = oct_e4m3x2_sat(__fdiv_rn(oct_bf16_lo(w[j]), s), __fdiv_rn(oct_bf16_hi(w[j]), s));
    }
    return make_uint2((uint32_t)c[0] | ((uint32_t)c[1] << 16),
                      (uint32_t)c[2] | ((uint32_t)c[3] << 16));
}

/* L2 cache policy for streamed-once weights.  evict_first: the weight lines are
 * the first candidates for eviction, so a 100 MB weight stream recycles a small
 * part of the L2 instead of evicting what is there (activations, KV, or, under a
 * benchmark's L2 flush, ~50 MB of dirty lines whose write-back would compete with
 * the stream).  evict_normal is what a plain load does. */
__device__ __forceinline__ uint64_t oct_l2_policy(bool evict_first)
{
    uint64_t p;
    if (evict_first)
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    else
        asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(p));
    return p;
}

/* 16-byte streaming weight load: no L1 allocation, 256-byte L2 prefetch; with
 * `ef` the L2 eviction policy `pol` (oct_l2_policy), else no L2 hint (what the
 * kernels did before; note an explicit evict_normal policy measured slower than
 * no hint on the H200: 47.8 vs 40.3 us on 4096x28672 at M = 1). */
__device__ __forceinline__ uint4 oct_ld_stream(const uint8_t *p, uint64_t pol, int ef)
{
    uint4 v;
    if (ef)
        asm volatile(
            "ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
            : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
            : "l"(p), "l"(pol));
    else
        asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "l"(p));
    return v;
}

/* FP8 tensor-core product m16n8k32 (sm_89+), f32 accumulate in place. */
__device__ __forceinline__ void oct_mma_e4m3(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                             uint32_t a3, uint32_t b0, uint32_t b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

/* One 128-wide K chunk of the streaming kernels (gemv_fp8*.cu): rows g / g+8 in
 * w[0..1] / w[2..3] (bytes [16t,+16) and [64+16t,+16) of the chunk), the token's
 * bytes at the same positions in x0 / x1. */
__device__ __forceinline__ void oct_mma_chunk(float (&c)[4], const uint4 (&w)[4], uint4 x0,
                                              uint4 x1)
{
    oct_mma_e4m3(c, w[0].x, w[2].x, w[0].y, w[2].y, x0.x, x0.y);
    oct_mma_e4m3(c, w[0].z, w[2].z, w[0].w, w[2].w, x0.z, x0.w);
    oct_mma_e4m3(c, w[1].x, w[3].x, w[1].y, w[3].y, x1.x, x1.y);
    oct_mma_e4m3(c, w[1].z, w[3].z, w[1].w, w[3].w, x1.z, x1.w);
}

/* BF16 tensor-core product m16n8k16 (sm_80+), f32 accumulate in place. */
__device__ __forceinline__ void oct_mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                             uint32_t a3, uint32_t b0, uint32_t b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

/* FP16 tensor-core product m16n8k16 (sm_80+), f32 accumulate in place. */
__device__ __forceinline__ void oct_mma_f16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                            uint32_t a3, uint32_t b0, uint32_t b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

/* Four E4M3 codes (bytes 0..3 of v) as two f16x2 (exact): bytes 0, 1 in lo,
 * 2, 3 in hi, the lower byte in the lower half.  sm_90 has no FP8 mma.sync
 * (ptxas widens every operand of each one); widened once, a fragment feeds
 * several f16 products. */
__device__ __forceinline__ void oct_e4m3x4_to_f16x2(uint32_t v, uint32_t &lo, uint32_t &hi)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(lo) : "h"((unsigned short)(v & 0xFFFFu)));
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(hi) : "h"((unsigned short)(v >> 16)));
#else
    lo = hi = 0u;
#endif
}

/* oct_mma_chunk's 128 bytes as bf16: 64 K values of rows g / g+8 and the token. */
__device__ __forceinline__ void oct_mma_chunk_bf16(float (&c)[4], const uint4 (&w)[4], uint4 x0,
                                                   uint4 x1)
{
    oct_mma_bf16(c, w[0].x, w[2].x, w[0].y, w[2].y, x0.x, x0.y);
    oct_mma_bf16(c, w[0].z, w[2].z, w[0].w, w[2].w, x0.z, x0.w);
    oct_mma_bf16(c, w[1].x, w[3].x, w[1].y, w[3].y, x1.x, x1.y);
    oct_mma_bf16(c, w[1].z, w[3].z, w[1].w, w[3].w, x1.z, x1.w);
}

/* Shared-memory staging for the tiled tensor-core kernels (prefill attention,
 * the grouped MoE GEMM): cp.async 16-byte copies global -> shared (L2 only),
 * their commit groups, and ldmatrix of four 8x8 b16 matrices. */
__device__ __forceinline__ uint32_t oct_smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void oct_cp_async16(void *dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(oct_smem_u32(dst)),
                 "l"(__cvta_generic_to_global(src))
                 : "memory");
}

__device__ __forceinline__ void oct_cp_async_commit()
{
    asm volatile("cp.async.commit_group;" ::: "memory");
}

__device__ __forceinline__ void oct_cp_async_wait_all()
{
    asm volatile("cp.async.wait_all;" ::: "memory");
}

/* Raises kernel K's dynamic shared-memory limit to bytes, once per device
 * and instance. */
template <auto K> cudaError_t oct_cuda_smem_limit(int bytes)
{
    static std::atomic<uint32_t> ready{0}; /* one bit per device */
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    const uint32_t bit = dev >= 0 && dev < 32 ? 1u << dev : 0u;
    if (e == cudaSuccess && !(bit && (ready.load(std::memory_order_relaxed) & bit))) {
        e = cudaFuncSetAttribute(K, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
        if (e == cudaSuccess)
            ready.fetch_or(bit);
    }
    return e;
}

/* Waits until at most N of this thread's commit groups are in flight. */
template <int N> __device__ __forceinline__ void oct_cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

__device__ __forceinline__ void oct_ldsm_x4(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* Programmatic dependent launch (sm_90): a kernel launched with the
 * programmatic-serialization attribute may start before the previous kernel in
 * the stream finishes; it must wait here before reading that kernel's output. */
__device__ __forceinline__ void oct_pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Lets the next (programmatic) kernel in the stream start launching. */
__device__ __forceinline__ void oct_pdl_launch_dependents(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* A launch configuration for cudaLaunchKernelEx.  With pdl the kernel is
 * launched with programmatic stream serialization (it must call oct_pdl_wait
 * before reading the previous kernel's output).  *attr holds the attribute and
 * must live until the launch. */
static inline cudaLaunchConfig_t oct_cuda_launch_config(unsigned grid, unsigned block, size_t smem,
                                                        cudaStream_t st, bool pdl,
                                                        cudaLaunchAttribute *attr)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(block);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    attr->id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr->val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    return cfg;
}

/* cudaLaunchKernelEx of kern on grid x block, with programmatic stream
 * serialization when pdl (the kernel must then call oct_pdl_wait before it
 * reads or writes what earlier kernels touch). */
template <class... P, class... A>
cudaError_t oct_launch_pdl(void (*kern)(P...), dim3 grid, unsigned block, size_t smem,
                           cudaStream_t st, bool pdl, A... args)
{
    cudaLaunchAttribute attr;
    cudaLaunchConfig_t cfg = oct_cuda_launch_config(1, block, smem, st, pdl, &attr);
    cfg.gridDim = grid;
    return cudaLaunchKernelEx(&cfg, kern, args...);
}

/* Whether forward-pass op `op` ("rmsnorm", "silu", "rope", "attention") is
 * launched with programmatic serialization, so that it starts while the kernel
 * before it ends.  OCTET_CUDA_OPS_PDL: a comma-separated list of those names,
 * "1" all of them, "0" none; unset, OCT_CUDA_OPS_PDL_DEFAULT.  All of them
 * made the 8B FP8 decode step slower on the H200 (3.12 -> 3.70 ms at 512
 * positions, 3.63 -> 4.11 ms at 8192; BF16 even), the GEMMs' early blocks
 * holding SMs the kernels before them could use (docs/BENCHMARKS.md). */
#define OCT_CUDA_OPS_PDL_DEFAULT ""
bool oct_cuda_ops_pdl(const char *op);

/* Token tiles (of 8 tokens) per block in the streaming GEMV kernels for m tokens:
 * calls launch(std::integral_constant<int, MT>{}) with MT = 1, 2, 4 or 8. */
/* The streaming GEMV kernels' tile epilogue (gemv_fp8.cu, gemv_fp8_tma.cu,
 * gemv_fp8_fused.cu).  Each warp holds partial sums for MT token tiles in the
 * m16n8 mma accumulator layout (acc[mt][c]: row n0 + lane/4 (+8 for c >= 2),
 * token mt*8 + 2*(lane%4) + c%2); oct_gemv_stash parks them in red[warp] (and
 * zeroes them for the next tile), and after a barrier oct_gemv_store sums them
 * over warps in warp order and writes y[tok, row] = bf16(out(tok, row, sum)). */
template <int MT>
__device__ __forceinline__ void oct_gemv_stash(float (&acc)[MT][4], float (*red_warp)[32], int lane)
{
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int c = 0; c < 4; c++) {
            red_warp[mt * 4 + c][lane] = acc[mt][c];
            acc[mt][c] = 0.0f;
        }
}

/* The sums of oct_gemv_stash over warps, in warp order: put(tok, row, sum) for
 * every (token, weight row) of the tile (row relative to the tile's first). */
template <int MT, int WARPS, class Put>
__device__ __forceinline__ void oct_gemv_reduce(const float (*red)[MT * 4][32], Put put)
{
    for (int v = threadIdx.x; v < MT * 4 * 32; v += WARPS * 32) {
        const int e = v >> 5, ln = v & 31;
        float s = 0.0f;
#pragma unroll
        for (int wi = 0; wi < WARPS; wi++)
            s += red[wi][e][ln];
        const int mt = e >> 2, c = e & 3;
        put(mt * 8 + 2 * (ln & 3) + (c & 1), (ln >> 2) + (c >= 2 ? 8 : 0), s);
    }
}

template <int MT, int WARPS, class Out>
__device__ __forceinline__ void oct_gemv_store(const float (*red)[MT * 4][32], int n0, int m, int n,
                                               uint16_t *__restrict__ y, Out out)
{
    oct_gemv_reduce<MT, WARPS>(red, [&](int tok, int r, float s) {
        const int row = n0 + r;
        if (row < n && tok < m)
            y[(size_t)tok * n + row] = oct_f32_to_bf16_dev(out(tok, row, s));
    });
}

template <class F> static inline cudaError_t oct_cuda_by_token_tiles(int m, F launch)
{
    if (m <= 8)
        return launch(std::integral_constant<int, 1>{});
    if (m <= 16)
        return launch(std::integral_constant<int, 2>{});
    if (m <= 32)
        return launch(std::integral_constant<int, 4>{});
    return launch(std::integral_constant<int, 8>{});
}

/* ---- internal launchers shared between .cu files ---- */

/* Small-M W8A8 kernel (gemv_fp8.cu).  kind: OCT_SCALE_ROW (sa[m], sw[n]) or
 * OCT_SCALE_BLOCK128 (sa[m, k/128], sw[n/128, k/128]).  pdl: launch with
 * programmatic serialization (the kernel waits before reading a/sa). */
/* The current device is compute capability 9.0: the sm_90 / sm_90a code of this
 * build (the copy engine, wgmma) runs there.  Cached per device. */
bool oct_cuda_device_is_sm90(void);

oct_status oct_cuda_gemv_w8a8_launch(int64_t m, int64_t n, int64_t k, const uint8_t *a,
                                     const float *sa, const uint8_t *w, const float *sw,
                                     oct_scale_kind kind, uint16_t *y, bool pdl, cudaStream_t st);

/* The same with block scales at sa[r * sa_rs + kb * sa_ks] (the [k/128][m]
 * layout cuBLASLt reads is sa_rs = 1, sa_ks = m). */
oct_status oct_cuda_gemv_w8a8_launch_strided(int64_t m, int64_t n, int64_t k, const uint8_t *a,
                                             const float *sa, int64_t sa_rs, int64_t sa_ks,
                                             const uint8_t *w, const float *sw, oct_scale_kind kind,
                                             uint16_t *y, bool pdl, cudaStream_t st);

/* Small-M BF16 kernel (gemv_bf16.cu): y bf16 [m,n] = bf16((x w^T + bias) * mult)
 * for 1 <= m <= 16, k % 64 == 0 and 16-byte aligned x, w (_fits says whether a
 * call qualifies; else the launcher returns OCT_ERR_UNSUPPORTED).  pdl as above. */
bool oct_cuda_gemv_bf16_fits(int64_t m, int64_t n, int64_t k, const void *x, const void *w);
oct_status oct_cuda_gemv_bf16_launch(int64_t m, int64_t n, int64_t k, const uint16_t *x,
                                     const uint16_t *w, const float *bias, float mult, uint16_t *y,
                                     bool pdl, cudaStream_t st);

/* The bulk-copy version (gemv_fp8_tma.cu): m <= 64, k % 1024 == 0, sm_90. */
cudaError_t oct_cuda_gemv_w8a8_tma_launch(int m, int n, int k, const uint8_t *a, const float *sa,
                                          const uint8_t *w, const float *sw, oct_scale_kind kind,
                                          uint16_t *y, bool pdl, cudaStream_t st);
/* Which small-M kernel the launcher uses: 0 register-streaming (default, faster
 * on the H200), 1 bulk-copy where it applies (OCTET_CUDA_GEMV=tma). */
extern int oct_cuda_gemv_use_tma;
/* L2 policy of the streaming kernels' weight loads: 1 evict_first (default), 0
 * no hint (context knob "gemv_evict_first"). */
extern int oct_cuda_gemv_evict_first;

/* Small-M W8A8 with the per-token quantization of x (bf16) fused in, one
 * persistent kernel (gemv_fp8_fused.cu): y = bf16(sa * (sw * sum q(x) w)) with sa,
 * q(x) exactly those of oct_cuda_quant_rows_bf16(x, ub).  m <= 16, k % 1024 == 0,
 * m * (k + 16) <= 100 KB, 16-byte aligned x and w, and (unless any_grid) at least
 * two 16-row tiles per resident block, else OCT_ERR_UNSUPPORTED.  Launched with
 * programmatic serialization (waits before reading x). */
oct_status oct_cuda_gemv_w8a8_fused_launch(int64_t m, int64_t n, int64_t k, const void *x, float ub,
                                           const uint8_t *w, const float *sw, uint16_t *y,
                                           bool any_grid, cudaStream_t st);
/* The same persistent kernel on the per-token quantizer's codes q [m,k] and
 * scales sa [m] (launched after it with programmatic serialization): the even
 * tile split without the per-block quantization.  m <= 16, k % 1024 == 0, and
 * (unless any_grid) at least two tiles per resident block, else
 * OCT_ERR_UNSUPPORTED.  y is byte-identical to oct_cuda_gemv_w8a8_launch's. */
oct_status oct_cuda_gemv_w8a8_persist_launch(int64_t m, int64_t n, int64_t k, const uint8_t *q,
                                             const float *sa, const uint8_t *w, const float *sw,
                                             uint16_t *y, bool any_grid, cudaStream_t st);
/* Testing knob: cap on the persistent grids' blocks (the fused / persistent
 * streaming kernels and the "_p" wgmma shapes; 0: none). */
extern int oct_cuda_gemv_max_ctas;
/* Testing knob (process-wide, ctx key "quant_bulk"): 0 keeps the per-token and
 * 1x128 quantizers off the sm_90 bulk-copy kernel (quant.cu), 2 takes it for
 * every size it can run (1: the measured sizes). */
extern int oct_cuda_quant_bulk;
/* Knob (process-wide, ctx key "quant_pdl"): 0 launches the activation quantizers
 * without programmatic stream serialization (1: with it, the default). */
extern int oct_cuda_quant_pdl;

/* octet's Hopper FP8 GEMM (gemm_wgmma.cu, sm_90a): y [m,n] bf16 = a [m,k] x
 * w [n,k]^T with TENSOR / ROW activation x TENSOR / ROW weight scales, or
 * BLOCK128 x BLOCK128 (sa [r * sa_rs + kb * sa_ks], sw [ceil(n/128), k/128]).
 * k % 128 == 0, n % 8 == 0, 16-byte aligned a and w, a compute capability 9.0
 * device, else OCT_ERR_UNSUPPORTED.  cfg: one of the built tile shapes
 * (oct_cuda_wgmma_num_configs; a block config for block scales).  pdl: launched
 * with programmatic serialization (waits before reading a / sa).  Split-K
 * shapes need a workspace (oct_cuda_wgmma_workspace): ws for the partial tiles
 * (16-byte aligned) and cnt, one counter per output tile, zero before the call
 * (each call leaves them zero again); one stream at a time.  Without them they
 * return OCT_ERR_UNSUPPORTED. */
typedef struct {
    int64_t m, n, k;
    const uint8_t *a, *w;
    oct_scale_kind ka, kw;
    const float *sa, *sw;
    int64_t sa_rs, sa_ks;
    uint16_t *y;
    void *ws;
    size_t ws_bytes;
    int *cnt;
    size_t cnt_n;
} oct_wgmma_args;
oct_status oct_cuda_wgmma_gemm(const oct_wgmma_args *args, int cfg, bool pdl, cudaStream_t st);
int oct_cuda_wgmma_num_configs(void);
const char *oct_cuda_wgmma_config_name(int cfg);
/* The split-K workspace config cfg needs for this problem: partial-tile bytes
 * and tile counters (0, 0: none). */
void oct_cuda_wgmma_workspace(int cfg, int64_t m, int64_t n, int64_t k, size_t *ws_bytes,
                              size_t *counters);
/* cfg is a config of this scale family worth trying at this m, n, k. */
bool oct_cuda_wgmma_config_fits(int cfg, bool block, int64_t m, int64_t n, int64_t k);

/* ---- the context (linear.cu) ---- */

typedef struct oct_lt_plan oct_lt_plan; /* gemm_lt.cu */
/* A device buffer a context replaced but keeps until it is freed (linear.cu). */
typedef struct oct_cuda_kept {
    void *p;
    struct oct_cuda_kept *next;
} oct_cuda_kept;
typedef struct oct_mm_choice oct_mm_choice; /* linear.cu */

struct oct_cuda_ctx {
    void *lt;    /* cublasLtHandle_t */
    void *lt_ws; /* cuBLASLt workspace (device) */
    size_t lt_ws_bytes;
    uint8_t *q; /* quantized activations scratch */
    size_t q_bytes;
    float *s; /* activation scales scratch */
    size_t s_bytes;
    float *one; /* device 1.0f (unit scalar scales) */
    float *d32; /* f32 output scratch (cuBLASLt fallback without outer-vector scales) */
    size_t d32_bytes;
    float *swpad; /* block weight scales with K blocks padded to a multiple of 4 (cuBLASLt) */
    size_t swpad_bytes;
    void *wg_ws; /* split-K partial tiles of gemm_wgmma.cu */
    size_t wg_ws_bytes;
    int *wg_cnt; /* ... its tile counters (zeroed when allocated, left zero by each call) */
    size_t wg_cnt_bytes;
    oct_cuda_kept *kept;       /* replaced split-K buffers: captured graphs may still use them */
    oct_lt_plan *plans;        /* cached cuBLASLt plans (linked list) */
    int lt_block_mn_major;     /* 1: VEC128 activation scales laid out [k/128][m] for cuBLASLt */
    int64_t gemv_max_m;        /* auto path: GEMV up to this M (per-token scales) */
    int64_t gemv_max_m_block;  /* ... block scales */
    int64_t gemv_fused_max_m;  /* GEMV path, per-token scales: fused quantization up to this M */
    int64_t gemv_fused_max_mk; /* ... and while m * k <= this (m = 1 always) */
    int gemv_fused_any_grid;   /* 1: also when blocks get a single tile (tests) */
    int gemv_persist;          /* 1: the persistent streaming kernel where it applies */
    int64_t gemv_bf16_max_m;   /* BF16 GEMM with a bf16 output: gemv_bf16.cu up to this M */
    int wgmma;                 /* 0: the auto path never uses gemm_wgmma.cu */
    int wgmma_cfg;             /* > 0: always wgmma config wgmma_cfg - 1 (tests) */
    int large_gemv;            /* 1: the streaming kernel wherever the tuner may pick it (tests) */
    oct_mm_choice *choices;    /* measured wgmma-or-cuBLASLt choice per shape */
    void *l2_flush;            /* 2 x L2 bytes, overwritten before each tuning run */
    size_t l2_flush_bytes;
    char last_kernel[64];
};

/* cuBLASLt FP8 GEMM (gemm_lt.cu): y bf16 [m,n] = a [m,k] x w [n,k]^T with scale
 * kinds TENSOR x TENSOR, ROW x ROW (outer-vector scales, or an epilogue kernel
 * when cuBLASLt refuses them) or BLOCK128 x BLOCK128. */
oct_status oct_cuda_lt_gemm(oct_cuda_ctx *ctx, int64_t m, int64_t n, int64_t k, const uint8_t *a,
                            oct_scale_kind ka, const float *sa, const uint8_t *w, oct_scale_kind kw,
                            const float *sw, uint16_t *y, cudaStream_t st);
void oct_cuda_lt_free_plans(oct_cuda_ctx *ctx);
/* Grows a device scratch buffer of c (contents not kept).  The old buffer
 * stays allocated until c goes: a CUDA graph captured earlier holds its
 * address and replays into it. */
oct_status oct_cuda_grow(oct_cuda_ctx *c, void **buf, size_t *have, size_t need);
/* 1x128 group quantizer with a scale stride choice (quant.cu): scale index
 * row * rs + kb * ks. */
oct_status oct_cuda_quant_groups_strided(const void *x, int64_t m, int64_t k, void *q, float *scale,
                                         int64_t rs, int64_t ks, cudaStream_t st);

/* ---- forward-pass ops (ops_*.cu) ---- */

/* Records a failure's text (printf format) for oct_cuda_ops_last_error() and
 * returns st (ops_norm.cu). */
oct_status oct_cuda_ops_fail(oct_status st, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* The cache arguments of oct_cuda_kv_store (and oct_cuda_rope_qk_store). */
oct_status oct_cuda_kv_store_check(int64_t m, const int32_t *slot, int64_t block_size, int kv_dtype,
                                   const void *k_cache, const void *v_cache, float k_scale,
                                   float v_scale);
/* After a launch: OCT_OK, or OCT_ERR_INTERNAL naming op and the CUDA error. */
oct_status oct_cuda_ops_launched(const char *op);

/* ---- attention kernels (ops_attention_prefill.cu, ops_attention_decode.cu) ----
 * The arguments of oct_cuda_attention as its kernels take them.  tiles
 * [n_tiles][2] = first row, row count (device memory): the tensor-core
 * kernel's query tiles.  rows: the batch rows flash decoding runs (NULL: rows
 * 0..n-1); the fields below it are set by oct_cuda_attention_decode_setup.
 * bs_shift: log2 of a power-of-two block size, else -1. */
typedef struct oct_attn_args {
    const uint16_t *qkv; /* [m, (n_q + 2 n_kv) d] */
    int64_t n_q, n_kv, d;
    const int32_t *row_seq, *row_pos; /* [m] */
    const int32_t *bt;                /* [n_seqs, max_blocks] */
    int64_t max_blocks, bs;
    int bs_shift;
    const void *kc, *vc; /* [n_blocks][n_kv][bs][d] bf16 or E4M3 codes */
    bool fp8;
    float k_scale, v_scale, scale;
    int64_t window, max_ctx;
    const int32_t *tiles; /* [n_tiles][2] */
    int64_t n_tiles;
    uint16_t *out; /* [m, n_q d] */
    const int32_t *rows;
    void *ws_cnt, *ws_m, *ws_l, *ws_acc; /* merge counters, partition states */
    int max_parts, group, gsplit, gc;    /* partitions, GQA group, its split */
    int part_min;                        /* decode: positions a partition takes at least */
    /* Decode with act.kind FP8_ROW or FP8_GROUP128: out is a bf16 scratch, and
     * the block that completes a row (row_cnt, left zero again) writes the
     * row's codes and scales into act. */
    oct_cuda_act act;
    int *row_cnt;
    /* RoPE inside (oct_cuda_attention_rope_fits: decode rows on the tensor-core
     * kernel's register path, each row its sequence's only one): q and k of qkv
     * are read un-roped, every block rotates its query heads, and the block of
     * a row's last partition its KV head's k, storing k and v at the row's
     * position (the first of the head's query-head split). */
    bool rope;
    oct_cuda_rope rope_args;
} oct_attn_args;
/* The kernel covers these arguments: head_dim 64 or 128, 16-byte aligned qkv,
 * caches and out, max_ctx and block size <= 2^30, few enough heads for the grid. */
bool oct_cuda_attention_prefill_fits(const oct_attn_args *a);
/* Launches it on st over a->n_tiles (> 0) tiles; the launch's error. */
cudaError_t oct_cuda_attention_prefill_launch(const oct_attn_args *a, cudaStream_t st);
/* Flash decoding: the workspace for up to m rows (its first bytes are merge
 * counters: zero before the first call, every call leaves them zero), the
 * per-call fields of a for n rows (rows: their batch rows or NULL), the launch. */
size_t oct_cuda_attention_decode_ws_bytes(int64_t m, int64_t n_q, int64_t d);
oct_status oct_cuda_attention_decode_setup(oct_attn_args *a, const int32_t *rows, int64_t n,
                                           void *ws, size_t ws_bytes);
cudaError_t oct_cuda_attention_decode_launch(const oct_attn_args *a, int64_t n, cudaStream_t st);
/* The tensor-core decode kernel (ops_attention_decode_tc.cu): whether it takes a
 * (d 128, 16-byte aligned qkv and caches, oct_cuda_attn_decode_tc), its launch
 * on the grid of oct_cuda_attention_decode_launch. */
bool oct_cuda_attention_decode_tc_fits(const oct_attn_args *a);
cudaError_t oct_cuda_attention_decode_tc_launch(const oct_attn_args *a, dim3 grid, cudaStream_t st);

#endif

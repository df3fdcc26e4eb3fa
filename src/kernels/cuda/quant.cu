// quant.cu — dynamic activation quantization on the GPU: bf16 in, E4M3FN codes and
// f32 scales out, bit-identical to oct_quant_rows / oct_quant_groups (NUMERICS.md:
// scale = max(amax/448, 1/(448*512)) with true division, codes = saturating RNE cast
// of x / scale, NaN rows give NaN scales and NaN codes).
#include "kernels/cuda/cuda_impl.h"
#include "kernels/cuda/hopper.h"

int oct_cuda_quant_bulk = 1;

int oct_cuda_quant_pdl = 1;

namespace
{

constexpr int kTokThreads = 256;
constexpr int kTokVec = 8; // uint4 (8 bf16) per thread kept in registers: K <= 16384
// When quant_rows_bf16_bulk runs (one H200 run, docs/BENCHMARKS.md "quantizers
// alone"): per token from 1024 rows of K <= 8192 (K = 4096, M = 8192: 37.9 us
// against quant_rows_bf16_vec's 45.2; at K = 14336 the vec kernel was faster at
// every M, 91.6 against 105.9 us at M = 8192, 3.8 TB/s), 1x128 groups from 2^25
// elements (14336 x 8192: 102.8 against 126.4 us; 4096 x 4096: 25.2 against 23.7).
constexpr int64_t kBulkMinRows = 1024, kBulkMaxRowK = 8192, kBulkMinGroupElems = 1 << 25;
// The largest row it takes: 48 KB per block without an opt-in, less the kernel's
// static shared memory (48 bytes) and a margin.
constexpr int64_t kBulkMaxRowBytes = 48 * 1024 - 1024;

// Block-wide NaN-propagating max; every thread gets the result.
__device__ __forceinline__ float block_amax(float a)
{
    __shared__ float part[kTokThreads / 32];
    a = oct_warp_amax(a);
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (lane == 0)
        part[wid] = a;
    __syncthreads();
    a = lane < (int)(blockDim.x >> 5) ? part[lane] : 0.0f;
    return oct_warp_amax(a);
}

// Every quantizer kernel starts so: the GEMM launched after it (programmatic
// dependent launch) may start fetching its weights now, and waits for our results
// before reading them; we wait for the kernel before us (x may be its output;
// launched with programmatic serialization, this block may run before it ends).
__device__ __forceinline__ void pdl_enter(void)
{
    oct_pdl_launch_dependents();
    oct_pdl_wait();
}

// One block per token row; k % 8 == 0 and 16-byte aligned rows.  Rows up to
// kTokThreads * kTokVec * 8 elements stay in registers between the two passes.
__global__ void __launch_bounds__(kTokThreads)
    quant_rows_bf16_vec(const uint16_t *__restrict__ x, int64_t k, float ub,
                        uint8_t *__restrict__ q, float *__restrict__ scale)
{
    pdl_enter();
    const int64_t row = blockIdx.x;
    const uint4 *xr = reinterpret_cast<const uint4 *>(x + row * k);
    uint2 *qr = reinterpret_cast<uint2 *>(q + row * k);
    const int nv = (int)(k >> 3);
    uint4 v[kTokVec];
    float a = 0.0f;
#pragma unroll
    for (int j = 0; j < kTokVec; j++) {
        int i = (int)threadIdx.x + j * kTokThreads;
        if (i < nv) {
            v[j] = __ldg(xr + i);
            a = oct_amax8_bf16(a, v[j]);
        }
    }
    for (int i = (int)threadIdx.x + kTokVec * kTokThreads; i < nv; i += kTokThreads)
        a = oct_amax8_bf16(a, __ldg(xr + i));
    a = block_amax(a);
    const float s = oct_scale_from_amax(a, ub);
    const float r = oct_scale_recip(s);
    if (threadIdx.x == 0)
        scale[row] = s;
#pragma unroll
    for (int j = 0; j < kTokVec; j++) {
        int i = (int)threadIdx.x + j * kTokThreads;
        if (i < nv)
            qr[i] = oct_quant8_bf16(v[j], s, r);
    }
    for (int i = (int)threadIdx.x + kTokVec * kTokThreads; i < nv; i += kTokThreads)
        qr[i] = oct_quant8_bf16(__ldg(xr + i), s, r);
}

// Few rows: one row split over blocks (grid.x = 2048-element slices, grid.y =
// rows).  With one block per row a single SM would run all k/256 divisions per
// thread of a decode step's token (K = 14336: 56 true divisions each, measured
// ~5 us more than K = 4096 at M = 1); here every block takes the amax of the whole
// row (re-reads from L2 / L1) so all compute the same scale, and quantizes only
// its slice, one uint4 per thread.  Same codes and scales as quant_rows_bf16_vec.
constexpr int kSplitVecs = kTokThreads; // uint4 per block slice

__global__ void __launch_bounds__(kTokThreads)
    quant_rows_bf16_split(const uint16_t *__restrict__ x, int64_t k, float ub,
                          uint8_t *__restrict__ q, float *__restrict__ scale)
{
    pdl_enter();
    const int64_t row = blockIdx.y;
    const uint4 *xr = reinterpret_cast<const uint4 *>(x + row * k);
    const int nv = (int)(k >> 3);
    const int mine = (int)blockIdx.x * kSplitVecs + (int)threadIdx.x;
    const uint4 v = mine < nv ? __ldg(xr + mine) : make_uint4(0u, 0u, 0u, 0u);
    float a = 0.0f;
#pragma unroll 4
    for (int i = (int)threadIdx.x; i < nv; i += kTokThreads)
        a = oct_amax8_bf16(a, __ldg(xr + i));
    a = block_amax(a);
    const float s = oct_scale_from_amax(a, ub);
    if (blockIdx.x == 0 && threadIdx.x == 0)
        scale[row] = s;
    if (mine < nv)
        reinterpret_cast<uint2 *>(q + row * k)[mine] = oct_quant8_bf16(v, s, oct_scale_recip(s));
}

// Many rows on sm_90: one block per row, the row brought into shared memory by
// the bulk copy engine, then the amax and the codes read from there.  Bytes in
// flight cost no registers, so an SM streams as many rows as its shared memory
// holds (7 of K = 14336, 27 of K = 4096); quant_rows_bf16_vec holds each row in
// registers, 2-4 rows per SM.  (A persistent grid with two rows per block in
// flight measured no faster than quant_rows_bf16_vec.)  GROUPS: a scale per
// 1x128 group (16 lanes, 8 elements each, as in quant_groups_bf16_vec; blockDim
// is a multiple of 32) at scale[row * rs + group * ks], else one per row at
// scale[row * rs].  k % 8 == 0, 16-byte aligned rows, 8-byte aligned codes.
template <bool GROUPS>
__global__ void __launch_bounds__(kTokThreads)
    quant_rows_bf16_bulk(const uint16_t *__restrict__ x, int64_t k, float ub,
                         uint8_t *__restrict__ q, float *__restrict__ scale, int64_t rs, int64_t ks)
{
#ifdef OCT_HAS_SM90
    pdl_enter();
    extern __shared__ __align__(16) uint4 row_s[];
    __shared__ uint64_t bar;
    const int64_t row = blockIdx.x;
    const int nv = (int)(k >> 3);
    if (threadIdx.x == 0) {
        oct_mbar_init(&bar, 1);
        oct_mbar_init_fence();
        oct_mbar_expect_tx(&bar, (uint32_t)(k * 2));
        oct_bulk_g2s(row_s, x + row * k, (uint32_t)(k * 2), &bar);
    }
    __syncthreads(); // the barrier is initialized before anyone waits on it
    oct_mbar_wait(&bar, 0);
    uint2 *qr = reinterpret_cast<uint2 *>(q + row * k);
    if constexpr (GROUPS) {
        const int sub = threadIdx.x & 15;
        for (int i0 = 0; i0 < nv; i0 += (int)blockDim.x) { // whole warps shuffle
            const int i = i0 + (int)threadIdx.x;
            const uint4 v = i < nv ? row_s[i] : make_uint4(0u, 0u, 0u, 0u);
            float a = oct_amax8_bf16(0.0f, v);
#pragma unroll
            for (int o = 8; o > 0; o >>= 1)
                a = oct_amax_nan(a, __shfl_xor_sync(0xffffffffu, a, o));
            const float s = oct_scale_from_amax(a, 0.0f);
            if (i < nv) {
                if (sub == 0)
                    scale[row * rs + (int64_t)(i / 16) * ks] = s;
                qr[i] = oct_quant8_bf16(v, s, oct_scale_recip(s));
            }
        }
    } else {
        float a = 0.0f;
        for (int i = (int)threadIdx.x; i < nv; i += (int)blockDim.x)
            a = oct_amax8_bf16(a, row_s[i]);
        a = block_amax(a);
        const float s = oct_scale_from_amax(a, ub);
        const float r = oct_scale_recip(s);
        if (threadIdx.x == 0)
            scale[row * rs] = s;
        for (int i = (int)threadIdx.x; i < nv; i += (int)blockDim.x)
            qr[i] = oct_quant8_bf16(row_s[i], s, r);
    }
#else
    __trap(); // launched only on a compute capability 9.0 device
#endif
}

// The activation quantizers are launched with programmatic stream serialization:
// after one of octet's GEMMs (which lets its dependents go when its blocks start)
// their blocks are resident before it ends and start the moment it does.
template <class... P, class... A>
cudaError_t launch_pdl(void (*kern)(P...), dim3 grid, unsigned block, size_t smem, cudaStream_t st,
                       A... args)
{
    return oct_launch_pdl(kern, grid, block, smem, st, oct_cuda_quant_pdl != 0, args...);
}

// Launches quant_rows_bf16_bulk<GROUPS> if it applies and the launch is accepted
// (else returns false: the caller uses the other kernels): the sizes above, rows
// up to kBulkMaxRowBytes, about 8 uint4 per thread (64..256 threads).  The knob oct_cuda_quant_bulk
// = 2 (tests) takes it for any size it can run.
template <bool GROUPS>
bool launch_bulk(const void *x, int64_t m, int64_t k, float ub, void *q, float *scale, int64_t rs,
                 int64_t ks, cudaStream_t st)
{
    const bool wanted =
        GROUPS ? m * k >= kBulkMinGroupElems : m >= kBulkMinRows && k <= kBulkMaxRowK;
    if (!oct_cuda_quant_bulk || (!wanted && oct_cuda_quant_bulk != 2) || m > INT32_MAX ||
        k % 8 != 0 || k * 2 > kBulkMaxRowBytes || ((uintptr_t)x & 15u) != 0 ||
        ((uintptr_t)q & 7u) != 0 || !oct_cuda_device_is_sm90())
        return false;
    const int64_t t = (k / 8 / 8 + 31) / 32 * 32;
    const unsigned threads = (unsigned)(t < 64 ? 64 : t > kTokThreads ? kTokThreads : t);
    const cudaError_t e = launch_pdl(quant_rows_bf16_bulk<GROUPS>, dim3((unsigned)m), threads,
                                     (size_t)k * 2, st, static_cast<const uint16_t *>(x), k, ub,
                                     static_cast<uint8_t *>(q), scale, rs, ks);
    // A refused launch (a resource limit) falls back to the other kernels, its error
    // cleared here.
    cudaGetLastError();
    return e == cudaSuccess;
}

// Any k, any alignment: scalar two-pass version.
__global__ void __launch_bounds__(kTokThreads)
    quant_rows_bf16_any(const uint16_t *__restrict__ x, int64_t k, float ub,
                        uint8_t *__restrict__ q, float *__restrict__ scale)
{
    pdl_enter();
    const int64_t row = blockIdx.x;
    const uint16_t *xr = x + row * k;
    float a = 0.0f;
    for (int64_t i = threadIdx.x; i < k; i += kTokThreads)
        a = oct_amax_nan(a, __uint_as_float((uint32_t)xr[i] << 16));
    a = block_amax(a);
    const float s = oct_scale_from_amax(a, ub);
    const float r = oct_scale_recip(s);
    if (threadIdx.x == 0)
        scale[row] = s;
    for (int64_t i = threadIdx.x; i < k; i += kTokThreads)
        q[row * k + i] = (uint8_t)oct_e4m3x2_sat(
            oct_div_scale(__uint_as_float((uint32_t)xr[i] << 16), s, r), 0.0f);
}

// 1x128 groups: 16 lanes per group, 8 elements each (k % 8 == 0, aligned).  A
// partial last group takes its amax over the elements it has.
__global__ void __launch_bounds__(256)
    quant_groups_bf16_vec(const uint16_t *__restrict__ x, int64_t m, int64_t k,
                          uint8_t *__restrict__ q, float *__restrict__ scale, int64_t rs,
                          int64_t ks)
{
    pdl_enter();
    const int64_t ng = (k + 127) / 128;
    const int64_t g = (int64_t)blockIdx.x * 16 + (threadIdx.x >> 4);
    const int sub = threadIdx.x & 15;
    const bool live = g < m * ng;
    const int64_t row = live ? g / ng : 0, kb = live ? g % ng : 0;
    const int64_t col = kb * 128 + sub * 8;
    const bool have = live && col < k;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (have)
        v = __ldg(reinterpret_cast<const uint4 *>(x + row * k + col));
    float a = oct_amax8_bf16(0.0f, v);
#pragma unroll
    for (int o = 8; o > 0; o >>= 1)
        a = oct_amax_nan(a, __shfl_xor_sync(0xffffffffu, a, o));
    const float s = oct_scale_from_amax(a, 0.0f);
    if (live && sub == 0)
        scale[row * rs + kb * ks] = s;
    if (have)
        *reinterpret_cast<uint2 *>(q + row * k + col) = oct_quant8_bf16(v, s, oct_scale_recip(s));
}

bool aligned16(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}

} // namespace

extern "C" oct_status oct_cuda_quant_rows_bf16(const void *x, int64_t m, int64_t k, float ub,
                                               void *q, float *scale, void *stream)
{
    if (m < 0 || k <= 0 || (m > 0 && (!x || !q || !scale)) || m > INT32_MAX)
        return OCT_ERR_INVALID_ARG;
    if (m == 0)
        return OCT_OK;
    cudaStream_t st = oct_cuda_stream(stream);
    const uint16_t *xs = static_cast<const uint16_t *>(x);
    uint8_t *qs = static_cast<uint8_t *>(q);
    const int64_t slices = (k / 8 + kSplitVecs - 1) / kSplitVecs;
    if (launch_bulk<false>(x, m, k, ub, q, scale, 1, 0, st))
        return OCT_OK;
    if (k % 8 == 0 && aligned16(x) && ((uintptr_t)q & 7u) == 0 && slices > 1 && m < 128)
        // fewer rows than SMs: split rows over blocks (a row per block would
        // leave most SMs idle and run K/256 divisions per thread)
        return oct_cuda_check(launch_pdl(quant_rows_bf16_split, dim3((unsigned)slices, (unsigned)m),
                                         kTokThreads, 0, st, xs, k, ub, qs, scale));
    if (k % 8 == 0 && aligned16(x) && ((uintptr_t)q & 7u) == 0)
        return oct_cuda_check(launch_pdl(quant_rows_bf16_vec, dim3((unsigned)m), kTokThreads, 0, st,
                                         xs, k, ub, qs, scale));
    return oct_cuda_check(launch_pdl(quant_rows_bf16_any, dim3((unsigned)m), kTokThreads, 0, st, xs,
                                     k, ub, qs, scale));
}

oct_status oct_cuda_quant_groups_strided(const void *x, int64_t m, int64_t k, void *q, float *scale,
                                         int64_t rs, int64_t ks, cudaStream_t st)
{
    if (m < 0 || k <= 0 || (m > 0 && (!x || !q || !scale)))
        return OCT_ERR_INVALID_ARG;
    if (m == 0)
        return OCT_OK;
    if (k % 8 != 0 || !aligned16(x) || ((uintptr_t)q & 7u) != 0)
        return OCT_ERR_UNSUPPORTED;
    if (launch_bulk<true>(x, m, k, 0.0f, q, scale, rs, ks, st))
        return OCT_OK;
    const int64_t groups = m * ((k + 127) / 128);
    const int64_t blocks = (groups + 15) / 16;
    if (blocks > INT32_MAX)
        return OCT_ERR_INVALID_ARG;
    return oct_cuda_check(launch_pdl(quant_groups_bf16_vec, dim3((unsigned)blocks), 256, 0, st,
                                     static_cast<const uint16_t *>(x), m, k,
                                     static_cast<uint8_t *>(q), scale, rs, ks));
}

extern "C" oct_status oct_cuda_quant_groups_bf16(const void *x, int64_t m, int64_t k, void *q,
                                                 float *scale, void *stream)
{
    return oct_cuda_quant_groups_strided(x, m, k, q, scale, (k + 127) / 128, 1,
                                         oct_cuda_stream(stream));
}

// ---- dynamic per-tensor, static, MX 1x32, and the fused producers ----

namespace
{

// Pass 1 of the per-tensor quantizer: |x| max over the whole tensor into *amax
// as float bits (non-negative floats order like their bit patterns, and a NaN
// -- made positive -- orders above +Inf, so atomicMax propagates it).
__global__ void __launch_bounds__(256)
    tensor_amax_bf16(const uint16_t *__restrict__ x, int64_t n, unsigned *__restrict__ amax)
{
    float a = 0.0f;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        a = oct_amax_nan(a, __uint_as_float((uint32_t)x[i] << 16));
    a = block_amax(a);
    if (threadIdx.x == 0)
        atomicMax(amax, a != a ? 0x7FC00000u : __float_as_uint(a));
}

// Pass 2: codes = sat RNE(x * (1/s)), s = max(amax/448, floor) -- the CPU
// oct_quant_tensor multiplies by the f32 reciprocal, so this does too.
__global__ void __launch_bounds__(256)
    tensor_codes_bf16(const uint16_t *__restrict__ x, int64_t n, const unsigned *__restrict__ amax,
                      uint8_t *__restrict__ q)
{
    const float s = oct_scale_from_amax(__uint_as_float(*amax), 0.0f);
    const float r = __fdiv_rn(1.0f, s);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        q[i] = (uint8_t)oct_e4m3x2_sat(__fmul_rn(__uint_as_float((uint32_t)x[i] << 16), r), 0.0f);
}

// Pass 3 (one thread): the amax bits in place -> the scale.
__global__ void tensor_scale_final(float *scale)
{
    *scale = oct_scale_from_amax(__uint_as_float(*reinterpret_cast<unsigned *>(scale)), 0.0f);
}

// The three passes in one block, for tensors small enough that launches cost
// more than the work (a decode step's MoE inputs): the same scale and codes.
__global__ void __launch_bounds__(kTokThreads)
    tensor_quant_small_bf16(const uint16_t *__restrict__ x, int n, uint8_t *__restrict__ q,
                            float *__restrict__ scale)
{
    float a = 0.0f;
    for (int i = threadIdx.x; i < n; i += kTokThreads)
        a = oct_amax_nan(a, __uint_as_float((uint32_t)x[i] << 16));
    const float s = oct_scale_from_amax(block_amax(a), 0.0f);
    const float r = __fdiv_rn(1.0f, s);
    for (int i = threadIdx.x; i < n; i += kTokThreads)
        q[i] = (uint8_t)oct_e4m3x2_sat(__fmul_rn(__uint_as_float((uint32_t)x[i] << 16), r), 0.0f);
    if (threadIdx.x == 0)
        *scale = s;
}

__global__ void __launch_bounds__(256)
    static_codes_bf16(const uint16_t *__restrict__ x, int64_t n, float r, uint8_t *__restrict__ q)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        q[i] = (uint8_t)oct_e4m3x2_sat(__fmul_rn(__uint_as_float((uint32_t)x[i] << 16), r), 0.0f);
}

// MX 1x32, OCP recipe: one warp per block of 32, one element per lane.
// e = clamp(floor(log2 amax) - 8 + 127, 0, 254), amax 0 -> 0, Inf -> 254,
// NaN -> 0xFF (NaN codes); codes = sat RNE(x * 2^(127 - e)), an exact power-of-two
// scaling, the same value as the CPU's x / 2^(e - 127).
__global__ void __launch_bounds__(256)
    mx_codes_bf16(const uint16_t *__restrict__ x, int64_t nblocks, uint8_t *__restrict__ q,
                  uint8_t *__restrict__ e8)
{
    const int64_t b = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5);
    if (b >= nblocks)
        return;
    const int lane = threadIdx.x & 31;
    const float v = __uint_as_float((uint32_t)x[b * 32 + lane] << 16);
    const float a = oct_warp_amax(oct_amax_nan(0.0f, v));
    int e;
    if (a != a)
        e = 0xFF;
    else if (a == 0.0f)
        e = 0;
    else if (isinf(a))
        e = 254;
    else
        e = min(max(ilogbf(a) - 8 + 127, 0), 254);
    if (lane == 0)
        e8[b] = (uint8_t)e;
    const float y = e == 0xFF ? __int_as_float(0x7FC00000) : ldexpf(v, 127 - e);
    q[b * 32 + lane] = (uint8_t)oct_e4m3x2_sat(y, 0.0f);
}

// Fused producers: one block per row, the row's f32 values recomputed from the
// bf16 inputs in each pass (rows are small and stay in L2), then per-token
// quantization exactly as quant_rows (true division by the scale).
//   RMSNorm:   y = w * (x * r), r = 1 / sqrtf(mean(x^2) + eps), the sum of
//              squares in double as the CPU model sums it (bf16 squares are
//              exact in double and a row's sum rarely needs more than 53 bits,
//              so the order rarely matters, and r, rounded to f32, agrees)
//   SiLU-mul:  y = g / (1 + expf(-g)) * u, g | u the two halves of gu [m, 2k]
enum { PROD_RMSNORM = 0, PROD_SILU_MUL = 1 };

template <int P>
__device__ __forceinline__ float prod_value(const uint16_t *__restrict__ a,
                                            const uint16_t *__restrict__ b, int64_t i, float r)
{
    const float x = __uint_as_float((uint32_t)a[i] << 16);
    if (P == PROD_RMSNORM) {
        const float w = __uint_as_float((uint32_t)b[i] << 16);
        return __fmul_rn(w, __fmul_rn(x, r));
    }
    const float u = __uint_as_float((uint32_t)b[i] << 16);
    return __fmul_rn(__fdiv_rn(x, __fadd_rn(1.0f, expf(-x))), u);
}

template <int P>
__global__ void __launch_bounds__(kTokThreads)
    produce_quant_rows(const uint16_t *__restrict__ in, const uint16_t *__restrict__ w, int64_t k,
                       float eps, float ub, uint8_t *__restrict__ q, float *__restrict__ scale)
{
    const int64_t row = blockIdx.x;
    const uint16_t *a = P == PROD_RMSNORM ? in + row * k : in + row * 2 * k;
    const uint16_t *b = P == PROD_RMSNORM ? w : a + k;
    float r = 0.0f;
    if (P == PROD_RMSNORM) {
        __shared__ double part[kTokThreads / 32];
        double ss = 0.0;
        for (int64_t i = threadIdx.x; i < k; i += kTokThreads) {
            const double x = (double)__uint_as_float((uint32_t)a[i] << 16);
            ss += x * x;
        }
        for (int o = 16; o > 0; o >>= 1)
            ss += __shfl_xor_sync(0xffffffffu, ss, o);
        if ((threadIdx.x & 31) == 0)
            part[threadIdx.x >> 5] = ss;
        __syncthreads();
        ss = 0.0;
        for (int j = 0; j < kTokThreads / 32; j++)
            ss += part[j];
        r = __fdiv_rn(1.0f, sqrtf(__fadd_rn((float)(ss / (double)k), eps)));
    }
    float am = 0.0f;
    for (int64_t i = threadIdx.x; i < k; i += kTokThreads)
        am = oct_amax_nan(am, prod_value<P>(a, b, i, r));
    am = block_amax(am);
    const float s = oct_scale_from_amax(am, ub);
    const float rs = oct_scale_recip(s);
    if (threadIdx.x == 0)
        scale[row] = s;
    for (int64_t i = threadIdx.x; i < k; i += kTokThreads)
        q[row * k + i] =
            (uint8_t)oct_e4m3x2_sat(oct_div_scale(prod_value<P>(a, b, i, r), s, rs), 0.0f);
}

// Per-tensor quantization of at most this many values runs as one block.
constexpr int64_t kTensorSmall = 1 << 16;

unsigned grid_for(int64_t n)
{
    int64_t g = (n + 255) / 256;
    return (unsigned)(g < 1 ? 1 : g > 4096 ? 4096 : g);
}

} // namespace

extern "C" oct_status oct_cuda_quant_tensor_bf16(const void *x, int64_t n, void *q, float *scale,
                                                 void *stream)
{
    if (n < 0 || !scale || (n > 0 && (!x || !q)))
        return OCT_ERR_INVALID_ARG;
    cudaStream_t st = oct_cuda_stream(stream);
    if (n > 0 && n <= kTensorSmall) {
        tensor_quant_small_bf16<<<1, kTokThreads, 0, st>>>(static_cast<const uint16_t *>(x), (int)n,
                                                           static_cast<uint8_t *>(q), scale);
        return oct_cuda_check(cudaGetLastError());
    }
    unsigned *am = reinterpret_cast<unsigned *>(scale);
    if (cudaMemsetAsync(am, 0, sizeof *am, st) != cudaSuccess)
        return OCT_ERR_INTERNAL;
    const uint16_t *xs = static_cast<const uint16_t *>(x);
    if (n > 0) {
        tensor_amax_bf16<<<grid_for(n), 256, 0, st>>>(xs, n, am);
        tensor_codes_bf16<<<grid_for(n), 256, 0, st>>>(xs, n, am, static_cast<uint8_t *>(q));
    }
    tensor_scale_final<<<1, 1, 0, st>>>(scale);
    return oct_cuda_check(cudaGetLastError());
}

extern "C" oct_status oct_cuda_quant_static_bf16(const void *x, int64_t n, float scale, void *q,
                                                 void *stream)
{
    if (n < 0 || !(scale > 0.0f) || isinf(scale) || (n > 0 && (!x || !q)))
        return OCT_ERR_INVALID_ARG;
    if (n == 0)
        return OCT_OK;
    static_codes_bf16<<<grid_for(n), 256, 0, oct_cuda_stream(stream)>>>(
        static_cast<const uint16_t *>(x), n, 1.0f / scale, static_cast<uint8_t *>(q));
    return oct_cuda_check(cudaGetLastError());
}

extern "C" oct_status oct_cuda_quant_mx_bf16(const void *x, int64_t m, int64_t k, void *q,
                                             uint8_t *e8, void *stream)
{
    if (m < 0 || k <= 0 || (m > 0 && (!x || !q || !e8)))
        return OCT_ERR_INVALID_ARG;
    if (k % 32 != 0)
        return OCT_ERR_UNSUPPORTED;
    const int64_t nb = m * (k / 32);
    if (nb == 0)
        return OCT_OK;
    if ((nb + 7) / 8 > INT32_MAX)
        return OCT_ERR_INVALID_ARG;
    mx_codes_bf16<<<(unsigned)((nb + 7) / 8), 256, 0, oct_cuda_stream(stream)>>>(
        static_cast<const uint16_t *>(x), nb, static_cast<uint8_t *>(q), e8);
    return oct_cuda_check(cudaGetLastError());
}

extern "C" oct_status oct_cuda_rmsnorm_quant_rows_bf16(const void *x, const void *w, int64_t m,
                                                       int64_t k, float eps, float ub, void *q,
                                                       float *scale, void *stream)
{
    if (m < 0 || k <= 0 || (m > 0 && (!x || !w || !q || !scale)) || m > INT32_MAX)
        return OCT_ERR_INVALID_ARG;
    if (m == 0)
        return OCT_OK;
    produce_quant_rows<PROD_RMSNORM><<<(unsigned)m, kTokThreads, 0, oct_cuda_stream(stream)>>>(
        static_cast<const uint16_t *>(x), static_cast<const uint16_t *>(w), k, eps, ub,
        static_cast<uint8_t *>(q), scale);
    return oct_cuda_check(cudaGetLastError());
}

extern "C" oct_status oct_cuda_silu_mul_quant_rows_bf16(const void *gu, int64_t m, int64_t k,
                                                        float ub, void *q, float *scale,
                                                        void *stream)
{
    if (m < 0 || k <= 0 || (m > 0 && (!gu || !q || !scale)) || m > INT32_MAX)
        return OCT_ERR_INVALID_ARG;
    if (m == 0)
        return OCT_OK;
    produce_quant_rows<PROD_SILU_MUL><<<(unsigned)m, kTokThreads, 0, oct_cuda_stream(stream)>>>(
        static_cast<const uint16_t *>(gu), nullptr, k, 0.0f, ub, static_cast<uint8_t *>(q), scale);
    return oct_cuda_check(cudaGetLastError());
}
